"""The development set's clips mixed from openly licensed packaged sounds: the machinery of benchmarks/quality/devset.py, and of tests/test_devset_check.py."""

from __future__ import annotations

import json
import re
import zipfile
from collections import defaultdict
from pathlib import Path

import numpy as np

SR = 16_000
DOMAINS = ("000", "S00", "0M0", "00A", "SM0", "S0A", "0MA", "SMA")
# Median F0 per speaker group (Hz, 12 random files each, librosa pYIN; `--measure-groups` prints them): only
# groups whose files agree and lie clearly on one side of the adult ranges get a gender.
GENDER = {
    "ktuberling-en": "male",
    "ktuberling-wa": "male",
    "ktuberling-ga": "male",
    "ktuberling-es": "male",
    "tuxpaint-bg": "male",
    "ktuberling-it": "female",
    "ktuberling-ro": "female",
    "tuxpaint-es": "female",
    "tuxpaint-el": "female",
    "warzone-memressp": "female",
}
ENGLISH = ("warzone-memressp", "ktuberling-en")  # groups with known words Whisper tiny.en can transcribe
TWO_SPEAKERS = 0.35  # share of speech clips with two voices


def _db(x: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(x.astype(np.float64) ** 2) + 1e-12))


def _active_db(x: np.ndarray) -> float:
    """RMS over the frames within 30 dB of the loudest (a level that ignores the file's silences)."""
    frames = x[: len(x) // 320 * 320].reshape(-1, 320) if len(x) >= 320 else x.reshape(1, -1)
    e = 10 * np.log10(np.mean(frames.astype(np.float64) ** 2, axis=1) + 1e-12)
    return float(10 * np.log10(np.mean(10 ** (e[e > e.max() - 30] / 10))))


def _span(x: np.ndarray) -> tuple[float, float]:
    """Start and end (s) of the part of `x` within 40 dB of its loudest 20 ms frame."""
    frames = x[: max(len(x) // 320, 1) * 320].reshape(-1, 320) if len(x) >= 320 else x.reshape(1, -1)
    e = 10 * np.log10(np.mean(frames.astype(np.float64) ** 2, axis=1) + 1e-12)
    on = np.flatnonzero(e > e.max() - 40)
    return float(on[0] * 320 / SR), float((on[-1] + 1) * 320 / SR)


def warzone_texts(pkgs: Path) -> dict[str, str]:
    """File name → words, from the comments of Warzone 2100's audio/audio.cfg."""
    base = next(pkgs.glob("warzone2100-data/usr/share/games/warzone2100/base.wz"), None)
    if base is None:
        return {}
    cfg = zipfile.ZipFile(base).read("audio/audio.cfg").decode("utf-8", "replace")
    out = {}
    for m in re.finditer(r'audio\s+"([^"]+)"[^\n]*?/\*\s*([^*]+?)\s*\*/', cfg):
        out[m.group(1).lower()] = m.group(2).strip()
    return out


class Sources:
    """The corpus's sources of one split ("dev", or "check" for the check corpus) by role, with what is known of each.

    Speech rows that carry `text` / `gender` (the check corpus, benchmarks/quality/checkset_corpus.py) give their own
    words and gender, and every group with words counts as transcribable English; rows without them (the DEV
    corpus) get the Warzone / KTuberling words and the `GENDER` table, as before."""

    def __init__(self, corpus: Path, events: dict[str, str], music: dict[str, dict], split: str = "dev"):
        rows = [json.loads(line) for line in (corpus / "sources.jsonl").read_text().splitlines()]
        self.dir = corpus / "sources"
        self._samples: dict[str, int] = {}
        dev = [r for r in rows if r["split"] == split]
        texts = warzone_texts(corpus.parent / "pkgs")
        self.speech: dict[str, list[dict]] = defaultdict(list)
        self.gender: dict[str, str | None] = dict(GENDER)
        english = list(ENGLISH)
        for r in dev:
            if r["kind"] != "speech":
                continue
            if "text" in r or "gender" in r:  # the corpus knows the words and the gender itself
                group = r["group"]
                if r.get("text") and group not in english:
                    english.append(group)
                self.gender.setdefault(group, r.get("gender"))
                self.speech[group].append(dict(r, text=r.get("text")))
                continue
            # Warzone 2100's voice lines (memressp/: one voice, its words in audio.cfg), taunts and tutorial are
            # different voices
            group = f"warzone-{r['path'].split('/')[1]}" if r["pkg"] == "warzone2100-data" else r["group"]
            name = Path(r["path"]).name.lower()
            r["text"] = None
            if group == "warzone-memressp":
                r["text"] = texts.get(name)
            elif group == "ktuberling-en":
                r["text"] = Path(name).stem.split("_")[-1]
            self.speech[group].append(r)
        self.english = tuple(english)
        self.music = [r for r in dev if r["kind"] == "music"]
        self.music_tags = music
        labelled = {r["uid"]: r.get("event") for r in dev if r.get("event")} | events
        self.events = [dict(r, event=labelled[r["uid"]]) for r in dev if r["kind"] == "sfx" and r["uid"] in labelled]

    def audio(self, r: dict) -> np.ndarray:
        return np.load(self.dir / f"{r['uid']}.npy").astype(np.float32) / 32768.0

    def samples(self, r: dict) -> int:
        """The source's length in samples, without reading it. A turn draws only among the utterances that fit
        the rest of the clip: before 2026-11-27 it drew one and stopped if it was too long, which left a
        speech-domain clip without any voice (3 S00 clips of fresh3, SM0_05 of review: their truth lists none)."""
        if r["uid"] not in self._samples:
            self._samples[r["uid"]] = int(np.load(self.dir / f"{r['uid']}.npy", mmap_mode="r").shape[0])
        return self._samples[r["uid"]]


def _speech(src: Sources, rng: np.random.Generator, n_len: int, two: bool) -> tuple[np.ndarray, list[dict]]:
    english = [g for g in src.english if src.speech.get(g)]
    others = [g for g in src.speech if g not in src.english and len(src.speech[g]) >= 10]
    pool = english if rng.random() < 0.7 or not others else others
    first = str(rng.choice(pool))
    groups = [first]
    if two:
        rest = [g for g in [*english, *others] if g != first and src.gender.get(g) != src.gender.get(first)]
        rest = rest or [g for g in [*english, *others] if g != first]
        groups.append(str(rng.choice(rest)))
    y = np.zeros(n_len, np.float32)
    speakers = [{"group": g, "gender": src.gender.get(g), "turns": []} for g in groups]
    level = rng.uniform(-26, -17)
    t = int(rng.uniform(0.1, 0.6) * SR)
    turn = 0
    while t < n_len - SR // 2:
        who = speakers[turn % len(speakers)]
        # an utterance that fits the rest of the clip (a speech domain must hold speech)
        rows = [r for r in src.speech[who["group"]] if src.samples(r) <= n_len - t]
        if not rows:
            break
        r = rows[int(rng.integers(len(rows)))]
        x = src.audio(r)
        x = x * 10 ** ((level - _active_db(x)) / 20)
        y[t : t + len(x)] += x
        a, b = _span(x)
        who["turns"].append(
            {"start_s": round(t / SR + a, 2), "end_s": round(t / SR + b, 2), "text": r["text"], "file": r["path"]}
        )
        t += len(x) + int(rng.uniform(0.25, 0.7) * SR)
        turn += 1 if two and rng.random() < 0.7 else 0
    speakers = [s for s in speakers if s["turns"]]
    return y, speakers


def _drum_heavy(path: str, tags: dict) -> bool | None:
    """Known only for LMMS's loops (its beats/ and drum folders vs its bass loops) and music whose labels list
    instruments; None elsewhere (unknown, not "no")."""
    low = path.lower()
    if "/samples/beats/" in low or "drum" in low:
        return True
    if "/samples/bassloops/" in low:
        return False
    if tags.get("instrument"):
        return "drums" in tags["instrument"]
    return None


def _music(src: Sources, rng: np.random.Generator, n_len: int, level: float) -> tuple[np.ndarray, dict]:
    r = src.music[int(rng.integers(len(src.music)))]
    x = src.audio(r)
    start = int(rng.integers(0, max(1, len(x) - n_len)))
    x = x[start : start + n_len]
    if len(x) < n_len:
        x = np.tile(x, n_len // max(len(x), 1) + 1)[:n_len]
    x = x * 10 ** ((level - _active_db(x)) / 20)
    tags = src.music_tags.get(r["uid"], {})
    truth = {
        "file": r["path"],
        "pkg": r["pkg"],
        "start_s": 0.0,
        "end_s": round(n_len / SR, 2),
        "drum_heavy": _drum_heavy(r["path"], tags),
        "tags": tags,
    }
    return x.astype(np.float32), truth


def _events(src: Sources, rng: np.random.Generator, n_len: int, level: float) -> tuple[np.ndarray, list[dict]]:
    y = np.zeros(n_len, np.float32)
    out = []
    busy: list[tuple[int, int]] = []
    for _ in range(int(rng.integers(1, 4))):
        r = src.events[int(rng.integers(len(src.events)))]
        x = src.audio(r)[: 4 * SR]
        if len(x) >= n_len:
            continue
        for _try in range(20):
            t = int(rng.integers(0, n_len - len(x)))
            if all(t + len(x) <= a or t >= b for a, b in busy):
                break
        else:
            continue
        x = x * 10 ** ((level + rng.uniform(-3, 3) - _active_db(x)) / 20)
        y[t : t + len(x)] += x
        busy.append((t, t + len(x)))
        a, b = _span(x)
        out.append(
            {
                "class": r["event"],
                "start_s": round(t / SR + a, 2),
                "end_s": round(t / SR + b, 2),
                "file": r["path"],
                "pkg": r["pkg"],
            }
        )
    return y, sorted(out, key=lambda e: e["start_s"])


def make_clip(src: Sources, domain: str, rng: np.random.Generator, clip_id: str) -> tuple[np.ndarray, dict]:
    n_len = int(rng.choice([8.0, 10.0, 10.0]) * SR)
    speech_on, music_on, events_on = (domain[i] != "0" for i in range(3))
    mix = np.zeros(n_len, np.float32)
    truth: dict = {"id": clip_id, "domain": domain, "len_s": n_len / SR, "speakers": [], "music": None, "events": []}
    speech_db = None
    if speech_on:
        y, truth["speakers"] = _speech(src, rng, n_len, rng.random() < TWO_SPEAKERS)
        mix += y
        speech_db = _active_db(y) if np.any(y) else None
    if music_on:
        level = (speech_db - rng.uniform(8, 14)) if speech_db is not None else rng.uniform(-24, -15)
        y, truth["music"] = _music(src, rng, n_len, level)
        mix += y
    if events_on:
        ref = speech_db if speech_db is not None else (truth["music"] and _active_db(mix))
        level = (ref + rng.uniform(-2, 4)) if ref else rng.uniform(-24, -14)
        y, truth["events"] = _events(src, rng, n_len, level)
        mix += y
    noise_db = float(rng.uniform(-66, -54))
    pink = np.cumsum(rng.standard_normal(n_len)).astype(np.float32)
    pink -= np.convolve(pink, np.ones(400) / 400, mode="same")
    mix += pink * 10 ** ((noise_db - _db(pink)) / 20)
    peak = float(np.max(np.abs(mix)))
    if peak > 0.95:
        mix *= 0.95 / peak
    truth["room"] = {"noise_dbfs": round(noise_db, 1)}
    return mix, truth


def measure_groups(src: Sources, per_group: int = 12) -> None:
    """Print each DEV speech group's median F0 over `per_group` random files: what `GENDER` was read from."""
    import librosa

    rng = np.random.default_rng(0)
    for group, rows in sorted(src.speech.items()):
        meds = []
        for i in rng.permutation(len(rows))[:per_group]:
            f0, _, _ = librosa.pyin(
                src.audio(rows[i])[: 3 * SR], fmin=65, fmax=600, sr=SR, frame_length=1024, hop_length=320
            )
            if np.isfinite(f0).sum() > 5:
                meds.append(round(float(np.nanmedian(f0))))
        print(group, len(rows), sorted(meds), src.gender.get(group) or "-")
