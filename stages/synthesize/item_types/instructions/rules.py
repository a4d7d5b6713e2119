"""Instruction triples written by rule from the clip's confident facts (`synthesize.instruction_triples = "rule"`,
the default).

The triples keep the IFEval-Audio plan of `instruction_plan`; their answer is one of the clip's rule-written
captions (or three of them, or two in JSON), put into the rule's form by the same code as the model's answers and
checked by the rule and the audit; the questions are prompts/qa_rules.toml's `[instructions]`.
"""

from __future__ import annotations

from typing import Any

from earmark.schemas.evidence import ClipEvidence
from earmark.stages.synthesize.common import Outcome, Synth
from earmark.stages.synthesize.item_types.captions.rules import combined_captions, rule_captions
from earmark.stages.synthesize.item_types.instructions.write import expected_answer, instruction_plan, triple
from earmark.stages.synthesize.item_types.qa.rules import _fair, _rng, qa_facts
from earmark.stages.synthesize.registry import ITEM_TYPES
from earmark.stages.synthesize.replies import InstructionReply

LIST_ITEM_CHARS, SLOT_CHARS = 60, 80  # the reply schema's limits (replies._ListItem, replies._Slot)


def _text_answers(ev: ClipEvidence, s: Synth, facts: dict[str, Any], variant: int) -> list[str]:
    """Candidate sentence answers, shortest kinds first: the short captions, the long ones, a short caption
    followed by the environment caption and a long one by the clip's absence sentences (for a word-count rule),
    the content captions together, and each content caption."""
    if facts["silent"]:
        silence = s.phrases("absent")["silence"]
        shorts, longs = list(silence["short"]), list(silence["long"])
    else:
        shorts = [c.text for c in combined_captions(ev, "short", s)]
        longs = [c.text for c in combined_captions(ev, "long", s)]
    rotate = lambda xs: xs[variant % len(xs) :] + xs[: variant % len(xs)] if xs else []  # noqa: E731
    absences = " ".join(facts[f"no_{k}"] for k in ("speech", "music", "sound") if facts[f"no_{k}"])
    env = facts["environment"]
    extended = [f"{t} {env}" for t in rotate(shorts)] if env and not facts["silent"] else []
    extended += [f"{t} {absences}" for t in rotate(longs or shorts)] if absences else []
    parts = [facts[k] for k in ("speech", "music", "sound", "environment") if facts[k]]
    # every content's caption in one answer, without the recording's words: what a question for everything heard
    # needs where the short captions name the main content only and a rule forbids a word of the long ones
    contents = [facts[k] for k in ("speech", "music", "sound") if facts[k]]
    together = [" ".join(contents)] if len(contents) > 1 else []
    return [*rotate(shorts), *rotate(longs), *extended, *together, *parts]


def _list_items(facts: dict[str, Any]) -> list[str]:
    keys = ("speech", "music", "sound", "environment", "no_speech", "no_music", "no_sound")
    items = [facts[k].rstrip(".") for k in keys if facts[k]]
    if facts["silent"]:
        items.insert(0, facts["silent"].rstrip("."))
    return [t for t in items if 3 <= len(t) <= LIST_ITEM_CHARS]


def rule_instructions(ev: ClipEvidence, s: Synth, n: int = 3) -> Outcome:
    """The clip's instruction triples by rule: the plan's rule and form, a question of prompts/qa_rules.toml,
    an answer from the clip's rule-written captions that passes its rule and the audit."""
    questions = s.phrases("qa_rules")["instructions"]
    rule = s.prompt_like("qa_rules")
    rng = _rng(ev, s, 29)
    variant = rng.randrange(3)
    facts = qa_facts(ev, s, variant)
    lineage = {**s.lineage(ev, rule), "model": "rule", "writer": "rule"}
    out = Outcome()
    for i, plan in enumerate(instruction_plan(ev, s.prompt("ifeval"), n)):
        form = plan["form"] if plan["form"] in ("list", "json") else "text"
        fair = [q for q in questions[form] if _fair(s, ev, q)]
        question = rng.choice(fair) if fair else questions[form][0]
        # the drawn question first, then the form's others: an answer that names only the main content answers
        # "What is mainly heard…?", not "What is heard…?" (filter.claims.left_out)
        ordered = [question, *(q for q in fair if q != question)]
        if form == "list":
            items = _list_items(facts)
            replies = [{"items": items[:3]}] if len(items) >= 3 else []
        elif form == "json":
            main = facts["short"]
            # the recording slot: how it was recorded (main_sound says what), the shortest wording
            recordings = sorted((c.text for c in rule_captions(ev, "environment", s, subject=None)), key=len)
            recording = recordings[0] if recordings else None
            ok = main and recording and len(main) <= SLOT_CHARS and len(recording) <= SLOT_CHARS
            replies = [{"main_sound": main.rstrip("."), "recording": recording.rstrip(".")}] if ok else []
        else:
            replies = [{"answer": t} for t in _text_answers(ev, s, facts, variant)]
        row = None
        for question, content in ((q, c) for q in ordered for c in replies):
            try:
                reply = InstructionReply(reasoning="rule", question=question, confidence=1.0, **content)
                made = triple(ev, lineage, i, plan, reply, expected_answer(reply, plan), 1.0)
            except ValueError:
                continue
            if ITEM_TYPES["instructions"].audit(made, ev, s.min_confidence)[0]:  # QC's own audit of the item
                row = made
                break
        if row is None:
            why = f"{plan['dimension']} rule {plan['rule']} by rule: no answer from the clip's captions meets it"
            out.rejections.append(s.rejection(ev, "instructions", rule, why))
            continue
        out.rows.append(row)
    return out
