"""MECAT open QA: 5 pairs per clip over the 6 categories, with difficulty; one focused call per pair.

Which category is left out rotates with the clip id; each category's focus words are in prompts/qa.toml
and each sees its own evidence view (`QA_EVIDENCE`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.records import QA_CATEGORIES, QAPair
from earmark.stages.synthesize.common import Outcome, Spare, Synth, ask, grounded
from earmark.stages.synthesize.replies import QAItem, reply_schema

PROMPTS = ("qa",)
DIFFICULTY = ("basic", "intermediate", "intermediate", "advanced", "complex")
INFERENCE = ("inference_judgement", "application_context")  # answers that are inference by design
# Which evidence view each QA category sees (see earmark.stages.facts.render).
QA_EVIDENCE = {
    "direct_perception": "short",
    "sound_characteristics": "long",
    "quality_assessment": "environment",
    "environment_reasoning": "long",
    "inference_judgement": "long",
    "application_context": "short",
}


def qa_plan(clip_id: str, n: int = 5) -> list[dict[str, str]]:
    """(category, difficulty) of the clip's n pairs: all categories but one, rotating with the clip id."""
    skip = int(clip_id[:8], 16) % len(QA_CATEGORIES) if len(QA_CATEGORIES) > n else -1
    cats = [c for i, c in enumerate(QA_CATEGORIES) if i != skip][:n]
    return [{"category": c, "difficulty": DIFFICULTY[i]} for i, c in enumerate(cats)]


def qa_clip(ev: ClipEvidence, s: Synth, n: int = 5, fallback: Callable[[], Outcome] | None = None) -> Outcome:
    """The model's pairs; with `fallback` (the clip's rule-written pairs), a category whose pair the model could
    not write truthfully gets the rule's pair of that category instead (`writer = "rule_fallback"`)."""
    prompt = s.prompt("qa")
    out = Outcome()
    asked: set[str] = set()
    spare = Spare(fallback, "qa_index")

    def parse(data: Any, category: str = "") -> QAItem:
        item = QAItem.model_validate(data)
        if item.question.lower() in asked:
            raise ValueError("this question repeats an earlier one; ask a different one")
        grounded(s, ev, item.question, need_support=False)  # a question may presuppose, never contradict
        grounded(s, ev, item.answer, inference=category in INFERENCE, need_support=category not in INFERENCE)
        return item

    for i, p in enumerate(qa_plan(ev.clip_id, n)):
        messages = prompt.render(
            evidence_text=s.notes(ev, QA_EVIDENCE[p["category"]]),
            focus=prompt.data["focus"][p["category"]],
            difficulty=p["difficulty"],
        )
        item, raw, reason = ask(
            s, prompt, messages, reply_schema(QAItem), lambda d, c=p["category"]: parse(d, c), seed=s.seed_for(ev, i)
        )
        if item is None:
            out.rejections.append(s.rejection(ev, "qa", prompt, f"{p['category']} pair: {reason}", raw))
            row = spare.take(i)
            if row is not None and row.question.lower() not in asked:
                asked.add(row.question.lower())
                out.rows.append(row)
            continue
        asked.add(item.question.lower())
        out.rows.append(qa_row(ev, s.lineage(ev, prompt), i, p, item.question, item.answer, item.confidence))
    return out


def qa_row(
    ev: ClipEvidence, lineage: dict, i: int, plan: dict[str, str], question: str, answer: str, confidence: float
) -> QAPair:
    return QAPair(
        **lineage,
        confidence=confidence,
        item_id=f"{ev.clip_id}:qa:{i}",
        qa_index=i,
        category=plan["category"],
        difficulty=plan["difficulty"],
        question=question,
        answer=answer,
    )
