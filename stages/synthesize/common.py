"""What every synthesis item type shares: the LLM protocol, sentence checks, and call → validate → repair.

Every reply is JSON-schema constrained (schemas generated from the pydantic reply models in `replies`),
validated with pydantic, sent back once for repair with the validation error (in the words of
prompts/repair.toml), and otherwise kept as a `Rejection` with its reason and raw text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from earmark.core.config import SynthesizeSection
from earmark.llm.models import EMBEDDED_MODELS
from earmark.prompts import Phrases, Prompt, file_sha, load_phrases, load_prompt
from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.records import Rejection
from earmark.stages.facts.render import render, render_all
from earmark.stages.filter.claims import audit, claim_verdict

CONTENT_KINDS = {"speech": 0, "music": 1, "sound": 2}  # index into the domain code
_PLACEHOLDERS = ("...", "…", "<", ">", "{", "}", "caption 1", "caption1", "[", "]")
_NON_LATIN = re.compile(r"[^\x00-\x7f\u00a0-\u024f\u2013-\u2026]")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


class LLM(Protocol):
    model: str

    def complete_json(
        self,
        messages: list[dict[str, str]],
        schema: dict[str, Any],
        *,
        max_tokens: int,
        temperature: float = ...,
        seed: int = ...,
    ) -> Any: ...


@dataclass
class Outcome:
    rows: list[Any] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)


class Spare:
    """The rule-written rows that stand in for the model's rejected ones, by a key field (`qa_index`, …); the
    rule writer runs only when a first reply is rejected."""

    def __init__(self, writer: Callable[[], Outcome] | None, key: str) -> None:
        self.writer, self.key = writer, key
        self._rows: dict[Any, Any] | None = None

    def take(self, key: Any) -> Any | None:
        if self.writer is None:
            return None
        if self._rows is None:
            self._rows = {getattr(r, self.key): r for r in self.writer().rows}
        row = self._rows.pop(key, None)
        return None if row is None else row.model_copy(update={"writer": "rule_fallback"})


WRITER_SETTINGS = ("content_captions", "entailment_sets", "qa_pairs", "instruction_triples")


def resolve_writers(cfg: SynthesizeSection, model: str) -> SynthesizeSection:
    """`cfg` with every "auto" writer setting decided for `model`: the model writes each item kind ("llm") unless it
    is one of the embedded small models, whose text the rules beat ("rule"). What stages key and run on."""
    auto = "rule" if not model or model in EMBEDDED_MODELS else "llm"
    update = {k: auto for k in WRITER_SETTINGS if getattr(cfg, k) == "auto"}
    return cfg.model_copy(update=update) if update else cfg


@dataclass(frozen=True)
class Synth:
    """One synthesis run's LLM and settings, the writer settings decided for its model (`resolve_writers`)."""

    llm: LLM
    cfg: SynthesizeSection
    seed: int = 0
    min_confidence: float = 0.6  # [evidence] min_confidence: only facts this confident reach a prompt

    def __post_init__(self) -> None:
        object.__setattr__(self, "cfg", resolve_writers(self.cfg, getattr(self.llm, "model", "")))

    def prompt(self, name: str) -> Prompt:
        return load_prompt(name, self.cfg.prompt_dir)

    def prompt_like(self, name: str) -> Prompt:
        """A phrase file as the lineage of rule-written rows (its name and sha, no model call)."""
        return Prompt(
            name=name,
            version=0,
            sha=file_sha(name, self.cfg.prompt_dir),
            max_tokens=0,
            temperature=0.0,
            system="",
            user_template="",
        )

    def phrases(self, name: str) -> Phrases:
        return load_phrases(name, self.cfg.prompt_dir)

    def notes(self, ev: ClipEvidence, view: str) -> str:
        """The evidence, rendered for one view (see earmark.stages.facts.render)."""
        return render(ev, view, self.phrases("evidence"), self.min_confidence)

    def all_notes(self, ev: ClipEvidence) -> str:
        return render_all(ev, self.phrases("evidence"), self.min_confidence)

    def seed_for(self, ev: ClipEvidence, i: int) -> int:
        """A sampling seed per clip evidence and request: two clips share a request (and its cached reply)
        only when their evidence is identical."""
        return (self.seed + int(ev.evidence_sha[:8], 16) + 7919 * i) % (2**31 - 1)

    def rejection(self, ev: ClipEvidence, table: str, prompt: Prompt, reason: str, raw: str = "") -> Rejection:
        return Rejection(
            clip_id=ev.clip_id,
            table=table,
            prompt_name=prompt.name,
            prompt_sha=prompt.sha,
            model=self.llm.model,
            reason=reason,
            raw=raw[:4000],
        )

    def lineage(self, ev: ClipEvidence, prompt: Prompt) -> dict[str, Any]:
        return {
            "clip_id": ev.clip_id,
            "domain": ev.domain,
            "prompt_name": prompt.name,
            "prompt_sha": prompt.sha,
            "model": self.llm.model,
        }


# ------------------------------------------------------------------------------------ sentence checks
def clean(text: str) -> str:
    return " ".join(text.split())


def check_sentence(text: str, min_words: int, max_words: int, max_chars: int | None = None) -> str:
    """Whole sentences only. A reply the grammar's maxLength cut off is trimmed to its last full sentence
    (or refused when it has none); a short reply that merely lacks its full stop gets one."""
    text = clean(text)
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
    inner = [w for w in re.findall(r"[A-Za-z][A-Za-z']*", text)[1:] if len(w) > 2]
    if len(inner) >= 3 and sum(w[0].isupper() for w in inner) > 0.6 * len(inner):
        raise ValueError(f"write in sentence case, not Title Case: {text[:80]!r}")
    return text


def check_question(v: str, max_chars: int) -> str:
    """One question, ending at its first '?' (small models append chatter after it)."""
    v = clean(v)
    if "?" not in v:
        raise ValueError(f"question must end with '?': {v[:80]!r}")
    return check_sentence(v[: v.index("?") + 1], 3, 30, max_chars)


def grounded(s: Synth, ev: ClipEvidence, text: str, *, inference: bool = False, need_support: bool = True) -> str:
    """`text` when the claim audit keeps it against the clip's evidence; else ValueError with the audit's
    reason, which `ask` sends back to the model for repair (`repair_with_audit`)."""
    if not s.cfg.repair_with_audit:
        return text
    keep, reason, _ = claim_verdict(audit(text, ev, s.min_confidence), inference=inference, need_support=need_support)
    if not keep:
        raise ValueError(f"{reason}; say only what the facts state")
    return text


def reason_of(exc: Exception, limit: int = 500) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())[:limit]
    return str(exc)[:limit]


# ------------------------------------------------------------------------------------------ the call
def ask(
    s: Synth,
    prompt: Prompt,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    parse: Callable[[Any], Any],
    seed: int,
) -> tuple[Any | None, str, str]:
    """Call, validate, repair. Returns (parsed or None, raw text, reason if rejected)."""
    repair = s.phrases("repair")
    history = list(messages)
    raw, reason = "", ""
    for attempt in range(s.cfg.repair_attempts + 1):
        result = s.llm.complete_json(
            history, schema, max_tokens=prompt.max_tokens, temperature=prompt.temperature, seed=seed + 1000 * attempt
        )
        raw = result.text or ""
        if result.data is None:
            reason = result.error or repair["not_json"]
        else:
            try:
                return parse(result.data), raw, ""
            except (ValidationError, ValueError) as exc:
                reason = reason_of(exc)
        hint = repair["shorter"] if "mid-sentence" in reason else ""
        history = list(messages) + [
            {"role": "assistant", "content": raw[:2000]},
            {"role": "user", "content": repair["request"].format(reason=reason, hint=hint)},
        ]
    return None, raw, reason
