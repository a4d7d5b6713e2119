"""QC from the claim audit: every item's claims, judged against its clip's evidence, decide whether it ships.

`audit_items` returns one `claim_audit` QC verdict per item (plus `entailment_set` verdicts: an entailment set
ships whole or not at all) and one `claims` row per claim, each item by its item type's `audit`
(`stages/synthesize/item_types/`, built on `audit_fields` / `audit_hypothesis` here). What each must satisfy:

| items | fields audited | rule |
|---|---|---|
| captions | text | no contradicted, no unsupported claim, at least one supported (rule-written ones too) |
| qa | question | no contradicted claim (a question may presuppose what the evidence cannot confirm; what a yes/no or degree question asks about is no claim: `claims.asserted`) |
|    | answer | inference_judgement / application_context: no contradicted claim; others: as captions |
| entailment | hypothesis | the label's relation holds (earmark.stages.filter.claims.entailment_label_check) |
| instructions | instruction | no contradicted claim |
|    | answer (its words, whatever the rule's form) | as captions |

`duplicate_items` flags texts that appear on two clips whose evidence differs: an item that fits two
different clips describes neither (MECAT's references are per clip).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from earmark.core.text import normalise
from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.outcomes import ItemClaim, QCResult
from earmark.stages.base import ItemType
from earmark.stages.filter.claims import (
    AuditedClaim,
    about_audio,
    asserted,
    audit,
    claim_verdict,
    entailment_label_check,
    left_out,
)

INFERENCE = ("inference_judgement", "application_context")
NO_EVIDENCE = "no evidence for this clip: nothing can be checked"


def _answer_words(answer: str) -> str:
    """An instruction's expected answer as plain words (JSON values joined; list markers and case kept)."""
    try:
        obj = json.loads(answer)
    except ValueError:
        return answer
    return ". ".join(str(v) for v in obj.values()) if isinstance(obj, dict) else answer


def _unwrapped(answer: str) -> str:
    """A parenthesised answer ("(The main sound is…)", the Symbol rule) read without its brackets."""
    text = answer.strip()
    return text[1:-1] if text.startswith("(") and text.endswith(")") else answer


def _question(instruction: str) -> str:
    """An instruction without the format rule that follows its question: `Answer in JSON with exactly the keys
    "main_sound" and "recording".` quotes key names, not speech, and `Do not use the word "loud"` claims nothing."""
    end = instruction.rfind("?")
    return instruction[: end + 1] if end >= 0 else instruction


def _rows(table: str, item: Any, field: str, audited: Sequence[AuditedClaim]) -> list[ItemClaim]:
    return [
        ItemClaim(
            item_table=table,
            item_id=item.item_id,
            clip_id=item.clip_id,
            field=field,
            claim_type=a.claim.type,
            value=a.claim.value[:200],
            span=a.claim.span[:200],
            specific=a.claim.specific,
            verdict=a.judgement.verdict,
            fact=a.judgement.fact,
            reason=a.judgement.reason,
        )
        for a in audited
    ]


def qc_row(table: str, item: Any, check: str, keep: bool, reason: str | None, score: float | None) -> QCResult:
    return QCResult(
        item_table=table, item_id=item.item_id, clip_id=item.clip_id, check=check, keep=keep, reason=reason, score=score
    )


Audited = tuple[bool, str | None, float, list[ItemClaim]]  # keep, reason, share of supported claims, claim rows


def audit_fields(
    table: str,
    item: Any,
    ev: ClipEvidence,
    thr: float,
    fields: Sequence[tuple[str, str, dict]],
    precheck: str | None = None,
) -> Audited:
    """An item whose claims are those of its text fields, each `(field, text, claim_verdict options)`; a
    question's or instruction's claims are only what it asserts (`claims.asserted`). `precheck`: a reason the
    item fails before its claims are read."""
    keep, reason, shares = precheck is None, precheck, []
    rows: list[ItemClaim] = []
    for field, text, opts in fields:
        audited = audit(text, ev, thr)
        if field in ("question", "instruction"):
            audited = asserted(text, audited)
        rows += _rows(table, item, field, audited)
        ok, why, share = claim_verdict(audited, **opts)
        shares.append(share)
        if keep and not ok:
            keep, reason = False, f"{field}: {why}"
    return keep, reason, round(min(shares) if shares else 0.0, 4), rows


def audit_hypothesis(table: str, item: Any, ev: ClipEvidence, thr: float) -> Audited:
    """An entailment hypothesis: the relation its label names holds (`claims.entailment_label_check`)."""
    audited = audit(item.hypothesis, ev, thr)
    keep, reason = entailment_label_check(item.label, audited)
    n = len(audited)
    share = sum(a.judgement.verdict == "supported" for a in audited) / n if n else 0.0
    return keep, reason, round(share, 4), _rows(table, item, "hypothesis", audited)


def instruction_fields(item: Any) -> list[tuple[str, str, dict]]:
    """An instruction triple's audited fields: its question (the format rule left out) and its expected
    answer's words, whatever the rule's form."""
    return [
        ("instruction", _question(item.instruction), {"inference": True, "need_support": False}),
        ("answer", _unwrapped(_answer_words(item.answer)), {}),
    ]


def instruction_precheck(item: Any, ev: ClipEvidence) -> str | None:
    """Why an instruction triple fails before its claims are read: its question does not ask about the audio, or
    it asks for everything heard and its answer leaves a content the evidence is sure of out."""
    if not about_audio(item.instruction):
        return "instruction: the question does not ask about the audio"
    return whole_answer(_question(item.instruction), _unwrapped(_answer_words(item.answer)), ev)


def whole_answer(question: str, answer: str, ev: ClipEvidence) -> str | None:
    """Why an answer to a question that asks for everything heard fails: the contents it leaves out (None: none)."""
    missing = left_out(question, answer, ev)
    if not missing:
        return None
    words = " and ".join(m if m == "how it sounds" else f"the {m.replace('_', ' ')}" for m in missing)
    return f"answer: leaves out {words} the question asks for (the evidence is sure of it)"


def audit_items(
    items: Mapping[str, Sequence[Any]],
    evidence: Mapping[str, ClipEvidence],
    min_confidence: float,
    kinds: Mapping[str, ItemType],
) -> tuple[list[QCResult], list[ItemClaim]]:
    """`claim_audit` (and `entailment_set`) verdicts and the claims rows for every item of a shard."""
    qc: list[QCResult] = []
    claims: list[ItemClaim] = []
    failed_sets: dict[str, str] = {}
    for table, rows in items.items():
        for item in rows:
            ev = evidence.get(item.clip_id)
            if ev is None:
                qc.append(qc_row(table, item, "claim_audit", False, NO_EVIDENCE, None))
                continue
            keep, reason, share, found = kinds[table].audit(item, ev, min_confidence)
            claims += found
            qc.append(qc_row(table, item, "claim_audit", keep, reason, share))
            if table == "entailment" and not keep:
                failed_sets.setdefault(item.clip_id, f"{item.label}: {reason}")
    for item in items.get("entailment", ()):
        why = failed_sets.get(item.clip_id)
        qc.append(
            qc_row(
                "entailment",
                item,
                "entailment_set",
                why is None,
                None if why is None else f"its set fails the audit ({why})",
                None,
            )
        )
    return qc, claims


def duplicate_items(
    items: Mapping[str, Sequence[Any]], evidence: Mapping[str, ClipEvidence], kinds: Mapping[str, ItemType]
) -> list[QCResult]:
    """`duplicate_across_clips`: the same text (normalised) on clips with different evidence, per table and
    field; every such model-written item is rejected (a cached or generic reply, not about its clip), and the
    verdict names how many clips share it. A rule-written item (model "rule") says only facts of its kind, so
    the same words on two clips mean the same facts: it is flagged in the reason and kept."""
    out: list[QCResult] = []
    for table, rows in items.items():
        field = kinds[table].main_text
        groups: dict[str, list[Any]] = defaultdict(list)
        for item in rows:
            if getattr(item, "model", "") == "rule" and table == "captions" and item.prompt_name == "absent_rule":
                continue  # absence is stated in the same words on purpose (MECAT does the same)
            groups[normalise(getattr(item, field))].append(item)
        for group in groups.values():
            shas = {evidence[i.clip_id].evidence_sha for i in group if i.clip_id in evidence}
            clips = {i.clip_id for i in group}
            dup = len(clips) > 1 and len(shas) > 1
            for item in group:
                by_rule = getattr(item, "model", "") == "rule"  # same facts of its kind, same words: flagged, kept
                why = f"the same {field} appears on {len(clips)} clips with different evidence" if dup else None
                if dup and by_rule:
                    why = f"{why} (written by rule from facts those clips share: kept)"
                out.append(qc_row(table, item, "duplicate_across_clips", not dup or by_rule, why, float(len(clips))))
    return out


def premise_rejections(
    entailment: Sequence[Any], captions: Sequence[Any], rejected: set[tuple[str, str]]
) -> list[QCResult]:
    """Check `premise`: an entailment hypothesis ships only with a premise that is the text of a caption of its
    clip every check kept (the premise is chosen at synthesis, before QC judges the captions; a rejected long
    caption must not reach an export as a premise). `rejected`: (table, item id) of every rejection so far."""
    kept: dict[str, set[str]] = defaultdict(set)
    for c in captions:
        if ("captions", c.item_id) not in rejected:
            kept[c.clip_id].add(normalise(c.text))
    out = []
    for h in entailment:
        ok = normalise(h.premise) in kept[h.clip_id]
        why = None if ok else f"its premise, the clip's {h.premise_kind} caption, is not one QC kept"
        out.append(qc_row("entailment", h, "premise", ok, why, None))
    return out
