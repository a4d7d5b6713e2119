"""synthesize, strategy "joint": one chain-of-thought pass over all of a clip's evidence writes every item.

This is how MECAT built its references (DeepSeek-R1 over all expert outputs at once): the model reasons
first (`reasoning`, or a reasoning model's own channel), then emits captions (3 per caption kind), QA
pairs, the entailment hypotheses and the instruction triples in one schema-constrained JSON object. Meant
for capable endpoints; the focused strategy (earmark/synthesize.py, synthesize_items.py) is what small
local models manage. Every item is validated exactly as in the focused strategy, and an invalid item is
rejected on its own (with its reason) while the valid ones of the same reply are kept; a reply that is
not valid JSON at all gets one repair attempt.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from earmark.stages.evidence import render
from earmark.stages.synthesis.focused import (
    CONTENT_KINDS,
    LLM,
    MAX_CHARS,
    QA_MAX_CHARS,
    CaptionReply,
    Outcome,
    QAItem,
    SynthesisSettings,
    _absent_rows,
    _ask,
    qa_plan,
)
from earmark.stages.synthesis.items import (
    REASONING_CHARS,
    EntailmentReply,
    InstructionReply,
    check_entailment_set,
    expected_answer,
    instruction_plan,
    instruction_schema,
)
from earmark.schemas.records import CAPTION_KINDS, Caption, EntailmentHypothesis, InstructionTriple, QAPair, Rejection

ITEMS = ("captions", "qa", "entailment", "instructions")


def evidence_text(ev: dict[str, Any]) -> str:
    """All views of the evidence, each line once."""
    seen: list[str] = []
    for kind in ("long", "speech", "music", "sound", "environment"):
        for line in render(ev, kind).splitlines():
            if line not in seen:
                seen.append(line)
    return "\n".join(seen)


def _kinds(ev: dict[str, Any], settings: SynthesisSettings) -> list[str]:
    return [k for k in CAPTION_KINDS if not (k in CONTENT_KINDS and ev["domain"][CONTENT_KINDS[k]] == "0"
                                             and settings.absent_captions == "rule")]


def joint_schema(kinds: list[str], n_qa: int, plans: list[dict[str, Any]]) -> dict[str, Any]:
    def strings(max_chars: int) -> dict[str, Any]:
        return {"type": "array", "minItems": 3, "maxItems": 3,
                "items": {"type": "string", "minLength": 12, "maxLength": max_chars}}

    qa_item = {"type": "object", "additionalProperties": False, "required": ["question", "answer"],
               "properties": {"question": {"type": "string", "minLength": 15, "maxLength": QA_MAX_CHARS["question"]},
                              "answer": {"type": "string", "minLength": 20, "maxLength": QA_MAX_CHARS["answer"]}}}
    hyp = {"type": "string", "minLength": 25, "maxLength": 180}
    instructions = {}
    for i, plan in enumerate(plans):
        sub = instruction_schema(plan["form"])
        sub["properties"].pop("reasoning")
        sub["properties"].pop("confidence")
        sub["required"] = list(sub["properties"])
        instructions[f"i{i}"] = sub
    props = {
        "reasoning": {"type": "string", "minLength": 40, "maxLength": 2 * REASONING_CHARS},
        "captions": {"type": "object", "additionalProperties": False, "required": kinds,
                     "properties": {k: strings(MAX_CHARS[k]) for k in kinds}},
        "qa": {"type": "array", "minItems": n_qa, "maxItems": n_qa, "items": qa_item},
        "entailment": {"type": "object", "additionalProperties": False,
                       "required": ["entailment", "neutral", "contradiction"],
                       "properties": {"entailment": hyp, "neutral": hyp, "contradiction": hyp}},
        "instructions": {"type": "object", "additionalProperties": False, "required": list(instructions),
                         "properties": instructions},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    }
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())[:400]
    return str(exc)[:400]


def joint_clip(ev: dict[str, Any], llm: LLM, settings: SynthesisSettings, n_qa: int = 5) -> dict[str, Outcome]:
    """Every item type for one clip from one reply: {item type: Outcome}."""
    clip_id, domain = ev["clip_id"], ev["domain"]
    prompt = settings.prompt("joint")
    kinds, qplan, iplan = _kinds(ev, settings), qa_plan(clip_id, n_qa), instruction_plan(ev)
    qa_text = "; ".join(f"{i + 1}. a {p['difficulty']} question about {p['focus']}" for i, p in enumerate(qplan))
    ins_text = "; ".join(f"i{i}: a question ending with ? about {p['focus']}, and its answer, which must obey "
                         f"this rule: {p['constraint']}" for i, p in enumerate(iplan))
    messages = prompt.render(evidence_text=evidence_text(ev), qa_plan=qa_text, instruction_plan=ins_text)
    lineage = dict(clip_id=clip_id, domain=domain, prompt_name=prompt.name, prompt_sha=prompt.sha, model=llm.model)
    out = {item: Outcome([], []) for item in ITEMS}

    def reject(item: str, reason: str, raw: str = "") -> None:
        out[item].rejections.append(Rejection(clip_id=clip_id, table=item, prompt_name=prompt.name,
                                              prompt_sha=prompt.sha, model=llm.model, reason=reason, raw=raw[:4000]))

    def parse(data: Any) -> dict:
        if not isinstance(data, dict) or not all(k in data for k in ("captions", "qa", "entailment", "instructions")):
            raise ValueError("reply lacks captions/qa/entailment/instructions")
        return data

    data, raw, reason = _ask(llm, prompt, messages, joint_schema(kinds, n_qa, iplan), parse, settings, settings.seed)
    if data is None:
        for item in ITEMS:
            reject(item, f"joint reply unusable: {reason}", raw)
        return out
    conf = float(data.get("confidence") or 0.0)
    for kind in CAPTION_KINDS:
        if kind not in kinds:
            out["captions"].rows.extend(_absent_rows(ev, kind))
            continue
        seen: set[str] = set()
        for i, text in enumerate((data["captions"].get(kind) or [])[:3]):
            try:
                cap = CaptionReply.model_validate({"caption": text, "confidence": conf},
                                                  context={"max_chars": MAX_CHARS[kind]}).caption
                if cap.lower().rstrip(".") in seen:
                    raise ValueError("repeats an earlier reference")
            except (ValidationError, ValueError) as exc:
                reject("captions", f"{kind} reference {i}: {_reason(exc)}", str(text))
                continue
            seen.add(cap.lower().rstrip("."))
            out["captions"].rows.append(Caption(**lineage, confidence=conf, item_id=f"{clip_id}:{kind}:{i}",
                                                kind=kind, ref_index=i, text=cap))
    for i, (p, qa) in enumerate(zip(qplan, data["qa"])):
        try:
            item = QAItem.model_validate({**qa, "confidence": conf})
        except (ValidationError, ValueError, TypeError) as exc:
            reject("qa", f"{p['category']} pair: {_reason(exc)}", str(qa))
            continue
        out["qa"].rows.append(QAPair(**lineage, confidence=conf, item_id=f"{clip_id}:qa:{i}", qa_index=i,
                                     category=p["category"], difficulty=p["difficulty"], question=item.question,
                                     answer=item.answer))
    premise = next((c for c in out["captions"].rows if c.kind == "long"), None) or \
        next((c for c in out["captions"].rows if c.kind == "short"), None)
    try:
        if premise is None:
            raise ValueError("no valid long or short caption to serve as the premise")
        ent = check_entailment_set(EntailmentReply.model_validate({**data["entailment"], "reasoning": data["reasoning"],
                                                                   "confidence": conf}), premise.text)
        out["entailment"].rows.extend(
            EntailmentHypothesis(**lineage, confidence=conf, item_id=f"{clip_id}:entailment:{label}",
                                 premise_kind=premise.kind, premise=premise.text, label=label,
                                 hypothesis=getattr(ent, label))
            for label in ("entailment", "neutral", "contradiction"))
    except (ValidationError, ValueError, TypeError) as exc:
        reject("entailment", _reason(exc), str(data.get("entailment")))
    for i, plan in enumerate(iplan):
        entry = data["instructions"].get(f"i{i}") or {}
        try:
            reply = InstructionReply.model_validate({**entry, "reasoning": data["reasoning"], "confidence": conf})
            answer = expected_answer(reply, plan)
        except (ValidationError, ValueError, TypeError) as exc:
            reject("instructions", f"{plan['dimension']} rule {plan['rule']}: {_reason(exc)}", str(entry))
            continue
        out["instructions"].rows.append(InstructionTriple(
            **lineage, confidence=conf, item_id=f"{clip_id}:instruction:{i}", dimension=plan["dimension"],
            instruction=f"{reply.question} {plan['constraint']}", answer=answer, rule=plan["rule"],
            rule_content=plan["rule_content"]))
    return out
