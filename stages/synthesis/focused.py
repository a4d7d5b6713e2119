"""synthesize: evidence → MECAT captions (6 kinds × 3 references) and open QA pairs, through an LLM
(entailment hypotheses and instruction triples: earmark/synthesize_items.py; the joint strategy:
earmark/synthesize_joint.py).

Strategy "focused" (the one small local models can do): one small prompt per caption kind and one for QA,
each carrying only its own evidence. Every reply is JSON-schema constrained, validated with pydantic, given
one repair attempt with the validation error, and otherwise kept as a `Rejection` with its reason.
Content captions whose content the domain decision says is absent are stated as absent by rule
(`absent_captions = "rule"`), which is what MECAT's references say and costs no tokens.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator

from earmark.stages.evidence import render
from earmark.prompts import Prompt, load_prompt
from earmark.schemas.records import QA_CATEGORIES, Caption, QAPair, Rejection

STAGE_VERSION = "3"  # bump when validation or assembly of items changes
CONTENT_KINDS = {"speech": 0, "music": 1, "sound": 2}  # index into the domain code

ABSENT_TEXT = {
    "speech": ("No speech is present in this audio.", "There is no one speaking in the recording.", "The clip contains no spoken words."),
    "music": ("No music is present in this audio.", "There is no music playing in the recording.", "The clip contains no musical content."),
    "sound": ("No distinct sound events are present.", "There are no other notable sounds in the recording.", "The clip contains no separate sound events."),
}
ABSENT_SHA = hashlib.sha256(json.dumps(ABSENT_TEXT, sort_keys=True).encode()).hexdigest()[:16]
QA_MAX_CHARS = {"question": 120, "answer": 180}
MAX_CHARS = {"short": 120, "long": 300, "speech": 180, "music": 180, "sound": 180, "environment": 180}
_PLACEHOLDERS = ("...", "…", "<", ">", "{", "}", "caption 1", "caption1", "[", "]")

# QA plan: 5 pairs over the 6 MECAT categories; which category is left out rotates with the clip.
_FOCUS = {
    "direct_perception": "what can be heard (direct perception)",
    "sound_characteristics": "how the sounds sound: pitch, timbre, rhythm (sound characteristics)",
    "quality_assessment": "the recording quality (quality assessment)",
    "environment_reasoning": "where it was likely recorded (environment reasoning)",
    "inference_judgement": "what is likely happening and why (inference and judgement)",
    "application_context": "where such audio would be used (application context)",
}
_DIFFICULTY = ("basic", "intermediate", "intermediate", "advanced", "complex")


class LLM(Protocol):
    model: str

    def complete_json(self, messages: list[dict[str, str]], schema: dict[str, Any], *, max_tokens: int,
                      temperature: float = ..., seed: int = ...) -> Any: ...


# ------------------------------------------------------------------------------------ reply schemas
def _clean(text: str) -> str:
    return " ".join(text.split())


_NON_LATIN = re.compile(r"[^\x00-\x7f\u00a0-\u024f\u2013-\u2026]")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def _check_sentence(text: str, min_words: int, max_words: int, max_chars: int | None = None) -> str:
    """Whole sentences only. A reply the grammar's maxLength cut off is trimmed to its last full sentence
    (or refused when it has none); a short reply that merely lacks its full stop gets one."""
    text = _clean(text)
    if drift := _NON_LATIN.search(text):  # small models drift into another script mid-reply: keep what came before
        if not _SENTENCE_END.search(text[: drift.start()]):
            raise ValueError(f"non-English characters in text: {text[:80]!r}")
        text = text[: drift.start()]
    if text and text[-1] not in ".!?":
        ends = [m.end() for m in _SENTENCE_END.finditer(text)]
        if ends:
            text = text[: ends[-1]]
        elif max_chars is not None and len(text) >= 0.9 * max_chars:
            raise ValueError(f"text stops mid-sentence: {text[:80]!r}")
        else:
            text = text.rstrip(",;:- ") + "."
    n = len(text.split())
    if n < min_words or n > max_words:
        raise ValueError(f"{n} words, expected {min_words}-{max_words}: {text[:80]!r}")
    low = text.lower()
    if any(p in low for p in _PLACEHOLDERS):
        raise ValueError(f"placeholder or markup left in text: {text[:80]!r}")
    return text


Confidence = Annotated[float, Field(ge=0.0, le=1.0)]


class CaptionReply(BaseModel):
    caption: str
    confidence: Confidence

    @field_validator("caption")
    @classmethod
    def sentence(cls, v: str, info: ValidationInfo) -> str:
        return _check_sentence(v, 3, 60, (info.context or {}).get("max_chars"))


def check_question(v: str, max_chars: int) -> str:
    """One question, ending at its first '?' (small models append chatter after it)."""
    v = _clean(v)
    if "?" not in v:
        raise ValueError(f"question must end with '?': {v[:80]!r}")
    return _check_sentence(v[: v.index("?") + 1], 3, 30, max_chars)


class QAItem(BaseModel):
    question: str
    answer: str
    confidence: Confidence

    @field_validator("question")
    @classmethod
    def is_question(cls, v: str) -> str:
        return check_question(v, QA_MAX_CHARS["question"])

    @field_validator("answer")
    @classmethod
    def is_answer(cls, v: str) -> str:
        return _check_sentence(v, 3, 40, QA_MAX_CHARS["answer"])


def caption_schema(max_chars: int = 200) -> dict[str, Any]:
    # maxLength becomes part of llama.cpp's grammar: a rambling caption is cut by the sampler, not by
    # max_tokens in the middle of the JSON.
    return {
        "type": "object",
        "properties": {"caption": {"type": "string", "minLength": 12, "maxLength": max_chars},
                       "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
        "required": ["caption", "confidence"],
        "additionalProperties": False,
    }


def qa_schema() -> dict[str, Any]:
    return {
        "type": "object",
        # minLength is enforced by the grammar: it keeps small models from answering "Good."
        "properties": {"question": {"type": "string", "minLength": 15, "maxLength": QA_MAX_CHARS["question"]},
                       "answer": {"type": "string", "minLength": 20, "maxLength": QA_MAX_CHARS["answer"]},
                       "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
        "required": ["question", "answer", "confidence"],
        "additionalProperties": False,
    }


def qa_plan(clip_id: str, n: int = 5) -> list[dict[str, str]]:
    skip = int(clip_id[:8], 16) % len(QA_CATEGORIES) if len(QA_CATEGORIES) > n else -1
    cats = [c for i, c in enumerate(QA_CATEGORIES) if i != skip][:n]
    return [{"category": c, "difficulty": _DIFFICULTY[i], "focus": _FOCUS[c]} for i, c in enumerate(cats)]


# ------------------------------------------------------------------------------------- generation
@dataclass(frozen=True)
class SynthesisSettings:
    model: str
    temperature_override: float | None = None
    seed: int = 0
    repair_attempts: int = 1
    absent_captions: str = "rule"
    max_concurrency: int = 1
    prompt_dir: Path | None = None  # None: the prompts/ package; its files' sha enter the keys either way

    def prompt(self, name: str) -> Prompt:
        return load_prompt(name, self.prompt_dir)

    def key_config(self) -> dict[str, Any]:
        return {"t": self.temperature_override, "seed": self.seed, "repair": self.repair_attempts,
                "absent": self.absent_captions}


@dataclass
class Outcome:
    rows: list[Any]
    rejections: list[Rejection]


def _ask(llm: LLM, prompt: Prompt, messages: list[dict[str, str]], schema: dict[str, Any],
         parse: Callable[[Any], Any], settings: SynthesisSettings, seed: int) -> tuple[Any | None, str, str]:
    """Call, validate, repair. Returns (parsed or None, raw text, reason if rejected)."""
    temperature = settings.temperature_override if settings.temperature_override is not None else prompt.temperature
    history = list(messages)
    raw, reason = "", ""
    for attempt in range(settings.repair_attempts + 1):
        result = llm.complete_json(history, schema, max_tokens=prompt.max_tokens, temperature=temperature,
                                   seed=seed + 1000 * attempt)
        raw = result.text or ""
        if result.data is None:
            reason = result.error or "reply is not valid JSON"
        else:
            try:
                return parse(result.data), raw, ""
            except ValidationError as exc:
                reason = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())[:500]
            except ValueError as exc:
                reason = str(exc)[:500]
        history = list(messages) + [
            {"role": "assistant", "content": raw[:2000]},
            {"role": "user", "content": f"That answer was invalid ({reason}). "
             + ("Write a shorter one that ends with a full stop. " if "mid-sentence" in reason else "")
             + "Reply again with corrected JSON only."},
        ]
    return None, raw, reason


def _absent_rows(ev: dict[str, Any], kind: str) -> list[Caption]:
    prob = ev["content"]["sound_events" if kind == "sound" else kind]["prob"] or 0.0
    return [Caption(clip_id=ev["clip_id"], domain=ev["domain"], prompt_name="absent_rule", prompt_sha=ABSENT_SHA,
                    model="rule", confidence=round(1.0 - prob, 3), item_id=f"{ev['clip_id']}:{kind}:{i}",
                    kind=kind, ref_index=i, text=text)
            for i, text in enumerate(ABSENT_TEXT[kind])]


def caption_clip(ev: dict[str, Any], llm: LLM, settings: SynthesisSettings) -> Outcome:
    """3 references per caption kind, each an independent sample of the kind's focused prompt (small models
    asked for 3 paraphrases at once mostly repeat themselves); a reference equal to an earlier one is
    sent back for repair."""
    clip_id, domain = ev["clip_id"], ev["domain"]
    rows: list[Caption] = []
    rejections: list[Rejection] = []
    for kind in ("short", "long", "speech", "music", "sound", "environment"):
        if kind in CONTENT_KINDS and domain[CONTENT_KINDS[kind]] == "0" and settings.absent_captions == "rule":
            rows += _absent_rows(ev, kind)
            continue
        prompt = settings.prompt(f"caption_{kind}")
        messages = prompt.render(evidence_text=render(ev, kind))
        seen: set[str] = set()

        def parse(data: Any) -> CaptionReply:
            reply = CaptionReply.model_validate(data, context={"max_chars": MAX_CHARS[kind]})
            if reply.caption.lower().rstrip(".") in seen:
                raise ValueError("this caption repeats an earlier one; write a different one")
            return reply

        for i in range(3):
            reply, raw, reason = _ask(llm, prompt, messages, caption_schema(MAX_CHARS[kind]), parse, settings,
                                      seed=settings.seed + i)
            if reply is None:
                rejections.append(Rejection(clip_id=clip_id, table="captions", prompt_name=prompt.name,
                                            prompt_sha=prompt.sha, model=llm.model,
                                            reason=f"{kind} reference {i}: {reason}", raw=raw[:4000]))
                continue
            seen.add(reply.caption.lower().rstrip("."))
            rows.append(Caption(
                clip_id=clip_id, domain=domain, prompt_name=prompt.name, prompt_sha=prompt.sha, model=llm.model,
                confidence=reply.confidence, item_id=f"{clip_id}:{kind}:{i}", kind=kind, ref_index=i,
                text=reply.caption,
            ))
    return Outcome(rows, rejections)


# Which evidence each QA category sees (focused prompts): see earmark.stages.evidence.render.
QA_EVIDENCE = {
    "direct_perception": "short",
    "sound_characteristics": "long",
    "quality_assessment": "environment",
    "environment_reasoning": "long",
    "inference_judgement": "long",
    "application_context": "short",
}


def qa_clip(ev: dict[str, Any], llm: LLM, settings: SynthesisSettings, n: int = 5) -> Outcome:
    """n QA pairs over the MECAT categories, one focused call per pair."""
    clip_id, domain = ev["clip_id"], ev["domain"]
    prompt = settings.prompt("qa")
    rows: list[QAPair] = []
    rejections: list[Rejection] = []
    asked: set[str] = set()

    def parse(data: Any) -> QAItem:
        item = QAItem.model_validate(data)
        if item.question.lower() in asked:
            raise ValueError("this question repeats an earlier one; ask a different one")
        return item

    for i, p in enumerate(qa_plan(clip_id, n)):
        messages = prompt.render(evidence_text=render(ev, QA_EVIDENCE[p["category"]]), focus=p["focus"],
                                 difficulty=p["difficulty"])
        item, raw, reason = _ask(llm, prompt, messages, qa_schema(), parse, settings, seed=settings.seed + i)
        if item is None:
            rejections.append(Rejection(clip_id=clip_id, table="qa", prompt_name=prompt.name, prompt_sha=prompt.sha,
                                        model=llm.model, reason=f"{p['category']} pair: {reason}", raw=raw[:4000]))
            continue
        asked.add(item.question.lower())
        rows.append(QAPair(
            clip_id=clip_id, domain=domain, prompt_name=prompt.name, prompt_sha=prompt.sha, model=llm.model,
            confidence=item.confidence, item_id=f"{clip_id}:qa:{i}", qa_index=i, category=p["category"],
            difficulty=p["difficulty"], question=item.question, answer=item.answer,
        ))
    return Outcome(rows, rejections)


def prompts_sha(names: Sequence[str], prompt_dir: Path | None = None) -> str:
    """One sha over several prompts (and the absent-caption rule) for a shard key."""
    parts = [load_prompt(n, prompt_dir).sha for n in names] + [ABSENT_SHA]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


CAPTION_PROMPTS = tuple(f"caption_{k}" for k in ("short", "long", "speech", "music", "sound", "environment"))


ITEM_PROMPTS: dict[str, tuple[str, ...]] = {
    "captions": CAPTION_PROMPTS, "qa": ("qa",), "entailment": ("entailment",), "instructions": ("ifeval",),
    "joint": ("joint",),
}


def synthesize_shard(evidence: Sequence[dict[str, Any]], item: str, llm: LLM, settings: SynthesisSettings,
                     captions: Sequence[Caption] = ()) -> Outcome:
    """All clips of a shard for one item type of the focused strategy, with bounded concurrency.

    'captions', 'qa', 'entailment' (premises from `captions`, the shard's caption rows) or 'instructions'."""
    from earmark.stages.synthesis.items import entailment_clip, instructions_clip

    fns: dict[str, Callable[[dict[str, Any]], Outcome]] = {
        "captions": lambda ev: caption_clip(ev, llm, settings),
        "qa": lambda ev: qa_clip(ev, llm, settings),
        "entailment": lambda ev: entailment_clip(ev, list(captions), llm, settings),
        "instructions": lambda ev: instructions_clip(ev, llm, settings),
    }
    if item not in fns:
        raise ValueError(f"unknown item type {item!r}; use one of {', '.join(fns)}")
    with ThreadPoolExecutor(max_workers=settings.max_concurrency) as pool:
        outcomes = list(pool.map(fns[item], evidence))
    return Outcome([r for o in outcomes for r in o.rows], [r for o in outcomes for r in o.rejections])


def synthesize_joint_shard(evidence: Sequence[dict[str, Any]], llm: LLM, settings: SynthesisSettings,
                           items: Sequence[str]) -> dict[str, Outcome]:
    """The joint strategy over a shard: {item type: Outcome} for the requested item types."""
    from earmark.stages.synthesis.joint import joint_clip

    with ThreadPoolExecutor(max_workers=settings.max_concurrency) as pool:
        per_clip = list(pool.map(lambda ev: joint_clip(ev, llm, settings), evidence))
    return {item: Outcome([r for o in per_clip for r in o[item].rows], [r for o in per_clip for r in o[item].rejections])
            for item in items}
