"""EfficientAT mn04's AudioSet scores per 2 s window of the labelled event mixes (cached), for calibrate_mn04.py.

    python training/mn04_windows.py --tag tagger-ev2 --split ev_train --split ev_dev --jobs 2

Each window of `earmark.experts.yamnet.events.window_bounds_s` (the evidence's 2 s windows) is upsampled from the
mixes' 16 kHz to the 32 kHz mn04 reads (as `experts/speakers.py` does for its gender opinion) and scored on its own:
sigmoid of the 527 logits. Cache: `<cache>/<tag>/mn04_<split>_<weights sha12>.npz`, one (n_windows, 527) float16
array per clip id.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from earmark.experts.efficientat import WEIGHTS_SHA256  # noqa: E402

_MODEL = None


def _model():
    global _MODEL
    if _MODEL is None:
        import torch

        from earmark.experts.efficientat.model import Mn04

        torch.set_num_threads(1)
        _MODEL = Mn04()
    return _MODEL


def window_probs(x_16k: np.ndarray) -> np.ndarray:
    """(n_windows, 527) mn04 probabilities of each 2 s window of a 16 kHz clip."""
    import torch
    from scipy.signal import resample_poly

    from earmark.experts.yamnet.events import window_bounds_s

    m = _model()
    bounds = window_bounds_s(x_16k.size)
    segs = [x_16k[int(a * 16000) : int(b * 16000)] for a, b in bounds]
    n = max(s.size for s in segs)
    batch = np.stack([np.pad(s, (0, n - s.size)) for s in segs])
    up = resample_poly(batch, 2, 1, axis=1).astype(np.float32)
    with torch.inference_mode():
        z = m.model(m.front(torch.as_tensor(up)).unsqueeze(1)).numpy()
    return (1 / (1 + np.exp(-z))).astype(np.float16)


def _score(path: str) -> np.ndarray:
    x, sr = sf.read(path, dtype="float32")
    assert sr == 16000, path
    return window_probs(x)


def scores(cache: Path, tag: str, split: str, jobs: int) -> tuple[list[dict], list[np.ndarray]]:
    recs = [json.loads(line) for line in open(cache / tag / "mixes" / f"{split}.jsonl")]
    out = cache / tag / f"mn04_{split}_{WEIGHTS_SHA256[:12]}.npz"
    if out.exists():
        z = np.load(out)
        return recs, [z[r["id"]].astype(np.float32) for r in recs]
    paths = [str(cache / tag / "mixes" / split / f"{r['id']}.wav") for r in recs]
    t0 = time.time()
    with ProcessPoolExecutor(jobs) as ex:
        got = list(ex.map(_score, paths, chunksize=16))
    print(f"{split}: {len(got)} clips scored in {time.time() - t0:.0f} s", flush=True)
    np.savez_compressed(out, **{r["id"]: g for r, g in zip(recs, got)})
    return recs, [g.astype(np.float32) for g in got]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--tag", default="tagger-ev2")
    ap.add_argument("--split", action="append", default=[])
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    for split in a.split or ["ev_train", "ev_dev"]:
        recs, got = scores(a.cache, a.tag, split, a.jobs)
        print(split, len(recs), "clips,", sum(len(g) for g in got), "windows")


if __name__ == "__main__":
    main()
