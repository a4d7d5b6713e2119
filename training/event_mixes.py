"""Labelled mixes for the learned sound-event tagger: `ev_train` (TRAIN packages) and `ev_dev` (DEV packages).

    python training/build_corpus.py events                 # after `scan` (and `espeak`): both splits
    python training/build_corpus.py events --n-ev-train 400 --n-ev-dev 80 --splits ev_dev

Each clip (4-10 s, 16 kHz) is one of five scenes -- room tone only, music, speech, speech over music, or a
continuous unlabelled effect bed -- with 0-3 labelled events (the class drawn uniformly over the classes the
split's packages offer, then a package, then a file) at realistic levels: -15...+5 dB re the speech, -12...+6 dB
re the music, 0...+15 dB over a bed, -40...-10 dBFS alone; plus, in 35 % of the clips, 1-2 unlabelled effects
("other sounds"); 14 % of the clips have no labelled event (negatives). Short footsteps / key presses / ticks /
knocks / hammer blows are repeated into a walking / typing / ticking rhythm (70 %); long files are cropped.
Room tone 22-50 dB under the content, 15 % reverb, 5 % telephone band, +-6 dB final gain, as in build_corpus.py.

Truth: mixing.event_truth() per event (salient / audible / inaudible per 2 s window against the speech,
music, bed and the other events) and class_windows() per class; the domain stems' window labels as well.

TRAIN clips carry a fold (0..K-1): a fold's clips draw their labelled events only from that fold's files, and
for each class its TRAIN packages are dealt to the folds (largest first, so every fold gets some), so a model
trained on the other folds is scored on packages it has not seen for that class (train_events.py uses these
out-of-fold scores to calibrate and to choose thresholds; DEV is only reported). A class offered by one TRAIN
package only has its files dealt to the folds instead (flagged `oof: file` in the class file).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

import mixing as mx
from earmark.experts.learned.windows import SR, window_bounds
from mixing import db2amp

EV_MIX_VERSION = "e1"
K_FOLDS = 4
MIN_TRAIN_FILES = 3  # a class needs this many TRAIN files (after de-duplication) to be a target
# classes whose short files (single steps, key presses, ticks) become a rhythm: (min, max) gap in s
SEQUENCE = {
    "Walk, footsteps": (0.35, 0.7),
    "Typing": (0.06, 0.22),
    "Tick-tock": (0.45, 1.0),
    "Knock": (0.12, 0.3),
    "Hammer": (0.3, 0.8),
    "Clicking": (0.15, 0.6),
}
SCENES = ("quiet", "music", "speech", "speech_music", "bed")
SCENE_P = (0.3, 0.2, 0.25, 0.1, 0.15)


class EventPools:
    """Labelled event files of one split by class and package, the fold of each TRAIN file, and the unlabelled
    effects (distractors, beds) of that split."""

    def __init__(self, rows: list[dict], split: str, classes: list[str] | None = None, k: int = K_FOLDS):
        sfx = [r for r in rows if r["split"] == split and r["kind"] == "sfx"]
        self.by: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
        for r in sfx:
            if r.get("event") and (classes is None or r["event"] in classes):
                self.by[r["event"]][r["pkg"]].append(r)
        self.other = [r for r in sfx if not r.get("event")]
        self.beds = [r for r in self.other if r["duration"] >= 4.0 and r["tag"] != "alert"]
        self.fold: dict[str, int] = {}
        self.oof_by_file: set[str] = set()
        for ci, cls in enumerate(sorted(self.by)):
            pk = sorted(self.by[cls], key=lambda p: (-len(self.by[cls][p]), p))
            if len(pk) == 1:
                self.oof_by_file.add(cls)
                for i, r in enumerate(sorted(self.by[cls][pk[0]], key=lambda r: r["uid"])):
                    self.fold[r["uid"]] = (i + ci) % k
            else:
                for i, p in enumerate(pk):
                    for r in self.by[cls][p]:
                        self.fold[r["uid"]] = (i + ci) % k

    def classes(self, fold: int | None = None) -> list[str]:
        return sorted(
            c
            for c in self.by
            if fold is None or any(self.fold[r["uid"]] == fold for rs in self.by[c].values() for r in rs)
        )

    def pick(self, rng, cls: str, fold: int | None = None) -> dict:
        pk = {p: [r for r in rs if fold is None or self.fold[r["uid"]] == fold] for p, rs in self.by[cls].items()}
        pk = {p: rs for p, rs in sorted(pk.items()) if rs}
        p = list(pk)[rng.integers(len(pk))]
        return pk[p][rng.integers(len(pk[p]))]


def _fade(x: np.ndarray, ms: float = 20.0) -> np.ndarray:
    f = min(len(x) // 4, int(ms / 1000 * SR))
    if f > 0:
        x = x.copy()
        x[:f] *= np.linspace(0, 1, f)
        x[-f:] *= np.linspace(1, 0, f)
    return x


def event_signal(rng, x: np.ndarray, cls: str, n: int) -> np.ndarray:
    """A labelled file made into the event placed in a clip of n samples: a rhythm of repeats for short
    SEQUENCE files (70 %), a crop of 2 s ... clip length (continuous sounds) otherwise."""
    if cls in SEQUENCE and len(x) < 0.6 * SR and rng.random() < 0.7:
        lo, hi = SEQUENCE[cls]
        reps = int(rng.integers(3, 13))
        gap = rng.uniform(lo, hi)
        out = np.zeros(int((reps * gap + 1.0) * SR) + len(x), np.float32)
        t = 0.0
        for _ in range(reps):
            p = int(t * SR)
            out[p : p + len(x)] += x * db2amp(rng.uniform(-4, 1))
            t += gap * rng.uniform(0.85, 1.15)
        x = mx.trim(out)
    maxlen = int(rng.uniform(min(2.0, n / SR), n / SR) * SR)
    if len(x) > maxlen:
        o = int(rng.integers(0, len(x) - maxlen + 1))
        x = _fade(x[o : o + maxlen])
    return x.astype(np.float32)


def _place(rng, n: int, x: np.ndarray) -> int:
    return int(rng.integers(0, max(1, n - min(len(x), n) // 2)))


def make_event_clip(rng, bp: mx.Pools, ep: EventPools, split: str, fold: int | None, classes: list[str]):
    """One event mix: (audio, record) -- see the module doc."""
    L = 10.0 if rng.random() < 0.7 else float(rng.uniform(4.0, 10.0))
    n = int(L * SR)
    scene = SCENES[int(rng.choice(len(SCENES), p=SCENE_P))]
    rec: dict = {"len_s": round(L, 3), "scene": scene}
    z = np.zeros(n, np.float32)
    stems = {"speech": z.copy(), "music": z.copy(), "bed": z.copy()}
    ref = None
    if "speech" in scene:
        x = mx.speech_track(rng, bp, n, rng.random() < 0.65, False)
        if rng.random() < 0.08:
            x = mx.telephone(x)
            rec["speech_phone"] = True
        ref = float(rng.uniform(-32, -14))
        stems["speech"] = mx.set_level(x, ref)
        rec["speech_db"] = round(ref, 1)
    if "music" in scene:
        x, src = mx.music_track(rng, bp, n, drum_bias=0.3)
        lvl = ref - float(rng.uniform(6, 18)) if ref is not None else float(rng.uniform(-34, -12))
        stems["music"] = mx.set_level(x, lvl)
        rec.update(music_src=src, music_db=round(lvl, 1))
        ref = lvl if ref is None else ref
    if scene == "bed" and ep.beds:
        r = ep.beds[rng.integers(len(ep.beds))]
        lvl = float(rng.uniform(-40, -20))
        stems["bed"] = mx.set_level(mx._tile(bp.load(r["uid"]), n, rng), lvl)
        rec.update(bed_src=r["uid"], bed_pkg=r["pkg"], bed_db=round(lvl, 1))
        ref = lvl
    avail = [c for c in classes if c in ep.classes(fold)]
    k = int(rng.choice([0, 1, 1, 1, 2, 2, 3])) if avail else 0
    placed = []
    for _ in range(k):
        cls = avail[rng.integers(len(avail))]
        r = ep.pick(rng, cls, fold)
        placed.append((r, event_signal(rng, bp.load(r["uid"]), cls, n)))
    if ep.other and rng.random() < 0.35:
        for _ in range(int(rng.integers(1, 3))):
            r = ep.other[rng.integers(len(ep.other))]
            placed.append((r, event_signal(rng, bp.load(r["uid"]), "", n)))
    evs = []
    for r, x in placed:
        if scene in ("speech", "speech_music"):
            lvl = rec["speech_db"] + float(rng.uniform(-15, 5))
        elif scene == "music":
            lvl = rec["music_db"] + float(rng.uniform(-12, 6))
        elif scene == "bed" and ref is not None:
            lvl = ref + float(rng.uniform(0, 15))
        else:
            lvl = float(rng.uniform(-40, -10))
        x = mx.set_level(x, lvl)
        evs.append({"row": r, "start": _place(rng, n, x), "x": x[:n]})
        evs[-1]["x"] = evs[-1]["x"][: n - evs[-1]["start"]]
    sound = z.copy()
    for e in evs:
        sound[e["start"] : e["start"] + len(e["x"])] += e["x"]
    content = stems["speech"] + stems["music"] + stems["bed"] + sound
    cl = mx.active_rms_db(content)
    nl = min(-48.0, cl - float(rng.uniform(22, 50))) if cl > -100 else float(rng.uniform(-80, -50))
    noise = mx.room_tone(rng, n, nl)
    rec["noise_db"] = round(nl, 1)
    if rng.random() < 0.15:
        content = mx.reverb(rng, content, rec)
        rec["reverb"] = True
    mix = content + noise
    if rng.random() < 0.05:
        mix = mx.telephone(mix)
        rec["phone"] = True
    gain = db2amp(rng.uniform(-6, 6))
    peak = np.abs(mix).max() * gain
    if peak > 0.98:
        gain *= 0.98 / peak
    mix = mix * gain
    others = {k: v * gain for k, v in stems.items()}
    events = mx.event_truth(evs, gain, others, noise * gain)
    nw = len(window_bounds(n))
    rec["events"] = events
    rec["class_windows"] = mx.class_windows(events, nw)
    lab = mx.window_labels(
        {"speech": others["speech"], "music": others["music"], "sound": sound * gain + others["bed"]}, noise * gain
    )
    rec["windows"] = lab["windows"]
    return mix.astype(np.float32), rec


def target_classes(rows: list[dict]) -> list[str]:
    """The classes with at least MIN_TRAIN_FILES labelled TRAIN files (after de-duplication)."""
    n = defaultdict(int)
    for r in rows:
        if r["split"] == "train" and r["kind"] == "sfx" and r.get("event"):
            n[r["event"]] += 1
    return sorted(c for c, k in n.items() if k >= MIN_TRAIN_FILES)


def mix_events(cache: Path, rows: list[dict], split: str, n_clips: int, seed: int, tag: str) -> None:
    """Write <cache>/<tag>/mixes/<split>/*.wav and <split>.jsonl for split "ev_train" or "ev_dev"; every clip has
    its own RNG stream (seed, index), so a clip does not change when others are added."""
    import soundfile as sf

    src = "train" if split == "ev_train" else "dev"
    classes = target_classes(rows)
    bp = mx.Pools(cache / tag, rows, src, False)  # speech / music of the split's domain packages; loads any source
    ep = EventPools(rows, src, classes)
    out = cache / tag / "mixes" / split
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.wav"):
        old.unlink()
    recs = []
    for i in range(n_clips):
        fold = i % K_FOLDS if split == "ev_train" else None
        rng = np.random.default_rng([seed, 77 if split == "ev_train" else 78, i])  # own streams per split
        mix, rec = make_event_clip(rng, bp, ep, split, fold, classes)
        cid = f"{split}_{i:05d}"
        pcm = (np.clip(mix, -1, 1) * 32767).round().astype(np.int16)
        sf.write(out / f"{cid}.wav", pcm, SR, subtype="PCM_16")
        recs.append(
            {
                "id": cid,
                "split": split,
                "fold": fold,
                "sha1": hashlib.sha1(pcm.tobytes()).hexdigest(),
                "mix_version": EV_MIX_VERSION,
                "label_version": mx.LABEL_VERSION,
                **rec,
            }
        )
        if (i + 1) % 200 == 0:
            mx.log(f"  {split}: {i + 1}/{n_clips}")
    with open(cache / tag / "mixes" / f"{split}.jsonl", "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    meta = {
        "classes": classes,
        "oof_by_file": sorted(ep.oof_by_file),
        "train_files": {c: sum(len(v) for v in ep.by[c].values()) for c in ep.by} if src == "train" else None,
        "packages": {c: sorted(ep.by[c]) for c in ep.by},
    }
    (cache / tag / "mixes" / f"{split}.meta.json").write_text(json.dumps(meta, indent=1))
    mx.log(f"  {split}: {len(recs)} clips, {len(classes)} target classes")
