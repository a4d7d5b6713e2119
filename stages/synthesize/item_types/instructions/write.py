"""IFEval-Audio instruction triples (Gao et al.): three per clip, rotating over the six dimensions.

Each has an AudioBench rule code and rule_content chosen by plan (the options are data in
prompts/ifeval.toml); the instruction is the model's question plus the rule written out as a sentence. The
model writes the answer's content; where the rule is pure form (capitalisation, wrapping, symbols, list
markers, JSON keys) code puts the answer in that form, and where it is content (include/exclude a word,
word count) the model must meet it itself. Either way the expected answer must pass
`metrics.ifeval.check_rule`, or the item is repaired once and then rejected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from earmark.metrics.ifeval import check_rule
from earmark.prompts import Prompt
from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.facts import CONTENT
from earmark.schemas.records import InstructionTriple
from earmark.stages.filter.claims import about_audio
from earmark.stages.synthesize.common import Outcome, Spare, Synth, ask, check_sentence, clean, grounded
from earmark.stages.synthesize.replies import InstructionReply, instruction_reply, reply_schema

PROMPTS = ("ifeval",)
DIMENSION_ORDER = ("Content", "Capitalization", "Symbol", "List Structure", "Length", "Format")


def _keyword(ev: ClipEvidence, rule: int, words: dict[str, str]) -> str:
    if rule != 1:
        return words["exclude"]  # rule 2: a word a lazy answer tends to use
    present = [words[k] for k, c in CONTENT.items() if ev.present(c)]
    return present[0] if present else words["none"]


def instruction_plan(ev: ClipEvidence, prompt: Prompt, n: int = 3) -> list[dict[str, Any]]:
    """n (dimension, rule, rule_content, instruction sentence, form, focus) for the clip, rotating with its id."""
    plans, focus = prompt.data["plans"], prompt.data["focus"]
    start = int(ev.clip_id[:8], 16)
    out = []
    for i in range(n):
        dim = DIMENSION_ORDER[(start + i) % len(DIMENSION_ORDER)]
        options = plans[dim]
        opt = options[(start // len(DIMENSION_ORDER) + i) % len(options)]
        content = opt["content"] if "content" in opt else _keyword(ev, opt["rule"], prompt.data["keywords"])
        out.append(
            {
                "dimension": dim,
                "rule": opt["rule"],
                "rule_content": content,
                "form": opt["form"],
                "constraint": opt["sentence"].format(c=content),
                "focus": focus[(start + i) % len(focus)],
            }
        )
    return out


def reply_format(prompt: Prompt, form: str) -> str:
    f = prompt.data["reply_format"]
    return f["prefix"] + f.get(form, f["answer"]) + f["suffix"]


def _strip_symbols(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]|_", " ", text).split())


def expected_answer(reply: InstructionReply, plan: dict[str, Any]) -> str:
    """The expected answer in the rule's form; raises ValueError (→ repair) when it does not pass its rule."""
    form = plan["form"]
    if form == "list":
        items = [clean(i).rstrip(".") for i in (reply.items or []) if clean(i)]
        if len(items) != 3:
            raise ValueError("give exactly three list items")
        answer = "\n".join((f"- {t}" if plan["rule_content"] == "0" else f"{n}. {t}") for n, t in enumerate(items, 1))
    elif form == "json":
        answer = json.dumps({"main_sound": clean(reply.main_sound or ""), "recording": clean(reply.recording or "")})
    else:
        text = check_sentence(reply.answer or "", 2, 60)
        if form == "wrap":  # the model may have wrapped it itself
            while text.startswith("(") and text.rstrip(".").endswith(")"):
                text = text.rstrip(".")[1:-1].strip()
        answer = {"upper": text.upper(), "lower": text.lower(), "wrap": f"({text})", "strip": _strip_symbols(text)}.get(
            form, text
        )
    if not check_rule(answer, plan["rule"], plan["rule_content"]):
        raise ValueError(f"the answer breaks the rule ({plan['constraint']}): {answer[:80]!r}")
    return answer


def answer_text(reply: InstructionReply, plan: dict[str, Any]) -> str:
    """The answer's words, whatever its form (list items and JSON values joined), for the claim audit."""
    if plan["form"] == "list":
        return ". ".join(reply.items or [])
    if plan["form"] == "json":
        return f"{reply.main_sound or ''}. {reply.recording or ''}"
    return reply.answer or ""


def triple(
    ev: ClipEvidence,
    lineage: dict,
    i: int,
    plan: dict[str, Any],
    reply: InstructionReply,
    answer: str,
    confidence: float,
) -> InstructionTriple:
    return InstructionTriple(
        **lineage,
        confidence=confidence,
        item_id=f"{ev.clip_id}:instruction:{i}",
        dimension=plan["dimension"],
        instruction=f"{reply.question} {plan['constraint']}",
        answer=answer,
        rule=plan["rule"],
        rule_content=plan["rule_content"],
    )


def instructions_clip(ev: ClipEvidence, s: Synth, n: int = 3, fallback: Callable[[], Outcome] | None = None) -> Outcome:
    """The model's triples; with `fallback` (the clip's rule-written triples, same plan), an instruction the
    model could not answer truthfully gets the rule's triple of that plan instead (`writer = "rule_fallback"`)."""
    prompt = s.prompt("ifeval")
    out = Outcome()
    spare = Spare(fallback, "item_id")
    for i, plan in enumerate(instruction_plan(ev, prompt, n)):
        messages = prompt.render(
            evidence_text=s.notes(ev, "long"),
            focus=plan["focus"],
            constraint=plan["constraint"],
            reply_format=reply_format(prompt, plan["form"]),
        )

        def parse(d: Any, p: dict = plan) -> tuple[InstructionReply, str]:
            r = InstructionReply.model_validate(d)
            answer = expected_answer(r, p)
            if not about_audio(r.question):
                raise ValueError("ask about what is heard in the clip")
            grounded(s, ev, r.question, need_support=False)
            grounded(s, ev, answer_text(r, p))  # the expected answer is about the audio, and true
            return r, answer

        got, raw, reason = ask(
            s, prompt, messages, reply_schema(instruction_reply(plan["form"])), parse, s.seed_for(ev, i)
        )
        if got is None:
            out.rejections.append(
                s.rejection(ev, "instructions", prompt, f"{plan['dimension']} rule {plan['rule']}: {reason}", raw)
            )
            row = spare.take(f"{ev.clip_id}:instruction:{i}")
            if row is not None:
                out.rows.append(row)
            continue
        reply, answer = got
        out.rows.append(triple(ev, s.lineage(ev, prompt), i, plan, reply, answer, reply.confidence))
    return out
