"""analyze flow: one task per (clip shard, expert), each after the experts it needs; each writes its table.

A shard's key is derived from its inputs' keys before anything runs, so a dependent expert's job is
planned at once (its inputs are the keys its dependencies will have) and only waits for them to finish.
In a build (`[run] pipeline`) the flow runs beside ingest's and takes each clip shard as ingest writes it
(`ShardStream`): a clip shard's experts wait for its ingest task, not for the whole of ingest.
"""

from __future__ import annotations

from functools import partial

from prefect import flow
from prefect.futures import PrefectFuture
from prefect.states import State

from earmark.core.config import Config
from earmark.experts import build_experts
from earmark.experts.base import Expert
from earmark.flows.runs import flow_options
from earmark.flows.shards import ShardStream, StageResult, clip_counts, collect, mark_unregistered, submit
from earmark.stages import analyze
from earmark.stages.base import ShardJob
from earmark.storage import ShardRef


@flow(name="analyze", log_prints=True)
def analyze_flow(
    cfg: Config, clip_refs: list[ShardRef], run_id: str | None = None, stream: ShardStream | None = None
) -> dict[str, StageResult]:
    """Run every expert of the profile on every clip shard, each after the experts it needs. `stream`: clip
    shards still arriving from an ingest flow running beside this one (after `clip_refs`, if any)."""
    experts = build_experts(cfg.analyze)
    shards: list[tuple[int, ShardRef]] = []
    submitted: list[tuple[int, str, PrefectFuture]] = []

    def plan_and_submit(batch: list[tuple[int, ShardRef, State | None]]) -> None:
        shards.extend((i, ref) for i, ref, _ in batch)
        submitted.extend(_submit(cfg, experts, batch, run_id))

    plan_and_submit([(i, ref, None) for i, ref in enumerate(clip_refs)])
    while stream is not None and (arrived := stream.take()) is not None:  # one catalog query per batch that came
        plan_and_submit([(len(clip_refs) + i, ref, state) for i, ref, state in arrived])
    submitted.sort(key=lambda s: s[0])  # clip-shard order (a stream delivers in the order ingest finished)
    clips = dict(zip((i for i, _ in shards), clip_counts(cfg, [ref.key for _, ref in shards])))
    refs = collect(
        cfg,
        "analyze",
        [f for _, _, f in submitted],
        gpu=[experts[n].uses_gpu for _, n, _ in submitted],
        items=[clips[i] / len(experts) for i, _, _ in submitted],  # a clip is done once every expert has run on it
    )
    results: dict[str, StageResult] = {name: StageResult() for name in experts}
    for (_, name, _), ref in zip(submitted, refs):
        results[name].refs.append(ref)
    # what did arrive is analysed and registered; an interrupt (Ctrl-C, SIGTERM) of ingest is the build's to
    # report, and this flow, beside it, ends quietly (an error here put a traceback after a clean stop)
    if stream is not None and isinstance(stream.error, Exception):
        raise RuntimeError(f"ingest stopped ({stream.error}); analyzed the {len(shards)} clip shard(s) it wrote")
    return results


def _submit(
    cfg: Config, experts: dict[str, Expert], batch: list[tuple[int, ShardRef, State | None]], run_id: str | None
) -> list[tuple[int, str, PrefectFuture]]:
    """Plan every expert's job on these clip shards (one catalog query for the lot) and submit them in
    dependency order; a clip shard's ingest task state (streamed) is what its first experts wait for."""
    if not batch:
        return []
    planned: list[tuple[int, str, ShardJob]] = []
    for i, clip_ref, _ in batch:
        keys: dict[str, str] = {}
        for name, expert in experts.items():  # build_experts returns dependency order
            job = ShardJob(
                analyze.spec(expert),
                partial(analyze.run, expert),
                label=f"shard-{i:04d}",
                inputs={"clips": [clip_ref.key], **{n: [keys[n]] for n in expert.needs}},
                gpu=expert.uses_gpu,
                gpu_sections=expert.gpu_in_sections,
            )
            keys[name] = job.plan()[0]
            planned.append((i, name, job))
    upstream = {i: state for i, _, state in batch}
    pending: dict[int, dict[str, PrefectFuture]] = {i: {} for i, _, _ in batch}
    for (i, name, _), job in zip(planned, mark_unregistered(cfg, [job for _, _, job in planned])):
        needs = experts[name].needs
        wait_for = [pending[i][n] for n in needs] if needs or upstream[i] is None else [upstream[i]]
        pending[i][name] = submit(cfg, job, run_id, wait_for=wait_for, retries=1)
    return [(i, name, fut) for i, futures in pending.items() for name, fut in futures.items()]


def run_analyze(cfg: Config, clip_refs: list[ShardRef], run_id: str | None = None) -> dict[str, StageResult]:
    return analyze_flow.with_options(**flow_options(cfg, "analyze"))(cfg, clip_refs, run_id)
