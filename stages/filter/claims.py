"""The claim audit: what an item says, checked fact by fact against what the experts found.

`extract(text)` reads an item's claims (earmark.stages.filter.extract: presence and absence, speakers, gender,
quoted words, instruments, named events with their moments, order and count, timing words, the recording, …;
a negator denies every item of the list after it). `judge(claim, ev)` (earmark.stages.filter.judge) labels each
one supported, contradicted or unsupported against the clip's `ClipEvidence`, using only facts whose confidence
reaches the threshold (the verdicts are defined there).

The verdict is computed here, never by a model. QC (`claim_verdict`) rejects an item with a contradicted
claim, or with an unsupported one unless the item is inference by design, or that claims nothing the
evidence supports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from earmark.schemas.evidence import ClipEvidence
from earmark.stages.facts.bands import RECORDING
from earmark.stages.filter.extract import SPECIFIC, ExtractedClaim, extract, negated_items
from earmark.stages.filter.judge import CONTRADICTED, SUPPORTED, UNSUPPORTED, Judgement, event_spans, judge

__all__ = [
    "CONTRADICTED",
    "SPECIFIC",
    "SUPPORTED",
    "UNSUPPORTED",
    "AuditedClaim",
    "ExtractedClaim",
    "Judgement",
    "about_audio",
    "asserted",
    "audit",
    "claim_verdict",
    "entailment_label_check",
    "event_spans",
    "extract",
    "judge",
    "negated_items",
]

_ABOUT_AUDIO = re.compile(
    r"\b(?:hear\w*|heard|audio|sound\w*|listen\w*|clip|recording|record\w*|speak\w*|"
    r"speech|spoken|voices?|says?|said|talk\w*|words?|music\w*|song|melod\w*|beat|tempo|"
    r"noise\w*|loud\w*|quiet|echo|background|silen\w*|tone|pitch|instrument\w*)\b",
    re.I,
)


def about_audio(question: str) -> bool:
    """Whether a question asks about what is heard (an instruction item must; "What is 2 + 2?" does not)."""
    return bool(_ABOUT_AUDIO.search(question)) or any(c.type != "number" for c in extract(question))


# A question that asks for everything heard ("What can be heard in this clip?", "Who or what is heard…?", "What
# does this recording contain?"), not for the main sound or one kind of it: its answer must name every content the
# evidence is sure of. fresh13's blind check: "Who or what is heard?" answered "Speech from one or more voices
# throughout." with music playing throughout (the short caption names the main content only).
_WHOLE = re.compile(
    r"^\s*(?:who or what|what)\s+(?:can\s+be\s+|could\s+be\s+|is\s+|are\s+)?(?:heard|audible)\b|"
    r"^\s*what\s+(?:does|do)\s+(?:this|the)\s+(?:recording|clip|audio)\s+contain\b",
    re.I,
)
# the claim types that name a content without its presence word ("A dog barks" names sound events)
_NAMES_CONTENT = {
    "speech": {"quote", "gender", "speakers", "age", "emotion", "language", "accent", "pitch"},
    "music": {"instrument", "genre", "tempo", "key"},
    "sound_events": {"event"},
}
_PRESENCE = {"speech": "speech", "music": "music", "sound_events": "sound"}
# A question that also asks how the clip sounds or was recorded ("What is heard in this audio, and how does it
# sound?") needs an answer that says it: "One or more distinct sound events" and 'A man and a woman speak, one of
# them saying "man"' left it out (fresh21's blind check). The claim types that say how a recording sounds:
_HOW = re.compile(
    r"\bhow\s+(?:does|do|did)\s+(?:it|this|the\s+(?:clip|audio|recording))\s+sound\b|"
    r"\bhow\s+(?:was|is)\s+(?:it|this|the\s+(?:clip|audio))\s+recorded\b|\bwhat\s+is\s+the\s+recording\s+like\b",
    re.I,
)
_SAYS_HOW = {*RECORDING, "descriptor", "clipping", "quality", "silence"}


def left_out(question: str, answer: str, ev: ClipEvidence) -> list[str]:
    """The contents (speech, music, sound_events) the evidence is sure are present that `answer` does not name, or
    "silence" where nothing is heard (a silent clip, or every content surely absent) and `answer` neither says so nor
    denies a content, where `question` asks for everything heard; "how it sounds" where `question` asks that too
    (`_HOW`) and `answer` says nothing of the recording; [] for any other question."""
    claims = extract(answer)
    how = ["how it sounds"] if _HOW.search(question) and not {c.type for c in claims} & _SAYS_HOW else []
    if not _WHOLE.match(question):
        return how
    named = {c.value for c in claims if c.type == "presence"}
    types = {c.type for c in claims}
    out = [
        content
        for content, presence in _PRESENCE.items()
        if ev.present(content) and presence not in named and not types & _NAMES_CONTENT[content]
    ]
    # a clip with nothing in it (silent, or every content surely absent) is answered with that: "FULL-RANGE SOUND AT
    # A QUIET LEVEL" answered "What is heard…, and how does it sound?" of room tone alone (fresh17's blind check)
    empty = ev.text("content.silent") == "silent" or all(ev.text(f"content.{c}") == "absent" for c in _PRESENCE)
    if empty and not any(ev.present(c) for c in _PRESENCE) and not types & {"silence", "absence"}:
        out.append("silence")
    return out + how


# A yes/no question ("Is there any music?", "Does anyone speak?") or a degree question ("How loud is it?") asks
# whether content is there or how much of it: those claim types are asked, not asserted. Other claims of a
# question still presuppose ("Is the guitar out of tune?" presupposes a guitar).
_ASKING = re.compile(
    r"^\s*(?:(?:is|are|was|were|does|do|did|can|could|would|will|has|have)\b|"
    r"how\s+(?:loud|quiet|much|many|noisy|clean|clear|fast|slow)\b)",
    re.I,
)
ASKED_TYPES = {"presence", "absence", "silence", "loudness", "noise", "bandwidth", "reverb"}


def asserted(question: str, claims: list[AuditedClaim]) -> list[AuditedClaim]:
    """The claims a question asserts or presupposes: in a yes/no or degree question, presence, loudness, noise,
    bandwidth and echo are what it asks about, so they are left out."""
    if not _ASKING.match(question):
        return claims
    return [c for c in claims if c.claim.type not in ASKED_TYPES]


@dataclass(frozen=True)
class AuditedClaim:
    claim: ExtractedClaim
    judgement: Judgement


def audit(text: str, ev: ClipEvidence, min_confidence: float = 0.6) -> list[AuditedClaim]:
    return [AuditedClaim(c, judge(c, ev, min_confidence)) for c in extract(text)]


def claim_verdict(
    audited: list[AuditedClaim], *, inference: bool = False, need_support: bool = True
) -> tuple[bool, str | None, float]:
    """QC verdict from an item's audited claims: (keep, reason, share of claims supported).

    Rejected: any contradicted claim; any unsupported claim unless `inference` (items that are inference by
    design: inference and application-context answers, neutral hypotheses); no supported claim at all when
    `need_support` (a generic item)."""
    n = len(audited)
    share = sum(a.judgement.verdict == SUPPORTED for a in audited) / n if n else 0.0
    for a in audited:
        if a.judgement.verdict == CONTRADICTED:
            return (
                False,
                f"contradicts the evidence: {a.claim.span!r} ({a.judgement.reason or a.judgement.fact})",
                share,
            )
    if not inference:
        for a in audited:
            if a.judgement.verdict == UNSUPPORTED:
                return False, f"unsupported {a.claim.type} claim {a.claim.span!r}: {a.judgement.reason}", share
    if need_support and not any(a.judgement.verdict == SUPPORTED for a in audited):
        return False, "generic: claims nothing the evidence supports", share
    return True, None, round(share, 4)


def entailment_label_check(label: str, audited: list[AuditedClaim]) -> tuple[bool, str | None]:
    """Does a hypothesis stand in the relation its label claims, by the evidence? Entailment: every claim
    supported (at least one); contradiction: at least one claim contradicted; neutral: nothing contradicted
    and at least one claim the evidence cannot decide."""
    verdicts = [a.judgement.verdict for a in audited]
    spans = ", ".join(f"{a.claim.span!r}={a.judgement.verdict}" for a in audited) or "no claim found"
    if label == "entailment":
        ok = bool(verdicts) and all(v == SUPPORTED for v in verdicts)
        return ok, None if ok else f"the entailed hypothesis must be supported by the evidence ({spans})"
    if label == "contradiction":
        ok = CONTRADICTED in verdicts
        return ok, None if ok else f"the contradiction must contradict a confident fact ({spans})"
    ok = CONTRADICTED not in verdicts and UNSUPPORTED in verdicts
    return ok, None if ok else f"the neutral hypothesis must be undecidable from the evidence ({spans})"
