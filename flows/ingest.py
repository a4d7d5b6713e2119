"""ingest flow: input files → `clips` and `quarantine` shards, one task per group of files."""

from __future__ import annotations

from functools import partial

from prefect import flow

from earmark.config import Config
from earmark.flows.common import StageResult, submit, task_runner
from earmark.stages import ingest
from earmark.stages.base import ShardJob


@flow(name="ingest", log_prints=True)
def ingest_flow(cfg: Config, run_id: str | None = None) -> StageResult:
    """Decode, standardise and cut every input file; unusable files go to `quarantine` with a reason."""
    files = ingest.discover(cfg.inputs)
    if not files:
        raise FileNotFoundError(f"no audio files found under {', '.join(map(str, cfg.inputs)) or '(no inputs given)'}")
    root = ingest.input_root(list(cfg.inputs))
    spec = ingest.spec(cfg.ingest)
    n = cfg.ingest.files_per_shard
    futures = []
    for i in range(0, len(files), n):
        group = files[i : i + n]
        job = ShardJob(
            spec,
            partial(ingest.run, group, root, cfg.ingest),
            sources=[ingest.source_identity(f, root) for f in group],
            label=f"shard-{i // n:04d}",
        )
        futures.append(submit(cfg, job, run_id))
    return StageResult([f.result() for f in futures])


def run_ingest(cfg: Config, run_id: str | None = None) -> StageResult:
    return ingest_flow.with_options(task_runner=task_runner(cfg))(cfg, run_id)
