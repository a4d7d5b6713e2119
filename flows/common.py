"""What every stage flow shares: the catalog, the skip-if-present rule, and a task runner per config.

A stage task computes its shard key first and returns at once when the catalog already holds that key,
so the skip costs one catalog lookup and no model load. Prefect's own result caching is off
(`NO_CACHE`): its TASK_SOURCE policy does not see prompt files or helpers, the shard key does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from prefect import get_run_logger
from prefect.task_runners import ThreadPoolTaskRunner

from earmark.config import Config
from earmark.storage import Catalog, ShardMeta, ShardRef


def open_catalog(cfg: Config) -> Catalog:
    return Catalog(cfg.data_root, cfg.dataset)


def task_runner(cfg: Config) -> ThreadPoolTaskRunner:
    workers = 1 if cfg.run.task_runner == "sequential" else cfg.run.max_workers
    return ThreadPoolTaskRunner(max_workers=workers)


def computed_or_cached(
    cat: Catalog, key: str, tables: Sequence[str], meta: ShardMeta, run_id: str | None,
    compute: Callable[[], Mapping[str, pa.Table]], what: str,
) -> ShardRef:
    """Return the registered shard for `key`, or compute, write and register it."""
    logger = get_run_logger()
    if cat.has_shard(key, tables):
        logger.info("%s: shard %s already in the catalog, skipped", what, key)
        return ShardRef(key=key, tables=tuple(tables), rows=cat.shard_rows(key, tables), skipped=True)
    t0 = time.perf_counter()
    out = compute()
    ref = cat.write_shard(key, out, meta, run_id)
    logger.info("%s: shard %s computed, %d rows in %.1f s", what, key, ref.rows, time.perf_counter() - t0)
    return ref


@dataclass
class StageResult:
    """Shards a stage produced, by logical role (e.g. per clip shard key), plus counters."""

    refs: list[ShardRef] = field(default_factory=list)

    @property
    def computed(self) -> int:
        return sum(not r.skipped for r in self.refs)

    @property
    def skipped(self) -> int:
        return sum(r.skipped for r in self.refs)

    def keys(self, table: str) -> list[str]:
        return [r.key for r in self.refs if table in r.tables]
