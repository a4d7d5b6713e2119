"""Audio-Entailment hypotheses (Deshmukh et al.): per clip one entailment, one neutral, one contradiction.

The premise is the clip's first long caption (else its first short one). By default (`[synthesize]
entailment_sets = "rule"`) the three hypotheses are written by rule from the confident facts and the premise:
the embedded 0.5B model's sets never passed the checks below. With `"llm"`, one call writes a short reasoning
and the three hypotheses. Validation enforces the paper's generation rules a machine can check: whole
sentences, three different hypotheses, none a copy of the premise, a contradiction without negation words
(the paper's "easy contradiction" shortcut). A set that still fails after its repair is written by rule from
the confident facts where they allow it (earmark.stages.synthesize.item_types.entailment.rules), beside its rejection row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.records import Caption, EntailmentHypothesis
from earmark.stages.filter.claims import audit, entailment_label_check
from earmark.stages.synthesize.common import Outcome, Synth, ask
from earmark.stages.synthesize.item_types.entailment.rules import rule_entailment
from earmark.stages.synthesize.replies import EntailmentReply, reply_schema

PROMPTS = ("entailment", "entailment_rules")
LABELS = ("entailment", "neutral", "contradiction")
_WORDS = re.compile(r"[a-z0-9']+")


def _norm(text: str) -> str:
    return " ".join(_WORDS.findall(text.lower()))


def check_entailment_set(reply: EntailmentReply, premise: str) -> EntailmentReply:
    """Three different hypotheses, none a copy of the premise."""
    seen: dict[str, str] = {}
    for label in LABELS:
        n = _norm(getattr(reply, label))
        if n == _norm(premise) or (len(n) > 20 and n in _norm(premise)):
            raise ValueError(f"the {label} hypothesis copies the premise; write a new sentence")
        if n in seen:
            raise ValueError(f"the {label} and {seen[n]} hypotheses are the same; make them different")
        seen[n] = label
    return reply


def premise_for(clip_id: str, captions: Sequence[Caption]) -> Caption | None:
    """The clip's first long caption (the Audio Entailment premise), else its first short one."""
    for kind in ("long", "short"):
        got = sorted((c for c in captions if c.clip_id == clip_id and c.kind == kind), key=lambda c: c.ref_index)
        if got:
            return got[0]
    return None


def hypothesis_rows(
    ev: ClipEvidence, s: Synth, lineage: dict, reply: EntailmentReply, premise: Caption, confidence: float
) -> list[EntailmentHypothesis]:
    return [
        EntailmentHypothesis(
            **lineage,
            confidence=confidence,
            item_id=f"{ev.clip_id}:entailment:{label}",
            premise_kind=premise.kind,
            premise=premise.text,
            label=label,
            hypothesis=getattr(reply, label),
        )
        for label in LABELS
    ]


def entailment_clip(ev: ClipEvidence, captions: Sequence[Caption], s: Synth) -> Outcome:
    prompt = s.prompt("entailment")
    premise = premise_for(ev.clip_id, captions)
    if premise is None:
        return Outcome(
            [],
            [
                s.rejection(
                    ev, "entailment", prompt, "no long or short caption to use as the premise (see captions rejections)"
                )
            ],
        )
    if s.cfg.entailment_sets == "rule":
        rows, why = rule_entailment(ev, premise, s)
        return Outcome(rows, [s.rejection(ev, "entailment", s.prompt_like("entailment_rules"), why)] if why else [])
    messages = prompt.render(premise=premise.text, evidence_text=s.notes(ev, "long"))

    def parse(d: object) -> EntailmentReply:
        reply = check_entailment_set(EntailmentReply.model_validate(d), premise.text)
        if s.cfg.repair_with_audit:  # each hypothesis must stand in its label's relation to the evidence
            for label in LABELS:
                ok, why = entailment_label_check(label, audit(getattr(reply, label), ev, s.min_confidence))
                if not ok:
                    raise ValueError(why)
        return reply

    reply, raw, reason = ask(s, prompt, messages, reply_schema(EntailmentReply), parse, s.seed_for(ev, 0))
    if reply is None:  # the model's set failed: keep its rejection, write the set by rule when the facts allow
        rejected = s.rejection(ev, "entailment", prompt, reason, raw)
        rows, why = rule_entailment(ev, premise, s)
        if why:
            rejected = s.rejection(ev, "entailment", prompt, f"{reason}; rule fallback: {why}", raw)
        return Outcome([r.model_copy(update={"writer": "rule_fallback"}) for r in rows], [rejected])
    return Outcome(hypothesis_rows(ev, s, s.lineage(ev, prompt), reply, premise, reply.confidence), [])
