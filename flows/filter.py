"""filter flow: one qc task per clip shard over its items, then a per-check summary artifact."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

from prefect import flow
from prefect.artifacts import create_table_artifact

from earmark.core.config import Config
from earmark.flows.runs import artifact_key, flow_options
from earmark.flows.shards import StageResult, clip_counts, collect, submit
from earmark.metrics.similarity import resolve_sbert, sentence_embedder
from earmark.stages import filter  # the stage package (this module uses no builtin filter)
from earmark.stages.base import ShardJob, stored
from earmark.stages.filter.margin import require_clap
from earmark.stages.filter.qc import summary
from earmark.stages.synthesize import ITEM_TYPES
from earmark.storage import open_catalog


@flow(name="filter", log_prints=True)
def filter_flow(
    cfg: Config, shard_inputs: Sequence[Mapping[str, Sequence[str]]], run_id: str | None = None
) -> StageResult:
    """`shard_inputs`: per clip shard, table → keys (its item shards, evidence, clips, asr, asr_check)."""
    if cfg.filter.margin_backend == "clap":  # fail before any shard runs, naming the missing weights
        require_clap(cfg.filter.clap_model, cfg.analyze.models_dir)
    spec = filter.spec(cfg, resolve_sbert(cfg.filter.sbert)[1])
    embedder = partial(sentence_embedder, cfg.filter.sbert)
    futures = [
        submit(
            cfg,
            ShardJob(spec, partial(filter.run, cfg, embedder, ITEM_TYPES), inputs=dict(inputs), label=f"shard-{i:04d}"),
            run_id,
        )
        for i, inputs in enumerate(shard_inputs)
    ]
    clips = clip_counts(cfg, [(inputs.get("clips") or [""])[0] for inputs in shard_inputs])
    result = StageResult(collect(cfg, "filter", futures, items=clips))
    if result.refs:  # one cross-shard job, after every shard's verdicts: repeated texts, spread, premises
        keys = {
            t: sorted({k for inputs in shard_inputs for k in inputs.get(t, [])})
            for t in (*ITEM_TYPES, "evidence", "clips")
        }
        keys["qc"] = sorted(ref.key for ref in result.refs)
        job = ShardJob(
            filter.duplicates_spec(cfg),
            partial(filter.run_duplicates, cfg, ITEM_TYPES),
            inputs=keys,
            label="all-shards",
        )
        result.refs.append(submit(cfg, job, run_id).result())
    if result.refs:
        cat = open_catalog(cfg)
        rows = [r for ref in result.refs for r in stored(cat, ref, "qc")]
        create_table_artifact(
            key=artifact_key(cfg, "qc-summary"),
            table=summary(rows),
            description="Items kept and rejected per check, with each check's score range",
        )
    return result


def run_filter(cfg: Config, shard_inputs, run_id: str | None = None) -> StageResult:
    return filter_flow.with_options(**flow_options(cfg, "filter"))(cfg, shard_inputs, run_id)
