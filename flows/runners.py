"""Task runners: the threads runner, or Dask (a local cluster per run, or a scheduler), each process sized by the
run's thread budget (`cpu_threads`) before its libraries load."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from earmark.core import threads
from earmark.core.config import Config
from earmark.flows.slots import compute_slots
from earmark.storage import open_catalog


def dask_cluster_kwargs(cfg: Config) -> dict[str, Any]:
    """A local Dask cluster of `dask_workers` processes (models load once per process). With write-behind each
    has two threads, one computing and one writing finished shards (`compute_slots`); `shared_runner` readies
    Prefect's client on every worker before the first task (`prefect_ready`)."""
    threads = 2 if cfg.run.write_behind else 1
    return {
        "n_workers": cfg.run.dask_workers,
        "threads_per_worker": threads,
        "processes": True,
        "dashboard_address": ":0",
    }


def cpu_threads(cfg: Config) -> int:
    """Math-library threads of one stage function (`[run] cpu_threads`; by default the cores shared evenly among
    the stage functions that compute at once on this machine). The same for the threads runner and a local Dask
    cluster of as many workers, so both compute the same tables."""
    if cfg.run.cpu_threads:
        return cfg.run.cpu_threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if cfg.run.task_runner == "sequential":
        concurrent = 1
    elif cfg.run.task_runner == "dask":
        # an external scheduler's workers: each process on this host computes compute_slots shards at once
        concurrent = _dask_processes_here() * compute_slots(cfg) if cfg.run.dask_address else cfg.run.dask_workers
    else:
        concurrent = cfg.run.max_workers
    return max(1, cores // concurrent)


@functools.cache
def _dask_processes_here() -> int:
    """Inside a worker of an external Dask scheduler: the worker processes on this worker's host (the
    scheduler knows them; `dask worker --nworkers N` starts N); 1 outside a worker or when it cannot say.
    Asked once per process: every shard task sizes its pools, and this is a call to the scheduler."""
    try:
        from distributed import get_worker

        worker = get_worker()
        host = worker.address.rsplit(":", 1)[0]
        workers = worker.client.scheduler_info(n_workers=-1)["workers"]
        return max(1, sum(1 for address in workers if address.rsplit(":", 1)[0] == host))
    except (ImportError, ValueError, OSError, KeyError):  # not in a worker (ValueError), or no answer: one
        return 1


def prefect_ready(cfg: Config) -> str:
    """Run once on every local Dask worker before any task: open a Prefect client, which starts the worker's
    ephemeral Prefect server when the run has no API URL. Two tasks starting at once in a fresh worker would
    otherwise both start it, and the run hung (seen in CI with two threads per worker,
    tests/test_lake_concurrency.py). It also opens the dataset's catalog (kept per process), as the flow's
    process has: in a fresh worker that took 0.8 s (DuckDB extensions, ATTACH), paid by its first shard task."""
    from prefect.client.orchestration import get_client

    threads.apply(cpu_threads(cfg))
    open_catalog(cfg)
    with get_client(sync_client=True) as client:
        return str(client.api_url)


def _worker_environ(cfg: Config) -> None:
    """Local Dask workers start with the run's thread budget (`cpu_threads`) in their math libraries'
    variables, read when those load; `prefect_ready` / `stage_task` size the pools that are already loaded.
    Dask's own default caps them at 1, and Whisper's and the domain probe's outputs depend on the thread count
    (float reduction order): the same shard would differ between runners. Dask's default
    MALLOC_TRIM_THRESHOLD_ (64 KiB) is dropped too: it made every stage function ~2× slower in the workers
    (audio arrays are allocated and freed by the megabyte; measured, benchmarks/pipeline/orchestration_overhead.py)."""
    import dask
    import distributed  # noqa: F401  (registers its config defaults, which are changed here)

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}))
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    environ.update(threads.environ(cpu_threads(cfg)))
    dask.config.set({"distributed.nanny.pre-spawn-environ": environ})


def task_runner(cfg: Config, address: str | None = None) -> TaskRunner:
    """The configured task runner; `address`: a Dask scheduler to use instead of `[run] dask_address`."""
    if cfg.run.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        _worker_environ(cfg)

        if address or cfg.run.dask_address:
            return DaskTaskRunner(address=address or cfg.run.dask_address)
        # A cluster this runner starts itself (a stage flow run on its own) gets no `prefect_ready`: one thread.
        return DaskTaskRunner(cluster_kwargs={**dask_cluster_kwargs(cfg), "threads_per_worker": 1})
    if cfg.run.task_runner == "sequential":
        return ThreadPoolTaskRunner(max_workers=1)
    return ThreadPoolTaskRunner(max_workers=cfg.run.max_workers * (2 if cfg.run.write_behind else 1))


@contextmanager
def subflows_without_heartbeats() -> Iterator[None]:
    """Sub-flows started inside send no heartbeats of their own. Prefect 3.8.8 ends every flow run by joining
    its heartbeat thread, which sleeps in 1 s steps: each sub-flow took ~1.1 s longer than its work (measured,
    benchmarks/pipeline/orchestration_overhead.py). The parent run's heartbeats still report the process alive."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


@contextmanager
def shared_runner(cfg: Config) -> Iterator[TaskRunner]:
    """One task runner for all sub-flows of a run. With dask and no scheduler address, one local cluster is
    started here for the whole run (each sub-flow's runner would otherwise start and stop its own, and its
    worker processes would load the models again)."""
    if cfg.run.task_runner != "dask" or cfg.run.dask_address:
        yield task_runner(cfg)
        return
    from distributed import LocalCluster

    _worker_environ(cfg)
    kwargs = dask_cluster_kwargs(cfg)
    with LocalCluster(**kwargs) as cluster:
        if kwargs["threads_per_worker"] > 1:
            from distributed import Client

            with Client(cluster) as client:
                client.run(prefect_ready, cfg)
        yield task_runner(cfg, cluster.scheduler_address)
