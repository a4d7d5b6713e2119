"""The evidence's fact collector (`Facts`): typed facts with their confidence, from the registry's rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from earmark.schemas.evidence import Fact
from earmark.schemas.facts import fact_type, measured_confidence
from earmark.schemas.records import LabelProb

T = TypeVar("T")


MAX_LIST = 12  # list fields of generically included tables are cut to this many items


LINEAGE = {"clip_id", "expert", "expert_version", "backend"}


ONE_SIDED_CONFIDENCE = 0.3  # a blind room estimate on a clip with music or events: perhaps not the room


def rounded(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(float(x), nd)


def measured(type_: str) -> float | None:
    """A measurement's fixed confidence, from the fact-type registry (earmark.schemas.facts): how far its number
    can be trusted as a description of the clip (DSP levels are exact; blind reverberation and SNR estimates are
    not)."""
    return measured_confidence(type_)


class Facts:
    """Collects the facts of one clip, each with its expert table, backend and confidence."""

    def __init__(self) -> None:
        self.facts: list[Fact] = []

    def add(
        self,
        rec: Any,
        type_: str,
        number: float | None = None,
        value: str | None = None,
        *,
        subject: str | None = None,
        confidence: float | None = None,
        generic: bool = False,
    ) -> None:
        """One fact. Its type must be in the registry (a typo raises UnknownFactType), but for a `generic` one: a
        field of an expert table this module does not know, kept as `<table>.<field>` without a confidence."""
        row = None if generic else fact_type(type_)
        if number is None and value is None:
            return
        conf = confidence if confidence is not None or row is None else row.confidence
        self.facts.append(
            Fact(
                type=type_,
                value=value,
                number=number,
                subject=subject,
                source=rec.expert,
                backend=rec.backend,
                confidence=None if conf is None else round(float(conf), 3),
            )
        )

    def labels(
        self, rec: Any, type_: str, labels: Sequence[LabelProb], min_prob: float = 0.0, subject: str | None = None
    ) -> None:
        for lp in labels:
            if lp.prob >= min_prob:
                p = round(lp.prob, 3)
                self.add(rec, type_, p, lp.label, subject=subject, confidence=p)
