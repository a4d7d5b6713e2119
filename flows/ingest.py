"""ingest flow: input files → `clips` and `quarantine` shards, one task per group of files."""

from __future__ import annotations

from functools import partial

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

    Files keep the shard the dataset's manifest gave them on their first build; new files form new shards. A
    file is named after the input it was found in, so adding an input renames nothing (ingest.inputs), and a
    copy of a file already built is recorded as its duplicate, not swapped in (ingest.identify).
    `stream`: each shard is also put there as it is registered, for an analyze flow running beside this one.
    """
    found = ingest.discover(cfg.inputs, cfg.ingest.allowed_roots)
    if not found.files:
        raise FileNotFoundError(ingest.nothing_to_read(cfg.inputs, found))
    problems = len(found.sources) - len(found.files)
    print(
        f"inputs: {len(found.sources)} paths seen: {len(found.files)} audio files, {problems} folders or links "
        f"not walked (quarantined), {found.skipped} skipped (hidden, or not audio by name)"
    )
    spec = ingest.spec(cfg.ingest)
    cat = open_catalog(cfg)
    groups, added = ingest.assign_shards(found.sources, cat.manifest(), cfg.ingest.files_per_shard)
    first: dict[str, str] = {}  # sha256 → the source that holds those bytes first (ingest.identify)

    def jobs(shards: list[tuple[int, list[ingest.Source]]]) -> list[ShardJob]:
        out = []
        for shard, group in shards:
            sources = ingest.identify(group, cfg.ingest.allowed_roots, first)
            out.append(
                ShardJob(
                    spec,
                    partial(ingest.run, [s for s, _ in sources], cfg.ingest),
                    sources=[identity for _, identity in sources],
                    label=f"shard-{shard:04d}",
                )
            )
        return mark_unregistered(cfg, out)

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
