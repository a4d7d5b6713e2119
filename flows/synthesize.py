"""synthesize flow: expert tables → `evidence`, then per clip shard the item tables `captions`, `qa`,
`entailment`, `instructions` (+ `rejections`): one task per item type (strategy "focused"; entailment reads
the shard's captions as premises) or one task writing all of them (strategy "joint").

The LLM client is process-local (looked up by session id, created on first use in a worker process) and
the embedded server it may start is stopped when the flow ends.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from earmark.config import Config
from earmark.stages.evidence import EVIDENCE_VERSION, build_evidence, to_record
from earmark.llm.session import llm_stats, open_llm
from earmark.stages.synthesis.focused import (
    ITEM_PROMPTS,
    STAGE_VERSION,
    SynthesisSettings,
    prompts_sha,
    synthesize_joint_shard,
    synthesize_shard,
)
from earmark.flows.common import StageResult, computed_or_cached, open_catalog, task_runner
from earmark.schemas import (
    TABLES,
    Caption,
    Clip,
    EntailmentHypothesis,
    Evidence,
    InstructionTriple,
    QAPair,
    Rejection,
    from_table,
    to_table,
)

RECORDS = {"captions": Caption, "qa": QAPair, "entailment": EntailmentHypothesis, "instructions": InstructionTriple}
from earmark.storage import ShardMeta, ShardRef, shard_key

_sessions: dict[str, Any] = {}
_sessions_lock = threading.Lock()


def _llm(cfg: Config, session: str):
    with _sessions_lock:
        if session not in _sessions:
            root = open_catalog(cfg).root
            _sessions[session] = open_llm(cfg.llm, root.parent / ".llm_cache", log_path=root / "llm-server.log")
        return _sessions[session]


def _settings(cfg: Config) -> SynthesisSettings:
    s = cfg.synthesize
    return SynthesisSettings(model=cfg.llm.model, temperature_override=None, seed=cfg.llm.seed,
                             repair_attempts=s.repair_attempts, absent_captions=s.absent_captions,
                             max_concurrency=cfg.llm.max_concurrency, prompt_dir=s.prompt_dir)


@task(name="evidence-shard", cache_policy=NO_CACHE, retries=1)
def evidence_shard(cfg: Config, clip_ref: ShardRef, expert_refs: dict[str, ShardRef], run_id: str | None) -> ShardRef:
    inputs = [clip_ref.key] + sorted(r.key for r in expert_refs.values())
    key = shard_key("evidence", EVIDENCE_VERSION, inputs)
    meta = ShardMeta(stage="synthesize:evidence", stage_version=EVIDENCE_VERSION, inputs=inputs)
    cat = open_catalog(cfg)

    def compute():
        per_table = {t: {r.clip_id: r for r in from_table(TABLES[t], cat.read(t, [ref.key]))}
                     for t, ref in expert_refs.items()}
        rows = []
        for clip in from_table(Clip, cat.read("clips", [clip_ref.key])):
            records = {t: by_clip.get(clip.clip_id) for t, by_clip in per_table.items()}
            if records.get("domain") is None:
                continue  # no domain decision: nothing to caption (the analyze tables say why)
            rows.append(to_record(build_evidence(clip, records)))
        return {"evidence": to_table(Evidence, rows)}

    return computed_or_cached(cat, key, ("evidence",), meta, run_id, compute, "evidence")


@task(name="generate-shard", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=10)
def generate_shard(cfg: Config, item: str, evidence_ref: ShardRef, session: str, run_id: str | None,
                   captions_ref: ShardRef | None = None) -> ShardRef:
    """One item type for one shard (focused strategy); entailment also reads the shard's captions."""
    settings = _settings(cfg)
    psha = prompts_sha(ITEM_PROMPTS[item], settings.prompt_dir)
    inputs = [evidence_ref.key] + ([captions_ref.key] if item == "entailment" and captions_ref else [])
    if item == "entailment" and captions_ref is None:
        raise ValueError("entailment needs the shard's captions (its premises): include 'captions' in "
                         "synthesize.items or re-run from a version that has them")
    key = shard_key(item, STAGE_VERSION, inputs, prompt_sha=psha, model=cfg.llm.model, config=settings.key_config())
    meta = ShardMeta(stage=f"synthesize:{item}", stage_version=STAGE_VERSION, inputs=inputs, prompt_sha=psha,
                     model=cfg.llm.model, config=settings.key_config())
    cat = open_catalog(cfg)

    def compute():
        evidence = [json.loads(e.evidence_json) for e in from_table(Evidence, cat.read("evidence", [evidence_ref.key]))]
        captions = from_table(Caption, cat.read("captions", [captions_ref.key])) if len(inputs) > 1 else []
        out = synthesize_shard(evidence, item, _llm(cfg, session), settings, captions)
        return {item: to_table(RECORDS[item], out.rows), "rejections": to_table(Rejection, out.rejections)}

    return computed_or_cached(cat, key, (item, "rejections"), meta, run_id, compute, f"synthesize:{item}")


@task(name="generate-joint-shard", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=10)
def generate_joint_shard(cfg: Config, items: list[str], evidence_ref: ShardRef, session: str,
                         run_id: str | None) -> ShardRef:
    """Every item type for one shard from one reply per clip (joint strategy)."""
    settings = _settings(cfg)
    psha = prompts_sha(ITEM_PROMPTS["joint"], settings.prompt_dir)
    config = {**settings.key_config(), "items": sorted(items)}
    key = shard_key("joint", STAGE_VERSION, [evidence_ref.key], prompt_sha=psha, model=cfg.llm.model, config=config)
    meta = ShardMeta(stage="synthesize:joint", stage_version=STAGE_VERSION, inputs=[evidence_ref.key],
                     prompt_sha=psha, model=cfg.llm.model, config=config)
    cat = open_catalog(cfg)

    def compute():
        evidence = [json.loads(e.evidence_json) for e in from_table(Evidence, cat.read("evidence", [evidence_ref.key]))]
        out = synthesize_joint_shard(evidence, _llm(cfg, session), settings, items)
        tables = {item: to_table(RECORDS[item], out[item].rows) for item in items}
        return {**tables, "rejections": to_table(Rejection, [r for o in out.values() for r in o.rejections])}

    return computed_or_cached(cat, key, (*items, "rejections"), meta, run_id, compute, "synthesize:joint")


@flow(name="synthesize", log_prints=True)
def synthesize_flow(cfg: Config, clip_refs: list[ShardRef], expert_refs: Mapping[str, list[ShardRef]],
                    run_id: str | None = None, existing: Mapping[str, list[ShardRef]] | None = None) -> dict[str, Any]:
    """Evidence and the configured item types for every clip shard; returns the stage results and LLM usage.

    `existing`: per item type not being generated, the shards (aligned with `clip_refs`) to take from an
    earlier version — e.g. the captions whose long references are the premises of new entailment items.
    """
    session = uuid.uuid4().hex
    items = list(cfg.synthesize.items)
    existing = existing or {}
    results = {"evidence": StageResult(), **{item: StageResult() for item in items}}
    try:
        ev_futures = []
        for i, clip_ref in enumerate(clip_refs):
            per_shard = {t: refs[i] for t, refs in expert_refs.items()}
            ev_futures.append(evidence_shard.submit(cfg, clip_ref, per_shard, run_id))
        gen = []
        for i, ev in enumerate(ev_futures):
            if cfg.synthesize.strategy == "joint":
                fut = generate_joint_shard.submit(cfg, items, ev, session, run_id)
                gen += [(item, fut) for item in items]
                continue
            # Item types of one shard run one after another: a single-slot server (llama.cpp) keeps the
            # KV cache of the previous prompt, and the 3 references of a caption kind share their prompt,
            # so interleaving two item types would make it re-read every prompt from scratch.
            previous, captions = None, (existing["captions"][i] if "captions" in existing else None)
            for item in items:
                previous = generate_shard.submit(cfg, item, ev, session, run_id,
                                                 captions if item == "entailment" else None,
                                                 wait_for=[previous] if previous else None)
                if item == "captions":
                    captions = previous
                gen.append((item, previous))
        for ev in ev_futures:
            results["evidence"].refs.append(ev.result())
        for item, fut in gen:
            results[item].refs.append(fut.result())
    finally:
        client = _sessions.pop(session, None)
        stats = llm_stats(client) if client is not None else {"calls": 0, "cache_hits": 0, "server_started": False}
        if client is not None:
            client.close()
    get_run_logger().info("LLM usage: %s", stats)
    return {"results": results, "llm": stats}


def run_synthesize(cfg: Config, clip_refs, expert_refs, run_id: str | None = None, existing=None) -> dict[str, Any]:
    return synthesize_flow.with_options(task_runner=task_runner(cfg))(cfg, clip_refs, expert_refs, run_id, existing)
