"""Where a run's orchestration overhead goes: the worker's idle gaps and the time each shard task spends
outside its stage function, split by the calls that make it up.

    .venv/bin/python benchmarks/pipeline/overhead_breakdown.py [--clips 1000] [--files-per-shard 256 64]

The same setup as orchestration_overhead.py (generated 10 s clips, ingest + levels + acoustics, a real Prefect
server on loopback, the thread runner with one worker), after one untimed warm-up build. Every call listed is
timed where it runs (on the worker thread or the flow's thread; the two overlap), so the rows do not add up
to the overhead: they say what to shorten.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import orchestration_overhead as oo  # noqa: E402


def _cpu_seconds() -> tuple[float, float]:
    """(user + system CPU seconds of this process, of the Prefect server's processes) so far."""
    import psutil

    me = psutil.Process()
    mine = sum(me.cpu_times()[:2])
    server = 0.0
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "prefect" in cmd and "server start" in cmd:
            for q in [p, *p.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    server += sum(q.cpu_times()[:2])
    return mine, server


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", type=int, default=1000)
    ap.add_argument("--files-per-shard", type=int, nargs="+", default=[256, 64])
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/earmark-overhead"))
    ap.add_argument("--no-write-behind", dest="write_behind", action="store_false", help="[run] write_behind off")
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    oo.make_clips(args.work_dir / "input", args.clips)
    server = oo.prefect_server(args.work_dir / "prefect-home")
    server.__enter__()  # before earmark's flow modules are imported: they must see its PREFECT_API_URL
    try:
        return _breakdown(args)
    finally:
        server.__exit__(None, None, None)


def _breakdown(args: argparse.Namespace) -> int:
    import earmark.flows.analyze as flows_analyze
    import earmark.stages.base as base
    import earmark.stages.ingest as ingest
    import earmark.storage.catalog as catalog
    from earmark.flows import shards

    spent: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()

    def timed(owner: object, name: str, label: str) -> None:
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def wrapper(*a: object, **k: object) -> object:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[label] += time.perf_counter() - t
                calls[label] += 1

        setattr(owner, name, wrapper)

    tasks: list[tuple[float, float, str, float]] = []  # (start, end, task, seconds inside the stage function)
    run_job = base.run_job

    def traced_run_job(cat, job, run_id, logger=base.log, **kw):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        ref = run_job(cat, job, run_id, logger, **kw)
        tasks.append((t0, time.perf_counter(), job.task_name, ref.seconds))
        return ref

    shards.run_job = traced_run_job
    computing: list[tuple[float, float]] = []  # when a compute slot was held (the stage function ran)
    compute_slot = shards.compute_slot

    compute_cpu = [0.0]  # CPU seconds of the threads running stage functions, while they ran them

    @contextlib.contextmanager
    def traced_slot(cfg, gpu):  # type: ignore[no-untyped-def]
        with compute_slot(cfg, gpu):
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                yield
            finally:
                computing.append((t0, time.perf_counter()))
                compute_cpu[0] += time.thread_time() - c0

    shards.compute_slot = traced_slot
    for owner, name, label in [
        (catalog.Catalog, "has_shard", "catalog: has_shard (lookup before computing)"),
        (base, "to_table", "records → Arrow"),
        (catalog.Catalog, "write_shard", "catalog: write_shard (Parquet + register)"),
        (catalog, "write_shard", "  of which Parquet write + fsync + sha256"),
        (catalog.Catalog, "_transaction", "catalog: transactions (all)"),
        (catalog.Catalog, "extend_manifest", "catalog: extend_manifest"),
        (ingest, "identify", "ingest: source identities (file sha256, flow thread)"),
        (shards, "create_progress_artifact", "artifacts: create progress"),
        (shards, "update_progress_artifact", "artifacts: update progress"),
        (shards, "create_table_artifact", "artifacts: shard table"),
        (flows_analyze, "build_experts", "analyze: build_experts"),
    ]:
        timed(owner, name, label)
    oo.run_once(args.work_dir / "input", args.work_dir / "data-warm", "threads", 1, args.files_per_shard[0])
    for fps in args.files_per_shard:
        tasks.clear(), spent.clear(), calls.clear(), computing.clear()
        compute_cpu[0] = 0.0
        cpu0 = _cpu_seconds()
        r = oo.run_once(
            args.work_dir / "input",
            args.work_dir / f"data-breakdown-{fps}",
            "threads",
            1,
            fps,
            args.write_behind,
            alone=False,
        )
        cpu1 = _cpu_seconds()
        tasks.sort()
        computing.sort()
        gaps = [b2[0] - a2[1] for a2, b2 in zip(tasks, tasks[1:])]
        outside = sum(end - start - inside for start, end, _, inside in tasks)
        print(
            f"\n{fps} files / shard, {len(tasks)} shard tasks: wall {r['wall']:.2f} s, inside {r['inside']:.2f} s, "
            f"overhead {100 * (r['wall'] - r['inside']) / r['wall']:.1f} %"
        )
        this, server = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        print(
            f"CPU seconds over the run (2 cores): stage functions {compute_cpu[0]:.2f}; the rest of this process "
            f"{this - compute_cpu[0]:.2f}; the Prefect server's processes {server:.2f} (from the benchmark flow's start "
            "to its end: the run's set-up included; "
            "LLM-free stages only, so nothing else runs)"
        )
        print("| part | seconds | calls |\n|---|---|---|")
        if computing:  # the one compute slot's idle time: before the first, between, after the last stage function
            between = [b[0] - a[1] for a, b in zip(computing, computing[1:])]
            print(f"| compute slot idle: before the first stage function | {computing[0][0] - r['t0']:.3f} | 1 |")
            print(
                f"| compute slot idle: between stage functions | {sum(max(0.0, g) for g in between):.3f} | "
                f"{len(between)} |"
            )
            print(f"| compute slot idle: after the last stage function | {r['t1'] - computing[-1][1]:.3f} | 1 |")
            top = sorted(range(len(between)), key=lambda i: -between[i])[:3]
            for i in top:
                owner = next((t[2] for t in tasks if t[0] <= computing[i][0] and computing[i][1] <= t[1]), "?")
                print(f"| — the gap after {owner}'s stage function | {between[i]:.3f} | 1 |")
        print(f"| no shard task running, between tasks | {sum(max(0.0, g) for g in gaps):.3f} | {len(gaps)} |")
        biggest = max(range(len(gaps)), key=lambda i: gaps[i]) if gaps else None
        if biggest is not None:
            print(f"| — the longest gap (after {tasks[biggest][2]}) | {gaps[biggest]:.3f} | 1 |")
        print(
            f"| shard tasks outside their stage function (write-behind: waiting for a compute slot too) | "
            f"{outside:.3f} | {len(tasks)} |"
        )
        for label in spent:
            print(f"| {label} | {spent[label]:.3f} | {calls[label]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
