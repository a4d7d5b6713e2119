"""The full MECAT test set (9 caption groups + 6 QA groups) scored by metrics.mecat_eval, timed per group.

References: the mecat wheel's `reference/{caption,qa}/test/<domain>.jsonl.gz` (20,052 clips, 100,260 QA
pairs). Baseline candidates, a deliberately simple "system":
- caption field f ≠ short: the clip's first *short* reference (right content, wrong length/focus);
- caption field short: the clip's first *long* reference;
- QA: the first half of the reference answer's words (a truncated answer).
Only our implementation runs (the official one needs hours at this size on CPU; see benchmarks/scoring/date_speed.py
for a like-for-like comparison). The FENSE error checker is off (its checkpoint is a download).

    python benchmarks/scoring/mecat_full.py [--limit N] [--metrics date,fense,bleu] [--device cpu|cuda]
        [--threads T] [--reference-cache DIR] [--system baseline|echo]

`--limit N` keeps the first N references (sorted keys) of every group; Score_Cap/Score_QA are then over
that subset.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from earmark.metrics.date import QA_GROUPS  # noqa: E402
from earmark.metrics.mecat_eval import CAPTION_GROUPS, MecatReport, load_references, score_group, wheel_reference_root  # noqa: E402
from earmark.metrics.similarity import load_sbert  # noqa: E402


def baseline(group: str, refs: dict[str, list[str]], caption_refs: dict[str, dict]) -> dict[str, str]:
    if group in CAPTION_GROUPS:
        source = "long" if CAPTION_GROUPS[group][0] == "short" else "short"
        return {k: caption_refs[source][k][0] for k in refs}
    return {k: " ".join(r[0].split()[: max(1, len(r[0].split()) // 2)]) for k, r in refs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="references per group (default: all)")
    ap.add_argument("--metrics", default="date,fense,bleu")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--groups", default=None, help="comma-separated subset of groups (default: all 15)")
    ap.add_argument(
        "--reference-cache",
        type=Path,
        default=None,
        help="directory for metrics.refcache.ReferenceCache; run twice to time cold vs warm",
    )
    ap.add_argument(
        "--system",
        default="baseline",
        choices=["baseline", "echo"],
        help="baseline candidates (see above) or 'echo': the baseline with 'It sounds like' prepended "
        "(a second system for the warm-cache run)",
    )
    args = ap.parse_args()
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    torch.set_num_threads(args.threads)

    cache = None
    if args.reference_cache is not None:
        from earmark.metrics.refcache import ReferenceCache

        cache = ReferenceCache(args.reference_cache)
    root = wheel_reference_root()
    t0 = time.perf_counter()
    sbert = load_sbert() if {"date", "fense"} & set(metrics) else None
    caption_refs = {f: load_references(root, g) for f, g in (("short", "content_short"), ("long", "content_long"))}
    print(
        f"setup (model + short/long references) {time.perf_counter() - t0:.1f} s; device {args.device}, "
        f"{args.threads} threads, metrics {', '.join(metrics)}, limit {args.limit or 'none'}"
    )
    groups: dict[str, dict] = {}
    total, n_total = 0.0, 0
    wanted = args.groups.split(",") if args.groups else None
    for group in (*CAPTION_GROUPS, *QA_GROUPS):
        if wanted and group not in wanted:
            continue
        refs = load_references(root, group)
        keys = sorted(refs)[: args.limit] if args.limit else sorted(refs)
        refs = {k: refs[k] for k in keys}
        preds = baseline(group, refs, caption_refs)
        if args.system == "echo":
            preds = {k: "It sounds like " + v for k, v in preds.items()}
        start = time.perf_counter()
        res = score_group(
            group,
            preds,
            refs,
            metrics,
            sbert=sbert,
            device=args.device,
            batch_size=args.batch_size,
            reference_cache=cache,
        )
        if args.device == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - start
        total, n_total = total + dt, n_total + len(keys)
        groups[group] = {"n_samples": len(res.keys), "n_references": len(refs), "scores": res.means()}
        scores = "  ".join(f"{m} {100 * v:5.1f}" for m, v in res.means().items())
        print(
            f"{group:22s} {len(keys):6d} samples {dt:8.2f} s  {1000 * dt / max(len(keys), 1):6.2f} ms/sample  {scores}",
            flush=True,
        )
    if cache is not None:
        print(f"reference cache {args.reference_cache}: {cache.hits} hits, {cache.misses} misses")
    print(
        f"total scoring {total:.1f} s for {n_total} samples ({1000 * total / max(n_total, 1):.2f} ms/sample); "
        f"wall incl. reading references {time.perf_counter() - t0:.1f} s\n"
    )
    print(
        MecatReport.from_groups(metrics, groups).markdown(
            "baseline on the MECAT test set" + (f" (first {args.limit} per group)" if args.limit else "")
        )
    )


if __name__ == "__main__":
    main()
