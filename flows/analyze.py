"""analyze flow: one task per (clip shard, expert); each expert writes its own table.

An expert's shard key carries its version, backend, settings and the keys of the shards it read, so
changing one expert recomputes its table and the experts downstream of it, nothing else.
"""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from earmark.config import Config
from earmark.stages.ingest import decode_clip
from earmark.experts import build_experts
from earmark.flows.common import StageResult, computed_or_cached, open_catalog, task_runner
from earmark.schemas import TABLES, Clip, from_table, to_table
from earmark.storage import ShardMeta, ShardRef, shard_key

BATCH = 32  # clips decoded and analysed at a time, bounding memory on shards of long files


@task(name="analyze-shard", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=5)
def analyze_shard(cfg: Config, expert_name: str, clip_ref: ShardRef, deps: list[ShardRef], run_id: str | None) -> ShardRef:
    expert = build_experts(cfg.analyze)[expert_name]
    dep_keys = dict(zip(expert.needs, (d.key for d in deps)))
    inputs = [clip_ref.key] + [dep_keys[n] for n in expert.needs]
    key = shard_key(expert.name, expert.version, inputs, model=expert.backend, config=expert.key_config())
    meta = ShardMeta(stage=f"analyze:{expert.name}", stage_version=expert.version, inputs=inputs,
                     model=expert.backend, config=expert.key_config())
    cat = open_catalog(cfg)

    def compute():
        clips = from_table(Clip, cat.read("clips", [clip_ref.key]))
        context = {
            need: {r.clip_id: r for r in from_table(TABLES[need], cat.read(need, [dep_keys[need]]))}
            for need in expert.needs
        }
        records = []
        for i in range(0, len(clips), BATCH):
            audio = [decode_clip(c) for c in clips[i : i + BATCH]]
            records += expert.analyze(audio, context)
        return {expert.name: to_table(expert.record, records)}

    return computed_or_cached(cat, key, (expert.name,), meta, run_id, compute, f"analyze:{expert.name}")


@flow(name="analyze", log_prints=True)
def analyze_flow(cfg: Config, clip_refs: list[ShardRef], run_id: str | None = None) -> dict[str, StageResult]:
    """Run every expert of the profile on every clip shard, each after the experts it needs."""
    experts = build_experts(cfg.analyze)
    results: dict[str, StageResult] = {name: StageResult() for name in experts}
    pending = []
    for clip_ref in clip_refs:
        futures: dict = {}
        for name, expert in experts.items():  # build_experts returns dependency order
            deps = [futures[n] for n in expert.needs]
            futures[name] = analyze_shard.submit(cfg, name, clip_ref, deps, run_id)
        pending.append(futures)
    for futures in pending:
        for name, fut in futures.items():
            results[name].refs.append(fut.result())
    return results


def run_analyze(cfg: Config, clip_refs: list[ShardRef], run_id: str | None = None) -> dict[str, StageResult]:
    return analyze_flow.with_options(task_runner=task_runner(cfg))(cfg, clip_refs, run_id)
