"""analyze flow: one task per (clip shard, expert), each after the experts it needs; each writes its table.

A shard's key is derived from its inputs' keys before anything runs, so a dependent expert's job is
planned at once (its inputs are the keys its dependencies will have) and only waits for them to finish.
"""

from __future__ import annotations

from functools import partial

from prefect import flow
from prefect.futures import PrefectFuture

from earmark.config import Config
from earmark.experts import build_experts
from earmark.flows.common import StageResult, clip_counts, collect, flow_options, mark_unregistered, submit
from earmark.stages import analyze
from earmark.stages.base import ShardJob
from earmark.storage import ShardRef


@flow(name="analyze", log_prints=True)
def analyze_flow(cfg: Config, clip_refs: list[ShardRef], run_id: str | None = None) -> dict[str, StageResult]:
    """Run every expert of the profile on every clip shard, each after the experts it needs."""
    experts = build_experts(cfg.analyze)
    clips = clip_counts(cfg, [r.key for r in clip_refs])
    planned: list[tuple[int, str, ShardJob]] = []
    for i, clip_ref in enumerate(clip_refs):
        keys: dict[str, str] = {}
        for name, expert in experts.items():  # build_experts returns dependency order
            job = ShardJob(
                analyze.spec(expert),
                partial(analyze.run, expert),
                label=f"shard-{i:04d}",
                inputs={"clips": [clip_ref.key], **{n: [keys[n]] for n in expert.needs}},
                gpu=expert.uses_gpu,
            )
            keys[name] = job.plan()[0]
            planned.append((i, name, job))
    pending: list[dict[str, PrefectFuture]] = [{} for _ in clip_refs]
    for (i, name, _), job in zip(planned, mark_unregistered(cfg, [job for _, _, job in planned])):
        wait_for = [pending[i][n] for n in experts[name].needs]  # submitted before it: dependency order
        pending[i][name] = submit(cfg, job, run_id, wait_for=wait_for, retries=1)
    flat = [(i, name, fut) for i, futures in enumerate(pending) for name, fut in futures.items()]
    refs = collect(
        cfg,
        "analyze",
        [f for _, _, f in flat],
        gpu=[experts[n].uses_gpu for _, n, _ in flat],
        items=[clips[i] / len(experts) for i, _, _ in flat],  # a clip is done once every expert has run on it
    )
    results: dict[str, StageResult] = {name: StageResult() for name in experts}
    for (_, name, _), ref in zip(flat, refs):
        results[name].refs.append(ref)
    return results


def run_analyze(cfg: Config, clip_refs: list[ShardRef], run_id: str | None = None) -> dict[str, StageResult]:
    return analyze_flow.with_options(**flow_options(cfg, "analyze"))(cfg, clip_refs, run_id)
