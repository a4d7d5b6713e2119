"""The Debian packages of the domain tagger's and the event tagger's corpora: which are downloaded, for which split
(TRAIN / DEV), which only the extension mixes or the event mixes use, the tiny CI subset, and the held-out packages
that are never downloaded. Data only, shared by build_corpus.py and mixing.py; it imports no training script.
"""

from __future__ import annotations

import re

FORBIDDEN = re.compile(
    r"^(sound-theme-freedesktop|alsa-utils|wesnoth.*|hedgewars-data|asterisk-core-sounds-.*|"
    r"codec2-examples|moonshine-voice)$"
)

# package -> split. "lang" = speech split by language/speaker (see TUXPAINT_DEV_LANGS).
PACKAGES: dict[str, str] = {
    # ---------------- TRAIN packages
    "klettres-data": "train",  # spoken letters / syllables, many languages (human)
    "gcin-voice": "train",  # spoken Mandarin syllables (human)
    "megaglest-data": "train",  # unit voice lines (ack/select), music, effects
    "supertux-data": "train",  # music, effects
    "warzone2100-music": "train",  # music
    "freedroidrpg-data": "train",  # music, effects, a few spoken Tux comments
    "colobot-common-sounds": "train",  # music, effects
    "lincity-ng-data": "train",  # music, city ambience effects
    "openarena-data": "train",  # weapons / world / movers effects
    "oxygen-sounds": "train",  # desktop UI / alert sounds
    "sonic-pi-samples": "train",  # drum loops (music), drum hits (for sequenced drums), beeps
    "ri-li-data": "train",  # effects
    "tuxpaint-stamps-default": "lang",  # spoken stamp descriptions (split by language) + effects (train)
    # ---------------- DEV packages
    "ktuberling-data": "dev",  # spoken words, many languages (human)
    "warzone2100-data": "dev",  # spoken game messages / tutorial, effects
    "frozen-bubble-data": "dev",  # music, effects
    "pingus-data": "dev",  # tracker music (rendered with ffmpeg/libopenmpt), effects
    "scorched3d-data": "dev",  # music, effects (nature ambience, weapons)
    "tuxtype-data": "dev",  # music, effects
    "pinball-data": "dev",  # music, effects
    "xmoto-data": "dev",  # music, effects
    "extremetuxracer-data": "dev",  # music, effects
    "lmms-common": "dev",  # beat loops (music), drum hits (for sequenced drums), effects
    "minetest-data": "dev",  # effects
    "lomiri-sounds": "dev",  # notification chimes (events); ringtones excluded
    "psi-plus-sounds": "dev",  # chat alert sounds
    "eiskaltdcpp-sounds": "dev",  # alert sounds
    "lbreakout2-data": "dev",  # effects
    "alienblaster-data": "dev",  # effects
    "monsterz-data": "dev",  # effects
    "gweled": "dev",  # effects
    "kanagram": "dev",  # UI effects
    "khangman": "dev",  # UI effects
    "blinken": "dev",  # tones
    # ---------------- TRAIN extension (x1): used only by the `train2` mixes; the m3 `train` and
    # `hold` mixes exclude them so that those stay bit-identical / reproducible
    "nexuiz-music": "train",  # game music (electronic / rock), pk3
    "freeciv-data": "train",  # music, effects
    "chromium-bsu-data": "train",  # music, effects
    "teeworlds-data": "train",  # effects (WavPack), menu music; "vo_" voices excluded
    "trigger-rally-data": "train",  # rally co-driver calls (speech, 2 voices), engine / effects, music
    "yaru-theme-sound": "train",  # desktop notification sounds
    "deepin-sound-theme": "train",  # desktop notification sounds
    "gnome-audio": "train",  # GNOME 2 desktop sounds
    "sound-icons": "train",  # speech-dispatcher earcons (single instrument notes, pips)
}
EXTRA_PACKAGES = {
    "nexuiz-music",
    "freeciv-data",
    "chromium-bsu-data",
    "teeworlds-data",
    "trigger-rally-data",
    "yaru-theme-sound",
    "deepin-sound-theme",
    "gnome-audio",
    "sound-icons",
}
TINY_PACKAGES = [
    # train
    "gcin-voice",
    "oxygen-sounds",
    "sonic-pi-samples",
    # dev
    "ktuberling-data",
    "frozen-bubble-data",
    "psi-plus-sounds",
    "lbreakout2-data",
]

TUXPAINT_DEV_LANGS = {"es", "ro", "bg", "el", "da"}
# ---------------- Event-tagger packages (e1): labelled event sources of the learned sound-event tagger
# (event_labels.py labels their files by path; event_mixes.py mixes them; train_events.py trains on them). They are
# used only by the event mixes (ev_train, ev_dev) and never by the domain mixes (train / train2 / hold / dev), which
# therefore stay bit-identical; a file identical to one of the packages above is dropped here, not there.
EVENT_PACKAGES: dict[str, str] = {
    # TRAIN
    "0ad-data": "train",
    "widelands-data": "train",
    "searchandrescue-data": "train",
    "btanks-data": "train",
    "triplea": "train",
    "etw-data": "train",
    "bucklespring-data": "train",
    "workrave-data": "train",
    "caveexpress-data": "train",
    "madbomber-data": "train",
    "ardentryst": "train",
    "qabcs-data": "train",
    "brainparty-data": "train",
    "enigma-data": "train",
    "pekka-kana-2-data": "train",
    "powermanga-data": "train",
    "ukui-media": "train",
    "micropolis-data": "train",
    "flobopuyo": "train",
    "sdl-ball-data": "train",
    "neverball-common": "train",
    "dustracing2d-data": "train",
    "flare-game": "train",
    "warmux-data": "train",
    "endless-sky-data": "train",
    "cube2-data": "train",
    "hyperrogue-music": "train",
    "wordwarvi-sound": "train",
    "crossfire-client": "train",
    "overgod-data": "train",
    "excellent-bifurcation": "train",
    "titanion-data": "train",
    "tuxmath-data": "train",
    "sumo-tools": "train",
    "freedroid-data": "train",
    # DEV (reported on only)
    "scratch": "dev",
    "gcompris-qt-data": "dev",
    "lugaru-data": "dev",
    "plee-the-bear-data": "dev",
    "mazeofgalious-data": "dev",
    "icebreaker": "dev",
    "orage-data": "dev",
    "xemacs21-basesupport": "dev",
    "gl-117-data": "dev",
    "moon-lander-data": "dev",
    "seahorse-adventures": "dev",
    "simutrans-pak64": "dev",
    "tuxpaint-plugins-default": "dev",
    "tworld-data": "dev",
    "bambam": "dev",
    "circuslinux-data": "dev",
    "minetest-mod-homedecor": "dev",
    "acm": "dev",
    "gnome-shell-pomodoro-data": "dev",
    "heroes-sound-effects": "dev",
    "tuxpaint-data": "dev",
    "whichwayisup": "dev",
    "abe-data": "dev",
    "bzflag-data": "dev",
    "ceferino-data": "dev",
    "gamine-data": "dev",
    "gemdropx": "dev",
    "jag": "dev",
    "lmarbles": "dev",
    "mirrormagic-data": "dev",
    "pushover": "dev",
    "qgo": "dev",
    "solarwolf": "dev",
    "chuck-data": "dev",
    "tuxfootball": "dev",
    # DEV, added 2026-11-28 (training/dev_candidates_survey.md; tagger-ev2)
    "redeclipse-data": "dev",
    "flightgear-data-base": "dev",
    "supertuxkart-data": "dev",
    "torcs-data": "dev",
    "trophy-data": "dev",
    "dopewars-data": "dev",
    "hannah-data": "dev",
    "amphetamine-data": "dev",
    "barrage": "dev",
    "freeorion-data": "dev",
}
PACKAGES.update(EVENT_PACKAGES)
TINY_PACKAGES += [
    # event tagger: train
    "ukui-media",
    "micropolis-data",
    "bucklespring-data",
    # event tagger: dev
    "orage-data",
    "gl-117-data",
    "moon-lander-data",
]
