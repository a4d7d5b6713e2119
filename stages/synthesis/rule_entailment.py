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
from collections.abc import Sequence

from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.records import Caption, EntailmentHypothesis
from earmark.stages.claims import SUPPORTED, AuditedClaim, audit, entailment_label_check
from earmark.stages.synthesis.common import Synth

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


def rule_entailment(ev: ClipEvidence, premise: Caption, s: Synth) -> tuple[list[EntailmentHypothesis], str | None]:
    """The clip's three hypotheses by rule, or ([], why not)."""
    spec = s.phrases("entailment_rules")
    rng = random.Random(s.seed_for(ev, 17))
    premise_facts = _facts(audit(premise.text, ev, s.min_confidence))
    chosen: dict[str, str] = {}
    for label in LABELS:
        candidates = list(spec[label])
        rng.shuffle(candidates)
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
