"""Audio Entailment: a hypothesis per label over a premise caption of the clip (earmark.stages.synthesize.
entailment; by rule unless `[synthesize] entailment_sets = "llm"`). Its stage reads the clip's captions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from earmark.core.config import SynthesizeSection
from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.records import EntailmentHypothesis
from earmark.stages.base import ItemType
from earmark.stages.filter.audit import Audited, audit_hypothesis
from earmark.stages.filter.qc import check_confidence, check_unfilled
from earmark.stages.synthesize.common import Outcome, Synth
from earmark.stages.synthesize.item_types.entailment import write as entailment
from earmark.stages.synthesize.registry import register
from earmark.stages.synthesize.replies import EntailmentReply, reply_schema


def _write(ev: ClipEvidence, s: Synth, premises: Sequence[Any] = ()) -> Outcome:
    return entailment.entailment_clip(ev, premises, s)


def _planned(ev: ClipEvidence, s: Synth, premises: Sequence[Any] = ()) -> int:
    return int(s.cfg.entailment_sets == "llm" and entailment.premise_for(ev.clip_id, premises) is not None)


def _max_requests(cfg: SynthesizeSection) -> int:
    return int(cfg.entailment_sets == "llm")


def _audit(item: Any, ev: ClipEvidence, thr: float) -> Audited:
    return audit_hypothesis("entailment", item, ev, thr)


def _budget_group(item: Any) -> tuple[int, str]:
    return (0, "entailment set")


def _reply_schemas() -> list[dict[str, Any]]:
    return [reply_schema(EntailmentReply)]


KIND = register(
    ItemType(
        table="entailment",
        record=EntailmentHypothesis,
        prompts=entailment.PROMPTS,
        reply_schemas=_reply_schemas,
        write=_write,
        max_requests=_max_requests,
        planned_requests=_planned,
        checks={"confidence": check_confidence, "unfilled": check_unfilled},
        audit=_audit,
        texts=("hypothesis",),
        main_text="hypothesis",
        budget_rank=1,
        budget_group=_budget_group,
        context=("label", "premise"),
        label="label",
        reads=("evidence", "captions"),
    )
)
