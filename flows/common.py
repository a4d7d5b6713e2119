"""What every stage flow shares: the one generic shard task, the catalog, and a task runner per config.

`stage_task` wraps `earmark.stages.base.run_job` (key → catalog lookup → run → write → register), so a
stage whose key is already registered returns at once, without loading a model or calling an LLM. Its task
run is named after the stage and shard (`analyze/asr/shard-0003`). Prefect's own result caching is off
(`NO_CACHE`): the shard key, derived from the stage's description, is what decides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prefect import get_run_logger, tags, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture
from prefect.task_runners import ThreadPoolTaskRunner

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


def flow_options(cfg: Config, stage: str, runner: ThreadPoolTaskRunner | None = None) -> dict[str, Any]:
    """Options of a stage's flow run: named after the stage and dataset, on the configured task runner."""
    return {"flow_run_name": f"{stage} · {cfg.dataset}", "task_runner": runner or task_runner(cfg)}


def run_tags(cfg: Config, *extra: str) -> Any:
    """Tags on every flow and task run started inside (dataset, profile, and e.g. the command)."""
    return tags(f"dataset:{cfg.dataset}", f"profile:{cfg.analyze.profile}", *extra)


def task_runner(cfg: Config) -> ThreadPoolTaskRunner:
    workers = 1 if cfg.run.task_runner == "sequential" else cfg.run.max_workers
    return ThreadPoolTaskRunner(max_workers=workers)


@task(name="stage", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=5)
def stage_task(cfg: Config, job: ShardJob, run_id: str | None) -> ShardRef:
    return run_job(open_catalog(cfg), job, run_id, get_run_logger())


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
