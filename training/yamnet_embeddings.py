"""YAMNet's per-window embedding and scores over the labelled event mixes (cached): the features of the event head.

    python training/yamnet_embeddings.py --tag tagger-ev --split ev_train --jobs 2

Per clip and per 2 s window of the other event experts (`earmark.experts.yamnet.events.window_bounds_s`): the
frames whose centre lies in the window (the nearest frame where none does) pooled as max and mean of the
dequantised 1,024-d embedding, and the max of the 521 scores. Written to
`<cache>/<tag>/yamnet_emb_<split>_<model sha256[:12]>.npz` as float16 arrays `<id>` of shape (n_windows, 2569):
[emb max 1024 | emb mean 1024 | scores 521].
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from earmark.experts.yamnet.events import window_features  # noqa: E402
from earmark.experts.yamnet.model import MODEL_SHA256, yamnet  # noqa: E402


def clip_features(path: str) -> np.ndarray:
    x, sr = sf.read(path, dtype="float32")
    assert sr == 16000, path
    fs = yamnet().score(x, threads=1, embedding=True)
    return window_features(fs.scores, fs.embeddings, x.size).astype(np.float16)


def features(cache: Path, tag: str, split: str, jobs: int) -> tuple[list[dict], list[np.ndarray]]:
    recs = [json.loads(line) for line in open(cache / tag / "mixes" / f"{split}.jsonl")]
    out = cache / tag / f"yamnet_emb_{split}_{MODEL_SHA256[:12]}.npz"
    if out.exists():
        z = np.load(out)
        return recs, [z[r["id"]].astype(np.float32) for r in recs]
    paths = [str(cache / tag / "mixes" / split / f"{r['id']}.wav") for r in recs]
    with ProcessPoolExecutor(jobs) as ex:
        got = list(ex.map(clip_features, paths, chunksize=16))
    np.savez(out, **{r["id"]: g for r, g in zip(recs, got)})
    return recs, [g.astype(np.float32) for g in got]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--tag", default="tagger-ev")
    ap.add_argument("--split", action="append", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    for s in a.split:
        recs, f = features(a.cache, a.tag, s, a.jobs)
        print(f"{s}: {len(recs)} clips, {sum(len(x) for x in f)} windows")


if __name__ == "__main__":
    main()
