"""Entailment sets written by rule from the clip's confident facts, for clips whose model-written set fails.

A small model often writes a neutral hypothesis the facts decide, a contradiction that contradicts nothing,
or a negation. Rather than lose the clip, the fallback picks one candidate sentence per label from
prompts/entailment_rules.toml, in an order seeded by the clip's evidence, and keeps the first one the claim
audit puts in the label's relation to the evidence (the same `entailment_label_check` QC applies). The
entailed hypothesis must also restate a fact the premise itself states (a claim of the premise the audit
supports), so the label holds against the premise as well as against the audio's facts. No candidate for a
label → no set (a rejection says why).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

import jinja2

from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.records import Caption, EntailmentHypothesis
from earmark.stages.facts.render import View, heard_events, in_turn, occurrences
from earmark.stages.filter.claims import SUPPORTED, AuditedClaim, audit, entailment_label_check
from earmark.stages.synthesize.common import Synth

_env = jinja2.Environment(undefined=jinja2.ChainableUndefined, autoescape=False)

LABELS = ("entailment", "neutral", "contradiction")


def _facts(audited: Sequence[AuditedClaim]) -> set[str]:
    return {a.judgement.fact.split(" (")[0] for a in audited if a.judgement.verdict == SUPPORTED and a.judgement.fact}


def _pick(label: str, candidates: Sequence[str], ev: ClipEvidence, s: Synth, premise_facts: set[str]) -> str | None:
    for text in candidates:
        audited = audit(text, ev, s.min_confidence)
        ok, _ = entailment_label_check(label, audited)
        if ok and (label != "entailment" or _facts(audited) <= premise_facts):
            return text
    return None


COUNTED = {2: "two", 3: "three", 4: "four", 5: "five"}


def _event_facts(ev: ClipEvidence, s: Synth) -> dict[str, Any]:
    """The first named event (`event`: noun, clause, at, and `elsewhere`, a whole second of the clip when it is
    not heard) and the first two named events heard one after the other (`pair`: first and second, each with
    `moments`, "two" / "three" ... separate moments it is heard at, or None for one)."""
    v = View(ev, s.min_confidence)
    named = s.phrases("evidence")["events"]
    events = [e for e in heard_events(v) if e.cls in named]
    if not events:
        return {}
    first = events[0]
    busy = [(a - 2.0, b + 2.0) for a, b in first.spans]
    free = [t for t in range(int(ev.duration_s)) if not any(a <= t <= b for a, b in busy)]
    facts: dict[str, Any] = {"event": {**named[first.cls], "at": first.at, "elsewhere": free[-1] if free else None}}
    pair = next(
        ((a, b) for i, a in enumerate(events) for b in events[i + 1 :] if in_turn(list(a.spans), list(b.spans))), None
    )
    if pair is not None:
        facts["pair"] = {
            key: {**named[e.cls], "moments": COUNTED.get(occurrences(list(e.spans)))}
            for key, e in zip(("first", "second"), pair, strict=True)
        }
    return facts


def _rank(template: str) -> int:
    """How much a template names: the order of two events (2), one event (1), nothing heard by name (0)."""
    return 2 if "pair." in template else 1 if "event." in template else 0


def _candidates(templates: Sequence[str], facts: dict[str, Any], rng: random.Random) -> list[str]:
    """The templates filled with the clip's facts, in a seeded order, those naming more of what is heard first
    (a hypothesis about which events are heard, and in which order, tests more than one about the recording);
    one whose facts are missing is left out."""
    ranked: dict[int, list[str]] = {2: [], 1: [], 0: []}
    for t in templates:
        if any(name not in facts for name in re.findall(r"\b(event|pair)\.", t)):
            continue
        text = " ".join(_env.from_string(t).render(**facts).split()) if "{" in t else t
        if len(text.split()) >= 3 and "None" not in text:
            ranked[_rank(t)].append(text)
    for texts in ranked.values():
        rng.shuffle(texts)
    return [*ranked[2], *ranked[1], *ranked[0]]


def rule_entailment(ev: ClipEvidence, premise: Caption, s: Synth) -> tuple[list[EntailmentHypothesis], str | None]:
    """The clip's three hypotheses by rule, or ([], why not)."""
    spec = s.phrases("entailment_rules")
    rng = random.Random(s.seed_for(ev, 17))
    premise_facts = _facts(audit(premise.text, ev, s.min_confidence))
    facts = _event_facts(ev, s)
    chosen: dict[str, str] = {}
    for label in LABELS:
        candidates = _candidates(spec[label], facts, rng)
        text = _pick(label, [c for c in candidates if c not in chosen.values()], ev, s, premise_facts)
        if text is None:
            return [], f"no rule-written {label} hypothesis holds for this clip's facts and premise"
        chosen[label] = text
    lineage = s.lineage(ev, s.prompt_like("entailment_rules"))
    return [
        EntailmentHypothesis(
            **{**lineage, "model": "rule", "writer": "rule"},
            confidence=1.0,
            item_id=f"{ev.clip_id}:entailment:{label}",
            premise_kind=premise.kind,
            premise=premise.text,
            label=label,
            hypothesis=chosen[label],
        )
        for label in LABELS
    ], None
