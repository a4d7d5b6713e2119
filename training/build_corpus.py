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
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from corpus_packages import EVENT_PACKAGES, EXTRA_PACKAGES, FORBIDDEN, PACKAGES, TINY_PACKAGES, TUXPAINT_DEV_LANGS
from earmark.experts.learned.windows import DOMAINS, SR
from earmark.schemas.records import domain_code, domain_flags
from event_labels import NO_LABEL_RE, PACKAGE_RULES, event_label
from mixing import (
    CODECS,
    LABEL_VERSION,
    Pools,
    active_rms_db,
    codec,
    db2amp,
    event_truth,
    events_track,
    frame_db,
    log,
    music_track,
    reverb,
    room_tone,
    set_level,
    speech_track,
    telephone,
    trim,
    window_labels,
)

# folders of event packages that hold music, voices or instruments (never an sfx source)
EVENT_SKIP_RE = re.compile(
    r"/(music|musics|bgm|tunes|songs?|voices?|voice|speech|words|vocals|instruments?|"
    r"percussion|music loops|scale|ingame|menu|npcs|explore_world_music|melody|chronos|"
    r"handheld_console|title-screen|bonus|tutorial|civ)/"
)

AUDIO_EXT = (".ogg", ".wav", ".flac", ".opus", ".oga", ".mp3", ".it", ".s3m", ".xm", ".mod", ".wv")

ALERT_RE = re.compile(
    r"(beep|blip|bleep|chime|ding|notif|alert|alarm|ping|plip|bong|bell|"
    r"message|msg|attention|error|warning|question|positive|negative|"
    r"online|offline|confirm|click|chat|email|mail|reminder|connected|"
    r"finished|interfce|a440|xylo|mallet|rhodes|blinken|sintonia|"
    r"sintesis|karinding|soft delay|slick|ede|amsterdam|lowbattery|"
    r"right|wrong)",
    re.I,
)
# effects whose names suggest music stingers, voices or other ambiguity -> excluded
SFX_EXCLUDE_RE = re.compile(
    r"(music|musik|zik|jingle|fanfare|song|tune|melod|victory|win|"
    r"lose|cheer|applause|crowd|croud|laugh|haha|scream|voice|speech|"
    r"talk|say|taunt|help|grunt|breath|burp|pain|death|die\d|_die|"
    r"hurt|yell|shout|cry|sing|choir|silence|intro|credits|title|"
    r"gasp|drown|duh|giggle|kiss|baby|child|kid|boy|girl|man|woman|"
    r"people|market|school|sports|splash\.|playon|new_game|"
    r"gmeshtdn|humor|humour|goodidea|letsgo|ohno|yipee|excuse|excellent|affirm|yousuck)",
    re.I,
)


TAG = "tagger"  # sub-folder of the cache for decoded sources and mixes ("tagger-tiny" with --tiny)


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
            subprocess.run(["apt-get", "download", p], cwd=debs, check=True, stdout=subprocess.DEVNULL)
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
        if (
            low.startswith("audio/memressp/")
            or low.startswith("audio/tutorial/")
            or (low.startswith("audio/taunts/") and "haha" not in name)
        ):
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
        if low.startswith("sound/") and not any(
            k in low for k in ("announcer", "/feedback/", "/teamplay/", "voc_", "/voices/")
        ):
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
        if re.match(
            r"(bd_|sn_|drum_|elec_(hollow_kick|soft_kick|snare|hi_snare|lo_snare|mid_snare|"
            r"filt_snare|cymbal|fuzz_tom)|tabla_)",
            stem,
        ):
            return "drumhit", split, "sonicpi-drums", ""
        if re.match(
            r"elec_(beep|bell|blip|blip2|blup|bong|chime|ping|plip|pop|tick|twip|triangle|flip|wood|twang)$", stem
        ):
            return "sfx", split, pkg, "alert"
        if re.match(
            r"(misc_crow|misc_cineboom|perc_door|perc_impact\d|perc_snap\d?|perc_swash|"
            r"perc_swoosh|perc_till|vinyl_\w+|mehackit_phone\d|ambi_swoosh|ambi_dark_woosh|"
            r"ambi_sauna|ambi_soft_buzz|ambi_lunar_land)$",
            stem,
        ):
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
        if "/samples/misc/" in low and re.match(
            r"(dong\d+|metalish_dong\d+|electric_ping\d+|hit\d+|"
            r"snaph\d+|metronome\d+)$",
            stem,
        ):
            return "sfx", split, pkg, "alert"
        return None
    if pkg == "lomiri-sounds":
        if "/notifications/" in low:
            return "sfx", split, pkg, "alert"
        if "/camera/" in low:
            return "sfx", split, pkg, ""
        return None  # ringtones: music-vs-event ambiguous
    if pkg in ("oxygen-sounds", "psi-plus-sounds", "eiskaltdcpp-sounds", "blinken", "kanagram", "khangman"):
        if (
            pkg in ("kanagram", "khangman")
            and name.endswith(".wav")
            and (stem in ("wrong", "right", "chalk", "splash", "new_game", "ew_dialogue_appear"))
        ):
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
    if pkg in (
        "supertux-data",
        "warzone2100-music",
        "colobot-common-sounds",
        "lincity-ng-data",
        "xmoto-data",
        "extremetuxracer-data",
    ):
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
    if (
        EVENT_SKIP_RE.search(low)
        or SFX_EXCLUDE_RE.search(stem.replace(" ", ""))
        or NO_LABEL_RE.search(stem)
        or NO_LABEL_RE.search(folder)
        or (only and pkg != "0ad-data" and not re.search(only, low[1:]))
        or (
            pkg == "0ad-data"
            and not low.startswith(("/audio/actor", "/audio/attack", "/audio/resource", "/audio/ambient"))
        )
    ):
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
        elif (
            low.endswith((".pk3", ".wz"))
            or (low == "data.zip" and "trigger-rally" in str(f))
            or (low == "public.zip" and "0ad-data" in str(f))
        ):
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
    cmd = [
        "ffmpeg",
        "-nostdin",
        "-v",
        "error",
        "-i",
        path if path else "pipe:0",
        "-ac",
        "1",
        "-ar",
        str(SR),
        "-f",
        "f32le",
        "pipe:1",
    ]
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
    return (
        uid,
        {
            "duration": round(dur, 3),
            "active_db": round(active_db - 20 * math.log10(peak / 0.9), 2),
            "active_frac": round(float(act.mean()), 3),
            **vad_stats(y),
        },
        "",
    )


_VAD = None


def vad_stats(y: np.ndarray) -> dict:
    """Silero VAD speech fraction / max on (at most) the first 30 s: a listening proxy."""
    global _VAD
    if _VAD is None:
        from earmark.experts.learned.model import SileroVAD

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


def scan(cache: Path, packages: list[str], jobs: int = 2, max_files: int = 0) -> list[dict]:
    """Decode and screen every audio file of the packages (`max_files` > 0: at most that many per package, spread
    evenly over its sorted files -- the tiny corpus's speech packages hold 1,200-1,800 files each)."""
    tdir = cache / TAG
    sdir = tdir / "sources"
    sdir.mkdir(parents=True, exist_ok=True)
    todo, rows, excluded = [], [], []
    for pkg in packages:
        root = cache / "pkgs" / pkg
        files = list(iter_package_audio(root))
        if max_files and len(files) > max_files:
            files = files[:: math.ceil(len(files) / max_files)]
        for rel, loader in files:
            c = classify(pkg, rel)
            if c is None:
                excluded.append({"pkg": pkg, "path": rel, "why": "rule"})
                continue
            kind, split, group, tag = c
            uid = hashlib.sha1(f"{pkg}:{rel}".encode()).hexdigest()[:16]
            row = {
                "uid": uid,
                "pkg": pkg,
                "path": rel,
                "kind": kind,
                "split": split,
                "group": group,
                "tag": tag,
                "event": event_label(pkg, rel) if kind == "sfx" else None,
            }
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
    for r in sorted(
        rows, key=lambda r: (r["pkg"] in EVENT_PACKAGES, r["split"] != "dev", r["pkg"] in EXTRA_PACKAGES, r["uid"])
    ):
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
        licences, deb = package_licence(cache, pkg)
        lic[pkg] = {"licences": licences, "deb": deb, "split": PACKAGES[pkg]}
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
WORDS = (
    "the a we they you it this that there here now then today tomorrow yesterday meeting "
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
    "one two three four five six seven eight nine ten hundred thousand"
).split()
ESPEAK_VOICES = [
    "en",
    "en-us",
    "en-gb-x-rp",
    "en-029",
    "de",
    "fr",
    "es",
    "it",
    "pt",
    "nl",
    "sv",
    "pl",
    "ru",
    "cs",
    "fi",
    "da",
    "nb",
    "tr",
    "ro",
    "hu",
    "el",
    "id",
]


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
        subprocess.run(
            [
                "espeak-ng",
                "-v",
                voice + variant,
                "-s",
                str(int(rng.integers(120, 200))),
                "-p",
                str(int(rng.integers(25, 75))),
                "-w",
                str(wav),
                text,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        x, sr = sf.read(wav, dtype="float32")
        x = soxr.resample(x, sr, SR).astype(np.float32) if sr != SR else x
        x = trim(x)
        x = x / (np.abs(x).max() + 1e-9) * 0.9
        np.save(out, (x * 32767).astype(np.int16))
        made += 1
    log(f"espeak: {made} utterances")


# mixing-level recipes. "m3": the broad TRAIN recipe (unchanged since m3, so the cached
# features stay valid); "r4": realistic levels for DEV (and the dev-like TRAIN-source holdout):
# background music 6-18 dB under the speech (15 %: 0-6 dB), events -12...+3 dB re speech.
RECIPES = {
    "m3": {"music_under_speech": ((0.8, 0, 22), (0.2, 0, 6)), "sound_re_speech": (-20, 3)},
    "r4": {"music_under_speech": ((0.85, 6, 18), (0.15, 0, 6)), "sound_re_speech": (-12, 3)},
    # "x1": TRAIN extension (train2 mixes): m3 levels, extension packages in the pools, and
    # speech through a low-bitrate codec (30 %) / the whole mix through a codec (8 %)
    "x1": {
        "music_under_speech": ((0.8, 0, 22), (0.2, 0, 6)),
        "sound_re_speech": (-20, 3),
        "codec_p": 0.3,
        "mix_codec_p": 0.08,
    },
}


def make_clip(rng, pools: Pools, target: str, split: str, recipe: str = "m3"):
    R = RECIPES[recipe]
    s, m, a = domain_flags(target)
    L = 10.0 if rng.random() < 0.6 else float(rng.uniform(2.0, 10.0))
    n = int(L * SR)
    rec = {"len_s": round(L, 3)}
    stems = {"speech": np.zeros(n, np.float32), "music": np.zeros(n, np.float32), "sound": np.zeros(n, np.float32)}
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
    rec["events"] = event_truth(
        placed, ev_scale * gain, {"speech": stems["speech"], "music": stems["music"]}, noise * gain
    )
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


def mix_split(
    cache: Path,
    rows,
    split: str,
    n_per_domain: int,
    seed: int,
    use_espeak: bool,
    out_name: str | None = None,
    recipe: str = "m3",
    mode: str = "m3",
    src_split: str | None = None,
):
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
    pools = Pools(cache / TAG, rows, src_split, use_espeak, extra=RECIPES[recipe].get("codec_p", 0) > 0)
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
            recs.append(
                {
                    "id": cid,
                    "domain": target,
                    "clip_labels": lab["clip"],
                    "windows": lab["windows"],
                    "windows_m3": lab["windows_m3"],
                    "attempt": attempt,
                    "sha1": hashlib.sha1(pcm.tobytes()).hexdigest(),
                    "mix_version": {"m3": MIX_VERSION, "r4": DEV_MIX_VERSION}.get(recipe, recipe),
                    "label_version": LABEL_VERSION,
                    **rec,
                    "frames": lab["frames"],
                }
            )
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
    ap.add_argument(
        "--n-hold", type=int, default=40, help="clips per domain of the dev-like holdout made from TRAIN sources"
    )
    ap.add_argument("--n-train2", type=int, default=2400, help="extension TRAIN clips (recipe x1) in total")
    ap.add_argument("--splits", default="train,train2,hold,dev", help="which mixes the mix step writes")
    ap.add_argument("--n-espeak", type=int, default=800)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--tiny", action="store_true", help="few packages, few clips (CI smoke run)")
    ap.add_argument("--max-files", type=int, default=0, help="scan at most N files per package (0: all; 300 --tiny)")
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
        a.max_files = a.max_files or 300
        TAG = a.tag or "tagger-tiny"
    if a.step in ("download", "all"):
        download_and_extract(a.cache, pk)
    if a.step in ("scan", "all"):
        scan(a.cache, pk, a.jobs, a.max_files)
    if a.step in ("espeak", "all"):
        make_espeak(a.cache, a.n_espeak)
    if a.step in ("mix", "all"):
        rows = [json.loads(line) for line in open(a.cache / TAG / "sources.jsonl")]
        sp = a.splits.split(",")
        if "train" in sp:  # broad levels, m3 acceptance, salient labels with masks
            mix_split(a.cache, rows, "train", int(math.ceil(a.n_train / 8)), a.seed, True)
        if "train2" in sp and a.n_train2:  # extension: + new packages, codec speech, same label rule
            mix_split(
                a.cache,
                rows,
                "train",
                int(math.ceil(a.n_train2 / 8)),
                a.seed + 3,
                True,
                out_name="train2",
                recipe="x1",
                mode="m3",
            )
        if "hold" in sp:  # dev-like (realistic, unambiguous) clips from TRAIN sources: model selection
            mix_split(a.cache, rows, "train", a.n_hold, a.seed + 2, False, out_name="hold", recipe="r4", mode="strict")
        if "dev" in sp:  # realistic, unambiguous, DEV sources only, no generated speech
            mix_split(a.cache, rows, "dev", a.n_dev, a.seed + 1, False, recipe="r4", mode="strict")
    if a.step in ("events", "all"):  # the event tagger's labelled mixes (event_mixes.py)
        from event_mixes import mix_events

        rows = [json.loads(line) for line in open(a.cache / TAG / "sources.jsonl")]
        sp = (
            a.splits.split(",")
            if a.step == "events" and a.splits != ap.get_default("splits")
            else ["ev_train", "ev_dev"]
        )
        for split, n in (("ev_train", a.n_ev_train), ("ev_dev", a.n_ev_dev)):
            if split in sp and n:
                mix_events(a.cache, rows, split, n, a.seed + 10, TAG)


if __name__ == "__main__":
    main()
