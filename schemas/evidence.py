"""ClipEvidence: what the experts found in one clip, as a list of atomic facts.

Each fact is one statement an expert made about the clip — its type (`speech.transcript`, `music.key`,
`speaker.gender`, …), its value (a label or text, and/or a number), the subject it is about when a clip has
several (a speaker, a stem), the expert table and backend that produced it, and the expert's confidence
when it gives one. Prompts are rendered from these facts only (earmark.stages.facts.render), so what an item may
say is bounded by what is here; the table `evidence` stores them as a typed list column.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import Field

from earmark.schemas.facts import fact_type
from earmark.schemas.records import DomainCode, Record


class Fact(Record):
    """One atomic statement of one expert about one clip."""

    type: str  # dotted: "<topic>.<attribute>", e.g. "content.speech", "speaker.gender", "acoustics.rt60_s"
    value: str | None = None  # a label or text ("female", "A minor", the transcript)
    number: float | None = None  # a measurement or probability, rounded as the expert's precision allows
    subject: str | None = None  # what the fact is about when there are several: a speaker, a stem, a window
    source: str  # the expert table that produced it ("asr", "music", …)
    backend: str = ""  # the expert's backend id (a heuristic's starts with "heuristic:")
    confidence: float | None = None  # the expert's own probability for this fact, when it gives one


class ClipEvidence(Record):
    """Table `evidence`: every fact the experts produced for one clip, and a sha over them."""

    clip_id: str
    domain: DomainCode
    duration_s: float
    facts: list[Fact] = Field(repr=False)
    evidence_sha: str

    # --- read access used by the renderers and checks (no copies of the data). A type that is not in the registry
    # (earmark.schemas.facts) raises UnknownFactType: a misspelt read would otherwise find nothing, silently.
    def all(self, type_: str, subject: str | None = None) -> Iterator[Fact]:
        fact_type(type_)
        return (f for f in self.facts if f.type == type_ and (subject is None or f.subject == subject))

    def get(self, type_: str, subject: str | None = None) -> Fact | None:
        return next(self.all(type_, subject), None)

    def has(self, prefix: str) -> bool:
        """True when any fact's type starts with `prefix` (e.g. "music." — the music expert ran)."""
        return any(f.type.startswith(prefix) for f in self.facts)

    def num(self, type_: str, subject: str | None = None) -> float | None:
        fact = self.get(type_, subject)
        return None if fact is None else fact.number

    def text(self, type_: str, subject: str | None = None) -> str | None:
        fact = self.get(type_, subject)
        return None if fact is None else fact.value

    def labels(self, type_: str, subject: str | None = None) -> dict[str, float]:
        """{label: probability} of a labelled fact type, e.g. a speaker's gender probabilities."""
        return {f.value: f.number for f in self.all(type_, subject) if f.value is not None and f.number is not None}

    def subjects(self, type_: str) -> list[str]:
        return list(dict.fromkeys(f.subject for f in self.all(type_) if f.subject is not None))

    def present(self, content: str) -> bool:
        """Whether the evidence is sure `content` ("speech", "music", "sound_events") is present."""
        return self.text(f"content.{content}") == "present"
