"""Throughput of the embedded profile's experts on CPU, per expert and in total (× real time).

    PYTHONPATH=. python benchmarks/expert_throughput.py --per-domain 3 --out expert_throughput.json

Generates the synthetic corpus (earmark.corpus, all 8 domains), ingests it, and runs every expert of the
embedded profile in dependency order on all clips as one batch, as one analyze shard would. Each expert
first runs once on one clip so model loading and numba compilation stay out of the timing (reported
separately as `warmup_s`). × real time = seconds of audio / seconds of compute.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from earmark.config import (
    AnalyzeSection,  # noqa: E402
    IngestSection,
)
from earmark.corpus import generate_corpus  # noqa: E402
from earmark.experts import build_experts  # noqa: E402
from earmark.stages.ingest import decode_clip, ingest_file  # noqa: E402


def run(per_domain: int, seed: int, workdir: Path) -> dict:
    clips = []
    for item in generate_corpus(workdir, per_domain=per_domain, seed=seed, hostile=False):
        rows, _ = ingest_file(item.path, IngestSection())
        clips += [decode_clip(r) for r in rows]
    audio_s = sum(c.duration_s for c in clips)
    experts = build_experts(AnalyzeSection())
    context: dict[str, dict] = {}
    per_expert = {}
    for name, expert in experts.items():
        start = time.perf_counter()
        expert.analyze(clips[:1], context)
        warm = time.perf_counter() - start
        start = time.perf_counter()
        records = expert.analyze(clips, context)
        took = time.perf_counter() - start
        context[name] = {r.clip_id: r for r in records}
        per_expert[name] = {
            "backend": expert.backend,
            "seconds": round(took, 2),
            "warmup_s": round(warm, 2),
            "x_realtime": round(audio_s / took, 1),
        }
    total = sum(v["seconds"] for v in per_expert.values())
    return {
        "clips": len(clips),
        "audio_s": round(audio_s, 1),
        "cpu_count": os.cpu_count(),
        "experts": per_expert,
        "total_s": round(total, 2),
        "total_x_realtime": round(audio_s / total, 1),
    }


def markdown(result: dict) -> str:
    lines = ["| expert | backend | s | × real time |", "|---|---|---|---|"]
    for name, v in result["experts"].items():
        lines.append(f"| `{name}` | `{v['backend']}` | {v['seconds']:.2f} | {v['x_realtime']:.0f} |")
    lines.append(f"| **total** | | {result['total_s']:.2f} | {result['total_x_realtime']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-domain", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = run(args.per_domain, args.seed, Path(tmp))
    print(f"{result['clips']} clips, {result['audio_s']} s of audio, {result['cpu_count']} CPUs\n")
    print(markdown(result))
    if args.out:
        args.out.write_text(json.dumps({**result, "markdown": markdown(result)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
