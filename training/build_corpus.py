#!/usr/bin/env python3
"""Build the real-audio source corpus and the TRAIN / DEV mixes for the domain tagger.

Steps (each idempotent, results cached under --cache, default /work/data-cache):

  download   apt-get download of the Debian packages listed in PACKAGES  -> <cache>/debs
  extract    dpkg-deb -x                                                  -> <cache>/pkgs/<pkg>
  scan       classify every audio file (or zip member) by package + path rules into
             speech / music / sfx (or exclude), assign it to TRAIN or DEV, decode it to
             16 kHz mono int16 .npy                                       -> <cache>/tagger/sources
             and write the source manifest                                -> <cache>/tagger/sources.jsonl
  espeak     generated (espeak-ng) speech, TRAIN mixes only               -> <cache>/tagger/espeak
  mix        the labelled mixes                                           -> <cache>/tagger/mixes/{train,dev}
             (one .wav per clip + train.jsonl / dev.jsonl with per-window labels)

Usage:
  python training/build_corpus.py all                  # everything (defaults: 6400 train, 16 dev/domain)
  python training/build_corpus.py mix --n-train 200    # only regenerate mixes
  python training/build_corpus.py all --tiny           # tiny corpus for CI (few packages, few clips)

HELD OUT (never downloaded, never used): sound-theme-freedesktop, alsa-utils, wesnoth*,
hedgewars-data, asterisk-core-sounds-*, codec2-examples, moonshine-voice.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import re
import subprocess
import sys
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from event_labels import NO_LABEL_RE, PACKAGE_RULES, event_label  # noqa: E402

from earmark.experts.probe.windows import DOMAINS, SR, domain_code, domain_flags, window_bounds  # noqa: E402

FORBIDDEN = re.compile(
    r"^(sound-theme-freedesktop|alsa-utils|wesnoth.*|hedgewars-data|asterisk-core-sounds-.*|"
    r"codec2-examples|moonshine-voice)$"
)

# package -> split. "lang" = speech split by language/speaker (see TUXPAINT_DEV_LANGS).
PACKAGES: dict[str, str] = {
    # ---------------- TRAIN packages
    "klettres-data": "train",          # spoken letters / syllables, many languages (human)
    "gcin-voice": "train",             # spoken Mandarin syllables (human)
    "megaglest-data": "train",         # unit voice lines (ack/select), music, effects
    "supertux-data": "train",          # music, effects
    "warzone2100-music": "train",      # music
    "freedroidrpg-data": "train",      # music, effects, a few spoken Tux comments
    "colobot-common-sounds": "train",  # music, effects
    "lincity-ng-data": "train",        # music, city ambience effects
    "openarena-data": "train",         # weapons / world / movers effects
    "oxygen-sounds": "train",          # desktop UI / alert sounds
    "sonic-pi-samples": "train",       # drum loops (music), drum hits (for sequenced drums), beeps
    "ri-li-data": "train",             # effects
    "tuxpaint-stamps-default": "lang", # spoken stamp descriptions (split by language) + effects (train)
    # ---------------- DEV packages
    "ktuberling-data": "dev",          # spoken words, many languages (human)
    "warzone2100-data": "dev",         # spoken game messages / tutorial, effects
    "frozen-bubble-data": "dev",       # music, effects
    "pingus-data": "dev",              # tracker music (rendered with ffmpeg/libopenmpt), effects
    "scorched3d-data": "dev",          # music, effects (nature ambience, weapons)
    "tuxtype-data": "dev",             # music, effects
    "pinball-data": "dev",             # music, effects
    "xmoto-data": "dev",               # music, effects
    "extremetuxracer-data": "dev",     # music, effects
    "lmms-common": "dev",              # beat loops (music), drum hits (for sequenced drums), effects
    "minetest-data": "dev",            # effects
    "lomiri-sounds": "dev",            # notification chimes (events); ringtones excluded
    "psi-plus-sounds": "dev",          # chat alert sounds
    "eiskaltdcpp-sounds": "dev",       # alert sounds
    "lbreakout2-data": "dev",          # effects
    "alienblaster-data": "dev",        # effects
    "monsterz-data": "dev",            # effects
    "gweled": "dev",                   # effects
    "kanagram": "dev",                 # UI effects
    "khangman": "dev",                 # UI effects
    "blinken": "dev",                  # tones
    # ---------------- TRAIN extension (x1): used only by the `train2` mixes; the m3 `train` and
    # `hold` mixes exclude them so that those stay bit-identical / reproducible
    "nexuiz-music": "train",           # game music (electronic / rock), pk3
    "freeciv-data": "train",           # music, effects
    "chromium-bsu-data": "train",      # music, effects
    "teeworlds-data": "train",         # effects (WavPack), menu music; "vo_" voices excluded
    "trigger-rally-data": "train",     # rally co-driver calls (speech, 2 voices), engine / effects, music
    "yaru-theme-sound": "train",       # desktop notification sounds
    "deepin-sound-theme": "train",     # desktop notification sounds
    "gnome-audio": "train",            # GNOME 2 desktop sounds
    "sound-icons": "train",            # speech-dispatcher earcons (single instrument notes, pips)
}
EXTRA_PACKAGES = {"nexuiz-music", "freeciv-data", "chromium-bsu-data", "teeworlds-data",
                  "trigger-rally-data", "yaru-theme-sound", "deepin-sound-theme", "gnome-audio",
                  "sound-icons"}
TINY_PACKAGES = ["gcin-voice", "oxygen-sounds", "sonic-pi-samples",                 # train
                 "ktuberling-data", "frozen-bubble-data", "psi-plus-sounds", "lbreakout2-data"]  # dev

TUXPAINT_DEV_LANGS = {"es", "ro", "bg", "el", "da"}
# ---------------- Event-tagger packages (e1): labelled event sources of the learned sound-event tagger
# (event_labels.py labels their files by path; event_mixes.py mixes them; train_events.py trains on them). They are
# used only by the event mixes (ev_train, ev_dev) and never by the domain mixes (train / train2 / hold / dev), which
# therefore stay bit-identical; a file identical to one of the packages above is dropped here, not there.
EVENT_PACKAGES: dict[str, str] = {
    # TRAIN
    "0ad-data": "train", "widelands-data": "train", "searchandrescue-data": "train", "btanks-data": "train",
    "triplea": "train", "etw-data": "train", "bucklespring-data": "train", "workrave-data": "train",
    "caveexpress-data": "train", "madbomber-data": "train", "ardentryst": "train", "qabcs-data": "train",
    "brainparty-data": "train", "enigma-data": "train", "pekka-kana-2-data": "train", "powermanga-data": "train",
    "ukui-media": "train", "micropolis-data": "train", "flobopuyo": "train",
    "sdl-ball-data": "train", "neverball-common": "train", "dustracing2d-data": "train", "flare-game": "train",
    "warmux-data": "train", "endless-sky-data": "train", "cube2-data": "train", "hyperrogue-music": "train",
    "wordwarvi-sound": "train", "crossfire-client": "train", "overgod-data": "train",
    "excellent-bifurcation": "train", "titanion-data": "train", "tuxmath-data": "train", "sumo-tools": "train",
    "freedroid-data": "train",
    # DEV (reported on only)
    "scratch": "dev", "gcompris-qt-data": "dev", "lugaru-data": "dev", "plee-the-bear-data": "dev",
    "mazeofgalious-data": "dev", "icebreaker": "dev", "orage-data": "dev", "xemacs21-basesupport": "dev",
    "gl-117-data": "dev", "moon-lander-data": "dev", "seahorse-adventures": "dev", "simutrans-pak64": "dev",
    "tuxpaint-plugins-default": "dev", "tworld-data": "dev", "bambam": "dev", "circuslinux-data": "dev",
    "minetest-mod-homedecor": "dev", "acm": "dev", "gnome-shell-pomodoro-data": "dev",
    "heroes-sound-effects": "dev", "tuxpaint-data": "dev", "whichwayisup": "dev", "abe-data": "dev",
    "bzflag-data": "dev", "ceferino-data": "dev", "gamine-data": "dev", "gemdropx": "dev", "jag": "dev",
    "lmarbles": "dev", "mirrormagic-data": "dev", "pushover": "dev", "qgo": "dev", "solarwolf": "dev",
    "chuck-data": "dev", "tuxfootball": "dev",
}
PACKAGES.update(EVENT_PACKAGES)
TINY_PACKAGES += ["ukui-media", "micropolis-data", "bucklespring-data",  # event tagger: train
                  "orage-data", "gl-117-data", "moon-lander-data"]       # dev
# folders of event packages that hold music, voices or instruments (never an sfx source)
EVENT_SKIP_RE = re.compile(r"/(music|musics|bgm|tunes|songs?|voices?|voice|speech|words|vocals|instruments?|"
                           r"percussion|music loops|scale|ingame|menu|npcs|explore_world_music|melody|chronos|"
                           r"handheld_console|title-screen|bonus|tutorial|civ)/")

AUDIO_EXT = (".ogg", ".wav", ".flac", ".opus", ".oga", ".mp3", ".it", ".s3m", ".xm", ".mod", ".wv")

ALERT_RE = re.compile(r"(beep|blip|bleep|chime|ding|notif|alert|alarm|ping|plip|bong|bell|"
                      r"message|msg|attention|error|warning|question|positive|negative|"
                      r"online|offline|confirm|click|chat|email|mail|reminder|connected|"
                      r"finished|interfce|a440|xylo|mallet|rhodes|blinken|sintonia|"
                      r"sintesis|karinding|soft delay|slick|ede|amsterdam|lowbattery|"
                      r"right|wrong)", re.I)
# effects whose names suggest music stingers, voices or other ambiguity -> excluded
SFX_EXCLUDE_RE = re.compile(r"(music|musik|zik|jingle|fanfare|song|tune|melod|victory|win|"
                            r"lose|cheer|applause|crowd|croud|laugh|haha|scream|voice|speech|"
                            r"talk|say|taunt|help|grunt|breath|burp|pain|death|die\d|_die|"
                            r"hurt|yell|shout|cry|sing|choir|silence|intro|credits|title|"
                            r"gasp|drown|duh|giggle|kiss|baby|child|kid|boy|girl|man|woman|"
                            r"people|market|school|sports|splash\.|playon|new_game|"
                            r"gmeshtdn|humor|humour|goodidea|letsgo|ohno|yipee|excuse|excellent|affirm|yousuck)", re.I)


TAG = "tagger"  # sub-folder of the cache for decoded sources and mixes ("tagger-tiny" with --tiny)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- download/extract
def download_and_extract(cache: Path, packages: list[str]) -> None:
    debs = cache / "debs"
    pkgs = cache / "pkgs"
    debs.mkdir(parents=True, exist_ok=True)
    pkgs.mkdir(parents=True, exist_ok=True)
    for p in packages:
        if FORBIDDEN.match(p):
            raise SystemExit(f"refusing held-out package {p}")
        have = sorted(debs.glob(f"{p}_*.deb"))
        if not have:
            log(f"apt-get download {p}")
            subprocess.run(["apt-get", "download", p], cwd=debs, check=True,
                           stdout=subprocess.DEVNULL)
            have = sorted(debs.glob(f"{p}_*.deb"))
        dest = pkgs / p
        if not (dest / ".extracted").exists():
            log(f"dpkg-deb -x {have[-1].name}")
            dest.mkdir(exist_ok=True)
            subprocess.run(["dpkg-deb", "-x", str(have[-1]), str(dest)], check=True)
            (dest / ".extracted").write_text(have[-1].name)


def package_licence(cache: Path, pkg: str) -> tuple[str, str]:
    root = cache / "pkgs" / pkg
    c = root / "usr/share/doc" / pkg / "copyright"
    if not c.exists():
        cands = list(root.glob("usr/share/doc/*/copyright"))
        if not cands:
            return "", ""
        c = cands[0]
    lic = []
    for line in c.read_text(errors="replace").splitlines():
        if line.startswith("License:"):
            v = line.split(":", 1)[1].strip()
            if v and v not in lic:
                lic.append(v)
    deb = (root / ".extracted").read_text().strip() if (root / ".extracted").exists() else ""
    return "; ".join(lic) if lic else "see copyright file (non-DEP-5)", deb


# --------------------------------------------------------------------------- classification
def classify(pkg: str, rel: str) -> tuple[str, str, str, str] | None:
    """Return (kind, split, group, tag) or None (= excluded as ambiguous / unusable).

    kind in {speech, music, sfx, drumhit}; tag in {"", loop, alert, bed}."""
    if pkg in EVENT_PACKAGES:
        return classify_event_pkg(pkg, rel)
    low = rel.lower()
    name = low.rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0]
    split = PACKAGES[pkg]
    if pkg == "tuxpaint-stamps-default":
        m = re.search(r"_desc(?:_([a-z]{2,3}(?:_[a-z]{2})?))?\.ogg$", low)
        if m or "/symbols/math/" in low:
            if m:
                lang = m.group(1) or "en"
            else:
                mm = re.search(r"_([a-z]{2,3}(?:_[a-z]{2})?)\.ogg$", name)
                lang = mm.group(1) if mm else "en"
            lang = lang.split("_")[0]
            sp = "dev" if lang in TUXPAINT_DEV_LANGS else "train"
            return "speech", sp, f"tuxpaint-{lang}", ""
        if re.search(r"_[a-z]{2}(_[a-z]{2})?\.ogg$", name):  # other localised files: skip
            return None
        if "/symbols/" in low or SFX_EXCLUDE_RE.search(stem):
            return None
        return "sfx", "train", "tuxpaint", ""
    if pkg == "klettres-data":
        lang = low.split("/klettres/")[1].split("/")[0]
        return "speech", split, f"klettres-{lang}", ""
    if pkg == "gcin-voice":
        return "speech", split, "gcin", ""
    if pkg == "ktuberling-data":
        lang = low.split("/sounds/")[1].split("/")[0] if "/sounds/" in low else "x"
        return "speech", split, f"ktuberling-{lang}", ""
    if pkg == "megaglest-data":
        if "/music/" in low:
            return "music", split, pkg, ""
        if re.search(r"_(ack|select)\d+\.wav$", name):
            return "speech", split, "megaglest", ""
        if re.search(r"(attack|hit|die|build|harvest|work|ack|select|morph|produce)", stem):
            return None
        if SFX_EXCLUDE_RE.search(stem):
            return None
        return "sfx", split, pkg, ""
    if pkg == "warzone2100-data":
        if low.startswith("audio/memressp/") or low.startswith("audio/tutorial/") or (
                low.startswith("audio/taunts/") and "haha" not in name):
            return "speech", split, "warzone", ""
        if low.startswith("audio/sfx/"):
            if "/misc/" in low:
                return None  # screams, help, silence
            tag = "alert" if "/interfce/" in low else ""
            return "sfx", split, pkg, tag
        return None
    if pkg == "openarena-data":
        if low.startswith("sound/player/") and "/footsteps/" not in low:
            return None
        if low.startswith("sound/") and not any(k in low for k in ("announcer", "/feedback/", "/teamplay/", "voc_", "/voices/")):
            return "sfx", split, pkg, ""
        return None
    if pkg == "freedroidrpg-data":
        if "/sound/music/" in low:
            return "music", split, pkg, ""
        if "/tux_ingame_comments/" in low:
            return "speech", split, "freedroid-tux", ""
        if "/voice_samples/" in low or "/titles/" in low:
            return None
        if "/sound/effects/" in low and not SFX_EXCLUDE_RE.search(stem):
            return "sfx", split, pkg, ""
        return None
    if pkg == "sonic-pi-samples":
        if stem.startswith("loop_"):
            if stem in ("loop_3d_printer",):
                return "sfx", split, pkg, "bed"
            if stem in ("loop_drone_g_97", "loop_weirdo", "loop_electric"):
                return None
            return "music", split, "sonicpi-loops", "loop"
        if re.match(r"(bd_|sn_|drum_|elec_(hollow_kick|soft_kick|snare|hi_snare|lo_snare|mid_snare|"
                    r"filt_snare|cymbal|fuzz_tom)|tabla_)", stem):
            return "drumhit", split, "sonicpi-drums", ""
        if re.match(r"elec_(beep|bell|blip|blip2|blup|bong|chime|ping|plip|pop|tick|twip|triangle|flip|wood|twang)$", stem):
            return "sfx", split, pkg, "alert"
        if re.match(r"(misc_crow|misc_cineboom|perc_door|perc_impact\d|perc_snap\d?|perc_swash|"
                    r"perc_swoosh|perc_till|vinyl_\w+|mehackit_phone\d|ambi_swoosh|ambi_dark_woosh|"
                    r"ambi_sauna|ambi_soft_buzz|ambi_lunar_land)$", stem):
            return "sfx", split, pkg, ""
        return None
    if pkg == "lmms-common":
        if "/samples/beats/" in low:
            if re.match(r"rave_(hihat|kick|snare)", stem):
                return "drumhit", split, "lmms-drums", ""
            return "music", split, "lmms-loops", "loop"
        if "/samples/bassloops/" in low or "/samples/latin/" in low:
            return "music", split, "lmms-loops", "loop"
        if "/samples/drums/" in low:
            return "drumhit", split, "lmms-drums", ""
        if "/samples/effects/" in low:
            return "sfx", split, pkg, "alert" if "chime" in stem else ""
        if "/samples/misc/" in low and re.match(r"(dong\d+|metalish_dong\d+|electric_ping\d+|hit\d+|"
                                                 r"snaph\d+|metronome\d+)$", stem):
            return "sfx", split, pkg, "alert"
        return None
    if pkg == "lomiri-sounds":
        if "/notifications/" in low:
            return "sfx", split, pkg, "alert"
        if "/camera/" in low:
            return "sfx", split, pkg, ""
        return None  # ringtones: music-vs-event ambiguous
    if pkg in ("oxygen-sounds", "psi-plus-sounds", "eiskaltdcpp-sounds", "blinken", "kanagram", "khangman"):
        if pkg in ("kanagram", "khangman") and name.endswith(".wav") and (stem in ("wrong", "right", "chalk", "splash", "new_game", "ew_dialogue_appear")):
            return None  # .ogg duplicates
        if pkg == "khangman" and stem in ("splash", "new_game"):
            return None  # short jingles
        if "phone-ring" in low or "chess_finish" in low:
            return None
        return "sfx", split, pkg, "alert"
    if pkg in ("yaru-theme-sound", "deepin-sound-theme", "gnome-audio", "sound-icons"):
        if stem in ("phone",):
            return None  # ringtone: music-vs-event ambiguous
        return "sfx", split, pkg, "alert"
    if pkg == "nexuiz-music":
        return "music", split, pkg, ""
    if pkg == "teeworlds-data":
        if stem.startswith("music"):
            return "music", split, pkg, ""
        if stem.startswith("vo_"):
            return None  # voices: pain / cry / spawn vocalisations
        return "sfx", split, pkg, "alert" if stem.startswith("sfx_msg") else ""
    if pkg == "trigger-rally-data":
        if "/codriver/" in low:
            return "speech", split, "trigger-codriver-" + low.split("/codriver/")[1].split("/")[0], ""
        if "/cdtracks/" in low or "music" in low:
            return "music", split, pkg, ""
        if SFX_EXCLUDE_RE.search(stem):
            return None
        return "sfx", split, pkg, ""
    if pkg == "freeciv-data" and "/stdmusic/" in low:
        return "music", split, pkg, ""
    if pkg == "chromium-bsu-data" and stem.startswith("music"):
        return "music", split, pkg, ""
    if pkg == "pingus-data":
        if "/music/" in low:
            return "music", split, pkg, ""
        if SFX_EXCLUDE_RE.search(stem):
            return None
        return "sfx", split, pkg, ""
    if pkg == "frozen-bubble-data":
        if "zik" in name:
            return "music", split, pkg, ""
    if pkg == "tuxtype-data":
        if stem in ("amidst_the_raindrops", "chiptune2", "tuxi") or "/music/" in low:
            return "music", split, pkg, ""
    if pkg == "pinball-data":
        if name.endswith(".ogg") and re.search(r"(intro|game|multiball|professor|introp)", stem):
            return "music", split, pkg, ""
    if pkg == "alienblaster-data" and stem in ("playon", "intro"):
        return "music", split, pkg, ""
    if pkg == "scorched3d-data" and "/music/" in low:
        return "music", split, pkg, ""
    if pkg in ("supertux-data", "warzone2100-music", "colobot-common-sounds", "lincity-ng-data",
               "xmoto-data", "extremetuxracer-data"):
        if "/music" in low or "musics/" in low or "warzone2100/music" in low:
            return "music", split, pkg, ""
        if "/speech/" in low:
            return None
    # generic effects rule
    if SFX_EXCLUDE_RE.search(stem):
        return None
    tag = "alert" if ALERT_RE.search(stem) else ""
    return "sfx", split, pkg, tag


def classify_event_pkg(pkg: str, rel: str) -> tuple[str, str, str, str] | None:
    """A file of an event-tagger package is an sfx source when its path labels an event class, or when it is a
    plain unlabelled effect (an "other sound" of the event mixes); music, voices and UI jingles are excluded."""
    from event_labels import words
    split = EVENT_PACKAGES[pkg]
    if event_label(pkg, rel):
        return "sfx", split, pkg, ""
    low = "/" + rel.lower()
    stem, folder = words(rel)
    only = PACKAGE_RULES.get(pkg, {}).get("only")
    if (EVENT_SKIP_RE.search(low) or SFX_EXCLUDE_RE.search(stem.replace(" ", "")) or NO_LABEL_RE.search(stem)
            or NO_LABEL_RE.search(folder) or (only and pkg != "0ad-data" and not re.search(only, low[1:]))
            or (pkg == "0ad-data" and not low.startswith(("/audio/actor", "/audio/attack", "/audio/resource",
                                                          "/audio/ambient")))):
        return None
    return "sfx", split, pkg, ""


def iter_package_audio(root: Path):
    """Yield (relpath, loader) for audio files and audio members of zip containers."""
    for f in sorted(root.rglob("*")):
        if not f.is_file():
            continue
        low = f.name.lower()
        if low.endswith(AUDIO_EXT):
            yield str(f.relative_to(root)), ("file", str(f))
        elif low.endswith((".pk3", ".wz")) or (low == "data.zip" and "trigger-rally" in str(f)) or (
                low == "public.zip" and "0ad-data" in str(f)):
            with zipfile.ZipFile(f) as z:
                for n in sorted(z.namelist()):
                    if n.lower().endswith(AUDIO_EXT):
                        yield n, ("zip", str(f), n)
        elif low.endswith(".rcc"):  # Qt resource bundles (GCompris)
            from rcc import rcc_files
            for n, _ in sorted(rcc_files(f)):
                if n.lower().endswith(AUDIO_EXT):
                    yield n, ("rcc", str(f), n)


def _decode_bytes_ffmpeg(data: bytes | None, path: str | None) -> np.ndarray:
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-i", path if path else "pipe:0",
           "-ac", "1", "-ar", str(SR), "-f", "f32le", "pipe:1"]
    r = subprocess.run(cmd, input=data, capture_output=True, check=True)
    return np.frombuffer(r.stdout, np.float32).copy()


def decode(loader) -> np.ndarray:
    import soundfile as sf
    import soxr
    if loader[0] == "zip":
        with zipfile.ZipFile(loader[1]) as z:
            data = z.read(loader[2])
        src = io.BytesIO(data)
        path = None
    elif loader[0] == "rcc":
        from rcc import rcc_files
        data = next(b for n, b in rcc_files(loader[1]) if n == loader[2])
        src = io.BytesIO(data)
        path = None
    else:
        data = None
        path = loader[1]
        src = path
    try:
        if path and path.lower().endswith((".it", ".s3m", ".xm", ".mod", ".opus", ".wv")):
            raise RuntimeError("use ffmpeg")
        x, sr = sf.read(src, dtype="float32", always_2d=True)
        x = x.mean(axis=1)
        if sr != SR:
            x = soxr.resample(x, sr, SR).astype(np.float32)
        return x
    except Exception:
        if data is None and path is not None:
            return _decode_bytes_ffmpeg(None, path)
        return _decode_bytes_ffmpeg(data, None)


def frame_db(x: np.ndarray, hop: int = 320) -> np.ndarray:
    n = len(x) // hop
    if n == 0:
        return np.array([20 * np.log10(np.sqrt(np.mean(x ** 2)) + 1e-10)])
    f = x[: n * hop].reshape(n, hop)
    return 10 * np.log10(np.mean(f * f, axis=1) + 1e-12)


def trim(x: np.ndarray, top_db: float = 45.0) -> np.ndarray:
    d = frame_db(x)
    act = np.where(d > d.max() - top_db)[0]
    if len(act) == 0:
        return x[:0]
    a, b = act[0] * 320, (act[-1] + 1) * 320
    return x[max(0, a - 320): b + 320]


def _scan_one(args):
    uid, loader, kind, tag, out = args
    try:
        x = decode(loader)
    except Exception as e:  # unreadable -> excluded
        return uid, None, f"decode error: {e}"[:200]
    x = np.nan_to_num(x)
    if kind != "music" or tag == "loop":
        x = trim(x)
    if kind == "music" and tag != "loop" and len(x) > 0:
        x = trim(x, 60.0)
    dur = len(x) / SR
    if dur == 0:
        return uid, None, "silent"
    peak = float(np.max(np.abs(x)))
    d = frame_db(x)
    act = d > d.max() - 40
    active_db = float(10 * np.log10(np.mean(10 ** (d[act] / 10)) + 1e-12))
    if peak < 1e-3:
        return uid, None, "silent"
    lim = {"speech": (0.3, 40.0), "sfx": (0.05, 90.0), "drumhit": (0.02, 4.0)}
    if kind == "music":
        lo, hi = (0.8, 60.0) if tag == "loop" else (6.0, 1e9)
    else:
        lo, hi = lim[kind]
    if not (lo <= dur <= hi):
        return uid, None, f"duration {dur:.2f}s outside [{lo}, {hi}]"
    y = np.clip(x / peak * 0.9, -1, 1)
    np.save(out, (y * 32767).astype(np.int16))
    return uid, {"duration": round(dur, 3), "active_db": round(active_db - 20 * math.log10(peak / 0.9), 2),
                 "active_frac": round(float(act.mean()), 3), **vad_stats(y)}, ""


_VAD = None


def vad_stats(y: np.ndarray) -> dict:
    """Silero VAD speech fraction / max on (at most) the first 30 s: a listening proxy."""
    global _VAD
    if _VAD is None:
        from earmark.experts.probe.model import SileroVAD
        _VAD = SileroVAD()
    p = _VAD(y[: 30 * SR])
    return {"vad_frac": round(float((p > 0.5).mean()), 3), "vad_max": round(float(p.max()), 3)}


def vad_screen(r: dict) -> str:
    """Reason to exclude a source whose VAD statistics contradict its class ('' = keep)."""
    if r["kind"] == "speech" and r["vad_max"] < 0.5:
        return "speech file without VAD speech (vad_max < 0.5)"
    if r["kind"] == "sfx" and (r["vad_frac"] > 0.25 or (r["duration"] < 1.5 and r["vad_max"] > 0.85)):
        return f"effect looks like speech (vad_frac {r['vad_frac']}, vad_max {r['vad_max']})"
    return ""


def scan(cache: Path, packages: list[str], jobs: int = 2) -> list[dict]:
    tdir = cache / TAG
    sdir = tdir / "sources"
    sdir.mkdir(parents=True, exist_ok=True)
    todo, rows, excluded = [], [], []
    for pkg in packages:
        root = cache / "pkgs" / pkg
        for rel, loader in iter_package_audio(root):
            c = classify(pkg, rel)
            if c is None:
                excluded.append({"pkg": pkg, "path": rel, "why": "rule"})
                continue
            kind, split, group, tag = c
            uid = hashlib.sha1(f"{pkg}:{rel}".encode()).hexdigest()[:16]
            row = {"uid": uid, "pkg": pkg, "path": rel, "kind": kind, "split": split,
                   "group": group, "tag": tag, "event": event_label(pkg, rel) if kind == "sfx" else None}
            out = sdir / f"{uid}.npy"
            meta = sdir / f"{uid}.json"
            if meta.exists():
                m = json.loads(meta.read_text())
                if m.get("ok") and "vad_frac" not in m["info"]:
                    m["info"].update(vad_stats(np.load(out).astype(np.float32) / 32767))
                    meta.write_text(json.dumps(m))
                if m.get("ok"):
                    rows.append({**row, **m["info"]})
                else:
                    excluded.append({"pkg": pkg, "path": rel, "why": m["why"]})
                continue
            todo.append((row, (uid, loader, kind, tag, str(out))))
    log(f"scan: {len(rows)} cached, {len(todo)} to decode")
    with ProcessPoolExecutor(jobs) as ex:
        for (row, _), (uid, info, why) in zip(todo, ex.map(_scan_one, [t[1] for t in todo], chunksize=8)):
            meta = sdir / f"{uid}.json"
            if info is None:
                meta.write_text(json.dumps({"ok": False, "why": why}))
                excluded.append({"pkg": row["pkg"], "path": row["path"], "why": why})
            else:
                meta.write_text(json.dumps({"ok": True, "info": info}))
                rows.append({**row, **info})
    keep = []
    for r in rows:
        why = vad_screen(r)
        if why:
            excluded.append({"pkg": r["pkg"], "path": r["path"], "why": why})
        else:
            keep.append(r)
    rows = keep
    # de-duplicate identical audio (e.g. the same effect shipped twice)
    seen, uniq = {}, []
    for r in sorted(rows, key=lambda r: (r["pkg"] in EVENT_PACKAGES, r["split"] != "dev", r["pkg"] in EXTRA_PACKAGES,
                                         r["uid"])):
        key = (r["kind"], round(r["duration"], 2), r["active_db"])
        if key in seen:
            excluded.append({"pkg": r["pkg"], "path": r["path"], "why": "duplicate"})
            continue
        seen[key] = r
        uniq.append(r)
    rows = uniq
    # a source group must never appear in both splits
    gsplit = {}
    for r in rows:
        gsplit.setdefault(r["group"], set()).add(r["split"])
    bad = [g for g, s in gsplit.items() if len(s) > 1]
    assert not bad, f"groups in both splits: {bad}"
    rows.sort(key=lambda r: (r["split"], r["kind"], r["pkg"], r["path"]))
    with open(tdir / "sources.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    with open(tdir / "excluded.jsonl", "w") as f:
        for r in excluded:
            f.write(json.dumps(r) + "\n")
    lic = {}
    for pkg in packages:
        l, deb = package_licence(cache, pkg)
        lic[pkg] = {"licences": l, "deb": deb, "split": PACKAGES[pkg]}
    (tdir / "licences.json").write_text(json.dumps(lic, indent=1))
    summarize(rows)
    return rows


def summarize(rows):
    from collections import defaultdict
    agg = defaultdict(lambda: [0, 0.0])
    for r in rows:
        k = (r["split"], r["kind"], r["pkg"])
        agg[k][0] += 1
        agg[k][1] += r["duration"]
    for k in sorted(agg):
        log(f"  {k[0]:5s} {k[1]:7s} {k[2]:26s} n={agg[k][0]:5d} {agg[k][1] / 60:7.1f} min")


# --------------------------------------------------------------------------- espeak (TRAIN only)
WORDS = ("the a we they you it this that there here now then today tomorrow yesterday meeting "
         "project report budget team plan market price number house street city river music "
         "water light sound voice computer phone message question answer problem idea reason "
         "morning evening night week month year people friend family doctor teacher student "
         "window door table chair paper book letter story picture garden kitchen office school "
         "is are was were will would can could should must might have has had do does did go "
         "goes went come came make made take took see saw hear heard say said tell told think "
         "know want need like love help start stop open close call send read write speak listen "
         "very really quite almost always never often sometimes maybe perhaps because although "
         "and but or so if when while after before during about above below between into over "
         "under with without from for to of in on at by up down out new old big small good bad "
         "first last next long short high low early late important different possible ready "
         "one two three four five six seven eight nine ten hundred thousand").split()
ESPEAK_VOICES = ["en", "en-us", "en-gb-x-rp", "en-029", "de", "fr", "es", "it", "pt", "nl", "sv",
                 "pl", "ru", "cs", "fi", "da", "nb", "tr", "ro", "hu", "el", "id"]


def make_espeak(cache: Path, n: int, seed: int = 123) -> None:
    import soundfile as sf
    import soxr
    d = cache / TAG / "espeak"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    made = 0
    for i in range(n):
        out = d / f"tts_{i:04d}.npy"
        if out.exists():
            made += 1
            continue
        voice = ESPEAK_VOICES[rng.integers(len(ESPEAK_VOICES))]
        variant = rng.choice(["", "+m1", "+m3", "+f1", "+f2", "+f3", "+f4", "+m7"])
        words = rng.choice(WORDS, size=int(rng.integers(4, 22)))
        text = " ".join(words).capitalize() + rng.choice([".", "?", "!", ","])
        wav = d / "tmp.wav"
        subprocess.run(["espeak-ng", "-v", voice + variant, "-s", str(int(rng.integers(120, 200))),
                        "-p", str(int(rng.integers(25, 75))), "-w", str(wav), text], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        x, sr = sf.read(wav, dtype="float32")
        x = soxr.resample(x, sr, SR).astype(np.float32) if sr != SR else x
        x = trim(x)
        x = x / (np.abs(x).max() + 1e-9) * 0.9
        np.save(out, (x * 32767).astype(np.int16))
        made += 1
    log(f"espeak: {made} utterances")


# --------------------------------------------------------------------------- mixing
class Pools:
    def __init__(self, cache: Path, rows: list[dict], split: str, use_espeak: bool, extra: bool = False,
                 events: bool = False):
        self.sdir = cache / TAG / "sources"
        self.by = {}
        for r in rows:
            if r["split"] != split or (not extra and r["pkg"] in EXTRA_PACKAGES) or (
                    not events and r["pkg"] in EVENT_PACKAGES):
                continue
            self.by.setdefault(r["kind"], {}).setdefault(r["group"], []).append(r)
        self.espeak = sorted((cache / TAG / "espeak").glob("tts_*.npy")) if use_espeak else []
        self._cache = {}
        self.alerts = {g: [r for r in rs if r["tag"] == "alert"] for g, rs in self.by.get("sfx", {}).items()}
        self.alerts = {g: rs for g, rs in self.alerts.items() if rs}
        self.beds = [r for rs in self.by.get("sfx", {}).values() for r in rs if r["duration"] >= 4.0 and r["tag"] != "alert"]
        self.loops = {g: rs for g, rs in self.by.get("music", {}).items() if rs and rs[0]["tag"] == "loop"}
        self.tracks = {g: rs for g, rs in self.by.get("music", {}).items() if rs and rs[0]["tag"] != "loop"}
        self.drumhits = [r for rs in self.by.get("drumhit", {}).values() for r in rs]

    def load(self, uid_or_path) -> np.ndarray:
        key = str(uid_or_path)
        if key not in self._cache:
            p = uid_or_path if isinstance(uid_or_path, Path) else self.sdir / f"{uid_or_path}.npy"
            self._cache[key] = np.load(p, mmap_mode="r")
        return np.asarray(self._cache[key], dtype=np.float32) / 32767.0

    def pick(self, rng, groups: dict) -> dict:
        g = sorted(groups)[rng.integers(len(groups))]
        rs = groups[g]
        return rs[rng.integers(len(rs))]


def db2amp(db):
    return 10 ** (db / 20)


def active_rms_db(x):
    d = frame_db(x)
    if d.max() < -100:
        return -120.0
    act = d > d.max() - 30
    return float(10 * np.log10(np.mean(10 ** (d[act] / 10)) + 1e-12))


def set_level(x, target_db):
    cur = active_rms_db(x)
    if cur < -100:
        return x
    return x * db2amp(target_db - cur)


def colored_noise(rng, n, kind):
    w = rng.standard_normal(n).astype(np.float32)
    if kind == "white":
        return w
    X = np.fft.rfft(w)
    f = np.arange(len(X)) + 1.0
    X = X / (np.sqrt(f) if kind == "pink" else f)
    y = np.fft.irfft(X, n).astype(np.float32)
    return y / (np.std(y) + 1e-9)


def room_tone(rng, n, level_db):
    kind = rng.choice(["white", "pink", "brown", "pink", "brown"])
    x = colored_noise(rng, n, kind)
    if rng.random() < 0.5:  # HVAC-like low-pass hum bed
        from scipy.signal import butter, sosfilt
        sos = butter(2, float(rng.uniform(300, 3000)), "low", fs=SR, output="sos")
        x = sosfilt(sos, x).astype(np.float32)
    if rng.random() < 0.25:  # mains hum
        t = np.arange(n) / SR
        f0 = rng.choice([50.0, 60.0])
        h = sum(rng.uniform(0.2, 1.0) / k * np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 6)) for k in (1, 2, 3))
        x = x + h.astype(np.float32) * rng.uniform(0.3, 2.0)
    x = x / (np.sqrt(np.mean(x ** 2)) + 1e-12)
    return (x * db2amp(level_db)).astype(np.float32)


def speech_track(rng, pools: Pools, n, continuous, use_tts):
    """Concatenate utterances (one speaker group) into a track of n samples."""
    y = np.zeros(n, np.float32)
    groups = pools.by["speech"]
    g = sorted(groups)[rng.integers(len(groups))]
    if continuous:
        pos = int(rng.uniform(0, 0.3) * SR)
        end = n - int(rng.uniform(0, 0.3) * SR)
    else:
        span = rng.uniform(0.5, max(0.6, n / SR - 0.2))
        pos = int(rng.uniform(0, max(0.01, n / SR - span)) * SR)
        end = min(n, pos + int(span * SR))
    first = True
    while pos < end:
        if use_tts:
            u = pools.load(pools.espeak[rng.integers(len(pools.espeak))])
        else:
            r = groups[g][rng.integers(len(groups[g]))]
            u = pools.load(r["uid"])
        u = u * db2amp(rng.uniform(-4, 4))
        if not first and rng.random() < 0.15:
            pos += int(rng.uniform(0.6, 1.5) * SR)  # occasional longer pause
        k = min(len(u), n - pos)
        if k <= 0:
            break
        if k < len(u) and not first and k < 0.3 * SR:
            break
        y[pos:pos + k] += u[:k]
        pos += k + int(rng.uniform(0.04, 0.5) * SR)
        first = False
    return y


def _tile(x, n, rng):
    if len(x) >= n:
        o = int(rng.integers(0, len(x) - n + 1))
        return x[o:o + n].copy()
    reps = int(math.ceil(n / len(x))) + 1
    y = np.tile(x, reps)
    o = int(rng.integers(0, len(x)))
    return y[o:o + n].copy()


def drum_sequence(rng, pools: Pools, n):
    hits = pools.drumhits
    bpm = rng.uniform(75, 175)
    step = 60.0 / bpm / 4  # 16th notes
    names = [r["path"].lower() for r in hits]
    kick = [r for r, nm in zip(hits, names) if re.search(r"(bd_|kick|bass|dhec|ghe|tun)", nm)] or hits
    snare = [r for r, nm in zip(hits, names) if re.search(r"(sn_|snare|clap|na|tas|te)", nm)] or hits
    hat = [r for r, nm in zip(hits, names) if re.search(r"(hat|hh|cymbal|ride|ke|re|tom)", nm)] or hits
    ks, ss, hs = (pools.load(k[rng.integers(len(k))]["uid"]) for k in (kick, snare, hat))
    pat_k = rng.random(16) < 0.25
    pat_k[0] = True
    pat_s = np.zeros(16, bool)
    pat_s[[4, 12]] = True
    pat_s |= rng.random(16) < 0.08
    pat_h = (np.arange(16) % rng.choice([1, 2]) == 0) & (rng.random(16) < 0.95)
    y = np.zeros(n + SR, np.float32)
    t, i = rng.uniform(0, step * 4), 0
    swing = rng.uniform(0, 0.25) * step
    while t * SR < n:
        p = int((t + (swing if i % 2 else 0)) * SR)
        for pat, s, g in ((pat_k, ks, 1.0), (pat_s, ss, 0.8), (pat_h, hs, 0.45)):
            if pat[i % 16]:
                s2 = s[: min(len(s), len(y) - p)] * g * db2amp(rng.uniform(-3, 1))
                y[p:p + len(s2)] += s2
        t += step
        i += 1
    return y[:n]


def music_track(rng, pools: Pools, n, drum_bias):
    r_ = rng.random()
    if r_ < drum_bias and pools.loops:
        r = pools.pick(rng, pools.loops)
        x = _tile(pools.load(r["uid"]), n, rng)
        src = r["uid"]
    elif r_ < drum_bias * 1.5 and pools.drumhits:
        x = drum_sequence(rng, pools, n)
        src = "drumseq"
    else:
        r = pools.pick(rng, pools.tracks or pools.loops)
        x = _tile(pools.load(r["uid"]), n, rng)
        src = r["uid"]
    if rng.random() < 0.25 and n >= 5 * SR:  # partial: music starts or stops inside the clip
        # at least 3 s: a shorter musical snippet is hard to tell from a jingle / chime (event)
        seg = int(rng.uniform(3.0, max(3.0, n / SR * 0.8)) * SR)
        a = int(rng.integers(0, n - seg + 1))
        m = np.zeros(n, np.float32)
        fade = min(int(0.3 * SR), seg // 4)
        env = np.ones(seg, np.float32)
        env[:fade] = np.linspace(0, 1, fade)
        env[-fade:] = np.linspace(1, 0, fade)
        m[a:a + seg] = env
        x = x * m
    return x, src


def synth_beep(rng):
    """UI beep / chime (TRAIN only): 1-4 short decaying tones."""
    notes = int(rng.integers(1, 4))
    f0 = rng.uniform(400, 2500)
    out = []
    for _ in range(notes):
        dur = rng.uniform(0.05, 0.4)
        t = np.arange(int(dur * SR)) / SR
        f = f0 * 2 ** (rng.integers(-7, 8) / 12)
        wave = np.sin(2 * np.pi * f * t)
        if rng.random() < 0.4:
            wave = np.sign(wave) * 0.5 + 0.5 * wave  # harsher beep
        if rng.random() < 0.5:
            wave += 0.3 * np.sin(2 * np.pi * 2.76 * f * t)  # bell partial
        env = np.exp(-t * rng.uniform(3, 25)) if rng.random() < 0.6 else np.minimum(1, (dur - t) * 50)
        out.append((wave * env).astype(np.float32))
        out.append(np.zeros(int(rng.uniform(0, 0.12) * SR), np.float32))
    return np.concatenate(out)


def events_track(rng, pools: Pools, n, alert_bias, synth_beeps, events: list | None = None):
    """The sound-events stem of a domain mix. With `events` (a list), each placed event is appended to it as
    {"row": source row or None (synthetic beep), "start": sample, "x": its samples as placed}: the RNG draws are
    the same either way, so recording the events does not change the audio."""
    y = np.zeros(n, np.float32)
    if rng.random() < 0.25 and pools.beds:
        r = pools.beds[rng.integers(len(pools.beds))]
        y += _tile(pools.load(r["uid"]), n, rng)
        if events is not None:
            events.append({"row": r, "start": 0, "x": y.copy()})
        return y
    k = int(rng.choice([1, 1, 2, 2, 3, 4, 6]))
    sfx = pools.by["sfx"]
    for _ in range(k):
        u = rng.random()
        r = None
        if u < alert_bias * 0.5 and synth_beeps:
            x = synth_beep(rng)
        elif u < alert_bias and pools.alerts:
            r = pools.pick(rng, pools.alerts)
            x = pools.load(r["uid"])
        else:
            r = pools.pick(rng, sfx)
            x = pools.load(r["uid"])
        maxlen = int(rng.uniform(0.3, 6.0) * SR)
        if len(x) > maxlen:
            o = int(rng.integers(0, len(x) - maxlen + 1))
            x = x[o:o + maxlen].copy()
            f = min(len(x) // 4, int(0.05 * SR))
            if f > 0:
                x[-f:] *= np.linspace(1, 0, f)
        x = x * db2amp(rng.uniform(-6, 0))
        p = int(rng.integers(0, max(1, n - min(len(x), n) // 2)))
        kk = min(len(x), n - p)
        y[p:p + kk] += x[:kk]
        if events is not None and kk > 0:
            events.append({"row": r, "start": p, "x": x[:kk].copy()})
    return y


def reverb(rng, x, rec=None):
    """Exponentially decaying noise IR (RT60 0.15-0.9 s) with a direct path; `rec` gets the RT60 drawn and
    the direct-to-reverberant energy ratio (ground truth for the by-hand check; the audio is unchanged)."""
    rt60 = rng.uniform(0.15, 0.9)
    L = int(rt60 * SR)
    t = np.arange(L) / SR
    ir = (rng.standard_normal(L) * np.exp(-6.9 * t / rt60)).astype(np.float32)
    ir[0] = 1.0 / rng.uniform(0.3, 1.2)
    if rec is not None:
        rec["rt60_s"] = round(float(rt60), 3)
        rec["drr_db"] = round(float(10 * np.log10(ir[0] ** 2 / max(float(np.sum(ir[1:] ** 2)), 1e-12))), 1)
    from scipy.signal import fftconvolve
    y = fftconvolve(x, ir)[: len(x)].astype(np.float32)
    return y * (np.sqrt(np.mean(x ** 2)) / (np.sqrt(np.mean(y ** 2)) + 1e-12))


# speech codecs (ffmpeg encoders): IVR prompts / codec speech samples / VoIP. Generated from our
# own TRAIN speech only.
CODECS = [
    ("codec2-3200", ["-ar", "8000", "-c:a", "libcodec2", "-mode", "3200"], "codec2"),
    ("codec2-1600", ["-ar", "8000", "-c:a", "libcodec2", "-mode", "1600"], "codec2"),
    ("codec2-1300", ["-ar", "8000", "-c:a", "libcodec2", "-mode", "1300"], "codec2"),
    ("codec2-700C", ["-ar", "8000", "-c:a", "libcodec2", "-mode", "700C"], "codec2"),
    ("gsm", ["-ar", "8000", "-c:a", "libgsm"], "gsm"),
    ("g726-16k", ["-ar", "8000", "-c:a", "g726", "-b:a", "16k"], "wav"),
    ("g726-32k", ["-ar", "8000", "-c:a", "g726", "-b:a", "32k"], "wav"),
    ("g723.1", ["-ar", "8000", "-c:a", "g723_1", "-b:a", "6.3k"], "g723_1"),
    ("speex-nb", ["-ar", "8000", "-c:a", "libspeex"], "ogg"),
    ("opus-8k", ["-c:a", "libopus", "-b:a", "8k"], "ogg"),
    ("opus-16k", ["-c:a", "libopus", "-b:a", "16k"], "ogg"),
    ("mp3-16k", ["-ar", "8000", "-c:a", "libmp3lame", "-b:a", "16k"], "mp3"),
    ("mulaw", ["-ar", "8000", "-c:a", "pcm_mulaw"], "wav"),
    ("alaw", ["-ar", "8000", "-c:a", "pcm_alaw"], "wav"),
]


def codec(x: np.ndarray, name: str) -> np.ndarray:
    """Encode + decode through one of CODECS (ffmpeg); same length as x; x unchanged on failure."""
    _, args, fmt = next(c for c in CODECS if c[0] == name)
    peak = float(np.abs(x).max()) + 1e-9
    try:
        e = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "f32le", "-ar", str(SR), "-ac", "1",
                            "-i", "pipe:0", *args, "-f", fmt, "pipe:1"],
                           input=(x / peak * 0.5).astype(np.float32).tobytes(), capture_output=True, check=True)
        d = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", fmt, "-i", "pipe:0", "-ac", "1",
                            "-ar", str(SR), "-f", "f32le", "pipe:1"], input=e.stdout, capture_output=True,
                           check=True)
    except subprocess.CalledProcessError:
        return x
    y = np.frombuffer(d.stdout, np.float32) * (peak / 0.5)
    out = np.zeros(len(x), np.float32)
    out[: min(len(x), len(y))] = y[: len(x)]
    return out


def telephone(x):
    import soxr
    from scipy.signal import butter, sosfilt
    y = soxr.resample(x, SR, 8000)
    sos = butter(4, [300, 3400], "band", fs=8000, output="sos")
    y = sosfilt(sos, y)
    y = np.round(y * 2 ** 11) / 2 ** 11  # coarse quantisation
    return soxr.resample(y, 8000, SR).astype(np.float32)[: len(x)]


ACT_ABS_DB = -62.0   # a stem frame quieter than this (dBFS) is inaudible
ACT_NOISE_DB = 3.0   # ... or not this much above the room tone / noise floor
# m3 rule ("audible"): <= 20 dB below the loudest other stem for >= 100 ms in a 2 s window
ACT_REL_DB = 20.0
ACT_MIN_FRAMES = 5   # 5 x 20 ms
# s1 rule ("salient", what a listener notices; MECAT-style references only name those):
SAL_REL_DB = 12.0       # within 12 dB of the loudest other stem (or alone above the floor)
SAL_WIN_FRAMES = 10     # >= 200 ms of salient frames in a 2 s window -> window positive
SAL_CLIP_FRAMES = 15    # >= 300 ms of salient frames in the clip -> clip positive
AMB_FRAMES = 5          # not salient but audible (m3 rule) for >= 100 ms -> ambiguous (-1)
LABEL_VERSION = "s1"


def frame_activity(stems: dict[str, np.ndarray], noise: np.ndarray):
    """Per 20 ms frame and stem: (audible, salient) boolean arrays of shape (3, n_frames)."""
    fdb = {k: frame_db(v) for k, v in stems.items()}
    ndb = frame_db(noise)
    aud, sal = [], []
    for k in ("speech", "music", "sound"):
        d = fdb[k]
        other = np.max([fdb[o] for o in stems if o != k] + [ndb], axis=0)
        base = (d > ACT_ABS_DB) & (d > ndb + ACT_NOISE_DB)
        aud.append(base & (d > other - ACT_REL_DB))
        sal.append(base & (d > other - SAL_REL_DB))
    return np.stack(aud), np.stack(sal)


def _tri(n_sal: int, n_aud: int, need: int) -> int:
    return 1 if n_sal >= need else (-1 if n_aud >= AMB_FRAMES else 0)


def window_labels(stems: dict[str, np.ndarray], noise: np.ndarray):
    """Labels from per-stem 20 ms frame energies.

    Returns dict with
      windows     per 2 s window [s, m, a] in {1 salient, 0 absent, -1 ambiguous / don't care}
      clip        [s, m, a] in {1, 0, -1} for the whole clip (>= 300 ms salient -> 1)
      windows_m3  the previous (m3) audibility rule per window, in {0, 1}
      frames      counts of salient / audible frames per window and for the clip."""
    n = len(noise)
    aud, sal = frame_activity(stems, noise)
    wl, wl3, fs, fa = [], [], [], []
    for a, b in window_bounds(n):
        f0, f1 = a // 320, max(a // 320 + 1, b // 320)
        need3 = min(ACT_MIN_FRAMES, max(1, (f1 - f0) // 4))
        ns = sal[:, f0:f1].sum(axis=1)
        na = aud[:, f0:f1].sum(axis=1)
        wl.append([_tri(int(ns[i]), int(na[i]), SAL_WIN_FRAMES) for i in range(3)])
        wl3.append([int(na[i] >= need3) for i in range(3)])
        fs.append(ns.tolist())
        fa.append(na.tolist())
    cs, ca = sal.sum(axis=1), aud.sum(axis=1)
    clip = [_tri(int(cs[i]), int(ca[i]), SAL_CLIP_FRAMES) for i in range(3)]
    return {"windows": wl, "clip": clip, "windows_m3": wl3,
            "frames": {"sal": fs, "aud": fa, "clip_sal": cs.tolist(), "clip_aud": ca.tolist()}}


def event_truth(placed: list[dict], scale: float, others: dict[str, np.ndarray], noise: np.ndarray) -> list[dict]:
    """The ground truth of every placed event: its class (None: an unlabelled effect), source, start / end time and,
    per 2 s window, whether it is salient (1), audible only (-1) or inaudible (0) by the rule of window_labels() with
    the speech, music and every other event as the competing stems; `salient_s` lists the spans (s) where it is
    salient. `scale` is the gain applied to the events stem after placing (level, final gain)."""
    n = len(noise)
    if not placed:
        return []
    stems = []
    for ev in placed:
        s = np.zeros(n, np.float32)
        s[ev["start"]: ev["start"] + len(ev["x"])] = ev["x"][: n - ev["start"]] * scale
        stems.append(s)
    total = np.sum(stems, axis=0)
    ndb = frame_db(noise)
    odb = [frame_db(v) for v in others.values()]
    out = []
    for ev, s in zip(placed, stems):
        d = frame_db(s)
        rest = frame_db(total - s)
        other = np.max(odb + [rest, ndb], axis=0)
        base = (d > ACT_ABS_DB) & (d > ndb + ACT_NOISE_DB)
        aud, sal = base & (d > other - ACT_REL_DB), base & (d > other - SAL_REL_DB)
        wins = []
        for a, b in window_bounds(n):
            f0, f1 = a // 320, max(a // 320 + 1, b // 320)
            # a short event (a beep, a shot, a click) is salient when most of it is: >= half of its frames above
            # the floor in this window, at least 40 ms; a longer one needs the 200 ms of window_labels()
            need = min(SAL_WIN_FRAMES, max(2, int(np.ceil(0.5 * base[f0:f1].sum()))))
            ns, na = int(sal[f0:f1].sum()), int(aud[f0:f1].sum())
            wins.append(1 if ns >= need else (-1 if na >= 2 else 0))
        spans, i = [], 0
        while i < len(sal):
            if sal[i]:
                j = i
                while j < len(sal) and sal[j]:
                    j += 1
                if j - i >= 5:  # >= 100 ms
                    spans.append([round(i * 0.02, 2), round(j * 0.02, 2)])
                i = j
            else:
                i += 1
        r = ev["row"]
        out.append({"class": r.get("event") if r else "Beep, bleep", "src": r["uid"] if r else "synth",
                    "pkg": r["pkg"] if r else None, "path": r["path"] if r else None,
                    "start_s": round(ev["start"] / SR, 3), "end_s": round((ev["start"] + len(ev["x"])) / SR, 3),
                    "windows": wins, "salient_s": spans})
    return out


def class_windows(events: list[dict], n_windows: int) -> dict[str, list[int]]:
    """Per event class, per window: 1 if an event of the class is salient there, else -1 if one is audible, else 0."""
    out: dict[str, list[int]] = {}
    for e in events:
        if not e["class"]:
            continue
        w = out.setdefault(e["class"], [0] * n_windows)
        for i, v in enumerate(e["windows"]):
            w[i] = 1 if (w[i] == 1 or v == 1) else (-1 if (w[i] == -1 or v == -1) else 0)
    return out


# mixing-level recipes. "m3": the broad TRAIN recipe (unchanged since m3, so the cached
# features stay valid); "r4": realistic levels for DEV (and the dev-like TRAIN-source holdout):
# background music 6-18 dB under the speech (15 %: 0-6 dB), events -12...+3 dB re speech.
RECIPES = {
    "m3": {"music_under_speech": ((0.8, 0, 22), (0.2, 0, 6)), "sound_re_speech": (-20, 3)},
    "r4": {"music_under_speech": ((0.85, 6, 18), (0.15, 0, 6)), "sound_re_speech": (-12, 3)},
    # "x1": TRAIN extension (train2 mixes): m3 levels, extension packages in the pools, and
    # speech through a low-bitrate codec (30 %) / the whole mix through a codec (8 %)
    "x1": {"music_under_speech": ((0.8, 0, 22), (0.2, 0, 6)), "sound_re_speech": (-20, 3),
           "codec_p": 0.3, "mix_codec_p": 0.08},
}


def make_clip(rng, pools: Pools, target: str, split: str, recipe: str = "m3"):
    R = RECIPES[recipe]
    s, m, a = domain_flags(target)
    L = 10.0 if rng.random() < 0.6 else float(rng.uniform(2.0, 10.0))
    n = int(L * SR)
    rec = {"len_s": round(L, 3)}
    stems = {"speech": np.zeros(n, np.float32), "music": np.zeros(n, np.float32),
             "sound": np.zeros(n, np.float32)}
    train = split == "train"
    ref = None
    if s:
        use_tts = train and bool(pools.espeak) and rng.random() < 0.15
        cont = rng.random() < 0.65
        x = speech_track(rng, pools, n, cont, use_tts)
        if rng.random() < 0.12:
            x = telephone(x)
            rec["speech_phone"] = True
        if R.get("codec_p", 0) and rng.random() < R["codec_p"]:
            cname = CODECS[int(rng.integers(len(CODECS)))][0]
            x = codec(x, cname)
            rec["speech_codec"] = cname
        ref = rng.uniform(-32, -14)
        stems["speech"] = set_level(x, ref)
        rec.update(speech_tts=use_tts, speech_continuous=cont)
    if m:
        x, src = music_track(rng, pools, n, drum_bias=0.3)
        if ref is not None:
            (p1, a1, b1), (_, a2, b2) = R["music_under_speech"]
            lvl = ref - (rng.uniform(a1, b1) if rng.random() < p1 else rng.uniform(a2, b2))
        else:
            lvl = rng.uniform(-34, -12)
        stems["music"] = set_level(x, lvl)
        rec.update(music_src=src, music_db=round(lvl, 1))
        ref = lvl if ref is None else ref
    placed, ev_scale = [], 1.0
    if a:
        x = events_track(rng, pools, n, alert_bias=0.3 if not train else 0.35, synth_beeps=train, events=placed)
        if s:
            lvl = ref + rng.uniform(*R["sound_re_speech"])
        elif m:
            lvl = rec["music_db"] + rng.uniform(-12, 6)
        else:
            lvl = rng.uniform(-36, -10)
        stems["sound"] = set_level(x, lvl)
        cur = active_rms_db(x)
        ev_scale = db2amp(lvl - cur) if cur >= -100 else 1.0
        rec["sound_db"] = round(lvl, 1)
    content = sum(stems.values())
    if target == "000":
        if rng.random() < 0.15:
            noise = (rng.standard_normal(n) * 1e-5).astype(np.float32)
            rec["noise_db"] = -100
        else:
            nl = rng.uniform(-80, -42)
            noise = room_tone(rng, n, nl)
            rec["noise_db"] = round(nl, 1)
    else:
        cl = active_rms_db(content)
        nl = min(-48.0, cl - rng.uniform(22, 50))
        noise = room_tone(rng, n, nl)
        rec["noise_db"] = round(nl, 1)
    if target != "000" and rng.random() < 0.2:
        content = reverb(rng, content, rec)
        rec["reverb"] = True
    mix = content + noise
    if rng.random() < 0.08:
        mix = telephone(mix)
        rec["phone"] = True
    if R.get("mix_codec_p", 0) and rng.random() < R["mix_codec_p"]:
        cname = CODECS[int(rng.integers(len(CODECS)))][0]
        mix = codec(mix, cname)
        rec["mix_codec"] = cname
    gain = db2amp(rng.uniform(-6, 6)) if target != "000" else 1.0
    peak = np.abs(mix).max() * gain
    if peak > 0.98:
        gain *= 0.98 / peak
    mix = mix * gain
    stems = {k: v * gain for k, v in stems.items()}
    lab = window_labels(stems, noise * gain)
    # the ground truth of each sound event (class, source, times, salience per window); the audio is unchanged
    rec["events"] = event_truth(placed, ev_scale * gain, {"speech": stems["speech"], "music": stems["music"]},
                                noise * gain)
    clip3 = [int(any(w[i] for w in lab["windows_m3"])) for i in range(3)]
    rec["code_m3"] = domain_code(*map(bool, clip3))
    rec["recipe"] = recipe
    return mix.astype(np.float32), lab, rec


MIX_VERSION = "m3"  # audio recipe version of the TRAIN mixes (bump when the mixing changes)
DEV_MIX_VERSION = "r4"  # realistic levels + salient-label acceptance (DEV and the dev-like holdout)


def accept(lab: dict, rec: dict, target: str, mode: str) -> bool:
    """mode "m3": TRAIN acceptance, as before (the m3 audibility code equals the target), so
    the audio is bit-identical to the m3 mixes; ambiguous heads are masked in training.
    mode "strict": DEV acceptance: every clip label unambiguous and equal to the target."""
    if mode == "m3":
        return rec["code_m3"] == target
    c = lab["clip"]
    return -1 not in c and domain_code(*map(bool, c)) == target


def mix_split(cache: Path, rows, split: str, n_per_domain: int, seed: int, use_espeak: bool,
              out_name: str | None = None, recipe: str = "m3", mode: str = "m3",
              src_split: str | None = None):
    """Every clip has its own RNG stream (seed, domain, index, attempt): a clip does not change
    when other clips are added or rejected, so cached features (keyed by content hash) stay valid.

    out_name: folder / jsonl name (default = split); src_split: whose sources to use."""
    import soundfile as sf
    out_name = out_name or split
    src_split = src_split or split
    out = cache / TAG / "mixes" / out_name
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.wav"):
        old.unlink()
    pools = Pools(cache, rows, src_split, use_espeak, extra=RECIPES[recipe].get("codec_p", 0) > 0)
    recs = []
    for di, target in enumerate(DOMAINS):
        tries = 0
        for k in range(n_per_domain):
            for attempt in range(300):
                tries += 1
                rng = np.random.default_rng([seed, di, k, attempt])
                mix, lab, rec = make_clip(rng, pools, target, src_split, recipe)
                if accept(lab, rec, target, mode):
                    break
            else:
                raise RuntimeError(f"cannot make a {target} clip")
            cid = f"{out_name}_{target}_{k:05d}"
            pcm = (np.clip(mix, -1, 1) * 32767).round().astype(np.int16)
            sf.write(out / f"{cid}.wav", pcm, SR, subtype="PCM_16")
            recs.append({"id": cid, "domain": target, "clip_labels": lab["clip"], "windows": lab["windows"],
                         "windows_m3": lab["windows_m3"], "attempt": attempt,
                         "sha1": hashlib.sha1(pcm.tobytes()).hexdigest(),
                         "mix_version": {"m3": MIX_VERSION, "r4": DEV_MIX_VERSION}.get(recipe, recipe),
                         "label_version": LABEL_VERSION, **rec, "frames": lab["frames"]})
        log(f"  {out_name} {target}: {n_per_domain} clips ({tries} tries)")
    with open(cache / TAG / "mixes" / f"{out_name}.jsonl", "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    amb = np.mean([-1 in r["clip_labels"] for r in recs])
    log(f"  {out_name}: {len(recs)} clips, {amb * 100:.1f} % with an ambiguous (masked) clip label")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["download", "scan", "espeak", "mix", "events", "all"])
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--n-train", type=int, default=6400, help="train clips in total (split over 8 domains)")
    ap.add_argument("--n-dev", type=int, default=16, help="dev clips per domain")
    ap.add_argument("--n-hold", type=int, default=40,
                    help="clips per domain of the dev-like holdout made from TRAIN sources")
    ap.add_argument("--n-train2", type=int, default=2400, help="extension TRAIN clips (recipe x1) in total")
    ap.add_argument("--splits", default="train,train2,hold,dev", help="which mixes the mix step writes")
    ap.add_argument("--n-espeak", type=int, default=800)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--tiny", action="store_true", help="few packages, few clips (CI smoke run)")
    ap.add_argument("--n-ev-train", type=int, default=4800, help="event-tagger TRAIN mixes (step events)")
    ap.add_argument("--n-ev-dev", type=int, default=960, help="event-tagger DEV mixes (step events)")
    ap.add_argument("--tag", default=None, help="cache sub-folder (default tagger, tagger-tiny with --tiny)")
    a = ap.parse_args()
    global TAG
    if a.tag:
        TAG = a.tag
    pk = TINY_PACKAGES if a.tiny else list(PACKAGES)
    if a.tiny:
        a.n_train, a.n_dev, a.n_espeak, a.n_hold, a.n_train2 = 80, 2, 20, 2, 0
        a.n_ev_train, a.n_ev_dev = 48, 12
        TAG = a.tag or "tagger-tiny"
    if a.step in ("download", "all"):
        download_and_extract(a.cache, pk)
    if a.step in ("scan", "all"):
        scan(a.cache, pk, a.jobs)
    if a.step in ("espeak", "all"):
        make_espeak(a.cache, a.n_espeak)
    if a.step in ("mix", "all"):
        rows = [json.loads(l) for l in open(a.cache / TAG / "sources.jsonl")]
        sp = a.splits.split(",")
        if "train" in sp:   # broad levels, m3 acceptance, salient labels with masks
            mix_split(a.cache, rows, "train", int(math.ceil(a.n_train / 8)), a.seed, True)
        if "train2" in sp and a.n_train2:  # extension: + new packages, codec speech, same label rule
            mix_split(a.cache, rows, "train", int(math.ceil(a.n_train2 / 8)), a.seed + 3, True,
                      out_name="train2", recipe="x1", mode="m3")
        if "hold" in sp:    # dev-like (realistic, unambiguous) clips from TRAIN sources: model selection
            mix_split(a.cache, rows, "train", a.n_hold, a.seed + 2, False, out_name="hold",
                      recipe="r4", mode="strict")
        if "dev" in sp:     # realistic, unambiguous, DEV sources only, no generated speech
            mix_split(a.cache, rows, "dev", a.n_dev, a.seed + 1, False, recipe="r4", mode="strict")
    if a.step in ("events", "all"):  # the event tagger's labelled mixes (event_mixes.py)
        from event_mixes import mix_events
        rows = [json.loads(line) for line in open(a.cache / TAG / "sources.jsonl")]
        sp = a.splits.split(",") if a.step == "events" and a.splits != ap.get_default("splits") else ["ev_train", "ev_dev"]
        for split, n in (("ev_train", a.n_ev_train), ("ev_dev", a.n_ev_dev)):
            if split in sp and n:
                mix_events(a.cache, rows, split, n, a.seed + 10, TAG)


if __name__ == "__main__":
    main()
