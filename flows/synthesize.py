"""synthesize flow: expert tables → `evidence`, then per clip shard the item tables (+ `rejections`).

Strategy "focused": one task per item type and clip shard (entailment reads the shard's captions as
premises); strategy "joint": one task per clip shard writing every item type. The flow opens one LLM
session; its embedded server, if it started one, is stopped when the flow ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from prefect import flow, get_run_logger

from earmark.config import Config
from earmark.flows.common import StageResult, flow_options, open_catalog, submit
from earmark.llm.session import LLMSession
from earmark.stages import evidence, synthesis
from earmark.stages.base import ShardJob
from earmark.storage import ShardRef


def llm_session(cfg: Config) -> LLMSession:
    root = open_catalog(cfg).root
    return LLMSession(cfg.llm, root.parent / ".llm_cache", log_path=root / "llm-server.log")


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
    session = llm_session(cfg)
    ev_spec = evidence.spec(list(expert_refs), cfg.evidence)
    results = {"evidence": StageResult(), **{item: StageResult() for item in items}}
    gen: list[tuple[str, Any]] = []
    ev_futures = []
    try:
        for i, clip_ref in enumerate(clip_refs):
            label = f"shard-{i:04d}"
            ev_job = ShardJob(
                ev_spec,
                partial(evidence.run, list(expert_refs), cfg.evidence),
                label=label,
                inputs={"clips": [clip_ref.key], **{t: [refs[i].key] for t, refs in expert_refs.items()}},
            )
            ev_key, ev_future = ev_job.plan()[0], submit(cfg, ev_job, run_id)
            ev_futures.append(ev_future)
            if cfg.synthesize.strategy == "joint":
                job = _item_job(cfg, session, "joint", ev_key, None, label, items)
                fut = submit(cfg, job, run_id, wait_for=[ev_future], retries=2)
                gen += [(item, fut) for item in items]
                continue
            # Item types of one shard run one after another: a single-slot server (llama.cpp) keeps the KV
            # cache of the previous prompt, and the 3 references of a caption kind share their prompt.
            previous = ev_future
            captions = existing["captions"][i].key if "captions" in existing else None
            for item in items:
                job = _item_job(cfg, session, item, ev_key, captions if item == "entailment" else None, label, items)
                previous = submit(cfg, job, run_id, wait_for=[previous], retries=2)
                if item == "captions":
                    captions = job.plan()[0]
                gen.append((item, previous))
        for fut in ev_futures:
            results["evidence"].refs.append(fut.result())
        for item, fut in gen:
            results[item].refs.append(fut.result())
    finally:
        stats = session.close()
    get_run_logger().info("LLM usage: %s", stats)
    return {"results": results, "llm": stats}


def _item_job(
    cfg: Config,
    session: LLMSession,
    item: str,
    evidence_key: str,
    captions_key: str | None,
    label: str,
    items: list[str],
) -> ShardJob:
    spec = synthesis.spec(item, cfg.synthesize, cfg.llm, cfg.evidence, items)
    inputs = {"evidence": [evidence_key], **({"captions": [captions_key]} if captions_key else {})}
    fn = partial(synthesis.run, item, cfg.synthesize, cfg.llm, cfg.evidence, session, items)
    return ShardJob(spec, fn, inputs=inputs, label=label)


def run_synthesize(cfg: Config, clip_refs, expert_refs, run_id: str | None = None, existing=None) -> dict[str, Any]:
    return synthesize_flow.with_options(**flow_options(cfg, "synthesize"))(
        cfg, clip_refs, expert_refs, run_id, existing
    )
