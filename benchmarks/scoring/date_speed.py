"""DATE speed: mecat 1.1.0's official implementation vs metrics.date, same inputs, same model, same run.

Group: content_long over the first N clips of the mecat wheel's caption references (all 8 domains, round
robin); each clip's candidate is its first *short* reference (a plausible but different caption).

    python benchmarks/scoring/date_speed.py [--clips 500] [--device cpu|cuda] [--threads 1]

The official module pins torch to one thread on import; ours is timed with `--threads` (default 1, the
same), with all cores, and with the group's reference embeddings cached (scoring a second system). The FENSE error checker is off on both sides (its checkpoint is
a download): every penalty is 1.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import time
from importlib.resources import files

import numpy as np
import pandas as pd
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from earmark.metrics.date import GROUP_DELTA, date_scores  # noqa: E402
from earmark.metrics.similarity import default_sbert_path, load_sbert  # noqa: E402

DOMAINS = ("000", "00A", "0M0", "0MA", "S00", "S0A", "SM0", "SMA")


def load_group(n: int) -> tuple[list[str], list[list[str]]]:
    root = files("mecat") / "reference" / "caption" / "test"
    streams = []
    for dom in DOMAINS:
        with gzip.open(str(root / f"{dom}.jsonl.gz"), "rt", encoding="utf-8") as fh:
            streams.append([v for line in itertools.islice(fh, n) for v in json.loads(line).values()])
    records = [r for tup in itertools.zip_longest(*streams) for r in tup if r is not None][:n]
    return [r["short"][0] for r in records], [list(r["long"]) for r in records]


class _NoChecker(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, sentences, batch_size: int = 32):
        return torch.ones(1 if isinstance(sentences, str) else len(sentences))


def run_official(cands, refs, device: str) -> tuple[pd.DataFrame, float]:
    import mecat.DATE as upstream

    upstream.RefinedErrorChecker = _NoChecker  # checkpoint download is unavailable offline
    model = upstream.DATE(sbert_name_or_path=str(default_sbert_path()), device=device)
    keys = [f"s{i:05d}" for i in range(len(cands))]
    frame = pd.DataFrame(columns=["sample_id", "field_type", "delta", "similarity", "discrimination", "date"])
    start = time.perf_counter()
    _, frame = model(
        ref_data={k: {"long": r} for k, r in zip(keys, refs)},
        val_data={k: {"long": [c]} for k, c in zip(keys, cands)},
        group_name="content_long",
        dataframe=frame,
        field_type="long",
    )
    return frame, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clips", type=int, default=500)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2, help="timed runs of ours (best is reported)")
    args = ap.parse_args()

    cands, refs = load_group(args.clips)
    frame, t_official = run_official(cands, refs, args.device)
    model = load_sbert()
    delta = GROUP_DELTA["content_long"]

    def best(threads: int, cache: dict | None = None):
        torch.set_num_threads(threads)
        date_scores(cands[:8], refs[:8], delta=delta, sbert=model, device=args.device)  # warm-up
        times, out = [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            out = date_scores(cands, refs, delta=delta, sbert=model, device=args.device, reference_cache=cache)
            if args.device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        return out, min(times)

    ours, t_ours = best(args.threads)
    _, t_all = best(os.cpu_count() or 1)
    cache: dict = {}
    date_scores(cands, refs, delta=delta, sbert=model, device=args.device, reference_cache=cache)  # fill cache
    warm, t_warm = best(args.threads, cache)

    print(f"group content_long, {len(cands)} clips, device {args.device}")
    print(f"official mecat DATE (1 thread, pinned by mecat) : {t_official:8.3f} s")
    rows = [
        (f"metrics.date, {args.threads} thread(s)", t_ours),
        (f"metrics.date, {os.cpu_count()} threads", t_all),
        (f"metrics.date, {args.threads} thread(s), references cached", t_warm),
    ]
    for name, t in rows:
        print(f"{name:48s}: {t:8.3f} s   speed-up {t_official / t:6.1f}x   (best of {args.repeat})")
    for col in ("similarity", "discrimination", "date"):
        theirs = frame[col].to_numpy(dtype=np.float64)
        diff = np.abs(getattr(ours, col).astype(np.float64) - theirs)
        diff_warm = np.abs(getattr(warm, col).astype(np.float64) - theirs)
        print(
            f"max |Δ| {col:15s}: {diff.max():.2e} (cached refs {diff_warm.max():.2e}); "
            f"samples differing > 1e-4: {(diff > 1e-4).sum()}"
        )
    print(f"mean DATE official {frame['date'].astype(float).mean():.4f}  ours {ours.date.mean():.4f}")


if __name__ == "__main__":
    main()
