"""ingest flow: input files → `clips` and `quarantine` shards, one task per group of files."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from prefect import flow

from earmark.core.config import Config
from earmark.flows.runs import flow_options
from earmark.flows.shards import ShardStream, StageResult, collect, mark_unregistered, submit
from earmark.stages import ingest
from earmark.stages.base import ShardJob
from earmark.storage import open_catalog


@flow(name="ingest", log_prints=True)
def ingest_flow(cfg: Config, run_id: str | None = None, stream: ShardStream | None = None) -> StageResult:
    """Decode, standardise and cut every input file; unusable files go to `quarantine` with a reason.

    Files keep the shard the dataset's manifest gave them on their first build; new files form new shards.
    `stream`: each shard is also put there as it is registered, for an analyze flow running beside this one.
    """
    files = ingest.discover(cfg.inputs, cfg.ingest.allowed_roots)
    if not files:
        raise FileNotFoundError(f"no audio files found under {', '.join(map(str, cfg.inputs)) or '(no inputs given)'}")
    root = ingest.input_root(list(cfg.inputs))
    spec = ingest.spec(cfg.ingest)
    cat = open_catalog(cfg)
    groups, added = ingest.assign_shards(files, root, cat.manifest(), cfg.ingest.files_per_shard)

    def jobs(shards: list[tuple[int, list[Path]]]) -> list[ShardJob]:
        return mark_unregistered(
            cfg,
            [
                ShardJob(
                    spec,
                    partial(ingest.run, group, root, cfg.ingest),
                    sources=[ingest.source_identity(f, root, cfg.ingest.allowed_roots) for f in group],
                    label=f"shard-{shard:04d}",
                )
                for shard, group in shards
            ],
        )

    # A shard's key hashes its files' bytes. Shards are planned and submitted in batches of 1, 2, 4, … shards:
    # each batch's files are hashed while the batches before it compute (1,000 10 s files: 0.35 s the workers
    # no longer wait for), and the catalog is still asked about log2(shards) batches, not every shard.
    planned, futures, size = list(groups.items()), [], 1
    while planned:
        batch, planned, size = planned[:size], planned[size:], size * 2
        futures += [submit(cfg, job, run_id) for job in jobs(batch)]
    results = collect(cfg, "ingest", futures, items=[len(g) for g in groups.values()], item_unit="files", stream=stream)
    cat.extend_manifest(added, run_id)  # only once every new shard is written: a failed run assigns nothing
    return StageResult(results)


def run_ingest(cfg: Config, run_id: str | None = None) -> StageResult:
    return ingest_flow.with_options(**flow_options(cfg, "ingest"))(cfg, run_id)
