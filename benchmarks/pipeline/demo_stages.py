"""Wall time of the demo build per stage, first run and re-run, on this machine.

    .venv/bin/python benchmarks/pipeline/demo_stages.py --data-root /tmp/earmark-bench [--model ...] [--per-domain 2]

Runs `earmark demo` twice into a fresh data root and prints a markdown table built from the catalog's
`runs` table (stage wall times, shards computed/skipped, LLM calls, tokens), plus the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from earmark.storage import Catalog


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-root", type=Path, default=Path("/tmp/earmark-bench"))
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m")
    ap.add_argument("--per-domain", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="reuse an existing data root instead of starting fresh")
    args = ap.parse_args()
    if args.data_root.exists() and not args.keep:
        shutil.rmtree(args.data_root)
    walls = []
    for _ in range(2):
        t0 = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "earmark.cli.main",
                "demo",
                "--data-root",
                str(args.data_root),
                "--llm-model",
                args.model,
                "--per-domain",
                str(args.per_domain),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        walls.append(time.perf_counter() - t0)
    cat = Catalog(args.data_root, "demo")
    runs = cat.query("SELECT stats_json FROM runs ORDER BY started_at")[-2:]
    clips = cat.query("SELECT count(*) FROM clips")[0][0]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}; "
        f"model {args.model}; {clips} clips"
    )
    print(
        "| run | total (process) | ingest | analyze | synthesize | filter | publish | shards computed | LLM calls | completion tokens |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, wall, (stats_json,) in zip(("first", "re-run"), walls, runs):
        s = json.loads(stats_json)
        t = s["timings_s"]
        computed = sum(v["computed"] for v in s["shards"].values())
        llm = s["llm"] or {}
        print(
            f"| {name} | {wall:.0f} s | {t['ingest']:.1f} | {t['analyze']:.1f} | {t['synthesize']:.1f} | "
            f"{t['filter']:.1f} | {t['publish']:.1f} | {computed} | {llm.get('calls', 0)} | {llm.get('completion_tokens', 0)} |"
        )


if __name__ == "__main__":
    main()
