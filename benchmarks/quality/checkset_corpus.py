"""The CHECK corpus: decoded sources from Debian packages no part of earmark has trained or tuned on.

    .venv/bin/python benchmarks/quality/checkset_corpus.py [--cache /work/data-cache] [--jobs 2] [--measure-gender]

One command, idempotent (every decoded file is cached with its verdict): apt-get download + dpkg-deb -x of
`PACKAGES` into <cache>/debs and <cache>/pkgs/<pkg> (as training/build_corpus.py does; the held-out packages and
every package of the training / DEV corpora are refused), then each used file is decoded to 16 kHz mono int16
<cache>/checkset/sources/<uid>.npy and listed in <cache>/checkset/sources.jsonl with the corpus's fields (uid,
pkg, path, kind, split = "check", group, event, duration, active_db, ...) plus, for speech, `text` (the English
words, or null), `gender` ("male" / "female" / null) and `lang`. <cache>/checkset/licences.json lists each
package's licences and .deb. `benchmarks/quality/devset.py --split check` mixes the check benchmark from it.

What is in it (benchmarks/quality/checkset_labels.md has the counts and the by-hand label review):
- speech with known English words: the English voices of Drascula: The Vampire Strikes Back (drascula: .ALS
  files, raw 8-bit 11025 Hz), their words from the English text tables of ScummVM's drascula.dat (scummvm-data),
  matched file → table as ScummVM's engines/drascula/talk.cpp does (N.als: _text[N], the hero John Hacker;
  BJ<N>: B.J.; I<N>: Igor; VB<N>: Von Braun; T<N>: the bartender; P<N>: the pianist; B<N>: the drunk;
  L<N>: the werewolf; E<N>: Desiderio). The D table (Drascula, the blind man and some of John's lines share it)
  is left out: its speaker is not known per file without walking the game script.
- speech without English words (real voices, other languages): Fish Fillets NG's Dutch and Czech voice packs
  (fillets-ng-data-nl / -cs), one group per language and fish (m: the small fish, v: the big one). The
  fillets-ng-data package has no English voice lines of the fish (its sound/*/en folders hold effects and a few
  non-dialogue lines), so there are none here.
- music: game soundtracks (drascula-music, asc-music, fillets-ng-data, hex-a-hop-data, tecnoballz-data, ...).
- effects: labelled with the event tagger's own path rules (`event_label` of training/event_labels.py, imported
  from --event-labels), corrected by the explicit per-package table `EVENT_OVERRIDES` below after a by-hand
  review; effects Silero VAD finds speech in are excluded (build_corpus.py's screen).
Files shorter than 0.3 s, silent ones, and any file whose decoded audio equals a source of the training / DEV
corpora (same duration and level: build_corpus.py's duplicate key) are excluded.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import re
import struct
import sys
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))
import build_corpus as bc  # noqa: E402

SR = 16_000
MIN_S = 0.3  # shorter files are excluded (all kinds)
MUSIC_MAX_S = 120.0  # music is kept to its first 120 s (after trimming): clips take 8-10 s of it
PER_GROUP_MAX = 120  # files per Fish Fillets voice group (a deterministic pick: the pack has ~650 per fish)

# package -> what it gives (the role is informative; classify() decides per file)
PACKAGES: dict[str, str] = {
    "drascula": "speech (English voices) + effects",
    "scummvm-data": "text only: drascula.dat, the words of Drascula's English voices",
    "fillets-ng-data-nl": "speech (Dutch voices)",
    "fillets-ng-data-cs": "speech (Czech voices)",
    "fillets-ng-data": "music + effects",
    "drascula-music": "music",
    "asc-music": "music",
    "hex-a-hop-data": "music + effects",
    "tecnoballz-data": "music (tracker) + effects",
    "bomberclone-data": "music (tracker) + effects",
    "freedink-data": "music + effects",
    "raincat-data": "music",
    "blobwars-data": "music + effects",
    "ufoai-sound": "effects",
    "openttd-opensfx": "effects",
    "7kaa-data": "effects",
    "stormbaancoureur-data": "effects",
    "opencity-data": "effects",
    "xboard": "effects",
    "pychess": "effects",
    "gnome-robots": "effects",
    "gnome-nibbles": "effects",
    "quadrapassel": "effects",
    "aisleriot": "effects",
    "knavalbattle": "effects",
    "granatier": "effects",
    "kolf": "effects",
    "ksirk": "effects",
    "kbounce": "effects",
    "kapman": "effects",
    "kgoldrunner": "effects",
    "kblocks": "effects",
    "kdiamond": "effects",
    "kollision": "effects",
    "vectoroids": "effects",
    "bugsquish": "effects",
    "penguin-command": "effects",
}
# never: the held-out packages (bc.FORBIDDEN), every package of the training / DEV corpora (domain tagger, event
# tagger, music tags: bc.PACKAGES and the list below), the music tagger's soundfonts, Frozen Bubble
NOT_INDEPENDENT = re.compile(
    r"^(fluid-soundfont-gm|musescore-general-soundfont.*|timgm6mb-soundfont|csound-soundfont|frozen-bubble.*|"
    r"fb-music-.*|boswars-data|0ad-data|widelands-data|searchandrescue-data|btanks-data|triplea|etw-data|"
    r"bucklespring-data|workrave-data|caveexpress-data|madbomber-data|ardentryst|qabcs-data|brainparty-data|"
    r"enigma-data|pekka-kana-2-data|powermanga-data|ukui-media|micropolis-data|flobopuyo|sdl-ball-data|"
    r"neverball-common|dustracing2d-data|flare-game|warmux-data|endless-sky-data|cube2-data|hyperrogue-music|"
    r"wordwarvi-sound|crossfire-client|overgod-data|excellent-bifurcation|titanion-data|tuxmath-data|sumo-tools|"
    r"freedroid-data|scratch|gcompris-qt-data|lugaru-data|plee-the-bear-data|mazeofgalious-data|icebreaker|"
    r"orage-data|xemacs21-basesupport|gl-117-data|moon-lander-data|seahorse-adventures|simutrans-pak64|"
    r"tuxpaint-plugins-default|tworld-data|bambam|circuslinux-data|minetest-mod-homedecor|acm|"
    r"gnome-shell-pomodoro-data|heroes-sound-effects|tuxpaint-data|whichwayisup|abe-data|bzflag-data|"
    r"ceferino-data|gamine-data|gemdropx|jag|lmarbles|mirrormagic-data|pushover|qgo|solarwolf|chuck-data|"
    r"tuxfootball)$"
)

AUDIO_EXT = (".ogg", ".wav", ".flac", ".oga", ".mp3", ".it", ".s3m", ".xm", ".mod")

# ---------------------------------------------------------------------------------------------- speech truth
# Drascula: voice-file prefix -> (speaker group, drascula.dat table). From ScummVM's engines/drascula/talk.cpp.
DRASCULA_VOICES = {
    "": ("john", "text"),
    "BJ": ("bj", "textbj"),
    "I": ("igor", "texti"),
    "VB": ("vonbraun", "textvb"),
    "T": ("bartender", "textt"),
    "P": ("pianist", "textp"),
    "B": ("drunk", "textb"),
    "L": ("werewolf", "textl"),
    "E": ("desiderio", "texte"),  # talk_mus: Desiderio, the village drunkard Drascula takes organs from
}
DRASCULA_TABLES = (
    "text",
    "textd",
    "textb",
    "textbj",
    "texte",
    "texti",
    "textl",
    "textp",
    "textt",
    "textvb",
    "textsys",
    "texthis",
    "textverbs",
    "textmisc",
    "textd1",
)
# Gender per speaker group: the character's, from the game, kept only where the median F0 of 12 of the group's
# files (`--measure-gender`, pYIN) does not contradict it (a male voice needs a median under 185 Hz, a female one
# over 130 Hz); the measured medians are in the comments. Drascula's characters are known from the story; Fish
# Fillets' small fish (m) is female and the big one (v) male by the grammatical gender of their Czech lines
# (script/*/dialogs_cs.lua: "Pochopila jsem" / "Myslel jsem", 17 and 14 such forms, none the other way).
# Groups whose F0 contradicts the character get none: John Hacker (a man, 222 Hz), the pianist (194 Hz),
# Von Braun (186 Hz), Desiderio (233 Hz) -- high male voices, or not; a listener would have to say.
GENDER: dict[str, str] = {
    "drascula-bj": "female",  # 252 Hz
    "drascula-bartender": "male",  # 106 Hz
    "drascula-werewolf": "male",  # 79 Hz
    "drascula-igor": "male",  # 162 Hz
    "drascula-drunk": "male",  # 138 Hz
    "fillets-cs-m": "female",  # 273 Hz
    "fillets-cs-v": "male",  # 128 Hz
    "fillets-nl-m": "female",  # 198 Hz
    "fillets-nl-v": "male",  # 148 Hz
}


def drascula_texts(dat: Path) -> dict[str, list[str]]:
    """The English (language 0) text tables of ScummVM's drascula.dat (format of devtools/create_drascula)."""
    d = dat.read_bytes()
    if d[:8] != b"DRASCULA":
        raise ValueError(f"{dat}: not a drascula.dat")
    p = 9

    def u16() -> int:
        nonlocal p
        p += 2
        return struct.unpack(">H", d[p - 2 : p])[0]

    # charmap, item locations, x/y_pol, verbBarX, x1d_menu, frameX, candles, pianistX, drunkX, room pre-updates,
    # updates, room actions, talk sequences: (count, bytes per entry)
    for size in (4, 4, 4, 2, 4, 2, 4, 2, 2, 20, 20, 10, 8):
        n = u16()
        p += n * size
    n_langs = u16()
    out = {}
    for table in DRASCULA_TABLES:
        n = u16()
        for lang in range(n_langs):
            u16()
            p += 2  # total length, alignment padding
            strings = []
            for _ in range(n):
                size = u16() - 2
                strings.append(d[p : p + size].split(b"\0")[0].decode("latin-1"))
                p += size
            if lang == 0:
                out[table] = strings
    return out


def _sentence(s: str) -> str:
    """DRASCULA'S UPPER-CASE LINES -> 'Drascula's upper-case lines' (the words are what counts)."""
    s = s.strip().lower()
    s = re.sub(r"\bi\b", "I", s)
    return s[:1].upper() + s[1:]


def drascula_speech(rel: str, texts: dict[str, list[str]]) -> tuple[str, str] | None:
    """(group, English words) of a Drascula voice file, or None (not a voice with a known speaker and text)."""
    m = re.fullmatch(r"([A-Z]*)(\d+)\.ALS", Path(rel).name.upper())
    if not m or m.group(1) not in DRASCULA_VOICES:
        return None
    group, table = DRASCULA_VOICES[m.group(1)]
    i = int(m.group(2))
    words = texts[table][i] if i < len(texts[table]) else ""
    if not re.search(r"[A-Za-z]", words):
        return None
    return f"drascula-{group}", _sentence(words)


# ---------------------------------------------------------------------------------------------- event labels
# By-hand review of the tagger's path labels on this corpus (benchmarks/quality/checkset_labels.md): per package, regex on
# the lower-case path -> class (or None: no label), applied before event_label(). Every entry was decided by
# listening proxies (name, folder, duration, spectrogram); the reason is in the comment.
EVENT_OVERRIDES: dict[str, dict[str, str | None]] = {
    "openttd-opensfx": {
        r"/05_steam_engine_going_in_tunnel": "Train",  # a steam train's whistle (from "steam train horn 01")
        r"/13_steam_of_steam_engine": None,  # a steam hiss, not an engine running
        r"/16_train_ship_breakdown|/58_toyland_train_breakdown": None,  # metal clanks / a comic crash
        r"/31_splat_terraform": None,  # a dry thud (earth moved), no liquid
        r"/49_toyland_bubble_slurped": None,  # a cartoon slurp
        # added (the tagger's rules miss them: "mill" is a no-label word): named in the catalogue's titles
        r"/56_lumber_mill_chainsaw": "Chainsaw",
        r"/40_sawmill": "Sawing",  # "Circular saw crosscutting"
    },
    "ufoai-sound": {
        r"engine_alien|alien_engine": None,  # a science-fiction drone of an alien craft, not an engine
        r"explosion-smoke|ptl-blast": None,  # a smoke grenade's pop and hiss; a plasma weapon's blast
    },
    "granatier": {r"corpse_explode": None},  # a comic splat-pop, not an explosion
}


def _event_label_fn(path: Path):
    sys.path.insert(0, str(path))
    from event_labels import event_label

    return event_label


def event_class(event_label, pkg: str, rel: str) -> str | None:
    low = rel.lower()
    for pat, cls in EVENT_OVERRIDES.get(pkg, {}).items():
        if re.search(pat, low):
            return cls
    return event_label(pkg, rel)


# ---------------------------------------------------------------------------------------------- which files
# Fish Fillets' language folders hold voices too (a virus reading hex digits, "Ouch", German and Russian lines):
# only these object sounds of them are effects
FILLETS_SFX = r"/sound/(linux/en/(key|enter|space)|[^/]+/en/[a-z0-9]+-[xt]-(click|motor|redalert|pracka|budik|phone))"
VOICE_SKIP = re.compile(
    r"/(aliens|civilians|soldiers)/|/misc/talk|radiomessage|tv_newswav|disco|jingle|"
    r"lock and load|galdov|death|pain|die\d|cheer|good year|bad year|oooh|unused"
)


def classify(pkg: str, rel: str, texts: dict) -> dict | None:
    """{kind, group, text, lang} of one file, or None (not used)."""
    low = rel.lower()
    name = low.rsplit("/", 1)[-1]
    if pkg == "drascula":
        if "/en/" not in low or not low.endswith(".als"):
            return None
        if re.fullmatch(r"s\d+\.als", name):
            return {"kind": "sfx", "group": pkg}
        said = drascula_speech(rel, texts)
        return said and {"kind": "speech", "group": said[0], "text": said[1], "lang": "en"}
    if pkg in ("fillets-ng-data-nl", "fillets-ng-data-cs"):
        lang = pkg.rsplit("-", 1)[-1]
        m = re.fullmatch(r"[a-z0-9]+-([mv])-[^/]+\.ogg", name)
        if f"/{lang}/" not in low or not m:
            return None
        return {"kind": "speech", "group": f"fillets-{lang}-{m.group(1)}", "text": None, "lang": lang}
    music = {
        "drascula-music": "/audio/",
        "asc-music": "/music/",
        "raincat-data": "/music/",
        "fillets-ng-data": "/fillets-ng/music/",
        "hex-a-hop-data": "/music-",
        "tecnoballz-data": "/musics/",
        "bomberclone-data": "/music/",
        "blobwars-data": "/music/",
    }
    if pkg in music and music[pkg] in low or (pkg == "freedink-data" and name.endswith(".ogg")):
        return {"kind": "music", "group": pkg}
    if pkg in ("drascula-music", "asc-music", "raincat-data", "scummvm-data") or name.endswith((".mid", ".tags")):
        return None
    if pkg == "fillets-ng-data" and not ("/sound/share/" in low or re.search(FILLETS_SFX, low)):
        return None
    if VOICE_SKIP.search(low) or bc.SFX_EXCLUDE_RE.search(name.rsplit(".", 1)[0]):
        return None
    return {"kind": "sfx", "group": pkg}


def iter_files(root: Path):
    """(relpath, loader) of every candidate audio file of a package: plain files, .pk3 members, OpenSFX .cat
    entries, Drascula .ALS voices and Blob Wars' extension-less sound / music files."""
    for f in sorted(root.rglob("*")):
        if not f.is_file():
            continue
        rel = str(f.relative_to(root))
        low = f.name.lower()
        if low.endswith(AUDIO_EXT) or low.endswith(".als"):
            yield rel, ("file", str(f))
        elif low.endswith(".pk3"):
            with zipfile.ZipFile(f) as z:
                for n in sorted(z.namelist()):
                    if n.lower().endswith(AUDIO_EXT):
                        yield n, ("zip", str(f), n)
        elif low.endswith(".cat"):
            for i, name in enumerate(opensfx_names(f)):
                slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
                yield f"{rel}/{i:02d}_{slug}.wav", ("cat", str(f), i)
        elif re.search(r"/blobwars/(sound|music)/[^./]+$", rel):
            yield rel, ("file", str(f))


def _cat_entries(path: Path) -> list[tuple[int, int]]:
    d = Path(path).read_bytes()
    n = (struct.unpack("<I", d[:4])[0] & 0x7FFFFFFF) // 8
    return [(o & 0x7FFFFFFF, s) for o, s in (struct.unpack("<II", d[8 * i : 8 * i + 8]) for i in range(n))]


def opensfx_names(path: Path) -> list[str]:
    """The titles of an OpenTTD sound catalogue's entries ("Explosion". By ... License: ...)."""
    d = Path(path).read_bytes()
    out = []
    for o, _ in _cat_entries(path):
        title = d[o + 1 : o + 1 + d[o]].decode("latin-1")
        out.append(title.split('"')[1] if title.count('"') >= 2 else title)
    return out


def decode(loader) -> np.ndarray:
    """Float32 16 kHz mono audio of a loader (build_corpus.decode, plus .cat entries and Drascula's raw .ALS)."""
    import soundfile as sf
    import soxr

    if loader[0] == "cat":
        d = Path(loader[1]).read_bytes()
        o, s = _cat_entries(loader[1])[loader[2]]
        riff = d[o + 1 + d[o] : o + s]
        x, sr = sf.read(io.BytesIO(riff), dtype="float32", always_2d=True)
        return soxr.resample(x.mean(axis=1), sr, SR).astype(np.float32)
    if loader[0] == "file" and loader[1].lower().endswith(".als"):
        raw = Path(loader[1]).read_bytes()
        # ScummVM's playFile: 32-byte header, the last 64 bytes are not sound; unsigned 8-bit, 11025 Hz
        x = (np.frombuffer(raw[32:-64], np.uint8).astype(np.float32) - 128.0) / 128.0
        return soxr.resample(x, 11025, SR).astype(np.float32)
    return bc.decode(loader)


def process(args) -> tuple[str, dict | None, str]:
    """Decode, trim, check and save one file (build_corpus._scan_one's steps, this corpus's limits)."""
    uid, loader, kind, out = args
    try:
        x = np.nan_to_num(decode(loader))
    except Exception as e:  # unreadable -> excluded
        return uid, None, f"decode error: {e}"[:200]
    x = bc.trim(x, 60.0 if kind == "music" else 45.0)
    if kind == "music":
        x = x[: int(MUSIC_MAX_S * SR)]
    dur = len(x) / SR
    if dur < MIN_S or (kind == "music" and dur < 6.0) or (kind != "music" and dur > 90.0):
        return uid, None, f"duration {dur:.2f} s"
    peak = float(np.max(np.abs(x)))
    if peak < 1e-3:
        return uid, None, "silent"
    d = bc.frame_db(x)
    act = d > d.max() - 40
    active_db = float(10 * np.log10(np.mean(10 ** (d[act] / 10)) + 1e-12))
    y = np.clip(x / peak * 0.9, -1, 1)
    np.save(out, (y * 32767).astype(np.int16))
    info = {
        "duration": round(dur, 3),
        "active_db": round(active_db - 20 * math.log10(peak / 0.9), 2),
        "active_frac": round(float(act.mean()), 3),
        **bc.vad_stats(y),
    }
    return uid, info, ""


# ---------------------------------------------------------------------------------------------- the corpus
class UsedSources:
    """The sources of the training / DEV corpora (<cache>/tagger*/sources.jsonl), to find a file of ours whose
    audio is one of theirs (the same effect shipped by two packages): same length within 20 ms, level within
    1.5 dB, and correlation > 0.98 over the common length of the decoded, peak-normalised arrays."""

    def __init__(self, cache: Path):
        self.by_len: dict[int, list[tuple[Path, dict]]] = {}
        for f in sorted(cache.glob("tagger*/sources.jsonl")):
            for line in f.read_text().splitlines():
                r = json.loads(line)
                self.by_len.setdefault(round(r["duration"] * 50), []).append((f.parent / "sources", r))

    def match(self, x: np.ndarray, r: dict) -> str | None:
        k = round(r["duration"] * 50)
        for d, u in (c for kk in (k - 1, k, k + 1) for c in self.by_len.get(kk, [])):
            if abs(u["active_db"] - r["active_db"]) > 1.5:
                continue
            y = np.load(d / f"{u['uid']}.npy", mmap_mode="r")
            n = min(len(x), len(y))
            a, b = x[:n].astype(np.float64), np.asarray(y[:n], np.float64)
            if np.dot(a, b) > 0.98 * math.sqrt(np.dot(a, a) * np.dot(b, b) + 1e-12):
                return f"{u['pkg']}:{u['path']}"
        return None


def candidates(cache: Path, event_label) -> list[dict]:
    texts = drascula_texts(next((cache / "pkgs/scummvm-data").rglob("drascula.dat")))
    rows = []
    for pkg in PACKAGES:
        if pkg == "scummvm-data":
            continue
        group_files: dict[str, list[dict]] = {}
        for rel, loader in iter_files(cache / "pkgs" / pkg):
            c = classify(pkg, rel, texts)
            if c is None:
                continue
            uid = hashlib.sha1(f"{pkg}:{rel}".encode()).hexdigest()[:16]
            row = {
                "uid": uid,
                "pkg": pkg,
                "path": rel,
                "kind": c["kind"],
                "split": "check",
                "group": c["group"],
                "event": event_class(event_label, pkg, rel) if c["kind"] == "sfx" else None,
                "text": c.get("text"),
                "gender": None,
                "lang": c.get("lang"),
                "_loader": loader,
            }
            group_files.setdefault(c["group"], []).append(row)
        for group, rs in group_files.items():
            if group.startswith("fillets-"):  # a deterministic pick of each voice pack's ~650 lines per fish
                rs = sorted(rs, key=lambda r: r["uid"])[:PER_GROUP_MAX]
            rows += rs
    return rows


def scan(cache: Path, event_label, jobs: int) -> list[dict]:
    out = cache / "checkset"
    sdir = out / "sources"
    sdir.mkdir(parents=True, exist_ok=True)
    rows, todo, excluded = [], [], []
    for r in candidates(cache, event_label):
        meta = sdir / f"{r['uid']}.json"
        if meta.exists():
            m = json.loads(meta.read_text())
            (rows.append({**r, **m["info"]}) if m["ok"] else excluded.append({**r, "why": m["why"]}))
        else:
            todo.append(r)
    bc.log(f"checkset: {len(rows)} cached, {len(todo)} to decode")
    with ProcessPoolExecutor(jobs) as ex:
        args = [(r["uid"], r["_loader"], r["kind"], str(sdir / f"{r['uid']}.npy")) for r in todo]
        for r, (uid, info, why) in zip(todo, ex.map(process, args, chunksize=8)):
            (sdir / f"{uid}.json").write_text(json.dumps({"ok": info is not None, "info": info, "why": why}))
            (rows.append({**r, **info}) if info else excluded.append({**r, "why": why}))
    keep, seen, used = [], set(), UsedSources(cache)
    for r in sorted(rows, key=lambda r: r["uid"]):
        why = bc.vad_screen(r)
        x = np.load(sdir / f"{r['uid']}.npy")
        key = hashlib.sha1(x.tobytes()).hexdigest()  # the same audio twice in this corpus: keep one
        twin = None if why else used.match(x, r)
        if twin:
            why = f"same audio as a training / DEV corpus source ({twin})"
        if not why and key in seen:
            why = "duplicate"
        if why:
            excluded.append({**r, "why": why})
            continue
        seen.add(key)
        keep.append(r)
    for r in keep:
        if r["kind"] == "speech":
            r["gender"] = GENDER.get(r["group"])
    keep.sort(key=lambda r: (r["kind"], r["pkg"], r["path"]))
    with open(out / "sources.jsonl", "w") as f:
        for r in keep:
            f.write(json.dumps({k: v for k, v in r.items() if k != "_loader"}) + "\n")
    with open(out / "excluded.jsonl", "w") as f:
        for r in excluded:
            f.write(json.dumps({"pkg": r["pkg"], "path": r["path"], "kind": r["kind"], "why": r["why"]}) + "\n")
    lic = {}
    for pkg in PACKAGES:
        licences, deb = bc.package_licence(cache, pkg)
        lic[pkg] = {"licences": licences, "deb": deb, "use": PACKAGES[pkg]}
    (out / "licences.json").write_text(json.dumps(lic, indent=1))
    return keep


def download(cache: Path) -> None:
    for pkg in PACKAGES:
        if bc.FORBIDDEN.match(pkg) or NOT_INDEPENDENT.match(pkg) or pkg in bc.PACKAGES:
            raise SystemExit(f"refusing {pkg}: held out, or a source of the training / DEV corpora")
    bc.download_and_extract(cache, list(PACKAGES))


def measure_gender(cache: Path, per_group: int = 12) -> None:
    """Print each speech group's median F0 over `per_group` random files (pYIN): what GENDER was read from."""
    import librosa

    rows = [json.loads(line) for line in (cache / "checkset/sources.jsonl").read_text().splitlines()]
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if r["kind"] == "speech":
            groups.setdefault(r["group"], []).append(r)
    rng = np.random.default_rng(0)
    for group, rs in sorted(groups.items()):
        meds = []
        for i in rng.permutation(len(rs))[:per_group]:
            x = np.load(cache / "checkset/sources" / f"{rs[i]['uid']}.npy").astype(np.float32) / 32768
            f0, _, _ = librosa.pyin(x[: 3 * SR], fmin=65, fmax=600, sr=SR, frame_length=1024, hop_length=320)
            if np.isfinite(f0).sum() > 5:
                meds.append(round(float(np.nanmedian(f0))))
        print(group, len(rs), sorted(meds), "median", int(np.median(meds)) if meds else "-", GENDER.get(group))


def review(cache: Path, n: int, out: Path, seed: int = 0) -> None:
    """Print `n` random labelled effects (markdown rows: path, class, duration) and draw their spectrograms
    (20 a sheet) into `out`: the by-hand review of benchmarks/quality/checkset_labels.md."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in (cache / "checkset/sources.jsonl").read_text().splitlines()]
    lab = [r for r in rows if r["kind"] == "sfx" and r["event"]]
    pick = [lab[i] for i in sorted(np.random.default_rng(seed).permutation(len(lab))[:n])]
    out.mkdir(parents=True, exist_ok=True)
    for k in range(0, len(pick), 20):
        fig, axes = plt.subplots(5, 4, figsize=(16, 13))
        for j, (ax, r) in enumerate(zip(axes.flat, pick[k : k + 20])):
            x = np.load(cache / "checkset/sources" / f"{r['uid']}.npy").astype(np.float32)[: 6 * SR] / 32768
            ax.specgram(x + 1e-6, NFFT=512, Fs=SR, noverlap=384, cmap="magma")
            ax.set_title(f"{k + j + 1}. {r['event'][:18]} | {Path(r['path']).name[:26]}", fontsize=8)
            ax.tick_params(labelsize=6)
        fig.tight_layout()
        fig.savefig(out / f"review_{k // 20 + 1}.png", dpi=55)
        plt.close(fig)
    for i, r in enumerate(pick, 1):
        print(f"| {i} | {r['pkg']} | `{r['path']}` | {r['event']} | {r['duration']:.1f} s |")


def asr_sample(cache: Path, n: int, seed: int = 3) -> None:
    """Whisper tiny.en (earmark's ASR model, greedy) on `n` random speech files with words: a sanity check that
    the file -> words mapping is right (it is not used to choose or drop anything). Prints per-file WER."""
    from devset_truth import wer, words  # this folder's script
    from faster_whisper import WhisperModel

    from earmark.experts.asr import whisper_model_dir

    model = WhisperModel(str(whisper_model_dir()), device="cpu", compute_type="int8", cpu_threads=2)
    rows = [json.loads(line) for line in (cache / "checkset/sources.jsonl").read_text().splitlines()]
    said = [r for r in rows if r["kind"] == "speech" and r["text"]]
    errs = []
    for i in np.random.default_rng(seed).permutation(len(said))[:n]:
        r = said[i]
        x = np.load(cache / "checkset/sources" / f"{r['uid']}.npy").astype(np.float32) / 32768
        heard = " ".join(s.text for s in model.transcribe(x, language="en", beam_size=1)[0])
        errs.append(wer(words(heard), words(r["text"])))
        print(f"{errs[-1]:.2f} | {r['group']} | {r['text'][:70]} | {heard.strip()[:70]}")
    print(f"{len(errs)} files: WER median {np.median(errs):.3f}, mean {np.mean(errs):.3f}")


def summary(rows: list[dict]) -> None:
    from collections import Counter

    for what, key in (
        ("kind", lambda r: r["kind"]),
        ("event", lambda r: r["event"]),
        ("speech group", lambda r: (r["group"], r["gender"], r["text"] is not None)),
    ):
        c = Counter(key(r) for r in rows if what != "speech group" or r["kind"] == "speech")
        bc.log(f"{what}: " + ", ".join(f"{k}={v}" for k, v in sorted(c.items(), key=str)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--event-labels", type=Path, default=ROOT / "training", help="folder with the event tagger's event_labels.py"
    )
    ap.add_argument("--measure-gender", action="store_true", help="print the speech groups' median F0 and stop")
    ap.add_argument("--review", type=Path, help="folder: draw and list --review-n random labelled effects, stop")
    ap.add_argument("--review-n", type=int, default=60)
    ap.add_argument("--asr-sample", type=int, help="Whisper tiny.en on this many speech files with words, stop")
    a = ap.parse_args()
    if a.measure_gender:
        return measure_gender(a.cache)
    if a.review:
        return review(a.cache, a.review_n, a.review)
    if a.asr_sample:
        return asr_sample(a.cache, a.asr_sample)
    download(a.cache)
    rows = scan(a.cache, _event_label_fn(a.event_labels), a.jobs)
    summary(rows)
    bc.log(f"{len(rows)} sources in {a.cache / 'checkset/sources.jsonl'}")


if __name__ == "__main__":
    main()
