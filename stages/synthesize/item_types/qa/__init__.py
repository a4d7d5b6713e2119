"""MECAT open QA: 5 pairs per clip over the 6 categories (earmark.stages.synthesize.item_types.qa.write, by rule:
earmark.stages.synthesize.item_types.qa.rules)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from earmark.core.config import SynthesizeSection
from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.records import QAPair
from earmark.stages.base import ItemType
from earmark.stages.filter.audit import Audited, audit_fields, whole_answer
from earmark.stages.filter.qc import check_answer_not_question, check_confidence, check_unfilled
from earmark.stages.synthesize.common import Outcome, Synth
from earmark.stages.synthesize.item_types.qa import rules as rule_qa
from earmark.stages.synthesize.item_types.qa import write as qa
from earmark.stages.synthesize.registry import register
from earmark.stages.synthesize.replies import QAItem, reply_schema


def _write(ev: ClipEvidence, s: Synth, premises: Any = ()) -> Outcome:
    if s.cfg.qa_pairs == "rule":
        return rule_qa.rule_qa(ev, s)
    return qa.qa_clip(ev, s, fallback=lambda: rule_qa.rule_qa(ev, s))


def _fields(item: QAPair) -> list[tuple[str, str, dict]]:
    """A question may presuppose what the evidence cannot confirm; an inference answer need not be supported."""
    inference = item.category in qa.INFERENCE
    return [
        ("question", item.question, {"inference": True, "need_support": False}),
        ("answer", item.answer, {"inference": inference, "need_support": not inference}),
    ]


def _max_requests(cfg: SynthesizeSection) -> int:
    return 5 * (cfg.qa_pairs == "llm")


def _planned_requests(ev: ClipEvidence, s: Synth, premises: Sequence[Any] = ()) -> int:
    return len(qa.qa_plan(ev.clip_id)) if s.cfg.qa_pairs == "llm" else 0


def _audit(item: Any, ev: ClipEvidence, thr: float) -> Audited:
    return audit_fields("qa", item, ev, thr, _fields(item), whole_answer(item.question, item.answer, ev))


def _budget_group(item: Any) -> tuple[int, str]:
    return (item.qa_index, item.item_id)


def _reply_schemas() -> list[dict[str, Any]]:
    return [reply_schema(QAItem)]


KIND = register(
    ItemType(
        table="qa",
        record=QAPair,
        prompts=(*qa.PROMPTS, *rule_qa.PROMPTS, "absent", "content_captions"),
        reply_schemas=_reply_schemas,
        write=_write,
        max_requests=_max_requests,
        planned_requests=_planned_requests,
        checks={
            "confidence": check_confidence,
            "answer_not_question": check_answer_not_question,
            "unfilled": check_unfilled,
        },
        audit=_audit,
        texts=("question", "answer"),
        main_text="answer",
        budget_rank=2,
        budget_group=_budget_group,
        context=("category", "question"),
        label="category",
    )
)
