"""What every stage flow shares: the one generic shard task, the catalog, and a task runner per config.

`stage_task` wraps `earmark.stages.base.run_job` (key → catalog lookup → run → write → register), so a
stage whose key is already registered returns at once, without loading a model or calling an LLM. Its task
run is named after the stage and shard (`analyze/asr/shard-0003`). Prefect's own result caching is off
(`NO_CACHE`): the shard key, derived from the stage's description, is what decides.

A shard of a GPU-using stage (`ShardJob.gpu`) computes inside the Prefect global concurrency limit `gpu`
(slots = `[run] gpus`, created by `earmark server` / `earmark deploy`), so builds sharing a GPU box queue
for it. Where no such limit exists (a plain local build) Prefect does not wait: the shard runs at once.
With `[run] task_runner = "dask"` the tasks (config, shard job) are pickled to Dask worker processes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from prefect import get_run_logger, tags, task
from prefect.cache_policies import NO_CACHE
from prefect.concurrency.sync import concurrency
from prefect.futures import PrefectFuture
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from earmark.config import Config
from earmark.stages.base import ShardJob, run_job
from earmark.storage import Catalog, ShardRef
from earmark.storage import open_catalog as storage_open_catalog


def open_catalog(cfg: Config) -> Catalog:
    return storage_open_catalog(cfg)


def artifact_key(cfg: Config, name: str) -> str:
    """A Prefect artifact key scoped by dataset (keys allow lowercase letters, digits and dashes only)."""
    slug = re.sub(r"[^a-z0-9-]+", "-", cfg.dataset.lower()).strip("-") or "dataset"
    return f"{slug}-{name}"


GPU_LIMIT = "gpu"  # the global concurrency limit GPU-using shards hold a slot of


def flow_options(cfg: Config, stage: str, runner: TaskRunner | None = None) -> dict[str, Any]:
    """Options of a stage's flow run: named after the stage and dataset, on the configured task runner."""
    return {"flow_run_name": f"{stage} · {cfg.dataset}", "task_runner": runner or task_runner(cfg)}


def name_flow_run(name: str) -> None:
    """Rename the current flow run once its name is known in full (e.g. with the version it published)."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    if flow_run.id:
        with get_client(sync_client=True) as client:
            client.update_flow_run(flow_run.id, name=name)


def run_tags(cfg: Config, *extra: str) -> Any:
    """Tags on every flow and task run started inside (dataset, profile, and e.g. the command)."""
    return tags(f"dataset:{cfg.dataset}", f"profile:{cfg.analyze.profile}", *extra)


def dask_cluster_kwargs(cfg: Config) -> dict[str, Any]:
    """A local Dask cluster of `dask_workers` single-thread processes (models load once per process)."""
    return {"n_workers": cfg.run.dask_workers, "threads_per_worker": 1, "processes": True, "dashboard_address": ":0"}


def _keep_thread_settings() -> None:
    """Local Dask workers start with the flow process's math-library thread settings. Dask's default caps
    them at 1 (OMP/MKL/OpenBLAS_NUM_THREADS), and Whisper's and the domain probe's outputs depend on the
    thread count (float reduction order): the same shard would differ between runners."""
    import dask

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        if var in os.environ:
            environ[var] = os.environ[var]
        else:
            environ.pop(var, None)
    dask.config.set({"distributed.nanny.pre-spawn-environ": environ})


def task_runner(cfg: Config, address: str | None = None) -> TaskRunner:
    """The configured task runner; `address`: a Dask scheduler to use instead of `[run] dask_address`."""
    if cfg.run.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        _keep_thread_settings()

        if address or cfg.run.dask_address:
            return DaskTaskRunner(address=address or cfg.run.dask_address)
        return DaskTaskRunner(cluster_kwargs=dask_cluster_kwargs(cfg))
    workers = 1 if cfg.run.task_runner == "sequential" else cfg.run.max_workers
    return ThreadPoolTaskRunner(max_workers=workers)


@contextmanager
def shared_runner(cfg: Config) -> Iterator[TaskRunner]:
    """One task runner for all sub-flows of a run. With dask and no scheduler address, one local cluster is
    started here for the whole run (each sub-flow's runner would otherwise start and stop its own, and its
    worker processes would load the models again)."""
    if cfg.run.task_runner != "dask" or cfg.run.dask_address:
        yield task_runner(cfg)
        return
    from distributed import LocalCluster

    _keep_thread_settings()
    with LocalCluster(**dask_cluster_kwargs(cfg)) as cluster:
        yield task_runner(cfg, cluster.scheduler_address)


@task(name="stage", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=5)
def stage_task(cfg: Config, job: ShardJob, run_id: str | None) -> ShardRef:
    cat, logger = open_catalog(cfg), get_run_logger()
    if job.gpu and not cat.has_shard(job.plan()[0], job.spec.writes):  # a stored shard needs no GPU slot
        with concurrency(GPU_LIMIT, occupy=1):
            return run_job(cat, job, run_id, logger)
    return run_job(cat, job, run_id, logger)


def submit(
    cfg: Config,
    job: ShardJob,
    run_id: str | None,
    wait_for: Sequence[PrefectFuture] | None = None,
    retries: int | None = None,
) -> PrefectFuture:
    """Submit one shard job as a task run named after its stage and shard."""
    options = {"task_run_name": job.task_name}
    if retries is not None:
        options["retries"] = retries
    return stage_task.with_options(**options).submit(cfg, job, run_id, wait_for=list(wait_for or []))


@dataclass
class StageResult:
    """Shards a stage produced, in clip-shard order, plus counters."""

    refs: list[ShardRef] = field(default_factory=list)

    @property
    def computed(self) -> int:
        return sum(not r.skipped for r in self.refs)

    @property
    def skipped(self) -> int:
        return sum(r.skipped for r in self.refs)

    def keys(self, table: str) -> list[str]:
        return [r.key for r in self.refs if table in r.tables]
