"""Orchestration overhead: how much of a run's wall time is *not* spent inside stage functions.

    .venv/bin/python benchmarks/pipeline/orchestration_overhead.py [--clips 1000] [--workers 1 2] [--runners threads dask]

Generates N 10 s clips (seeded noise, tones and pulses; 16 kHz PCM), then for each task runner and worker
count builds a fresh dataset through ingest + the embedded `levels` and `acoustics` experts (no LLM), with the
real flows, catalog (DuckLake on SQLite) and a real Prefect server on loopback (started once, before the
timed part; Dask workers report to it). The sub-flows run as `build` runs them: `flows.build.ingest_and_analyze`
under the build's tags (`--pipeline off`: analyze after ingest; `--task-tags on`: shard task runs tagged too, as
before 2026-11-25). Timed: the ingest and analyze sub-flows, after the runner is up (a
Dask cluster's start-up and its workers' first import of the stage code are excluded). Inside: Σ seconds inside the stage functions, as each shard task measured it (`ShardRef.seconds`).

    overhead = (workers × wall − Σ inside) / (workers × wall)            (the issue's definition)
    overhead vs alone = (workers × wall − Σ alone) / (workers × wall)

where Σ alone is the same stage functions run again after the timed part, one after the other in the flow's
thread on the shards the run wrote, with nothing else running. Σ inside grows when other threads of the same
process hold the GIL or the other cores are busy (write-behind, Dask's task threads, 2 workers on 2 cores);
the first figure counts that as stage work, the second as overhead. Both are the share of the workers' time
spent on anything but stage work: Prefect task submission and state tracking, catalog lookups and
registrations, Parquet reads and writes, Dask transfers, idle workers waiting for a dependency. Prints a
markdown table; its idle columns are the seconds of the timed part in which no stage function ran (from each
shard's `ShardRef.started_at` and `seconds`, so they hold for Dask workers too): before the first, between,
after the last. With one compute slot (threads × 1, or one Dask worker) they add up to the issue's overhead.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
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


def _warm_up() -> None:
    import earmark.flows.shards  # noqa: F401  (Prefect's engine, the catalog)
    import earmark.stages.analyze  # noqa: F401
    import earmark.stages.ingest  # noqa: F401


@contextlib.contextmanager
def prefect_server(home: Path):
    """A real Prefect server on loopback for the whole benchmark (its start-up is not timed); Dask worker
    processes inherit PREFECT_API_URL, so they report to it instead of each starting an ephemeral one."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # support: not installed
    from support.kill_points import prefect_server as loopback_server

    with loopback_server(home) as url:
        os.environ["PREFECT_API_URL"] = url
        yield url


def run_once(
    inputs: Path,
    root: Path,
    runner: str,
    workers: int,
    files_per_shard: int,
    write_behind: bool = True,
    alone: bool = True,
    prefetch: bool = True,
    pipeline: bool = True,
    task_tags: bool = False,
) -> dict[str, float]:
    from prefect import flow

    from earmark.core.config import load_config
    from earmark.flows.build import ingest_and_analyze
    from earmark.flows.runners import shared_runner, subflows_without_heartbeats
    from earmark.flows.runs import run_tags
    from earmark.storage import open_catalog

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
            "ingest.files_per_shard": files_per_shard,
            "run.write_behind": write_behind,
            "run.pipeline": pipeline,
        },
    )

    import earmark.flows.analyze as flows_analyze
    import earmark.flows.ingest as flows_ingest
    import earmark.stages.analyze as stages_analyze
    from earmark.stages.base import Inputs

    if runner != "threads" and not prefetch:
        raise SystemExit("--prefetch off patches the stage in this process: threads only")
    prefetching = stages_analyze.decoded_batches
    if not prefetch:  # the analyze stage as before: decode a batch, then analyse it, in one thread

        def decoded_batches(clips, size=stages_analyze.BATCH):
            for start in range(0, len(clips), size):
                yield stages_analyze._decode(clips[start : start + size])

        stages_analyze.decoded_batches = decoded_batches
    jobs: list = []  # every shard job submitted, recorded on the flow's side (whichever runner runs it)
    for module in (flows_ingest, flows_analyze):
        module.submit = _recording(module.submit, jobs)

    from earmark.flows import shards

    untagged = shards.TagsContext
    if task_tags:  # shard task runs tagged like their flow runs, as before: each checks tag concurrency limits
        shards.TagsContext = lambda **_: contextlib.nullcontext()

    @flow(name="overhead-benchmark")
    def bench() -> dict[str, float]:
        cat = open_catalog(cfg)
        run_id = cat.start_run("overhead-benchmark", {})
        with subflows_without_heartbeats(), shared_runner(cfg) as task_runner:
            if runner == "dask":  # cluster start-up, excluded: every worker imports the stage code once
                from distributed import Client

                with Client(task_runner.address) as client:
                    client.run(_warm_up)
            epoch0, t0 = time.time(), time.perf_counter()
            ingest, experts = ingest_and_analyze(cfg, task_runner, run_id, {})  # as build runs them
            t1 = time.perf_counter()
            wall = t1 - t0
        refs = [*ingest.refs, *(r for res in experts.values() for r in res.refs)]
        inside = sum(r.seconds for r in refs)
        per_stage = {"ingest": sum(r.seconds for r in ingest.refs)}
        per_stage.update({name: sum(r.seconds for r in res.refs) for name, res in experts.items()})
        clips = cat.query("SELECT count(*) FROM shards WHERE table_name = 'clips'")[0][0]
        # The same stage functions once more, one after the other in this thread, on the shards the run wrote:
        # what the work costs with nothing beside it (no other thread or process on the cores, no GIL sharing).
        seconds_alone = 0.0
        for job in jobs if alone else []:
            t = time.perf_counter()
            job.fn(Inputs(cat, job.inputs))
            seconds_alone += time.perf_counter() - t
        return {
            "idle": idle_gaps(refs, epoch0, epoch0 + wall),
            "wall": wall,
            "t0": t0,
            "t1": t1,
            "inside": inside,
            "alone": seconds_alone,
            "tasks": len(refs),
            "clip_shards": clips,
            "per_stage": per_stage,
        }

    try:
        with run_tags(cfg, "build"):  # the tags a build's flow runs carry
            return bench()
    finally:
        shards.TagsContext = untagged
        stages_analyze.decoded_batches = prefetching
        for module in (flows_ingest, flows_analyze):
            module.submit = module.submit.__wrapped__


def idle_gaps(refs, start: float, end: float) -> tuple[float, float, float]:
    """Seconds of [start, end] (Unix time) in which no stage function ran, from each computed shard's
    `started_at` and `seconds`: (before the first, between, after the last). With one compute slot this is
    that slot's idle time, whichever process it is in."""
    spans = sorted((r.started_at, r.started_at + r.seconds) for r in refs if not r.skipped)
    if not spans:
        return (end - start, 0.0, 0.0)
    between, busy_until = 0.0, spans[0][1]
    for lo, hi in spans[1:]:
        between += max(0.0, lo - busy_until)
        busy_until = max(busy_until, hi)
    return (max(0.0, spans[0][0] - start), between, max(0.0, end - busy_until))


def _recording(submit, jobs: list):
    @functools.wraps(submit)
    def wrapper(cfg, job, *a, **k):
        jobs.append(job)
        return submit(cfg, job, *a, **k)

    return wrapper


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", type=int, default=1000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--runners", nargs="+", default=["threads", "dask"], choices=["threads", "dask"])
    ap.add_argument("--files-per-shard", type=int, nargs="+", default=[64], help="ingest shard sizes to try")
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/earmark-overhead"))
    settings = {  # on / off settings, each tried in the order given (on off: paired, one after the other)
        "--write-behind": ("on", "[run] write_behind: a shard is written while the next one computes"),
        "--prefetch": ("on", "analyze decodes the next batch of clips while the expert runs (off: threads only)"),
        "--pipeline": ("on", "[run] pipeline: analyze's flow beside ingest's, on each clip shard once written"),
        "--task-tags": ("off", "on: shard task runs carry their flow's tags, as before 2026-11-25 (tag limit checks)"),
    }
    for flag, (default, text) in settings.items():
        ap.add_argument(flag, nargs="+", default=[default], choices=["on", "off"], help=text)
    ap.add_argument("--repeat", type=int, default=1, help="run every configuration this many times")
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    t = time.perf_counter()
    make_clips(args.work_dir / "input", args.clips)
    print(f"{args.clips} clips of 10 s ready in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    rows = []
    with prefect_server(args.work_dir / "prefect-home"):  # stopped however the runs end
        configs = [
            (runner, workers, fps, wb, pf, rep, pl, tt)
            for fps in args.files_per_shard
            for workers in args.workers
            for runner in args.runners
            for rep in range(args.repeat)
            for pf in args.prefetch
            for wb in args.write_behind
            for pl in args.pipeline
            for tt in args.task_tags
        ]
        for (
            runner,
            workers,
            fps,
            wb,
            pf,
            rep,
            pl,
            tt,
        ) in configs:  # a fresh data root each (a catalog is cached per path)
            root = args.work_dir / f"data-{runner}-{workers}-{fps}-{wb}-{pf}-{pl}-{tt}-{rep}"
            r = run_once(
                args.work_dir / "input",
                root,
                runner,
                workers,
                fps,
                wb == "on",
                prefetch=pf == "on",
                pipeline=pl == "on",
                task_tags=tt == "on",
            )
            r["prefetch"], r["pipeline"], r["task_tags"] = pf, pl, tt
            overhead = (workers * r["wall"] - r["inside"]) / (workers * r["wall"])
            r["vs_alone"] = (workers * r["wall"] - r["alone"]) / (workers * r["wall"])
            rows.append((runner, workers, fps, wb, r, overhead))
            print(
                f"{runner} × {workers}, {fps} files/shard, write-behind {wb}, prefetch {pf}, pipeline {pl}, task tags {tt}: {r}",
                file=sys.stderr,
            )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"{args.clips} clips × 10 s; ingest + levels + acoustics\n"
    )
    stages = list(rows[0][4]["per_stage"]) if rows else []
    print(
        "| runner | workers | files / shard | write-behind | prefetch | pipeline | task tags | shard tasks | wall (s) | "
        "Σ inside stage functions (s) | "
        "overhead | idle before / between / after (s) | the stage functions alone (s) | overhead vs alone | "
        + " | ".join(f"inside {s} (s)" for s in stages)
        + " |"
    )
    print("|---" * (14 + len(stages)) + "|")
    for runner, workers, fps, wb, r, overhead in rows:
        print(
            f"| {runner} | {workers} | {fps} | {wb} | {r['prefetch']} | {r['pipeline']} | {r['task_tags']} | {r['tasks']} | {r['wall']:.1f} | {r['inside']:.1f} | "
            f"{100 * overhead:.1f} % | {' / '.join(f'{x:.2f}' for x in r['idle'])} | {r['alone']:.1f} | "
            f"{100 * r['vs_alone']:.1f} % | " + " | ".join(f"{r['per_stage'][s]:.1f}" for s in stages) + " |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
