"""The domain tagger's TRAIN mixes as both of its heads read them: which TRAIN splits exist, the clip-level
holdout that the MLP (train_probe.py) and the CNN (train_cnn.py) share, and the cached log-mels of the mixes.

A library for those scripts: it imports no training script, so they can both import it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from earmark.experts.learned.model import logmel
from earmark.experts.learned.windows import DOMAINS, SR


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def load_split(tdir: Path, split: str):
    return [json.loads(line) for line in open(tdir / "mixes" / f"{split}.jsonl")]


TRAIN_PARTS = ("train", "train2")  # m3 mixes + the x1 extension (if built)


def train_parts(tdir: Path, use_ext: bool = True):
    """[(split, records)] of the TRAIN mixes that exist."""
    return [
        (sp, load_split(tdir, sp))
        for sp in TRAIN_PARTS
        if (tdir / "mixes" / f"{sp}.jsonl").exists() and (use_ext or sp == "train")
    ]


def holdout_ids(recs, frac: float, seed: int = 0) -> set:
    """Clip-level TRAIN holdout, stratified by (requested) domain; shared by the MLP and the CNN."""
    rng = np.random.default_rng(seed)
    hold = set()
    for d in DOMAINS:
        ids = [i for i, r in enumerate(recs) if r["domain"] == d]
        rng.shuffle(ids)
        hold.update(ids[: max(1, int(round(frac * len(ids))))])
    return hold


def cache_logmels(tdir: Path, split: str, recs) -> None:
    """Log-mel of every clip, cached as <tdir>/logmel/<sha1>.npy (float16)."""
    import soundfile as sf

    mdir = tdir / "logmel"
    mdir.mkdir(parents=True, exist_ok=True)
    t0, done = time.time(), 0
    for r in recs:
        f = mdir / f"{r['sha1']}.npy"
        if f.exists():
            continue
        x, sr = sf.read(tdir / "mixes" / split / f"{r['id']}.wav", dtype="float32")
        assert sr == SR
        np.save(f, logmel(x).astype(np.float16))
        done += 1
        if done % 500 == 0:
            log(f"  logmel {split}: {done} ({(time.time() - t0) / done * 1000:.1f} ms/clip)")
