"""synthesize stage: a clip shard's evidence → the item tables, through an LLM.

The item types (`ITEM_TYPES`, one module each under `item_types/`): MECAT captions (6 kinds × 3 references)
and QA pairs, Audio-Entailment hypotheses and IFEval-Audio instruction triples. Strategy "focused" (what a small local
model can do) runs one small prompt per caption kind / QA pair / entailment set / instruction, one stage
per item type; strategy "joint" (capable endpoints) writes every item type of a clip from one
chain-of-thought reply, as one stage. Each stage's key carries the sha of every file its requests are
rendered from (prompts, evidence phrases, the repair request, rule-written absence captions) and of its
reply schemas, plus the model and the settings that change its output.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from earmark.core import progress
from earmark.core.config import EvidenceSection, LLMSection, SynthesizeSection
from earmark.llm import shard_budget
from earmark.prompts import request_sha
from earmark.schemas.evidence import ClipEvidence
from earmark.stages.base import Inputs, StageSpec
from earmark.stages.synthesize import item_types, joint  # importing item_types registers the built-in ones
from earmark.stages.synthesize.common import LLM, WRITER_SETTINGS, Synth, resolve_writers
from earmark.stages.synthesize.registry import ITEM_TYPES, register  # noqa: F401  (register: the public way in)
from earmark.stages.synthesize.replies import Hypotheses, JointQA, instruction_reply, reply_schema

# bump when validation or assembly of items changes (5: uncertain absence unstated, 6: speech timing, 7: its reason,
# 8: silence captions by rule, entailment sets by rule unless [synthesize] entailment_sets = "llm", 9: QA pairs and
# instruction triples by rule unless qa_pairs / instruction_triples = "llm", 10: the `writer` column; "auto" writers;
# a rejected LLM QA pair / triple / content caption replaced by the rule's; 11: the audit reads "one or more people
# speak" as no count; 12: a coarse descriptor supports no event class; 13: timing words from turns joined across
# pauses and from windows that say where, not how long; non-speech vocal sounds are named sources; 14: "at several
# moments" confirmed by the tagger's windows, a voice's timing only with a confirmed count, music timing only
# "throughout"; 15: no coarse DSP descriptor and no timing from all-lit sound windows; 16: a rule-written answer to a
# question for everything heard names every sure content; 17: a named event's time is its window ("between 2 and
# 4 s"), "What are the sound events like?" is asked only where an event is named, "Who is speaking?" only where the
# voice's gender is known)
STAGE_VERSION = "17"
FORMS = ("list", "json", "answer")
SHARED_FILES = ("evidence", "repair")  # rendered into every request
JOINT_FILES = (*joint.PROMPTS, "absent", "content_captions")


def _schemas(item: str) -> list[dict[str, Any]]:
    if item == "joint":
        return [reply_schema(JointQA), reply_schema(Hypotheses)] + [
            reply_schema(instruction_reply(f, False)) for f in FORMS
        ]
    return ITEM_TYPES[item].reply_schemas()


def prompt_files(item: str) -> tuple[str, ...]:
    """Every prompt/phrase file an item type's requests are rendered from."""
    return (*(JOINT_FILES if item == "joint" else ITEM_TYPES[item].prompts), *SHARED_FILES)


def spec(
    item: str, cfg: SynthesizeSection, llm: LLMSection, evidence: EvidenceSection, items: Sequence[str] | None = None
) -> StageSpec:
    """The stage of one item type ("joint": every item type in `items` from one reply per clip)."""
    if item not in (*ITEM_TYPES, "joint"):
        raise ValueError(f"unknown item type {item!r}; use one of {', '.join(ITEM_TYPES)}")
    items = list(ITEM_TYPES) if items is None else items
    if item == "joint" and (other := sorted(set(items) - set(item_types.BUILT_IN))):
        raise ValueError(
            f"the joint strategy writes only {', '.join(item_types.BUILT_IN)}; {', '.join(other)} needs "
            f'[synthesize] strategy = "focused"'
        )
    cfg = resolve_writers(cfg, llm.model)
    config: dict[str, Any] = {
        "seed": llm.seed,
        "repair": cfg.repair_attempts,
        "absent": cfg.absent_captions,
        "content": cfg.content_captions,
        "fallback": cfg.caption_fallback,
        "entailment_sets": cfg.entailment_sets,
        "qa_pairs": cfg.qa_pairs,
        "instruction_triples": cfg.instruction_triples,
        "min_confidence": evidence.min_confidence,
    }
    writes: tuple[str, ...] = (item, "rejections")
    if item == "joint":
        config["items"] = sorted(items)
        writes = (*sorted(items), "rejections")
    reads = ("evidence",) if item == "joint" else ITEM_TYPES[item].reads
    files = prompt_files(item)
    return StageSpec(
        f"synthesize:{item}",
        STAGE_VERSION,
        writes=writes,
        reads=reads,
        model=llm.model,
        config=config,
        prompt_files=files,
        prompt_sha=request_sha(files, cfg.prompt_dir, _schemas(item)),
        prompt_dir=cfg.prompt_dir,
    )


def _per_clip(evidence: Sequence[ClipEvidence], fn: Callable[[ClipEvidence], Any], concurrency: int) -> list[Any]:
    # Each clip runs in a copy of the caller's context, so the stage's declared prompt files hold there too.
    contexts = [contextvars.copy_context() for _ in evidence]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(lambda c_ev: c_ev[0].run(fn, c_ev[1]), zip(contexts, evidence)))


class LLMProvider(Protocol):
    def client(self) -> LLM: ...


# ------------------------------------------------------------------------------------------- progress
REQUESTS = ("synthesize", "LLM requests")  # earmark.core.progress (stage, unit) of synthesis requests


def max_requests(item: str, cfg: SynthesizeSection) -> int:
    """LLM requests one clip needs at most on first attempts (repairs aside): the flow's estimate before the
    shard's evidence is read. `cfg` as `resolve_writers` decided it."""
    if "auto" in (getattr(cfg, k) for k in WRITER_SETTINGS):
        raise ValueError("max_requests needs the writers decided: pass resolve_writers(cfg, model)")
    return 1 if item == "joint" else ITEM_TYPES[item].max_requests(cfg)


def planned_requests(item: str, ev: ClipEvidence, s: Synth, premises: Sequence[Any] = ()) -> int:
    """LLM requests one clip needs on first attempts (the item type's plan: kinds written by rule need none,
    entailment needs a premise)."""
    return 1 if item == "joint" else ITEM_TYPES[item].planned_requests(ev, s, premises)


class _Counted:
    """The shard's LLM, counting its requests for the progress display: the exact count of first attempts once
    the evidence is read (in place of the flow's estimate), each request beyond it (a repair) added to the total
    as it is sent — so the bar never shows more done than its total —, each request as it returns, and the
    count made once the shard is done."""

    def __init__(self, llm: LLM, preplanned: int) -> None:
        self.llm, self.model = llm, llm.model
        self.planned, self.sent, self.calls = preplanned, 0, 0
        self._lock = threading.Lock()

    def plan(self, n: int) -> None:
        with self._lock:
            n = max(n, self.sent)  # requests already sent stay in the total
            more, self.planned = n - self.planned, n
        progress.report(*REQUESTS, planned=more)

    def complete_json(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self.sent += 1
            beyond = self.sent > self.planned  # a repair: the plan counted first attempts only
            self.planned += beyond
        if beyond:
            progress.report(*REQUESTS, planned=1)
        try:
            return self.llm.complete_json(*args, **kwargs)
        finally:
            with self._lock:
                self.calls += 1
            progress.report(*REQUESTS, done=1)

    def settle(self) -> None:
        self.plan(self.calls)


def run(
    item: str,
    cfg: SynthesizeSection,
    llm_cfg: LLMSection,
    evidence_cfg: EvidenceSection,
    llm: LLMProvider,
    items: Sequence[str],
    inputs: Inputs,
    preplanned: int = 0,
) -> dict[str, list[Any]]:
    """The stage function: every clip of the shard, as many clips at a time as the LLM serves requests; its
    LLM requests share the deadline `[llm] shard_budget_s`. They are reported to earmark.core.progress as they
    return; `preplanned`: how many the flow already announced for this shard."""
    cfg = resolve_writers(cfg, llm_cfg.model)  # as the spec keyed it, whatever the client calls its model
    client = llm.client()
    counted = _Counted(client, preplanned)
    try:
        with shard_budget(llm_cfg.shard_budget_s):
            return _run(item, cfg, llm_cfg, evidence_cfg, client, counted, items, inputs)
    finally:
        counted.settle()


def _run(
    item: str,
    cfg: SynthesizeSection,
    llm_cfg: LLMSection,
    evidence_cfg: EvidenceSection,
    client: LLM,
    counted: _Counted,
    items: Sequence[str],
    inputs: Inputs,
) -> dict[str, list[Any]]:
    s = Synth(counted, cfg, llm_cfg.seed, evidence_cfg.min_confidence)
    concurrency = getattr(client, "concurrency", llm_cfg.max_concurrency)
    evidence = inputs("evidence")
    reads = () if item == "joint" else ITEM_TYPES[item].reads
    premises = inputs("captions") if "captions" in reads and "captions" in inputs.tables() else []
    counted.plan(sum(planned_requests(item, ev, s, premises) for ev in evidence))
    if item == "joint":
        per_clip = _per_clip(evidence, lambda ev: joint.joint_clip(ev, s), concurrency)
        out: dict[str, list[Any]] = {i: [r for o in per_clip for r in o[i].rows] for i in items}
        out["rejections"] = [r for o in per_clip for i in items for r in o[i].rejections]
        return out
    kind = ITEM_TYPES[item]
    missing = [t for t in kind.reads if t not in inputs.tables()]
    if missing:
        raise ValueError(
            f"{item} needs the shard's {', '.join(missing)} (its premises): include "
            f"{', '.join(repr(t) for t in missing)} in synthesize.items or re-run from a version that has them"
        )
    outcomes = _per_clip(evidence, lambda ev: kind.write(ev, s, premises), concurrency)
    return {item: [r for o in outcomes for r in o.rows], "rejections": [r for o in outcomes for r in o.rejections]}
