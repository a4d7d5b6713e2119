"""Synthesis wall time with 1 embedded LLM server vs N (single-slot llama.cpp processes, one per core).

    .venv/bin/python benchmarks/llm/llm_servers.py INPUTS... --data-root /tmp/earmark-servers [--servers 1 2]

Builds the inputs up to `synthesize` once per setting, each into a fresh data root (so the LLM request cache
starts cold and every request is really made), and prints the synthesize stage's wall time, the LLM
requests and tokens, and requests per minute. The embedded client routes concurrent requests of a shard to
the servers (earmark.llm.session); `embedded_servers = 1` is one server using every core.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from earmark.storage import Catalog


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+", type=Path)
    ap.add_argument("--data-root", type=Path, default=Path("/tmp/earmark-servers"))
    ap.add_argument("--servers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    rows = []
    for n in args.servers:
        root = args.data_root / f"servers-{n}"
        if root.exists():
            shutil.rmtree(root)
        env = {**os.environ, "EARMARK_LLM__EMBEDDED_SERVERS": str(n)}
        cmd = [sys.executable, "-m", "earmark.cli.main", "build", *map(str, args.inputs), "--data-root", str(root)]
        subprocess.run([*cmd, "-d", "bench", "--until", "synthesize"], check=True, env=env, stdout=subprocess.DEVNULL)
        cat = Catalog(root, "bench")
        (stats_json,) = cat.query("SELECT stats_json FROM runs ORDER BY started_at DESC LIMIT 1")[0]
        clips = cat.query("SELECT count(*) FROM clips")[0][0]
        s = json.loads(stats_json)
        llm = s["llm"] or {}
        rows.append((n, clips, s["timings_s"]["synthesize"], llm.get("calls", 0), llm.get("completion_tokens", 0)))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n")
    print("| embedded servers | clips | synthesize wall | LLM requests | completion tokens | requests / min |")
    print("|---|---|---|---|---|---|")
    for n, clips, wall, calls, tokens in rows:
        print(f"| {n} | {clips} | {wall:.0f} s | {calls} | {tokens} | {60 * calls / wall:.1f} |")


if __name__ == "__main__":
    main()
