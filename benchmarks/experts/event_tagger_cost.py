"""What the learned event tagger adds to the analyze stage per 10 s clip on one core.

    taskset -c 0 env OMP_NUM_THREADS=1 EARMARK_TAGGER_THREADS=1 .venv/bin/python benchmarks/experts/event_tagger_cost.py

On N generated 10 s clips (earmark.corpus, every domain) it times, clip by clip, as the analyze stage runs them:
the domain expert's tagger (`learned.tag_clip`: Whisper tiny.en encoder, Silero VAD, DSP, musicnn, MLP), then the
event tagger right after it (`events.tag_events`: a hit in the per-process feature cache + the event MLP + the
calibration), and the event tagger alone on a cold cache (what it costs when nothing ran before it, e.g. with
`analyze.domain = "heuristic"`). Prints median and mean seconds per clip.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from earmark.core.config import IngestSection  # noqa: E402
from earmark.corpus import generate_corpus  # noqa: E402
from earmark.stages.ingest import decode_clip, ingest_file  # noqa: E402


def ten_second_clips(n: int, seed: int) -> list[np.ndarray]:
    """n clips of exactly 10 s: the generated corpus's clips (all domains) laid end to end and cut."""
    parts: list[np.ndarray] = []
    with tempfile.TemporaryDirectory() as d:
        for item in generate_corpus(Path(d), per_domain=max(1, n // 2), seed=seed, hostile=False):
            rows, _ = ingest_file(item.path, IngestSection())
            parts += [np.asarray(decode_clip(r).samples, np.float32) for r in rows]
    x = np.concatenate(parts)
    k = min(n, len(x) // 160000)
    return [x[i * 160000 : (i + 1) * 160000] for i in range(k)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    from earmark.experts import learned
    from earmark.experts.learned import events, model

    clips = ten_second_clips(a.n, a.seed)
    learned.tag_clip(clips[0][:32000])  # load the models outside the timing
    events.tag_events(clips[0][:32000])
    dom, ev_warm, ev_cold = [], [], []
    for x in clips:
        t0 = time.perf_counter()
        learned.tag_clip(x)
        t1 = time.perf_counter()
        events.tag_events(x)
        t2 = time.perf_counter()
        model._FEATURES.clear()  # a cold cache: the event tagger computes the features itself
        events.tag_events(x)
        t3 = time.perf_counter()
        dom.append(t1 - t0)
        ev_warm.append(t2 - t1)
        ev_cold.append(t3 - t2)
    print(f"{len(clips)} clips of 10 s, one core")
    for name, v in (
        ("domain tagger (features + MLP)", dom),
        ("event tagger after it (cache hit)", ev_warm),
        ("event tagger alone (cold cache)", ev_cold),
    ):
        print(f"  {name:36s} median {np.median(v) * 1000:8.1f} ms   mean {np.mean(v) * 1000:8.1f} ms")
    print(f"feature cache: {model.feature_cache_stats()}")


if __name__ == "__main__":
    main()
