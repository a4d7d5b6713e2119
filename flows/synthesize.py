"""synthesize flow: expert tables → `evidence`, then per clip shard the item tables (+ `rejections`).

Strategy "focused": one task per item type and clip shard (entailment reads the shard's captions as
premises); strategy "joint": one task per clip shard writing every item type. The flow opens one LLM
session; its embedded server, if it started one, is stopped when the flow ends. The LLM client is the one retry
layer: a shard that failed on the endpoint is not retried by Prefect (`stage_task`), and once the client's
circuit breaker opens the remaining shards fail at once; finished shards stay in the catalog for the re-run.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from prefect import flow, get_run_logger

from earmark.core import progress
from earmark.core.config import Config
from earmark.flows.runs import flow_options, load_api_key
from earmark.flows.shards import StageResult, clip_counts, collect, submit
from earmark.llm.session import LLMSession
from earmark.stages import synthesize
from earmark.stages.base import ShardJob
from earmark.stages.synthesize import evidence
from earmark.storage import ShardRef, open_catalog
from earmark.storage.paths import inside


def llm_session(cfg: Config) -> LLMSession:
    root = open_catalog(cfg).root
    return LLMSession(cfg.llm, root.parent / ".llm_cache", log_path=inside(root, "llm-server.log"))


@flow(name="synthesize", log_prints=True)
def synthesize_flow(
    cfg: Config,
    clip_refs: list[ShardRef],
    expert_refs: Mapping[str, list[ShardRef]],
    run_id: str | None = None,
    existing: Mapping[str, list[ShardRef]] | None = None,
) -> dict[str, Any]:
    """Evidence and the configured item types for every clip shard; returns the stage results and LLM usage.

    `existing`: per item type not being generated, the shards (aligned with `clip_refs`) to take from an
    earlier version — e.g. the captions whose long references are the premises of new entailment items.
    """
    items = list(cfg.synthesize.items)
    existing = existing or {}
    load_api_key(cfg)
    session = llm_session(cfg)
    expert_refs = evidence.evidence_tables(expert_refs)
    ev_spec = evidence.spec(list(expert_refs), cfg.evidence, cfg.synthesize.prompt_dir)
    results = {"evidence": StageResult(), **{item: StageResult() for item in items}}
    clips = clip_counts(cfg, [r.key for r in clip_refs])
    gen: list[tuple[str, Any]] = []
    shard_of: list[int] = []  # gen's clip shard, for progress
    ev_futures = []
    try:
        for i, clip_ref in enumerate(clip_refs):
            label = f"shard-{i:04d}"
            ev_job = ShardJob(
                ev_spec,
                partial(evidence.run, list(expert_refs), cfg.evidence, prompt_dir=cfg.synthesize.prompt_dir),
                label=label,
                inputs={"clips": [clip_ref.key], **{t: [refs[i].key] for t, refs in expert_refs.items()}},
            )
            ev_key, ev_future = ev_job.plan()[0], submit(cfg, ev_job, run_id)
            ev_futures.append(ev_future)
            if cfg.synthesize.strategy == "joint":
                job = _item_job(cfg, session, "joint", ev_key, None, label, items, clips[i])
                fut = submit(cfg, job, run_id, wait_for=[ev_future])
                gen += [(item, fut) for item in items]
                shard_of += [i] * len(items)
                continue
            # The embedded llama.cpp servers (single-slot each): the item types of a shard run one after another,
            # so a server keeps the KV cache of the previous prompt. An endpoint with several slots (vLLM's
            # continuous batching, `max_concurrency` > 1): they run at once, entailment after the captions it
            # takes premises from.
            waits = item_waits(items, parallel=cfg.llm.endpoint is not None and cfg.llm.max_concurrency > 1)
            captions = existing["captions"][i].key if "captions" in existing else None
            shard_futures: dict[str, Any] = {}
            for item in items:
                premises = captions if item == "entailment" else None
                job = _item_job(cfg, session, item, ev_key, premises, label, items, clips[i])
                after = [ev_future, *(shard_futures[w] for w in waits[item] if w in shard_futures)]
                shard_futures[item] = submit(cfg, job, run_id, wait_for=after)
                if item == "captions":
                    captions = job.plan()[0]
                gen.append((item, shard_futures[item]))
                shard_of.append(i)
        results["evidence"].refs.extend(collect(cfg, "evidence", ev_futures, items=clips))
        share = [clips[i] / len(items) for i in shard_of]  # a clip is done once all its item types are
        for (item, _), ref in zip(gen, collect(cfg, "synthesize", [f for _, f in gen], llm=True, items=share)):
            results[item].refs.append(ref)
    finally:
        stats = session.close()
    get_run_logger().info("LLM usage: %s", stats)
    return {"results": results, "llm": stats}


def item_waits(items: list[str], parallel: bool) -> dict[str, list[str]]:
    """For each item type of a shard, the item types it waits for (besides the shard's evidence).

    Sequential: each waits for the one before it. Parallel: only entailment waits, for the captions of its
    shard (its premises) when they are generated in the same run."""
    if not parallel:
        return {item: items[i - 1 : i] for i, item in enumerate(items)}
    return {item: ["captions"] if item == "entailment" and "captions" in items else [] for item in items}


def _item_job(
    cfg: Config,
    session: LLMSession,
    item: str,
    evidence_key: str,
    captions_key: str | None,
    label: str,
    items: list[str],
    n_clips: int = 0,
) -> ShardJob:
    spec = synthesize.spec(item, cfg.synthesize, cfg.llm, cfg.evidence, items)
    inputs = {"evidence": [evidence_key], **({"captions": [captions_key]} if captions_key else {})}
    fn = partial(synthesize.run, item, cfg.synthesize, cfg.llm, cfg.evidence, session, items)
    job = ShardJob(spec, fn, inputs=inputs, label=label)
    job.fn = partial(fn, preplanned=_preplan(cfg, job, item, n_clips))
    return job


def _preplan(cfg: Config, job: ShardJob, item: str, n_clips: int) -> int:
    """The shard's LLM requests at most, put on the progress bar at once so its total and ETA cover the whole
    stage from the start (the stage replaces it with its exact count when it runs). 0 when nobody listens,
    when the shard is in the catalog already, or when it runs in a Dask worker, whose reports go nowhere."""
    if not n_clips or not progress.active() or cfg.run.task_runner == "dask":
        return 0
    if open_catalog(cfg).has_shard(job.plan()[0], job.spec.writes):
        return 0
    n = synthesize.max_requests(item, synthesize.resolve_writers(cfg.synthesize, cfg.llm.model)) * n_clips
    progress.report(*synthesize.REQUESTS, planned=n)
    return n


def run_synthesize(cfg: Config, clip_refs, expert_refs, run_id: str | None = None, existing=None) -> dict[str, Any]:
    return synthesize_flow.with_options(**flow_options(cfg, "synthesize"))(
        cfg, clip_refs, expert_refs, run_id, existing
    )
