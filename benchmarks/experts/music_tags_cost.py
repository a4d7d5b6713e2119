"""Cost per clip of the music tags (experts/learned/musictags) on one core, as the analyze stage meets it.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/experts/music_tags_cost.py [--clips 20]

For each of N 10 s clips of the labelled dev renders (or synthetic chords + clicks when the cache is absent)
it times, after a warm-up:
* `probe`: what the domain probe already pays for musicnn (log-mel + the MTT front-/mid-end pass, pooled);
* `tags, after the probe`: `musictags.tag_clip` when the probe ran first in the same process (the analyze
  stage's order: MTT's pooled features and the log-mel come from musicnn's content cache, so the new work is
  the MSD network pass + both back-ends + the heads);
* `tags, alone`: `tag_clip` on a cold cache (both networks), the cost if the probe's features were evicted;
* `music expert`: the whole LibrosaMusicExpert record (tempo, beats, key, loudness + tags), after the probe.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np


def _clips(n: int) -> list[np.ndarray]:
    import soundfile as sf

    cache = Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")) / "music_tags" / "renders"
    index = cache / "dev.jsonl"
    if index.exists():
        rows = [json.loads(line) for line in index.read_text().splitlines()][:n]
        return [sf.read(cache / "dev" / f"{r['id']}.flac", dtype="float32")[0] for r in rows]
    rng = np.random.default_rng(0)
    t = np.arange(160000) / 16000
    return [
        (0.1 * np.sin(2 * np.pi * 220 * (1 + k / 10) * t) + 0.02 * rng.standard_normal(t.size)).astype(np.float32)
        for k in range(n)
    ]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", type=int, default=20)
    a = ap.parse_args(argv)
    from earmark.experts.base import ClipAudio
    from earmark.experts.learned import musicnn as mn
    from earmark.experts.learned import musictags
    from earmark.experts.learned.windows import window_bounds
    from earmark.experts.music import LibrosaMusicExpert, tag_fields
    from earmark.schemas.records import DomainDecision, Separation

    clips = _clips(a.clips)
    mtt = mn.Musicnn("MTT_musicnn")
    musictags.tag_clip(clips[0])  # load models, warm caches
    times: dict[str, list[float]] = {"probe": [], "tags, after the probe": [], "tags, alone": [], "music expert": []}
    expert = LibrosaMusicExpert()
    for k, x in enumerate(clips):
        x = x + np.float32(1e-7 * (k + 1))  # a new content key: nothing cached from an earlier run
        mn._CACHE.clear()
        t0 = time.perf_counter()
        mn.window_midend(mtt, x, window_bounds(x.size))
        t1 = time.perf_counter()
        musictags.tag_clip(x)
        t2 = time.perf_counter()
        mn._CACHE.clear()
        t3 = time.perf_counter()
        musictags.tag_clip(x)
        t4 = time.perf_counter()
        mn._CACHE.clear()
        mn.window_midend(mtt, x, window_bounds(x.size))
        dom = DomainDecision(clip_id="c", expert="domain", backend="b", expert_version="1", domain="0M0",
                             speech_prob=0.0, music_prob=1.0, sound_prob=0.0, silent=False, features=[])  # fmt: skip
        sep = Separation(clip_id="c", expert="separation", backend="b", expert_version="1", method="hpss",
                         stems=[], vocals_speech_s=None, skipped_reason=None)  # fmt: skip
        t5 = time.perf_counter()
        expert.analyze([ClipAudio("c", x)], {"domain": {"c": dom}, "separation": {"c": sep}})
        t6 = time.perf_counter()
        for name, dt in zip(times, (t1 - t0, t2 - t1, t4 - t3, t6 - t5)):
            times[name].append(dt)
    assert tag_fields  # the expert's own path was timed through analyze
    secs = np.mean([c.size / 16000 for c in clips])
    print(f"{len(clips)} clips of {secs:.1f} s, one core (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}):")
    print("| step | mean s per clip | median |")
    print("|---|---|---|")
    for name, v in times.items():
        print(f"| {name} | {np.mean(v):.3f} | {np.median(v):.3f} |")


if __name__ == "__main__":
    main()
