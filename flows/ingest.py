"""ingest flow: input files → `clips` and `quarantine` shards, one task per group of files."""

from __future__ import annotations

import os
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from earmark.config import Config
from earmark.stages.ingest import STAGE_VERSION, IngestConfig, discover, file_sha256, ingest_files
from earmark.flows.common import StageResult, computed_or_cached, open_catalog, task_runner
from earmark.schemas import Clip, QuarantineRow, to_table
from earmark.storage import ShardMeta, shard_key

TABLES = ("clips", "quarantine")


def _ingest_config(cfg: Config) -> IngestConfig:
    s = cfg.ingest
    return IngestConfig(max_clip_s=s.max_clip_s, min_clip_s=s.min_clip_s, max_file_s=s.max_file_s)


@task(name="ingest-shard", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=2)
def ingest_shard(cfg: Config, files: list[Path], root: Path | None, run_id: str | None):
    icfg = _ingest_config(cfg)
    shown = [str(f.relative_to(root)) if root and f.is_relative_to(root) else str(f) for f in files]
    identity = [f"{s}:{file_sha256(f)}" for s, f in zip(shown, files)]
    key = shard_key("ingest", STAGE_VERSION, identity, config=icfg.key_config())
    meta = ShardMeta(stage="ingest", stage_version=STAGE_VERSION, inputs=identity, config=icfg.key_config())

    def compute():
        clips, quarantine = ingest_files(files, icfg, root)
        return {"clips": to_table(Clip, clips), "quarantine": to_table(QuarantineRow, quarantine)}

    return computed_or_cached(open_catalog(cfg), key, TABLES, meta, run_id, compute, f"ingest[{len(files)} files]")


def input_root(paths: list[Path]) -> Path | None:
    dirs = [p.resolve() if p.is_dir() else p.resolve().parent for p in paths]
    return Path(os.path.commonpath(dirs)) if dirs else None


@flow(name="ingest", log_prints=True)
def ingest_flow(cfg: Config, run_id: str | None = None) -> StageResult:
    """Decode, standardise and cut every input file; unusable files go to `quarantine` with a reason."""
    files = discover(cfg.inputs)
    if not files:
        raise FileNotFoundError(f"no audio files found under {', '.join(map(str, cfg.inputs)) or '(no inputs given)'}")
    root = input_root(list(cfg.inputs))
    n = cfg.ingest.files_per_shard
    groups = [files[i : i + n] for i in range(0, len(files), n)]
    futures = [ingest_shard.submit(cfg, g, root, run_id) for g in groups]
    return StageResult([f.result() for f in futures])


def run_ingest(cfg: Config, run_id: str | None = None) -> StageResult:
    return ingest_flow.with_options(task_runner=task_runner(cfg))(cfg, run_id)
