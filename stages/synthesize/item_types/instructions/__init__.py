"""IFEval-Audio instruction triples: 3 per clip, each with a machine-checkable rule
(earmark.stages.synthesize.item_types.instructions.write, by rule: earmark.stages.synthesize.item_types.qa.rules)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from earmark.core.config import SynthesizeSection
from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.records import InstructionTriple
from earmark.stages.base import ItemType
from earmark.stages.filter.audit import audit_fields, instruction_fields, instruction_precheck
from earmark.stages.filter.qc import check_confidence, check_ifeval_answer, check_unfilled
from earmark.stages.synthesize.common import Outcome, Synth
from earmark.stages.synthesize.item_types.instructions import rules as rule_instructions
from earmark.stages.synthesize.item_types.instructions import write as instructions
from earmark.stages.synthesize.item_types.qa import rules as rule_qa
from earmark.stages.synthesize.registry import register
from earmark.stages.synthesize.replies import instruction_reply, reply_schema

FORMS = ("list", "json", "answer")


def _write(ev: ClipEvidence, s: Synth, premises: Any = ()) -> Outcome:
    if s.cfg.instruction_triples == "rule":
        return rule_instructions.rule_instructions(ev, s)
    return instructions.instructions_clip(ev, s, fallback=lambda: rule_instructions.rule_instructions(ev, s))


def _audit(item: InstructionTriple, ev: ClipEvidence, thr: float):
    return audit_fields("instructions", item, ev, thr, instruction_fields(item), instruction_precheck(item, ev))


def _max_requests(cfg: SynthesizeSection) -> int:
    return 3 * (cfg.instruction_triples == "llm")


def _planned_requests(ev: ClipEvidence, s: Synth, premises: Sequence[Any] = ()) -> int:
    return 3 * (s.cfg.instruction_triples == "llm")


def _budget_group(item: Any) -> tuple[int, str]:
    return (int(item.item_id.rsplit(":", 1)[-1]), item.item_id)


def _reply_schemas() -> list[dict[str, Any]]:
    return [reply_schema(instruction_reply(f)) for f in FORMS]


KIND = register(
    ItemType(
        table="instructions",
        record=InstructionTriple,
        prompts=(*instructions.PROMPTS, *rule_qa.PROMPTS, "absent", "content_captions"),
        reply_schemas=_reply_schemas,
        write=_write,
        max_requests=_max_requests,
        planned_requests=_planned_requests,
        checks={"confidence": check_confidence, "ifeval_answer": check_ifeval_answer, "unfilled": check_unfilled},
        audit=_audit,
        texts=("instruction", "answer"),
        main_text="answer",
        budget_rank=3,
        budget_group=_budget_group,
        context=("instruction", "rule", "rule_content"),
        label="dimension",
    )
)
