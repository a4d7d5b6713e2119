"""MECAT captions: 6 kinds × 3 references per clip (earmark.stages.synthesize.item_types.captions.write)."""

from __future__ import annotations

from typing import Any

from earmark.core.config import SynthesizeSection
from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.records import CAPTION_KINDS, Caption
from earmark.stages.base import ItemType
from earmark.stages.filter.audit import Audited, audit_fields
from earmark.stages.filter.budget import CAPTION_ORDER
from earmark.stages.filter.qc import check_confidence, check_length, check_unfilled
from earmark.stages.synthesize.common import Outcome, Synth
from earmark.stages.synthesize.item_types.captions import write as captions
from earmark.stages.synthesize.registry import register
from earmark.stages.synthesize.replies import MAX_CHARS, caption_reply, reply_schema


def _write(ev: ClipEvidence, s: Synth, premises: Any = ()) -> Outcome:
    return captions.caption_clip(ev, s)


def _max_requests(cfg: SynthesizeSection) -> int:
    llm_kinds = [k for k in CAPTION_KINDS if not (k in captions.RULE_KINDS and cfg.content_captions == "rule")]
    return 3 * len(llm_kinds)


def _planned(ev: ClipEvidence, s: Synth, premises: Any = ()) -> int:
    """Kinds written by rule (absent content, rule-written content captions, silence) take no request."""
    rule = captions.RULE_KINDS if s.cfg.content_captions == "rule" else ()
    by_rule = (captions.is_absent(ev, k, s) or k in rule or captions.only_silence(ev, k, s) for k in CAPTION_KINDS)
    return 3 * sum(not r for r in by_rule)


def _audit(item: Any, ev: ClipEvidence, thr: float) -> Audited:
    return audit_fields("captions", item, ev, thr, [("text", item.text, {})])


def _budget_group(item: Any) -> tuple[int, str]:
    return (CAPTION_ORDER.index(item.kind), f"{item.kind} captions")


def _reply_schemas() -> list[dict[str, Any]]:
    return [reply_schema(caption_reply(MAX_CHARS[k])) for k in CAPTION_KINDS]


KIND = register(
    ItemType(
        table="captions",
        record=Caption,
        prompts=(*captions.PROMPTS, "absent", "content_captions"),
        reply_schemas=_reply_schemas,
        write=_write,
        validate=captions.validated,
        max_requests=_max_requests,
        planned_requests=_planned,
        checks={"confidence": check_confidence, "length": check_length, "unfilled": check_unfilled},
        audit=_audit,
        texts=("text",),
        main_text="text",
        budget_rank=0,
        budget_group=_budget_group,
        context=("kind", "domain"),
        label="kind",
    )
)
