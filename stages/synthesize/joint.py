"""Strategy "joint": one chain-of-thought pass over all of a clip's evidence writes every item.

This is how MECAT built its references (DeepSeek-R1 over all expert outputs at once): the model reasons
first (`reasoning`, or a reasoning model's own channel), then emits captions (3 per caption kind), QA
pairs, the entailment hypotheses and the instruction triples in one schema-constrained JSON object. Meant
for capable endpoints. Every item is validated exactly as in the focused strategy, and an invalid item is
rejected on its own (with its reason) while the valid ones of the same reply are kept; a reply that is not
valid JSON at all gets one repair attempt.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.records import CAPTION_KINDS, Caption
from earmark.stages.synthesize.common import Outcome, Synth, ask, reason_of
from earmark.stages.synthesize.item_types.captions.write import absent_rows, is_absent
from earmark.stages.synthesize.item_types.entailment.write import check_entailment_set, hypothesis_rows
from earmark.stages.synthesize.item_types.instructions.write import expected_answer, instruction_plan, triple
from earmark.stages.synthesize.item_types.qa.write import qa_plan, qa_row
from earmark.stages.synthesize.registry import ITEM_TYPES
from earmark.stages.synthesize.replies import Hypotheses, InstructionReply, QAItem, joint_reply, reply_schema

PROMPTS = ("joint", "qa", "ifeval")  # joint renders the QA focus words and instruction plans from those files
ITEMS = ("captions", "qa", "entailment", "instructions")
_ERRORS = (ValidationError, ValueError, TypeError)


def joint_clip(ev: ClipEvidence, s: Synth, n_qa: int = 5) -> dict[str, Outcome]:
    """Every item type for one clip from one reply: {item type: Outcome}."""
    prompt, qa_prompt = s.prompt("joint"), s.prompt("qa")
    plan_words = prompt.data["plan"]
    kinds = [k for k in CAPTION_KINDS if not is_absent(ev, k, s)]
    qplan, iplan = qa_plan(ev.clip_id, n_qa), instruction_plan(ev, s.prompt("ifeval"))
    qa_text = plan_words["separator"].join(
        plan_words["qa_item"].format(n=i + 1, difficulty=p["difficulty"], focus=qa_prompt.data["focus"][p["category"]])
        for i, p in enumerate(qplan)
    )
    ins_text = plan_words["separator"].join(
        plan_words["instruction_item"].format(i=i, focus=p["focus"], constraint=p["constraint"])
        for i, p in enumerate(iplan)
    )
    messages = prompt.render(evidence_text=s.all_notes(ev), qa_plan=qa_text, instruction_plan=ins_text)
    lineage = s.lineage(ev, prompt)
    out = {item: Outcome() for item in ITEMS}

    def reject(item: str, reason: str, raw: str = "") -> None:
        out[item].rejections.append(s.rejection(ev, item, prompt, reason, raw))

    def parse(data: Any) -> dict:
        if not isinstance(data, dict) or not all(k in data for k in ITEMS):
            raise ValueError("reply lacks captions/qa/entailment/instructions")
        return data

    schema = reply_schema(joint_reply(tuple(kinds), n_qa, tuple(p["form"] for p in iplan)))
    data, raw, reason = ask(s, prompt, messages, schema, parse, s.seed_for(ev, 0))
    if data is None:
        for item in ITEMS:
            reject(item, f"joint reply unusable: {reason}", raw)
        return out
    conf = float(data.get("confidence") or 0.0)
    for kind in CAPTION_KINDS:
        if kind not in kinds:
            out["captions"].rows.extend(absent_rows(ev, kind, s))
            continue
        seen: set[str] = set()
        for i, text in enumerate((data["captions"].get(kind) or [])[:3]):
            try:  # the item type's own check, as the focused strategy's (earmark.stages.synthesize.item_types)
                cap = ITEM_TYPES["captions"].validate({"caption": text, "confidence": conf}, kind, ev, s, seen).caption
            except _ERRORS as exc:
                reject("captions", f"{kind} reference {i}: {reason_of(exc, 400)}", str(text))
                continue
            seen.add(cap.lower().rstrip("."))
            out["captions"].rows.append(
                Caption(
                    **lineage, confidence=conf, item_id=f"{ev.clip_id}:{kind}:{i}", kind=kind, ref_index=i, text=cap
                )
            )
    for i, (p, qa) in enumerate(zip(qplan, data["qa"])):
        try:
            item = QAItem.model_validate({**qa, "confidence": conf})
        except _ERRORS as exc:
            reject("qa", f"{p['category']} pair: {reason_of(exc, 400)}", str(qa))
            continue
        out["qa"].rows.append(qa_row(ev, lineage, i, p, item.question, item.answer, conf))
    premise = next((c for c in out["captions"].rows if c.kind == "long"), None) or next(
        (c for c in out["captions"].rows if c.kind == "short"), None
    )
    try:
        if premise is None:
            raise ValueError("no valid long or short caption to serve as the premise")
        ent = check_entailment_set(Hypotheses.model_validate(data["entailment"]), premise.text)
        out["entailment"].rows.extend(hypothesis_rows(ev, s, lineage, ent, premise, conf))
    except _ERRORS as exc:
        reject("entailment", reason_of(exc, 400), str(data.get("entailment")))
    for i, plan in enumerate(iplan):
        entry = data["instructions"].get(f"i{i}") or {}
        try:
            reply = InstructionReply.model_validate({**entry, "reasoning": data["reasoning"], "confidence": conf})
            answer = expected_answer(reply, plan)
        except _ERRORS as exc:
            reject("instructions", f"{plan['dimension']} rule {plan['rule']}: {reason_of(exc, 400)}", str(entry))
            continue
        out["instructions"].rows.append(triple(ev, lineage, i, plan, reply, answer, conf))
    return out
