"""synthesize, continued: Audio-Entailment hypotheses and IFEval-Audio instruction triples (focused strategy).

Entailment (Deshmukh et al.): the premise is the clip's first long caption; one call writes a short
reasoning and then one entailment, one neutral and one contradiction hypothesis. Validation enforces the
paper's generation rules that a machine can check: whole sentences, three different hypotheses, none a
copy of the premise, and a contradiction without negation words (the paper's "easy contradiction"
shortcut; the prompt asks all three to avoid them).

IFEval-Audio (Gao et al.): three instructions per clip, rotating over the six dimensions. Each has an
AudioBench rule code and rule_content chosen by plan; the instruction is the model's question plus the
rule written out as a sentence. The model writes the answer's content; where the rule is pure form
(capitalisation, wrapping, symbols, list markers, JSON keys) the answer is put in that form by code, and
where it is content (include/exclude a word, word count) the model must satisfy it itself. Either way the
expected answer must pass `metrics.ifeval.check_rule`, or the item is repaired once and then rejected.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, field_validator

from earmark.stages.evidence import render
from earmark.stages.synthesis.focused import (
    LLM,
    Confidence,
    Outcome,
    SynthesisSettings,
    _ask,
    _check_sentence,
    _clean,
    check_question,
)
from earmark.metrics.ifeval import check_rule
from earmark.schemas.records import Caption, EntailmentHypothesis, InstructionTriple, Rejection

REASONING_CHARS = 320
_NEGATION = re.compile(r"\b(not|no|never|without|nothing|none|nobody|neither|nor|cannot)\b|n't\b", re.I)
_WORDS = re.compile(r"[a-z0-9']+")


def _norm(text: str) -> str:
    return " ".join(_WORDS.findall(text.lower()))


# ------------------------------------------------------------------------------------------ entailment
def _hypothesis(v: str) -> str:
    return _check_sentence(v, 5, 30, 180)


class EntailmentReply(BaseModel):
    reasoning: str
    entailment: str
    neutral: str
    contradiction: str
    confidence: Confidence

    @field_validator("entailment", "neutral", "contradiction")
    @classmethod
    def one_sentence(cls, v: str) -> str:
        return _hypothesis(v)

    @field_validator("contradiction")
    @classmethod
    def no_negation_shortcut(cls, v: str) -> str:
        # the paper's "easy contradiction": negating the premise instead of stating something incompatible
        if m := _NEGATION.search(v):
            raise ValueError(f"the contradiction uses a negation word ({m.group(0)!r}); state something "
                             "incompatible with the audio instead")
        return v


def entailment_schema() -> dict[str, Any]:
    hyp = {"type": "string", "minLength": 25, "maxLength": 180}
    return {
        "type": "object",
        "properties": {"reasoning": {"type": "string", "minLength": 20, "maxLength": REASONING_CHARS},
                       "entailment": hyp, "neutral": hyp, "contradiction": hyp,
                       "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
        "required": ["reasoning", "entailment", "neutral", "contradiction", "confidence"],
        "additionalProperties": False,
    }


def check_entailment_set(reply: EntailmentReply, premise: str) -> EntailmentReply:
    """Three different hypotheses, none a copy of the premise."""
    hyps = {"entailment": reply.entailment, "neutral": reply.neutral, "contradiction": reply.contradiction}
    seen: dict[str, str] = {}
    for label, text in hyps.items():
        n = _norm(text)
        if n == _norm(premise) or (len(n) > 20 and n in _norm(premise)):
            raise ValueError(f"the {label} hypothesis copies the premise; write a new sentence")
        if n in seen:
            raise ValueError(f"the {label} and {seen[n]} hypotheses are the same; make them different")
        seen[n] = label
    return reply


def premise_for(clip_id: str, captions: list[Caption]) -> Caption | None:
    """The clip's first long caption (the Audio Entailment premise), else its first short one."""
    for kind in ("long", "short"):
        got = sorted((c for c in captions if c.clip_id == clip_id and c.kind == kind), key=lambda c: c.ref_index)
        if got:
            return got[0]
    return None


def entailment_clip(ev: dict[str, Any], captions: list[Caption], llm: LLM, settings: SynthesisSettings) -> Outcome:
    clip_id, domain = ev["clip_id"], ev["domain"]
    prompt = settings.prompt("entailment")
    premise = premise_for(clip_id, captions)
    if premise is None:
        return Outcome([], [Rejection(clip_id=clip_id, table="entailment", prompt_name=prompt.name,
                                      prompt_sha=prompt.sha, model=llm.model, raw="",
                                      reason="no long or short caption to use as the premise (see captions rejections)")])
    messages = prompt.render(premise=premise.text, evidence_text=render(ev, "environment"))
    reply, raw, reason = _ask(llm, prompt, messages, entailment_schema(),
                              lambda d: check_entailment_set(EntailmentReply.model_validate(d), premise.text),
                              settings, seed=settings.seed)
    if reply is None:
        return Outcome([], [Rejection(clip_id=clip_id, table="entailment", prompt_name=prompt.name,
                                      prompt_sha=prompt.sha, model=llm.model, reason=reason, raw=raw[:4000])])
    rows = [EntailmentHypothesis(clip_id=clip_id, domain=domain, prompt_name=prompt.name, prompt_sha=prompt.sha,
                                 model=llm.model, confidence=reply.confidence, item_id=f"{clip_id}:entailment:{label}",
                                 premise_kind=premise.kind, premise=premise.text, label=label,
                                 hypothesis=getattr(reply, label))
            for label in ("entailment", "neutral", "contradiction")]
    return Outcome(rows, [])


# ------------------------------------------------------------------------------------------ instructions
_QUESTION_FOCUS = (
    "the main sounds in the clip", "the sound sources and what they do", "the recording conditions",
    "the setting the audio suggests",
)
# dimension → list of (rule, rule_content or None = chosen per clip, instruction sentence, how the answer gets its form)
_PLANS: dict[str, list[tuple[int, str | None, str, str]]] = {
    "Content": [(1, None, 'Your answer must include the word "{c}".', "model"),
                (2, None, 'Do not use the word "{c}" in your answer.', "model")],
    "Capitalization": [(3, "", "Answer in capital letters only.", "upper"),
                       (4, "", "Answer in lowercase letters only.", "lower")],
    "Symbol": [(9, "()", "Wrap your entire answer in parentheses.", "wrap"),
               (10, "", "Do not use any punctuation or symbols in your answer.", "strip")],
    "List Structure": [(11, "0", "Answer with a list of three items, one per line, each line starting with '- '.", "list"),
                       (11, "1", "Answer with a numbered list of three items, one per line: 1. 2. 3.", "list")],
    "Length": [(12, "8-16", "Answer in 8 to 16 words.", "model"), (12, "20-35", "Answer in 20 to 35 words.", "model")],
    "Format": [(13, '{"sound_source": "", "setting": ""}',
                'Answer in JSON with exactly the keys "sound_source" and "setting".', "json")],
}
DIMENSION_ORDER = tuple(_PLANS)


def _keyword(ev: dict[str, Any], rule: int) -> str:
    c = ev["content"]
    present = [w for w, k in (("voice", "speech"), ("music", "music"), ("sound", "sound_events")) if c[k]["present"]]
    if rule == 1:
        return present[0] if present else "quiet"
    return "loud"  # rule 2: a word a lazy answer tends to use


def instruction_plan(ev: dict[str, Any], n: int = 3) -> list[dict[str, Any]]:
    """n (dimension, rule, rule_content, instruction sentence, form) for the clip, rotating with its id."""
    start = int(ev["clip_id"][:8], 16)
    out = []
    for i in range(n):
        dim = DIMENSION_ORDER[(start + i) % len(DIMENSION_ORDER)]
        options = _PLANS[dim]
        rule, content, sentence, form = options[(start // len(DIMENSION_ORDER) + i) % len(options)]
        if content is None:
            content = _keyword(ev, rule)
        out.append({"dimension": dim, "rule": rule, "rule_content": content, "form": form,
                    "constraint": sentence.format(c=content), "focus": _QUESTION_FOCUS[(start + i) % len(_QUESTION_FOCUS)]})
    return out


def instruction_schema(form: str) -> dict[str, Any]:
    props: dict[str, Any] = {"reasoning": {"type": "string", "minLength": 20, "maxLength": REASONING_CHARS},
                             "question": {"type": "string", "minLength": 15, "maxLength": 140}}
    if form == "list":
        props["items"] = {"type": "array", "minItems": 3, "maxItems": 3,
                          "items": {"type": "string", "minLength": 3, "maxLength": 60}}
    elif form == "json":
        props["sound_source"] = {"type": "string", "minLength": 3, "maxLength": 80}
        props["setting"] = {"type": "string", "minLength": 3, "maxLength": 80}
    else:
        props["answer"] = {"type": "string", "minLength": 10, "maxLength": 260}
    props["confidence"] = {"type": "number", "minimum": 0, "maximum": 1}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def reply_format(form: str) -> str:
    body = {"list": '"items": [<item>, <item>, <item>]',
            "json": '"sound_source": <what makes the sound>, "setting": <where it is>'}.get(form, '"answer": <answer>')
    return '{"reasoning": <1-2 short sentences>, "question": <question ending with ?>, ' + body + ', "confidence": <0.0-1.0>}'


class InstructionReply(BaseModel):
    reasoning: str
    question: str
    answer: str | None = None
    items: list[str] | None = None
    sound_source: str | None = None
    setting: str | None = None
    confidence: Confidence

    @field_validator("question")
    @classmethod
    def is_question(cls, v: str) -> str:
        return check_question(v, 140)


def _strip_symbols(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]|_", " ", text).split())


def expected_answer(reply: InstructionReply, plan: dict[str, Any]) -> str:
    """The expected answer in the rule's form; raises ValueError (→ repair) when it does not pass its rule."""
    form = plan["form"]
    if form == "list":
        items = [_clean(i).rstrip(".") for i in (reply.items or []) if _clean(i)]
        if len(items) != 3:
            raise ValueError("give exactly three list items")
        answer = "\n".join((f"- {t}" if plan["rule_content"] == "0" else f"{n}. {t}") for n, t in enumerate(items, 1))
    elif form == "json":
        answer = json.dumps({"sound_source": _clean(reply.sound_source or ""), "setting": _clean(reply.setting or "")})
    else:
        text = _check_sentence(reply.answer or "", 2, 60)
        if form == "wrap":  # the model may have wrapped it itself
            while text.startswith("(") and text.rstrip(".").endswith(")"):
                text = text.rstrip(".")[1:-1].strip()
        answer = {"upper": text.upper(), "lower": text.lower(), "wrap": f"({text})",
                  "strip": _strip_symbols(text)}.get(form, text)
    if not check_rule(answer, plan["rule"], plan["rule_content"]):
        raise ValueError(f"the answer breaks the rule ({plan['constraint']}): {answer[:80]!r}")
    return answer


def instructions_clip(ev: dict[str, Any], llm: LLM, settings: SynthesisSettings, n: int = 3) -> Outcome:
    clip_id, domain = ev["clip_id"], ev["domain"]
    prompt = settings.prompt("ifeval")
    rows: list[InstructionTriple] = []
    rejections: list[Rejection] = []
    for i, plan in enumerate(instruction_plan(ev, n)):
        messages = prompt.render(evidence_text=render(ev, "long"), focus=plan["focus"], constraint=plan["constraint"],
                                 reply_format=reply_format(plan["form"]))
        got, raw, reason = _ask(llm, prompt, messages, instruction_schema(plan["form"]),
                                lambda d, p=plan: (r := InstructionReply.model_validate(d), expected_answer(r, p)),
                                settings, seed=settings.seed + i)
        if got is None:
            rejections.append(Rejection(clip_id=clip_id, table="instructions", prompt_name=prompt.name,
                                        prompt_sha=prompt.sha, model=llm.model,
                                        reason=f"{plan['dimension']} rule {plan['rule']}: {reason}", raw=raw[:4000]))
            continue
        reply, answer = got
        rows.append(InstructionTriple(
            clip_id=clip_id, domain=domain, prompt_name=prompt.name, prompt_sha=prompt.sha, model=llm.model,
            confidence=reply.confidence, item_id=f"{clip_id}:instruction:{i}", dimension=plan["dimension"],
            instruction=f"{reply.question} {plan['constraint']}", answer=answer, rule=plan["rule"],
            rule_content=plan["rule_content"]))
    return Outcome(rows, rejections)
