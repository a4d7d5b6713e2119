"""Orchestration overhead: how much of a run's wall time is *not* spent inside stage functions.

    .venv/bin/python benchmarks/orchestration_overhead.py [--clips 1000] [--workers 1 2] [--runners threads dask]

Generates N 10 s clips (seeded noise, tones and pulses; 16 kHz PCM), then for each task runner and worker
count builds a fresh dataset through ingest + the embedded `levels` and `acoustics` experts (no LLM), with the
real flows, catalog (DuckLake on SQLite) and Prefect (the ephemeral local server, started once, before the
timed part). Timed: the ingest and analyze sub-flows, after the runner is up (a Dask cluster's start-up is
excluded). Inside: Σ seconds inside the stage functions, as each shard task measured it (`ShardRef.seconds`).

    overhead = (workers × wall − Σ inside) / (workers × wall)

i.e. the share of the workers' time spent on anything but stage work: Prefect task submission and state
tracking, catalog lookups and registrations, Parquet reads and writes, Dask transfers, idle workers waiting for
a dependency. With 1 worker this is (wall − Σ inside) / wall. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import soundfile as sf

SR = 16_000


def make_clips(out: Path, n: int, seconds: float = 10.0, seed: int = 0) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    t = np.arange(int(SR * seconds)) / SR
    paths = []
    for i in range(n):
        path = out / f"clip-{i:05d}.wav"
        if not path.exists():
            x = 0.02 * rng.standard_normal(t.size)
            for _ in range(rng.integers(1, 4)):
                f0 = rng.uniform(100, 2000)
                on = (t > rng.uniform(0, seconds - 1)) & (t < rng.uniform(1, seconds))
                x += 0.1 * np.sin(2 * np.pi * f0 * t) * on
            x *= 10 ** (rng.uniform(-20, 0) / 20)
            sf.write(path, np.clip(x, -1, 1).astype(np.float32), SR, subtype="PCM_16")
        paths.append(path)
    return paths


def run_once(inputs: Path, root: Path, runner: str, workers: int) -> dict[str, float]:
    from prefect import flow

    from earmark.config import load_config
    from earmark.flows.analyze import analyze_flow
    from earmark.flows.common import flow_options, open_catalog, shared_runner
    from earmark.flows.ingest import ingest_flow

    if root.exists():
        shutil.rmtree(root)
    cfg = load_config(
        None,
        {
            "data_root": str(root),
            "dataset": "overhead",
            "inputs": [str(inputs)],
            "analyze.only": ["levels", "acoustics"],
            "run.task_runner": runner,
            "run.max_workers": workers,
            "run.dask_workers": workers,
        },
    )

    @flow(name="overhead-benchmark")
    def bench() -> dict[str, float]:
        cat = open_catalog(cfg)
        run_id = cat.start_run("overhead-benchmark", {})
        with shared_runner(cfg) as task_runner:
            t0 = time.perf_counter()
            ingest = ingest_flow.with_options(**flow_options(cfg, "ingest", task_runner))(cfg, run_id)
            experts = analyze_flow.with_options(**flow_options(cfg, "analyze", task_runner))(cfg, ingest.refs, run_id)
            wall = time.perf_counter() - t0
        refs = [*ingest.refs, *(r for res in experts.values() for r in res.refs)]
        inside = sum(r.seconds for r in refs)
        clips = cat.query("SELECT count(*) FROM shards WHERE table_name = 'clips'")[0][0]
        return {"wall": wall, "inside": inside, "tasks": len(refs), "clip_shards": clips}

    return bench()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", type=int, default=1000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--runners", nargs="+", default=["threads", "dask"], choices=["threads", "dask"])
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/earmark-overhead"))
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    t = time.perf_counter()
    make_clips(args.work_dir / "input", args.clips)
    print(f"{args.clips} clips of 10 s ready in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    rows = []
    for workers in args.workers:
        for runner in args.runners:
            r = run_once(args.work_dir / "input", args.work_dir / f"data-{runner}-{workers}", runner, workers)
            overhead = (workers * r["wall"] - r["inside"]) / (workers * r["wall"])
            rows.append((runner, workers, r, overhead))
            print(f"{runner} × {workers}: {r}", file=sys.stderr)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"{args.clips} clips × 10 s; ingest + levels + acoustics\n"
    )
    print("| runner | workers | shard tasks | wall (s) | Σ inside stage functions (s) | overhead |")
    print("|---|---|---|---|---|---|")
    for runner, workers, r, overhead in rows:
        print(f"| {runner} | {workers} | {r['tasks']} | {r['wall']:.1f} | {r['inside']:.1f} | {100 * overhead:.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
