"""Records of what happens to items after synthesis: QC verdicts, audited claims, human reviews, the files a
version exports, and evaluation scores (one pydantic model each, like earmark.schemas.records)."""

from __future__ import annotations

from typing import Literal

from earmark.schemas.records import Record


# ---------------------------------------------------------------------------------------------- filter
class QCResult(Record):
    """One check's verdict on one item: datatrove's keep-or-(False, reason), with a score."""

    item_table: str
    item_id: str
    clip_id: str
    check: str
    keep: bool
    reason: str | None
    score: float | None


class ItemClaim(Record):
    """Table `claims`: one claim an item makes, and the claim audit's verdict on it against the evidence."""

    item_table: str
    item_id: str
    clip_id: str
    field: str  # the item field the claim is in (text, question, answer, hypothesis, instruction)
    claim_type: str  # presence, absence, gender, quote, tempo, place, number, … (earmark.stages.filter.claims)
    value: str
    span: str  # the item's words
    specific: bool
    verdict: Literal["supported", "unsupported", "contradicted"]
    fact: str | None  # the fact that decided, when one did
    reason: str


ReviewVerdict = Literal["accept", "reject", "rewrite"]


class ReviewDecision(Record):
    """A person's verdict on one generated item (Audio Entailment's human verification), table `reviews`.

    Decisions never edit item rows: publishing turns them into `human_review` QC rows and, for a rewrite,
    a new item row (`<item_id>~rev`) written by the reviewer. `item_text` is the text the reviewer saw; a
    decision applies only while the item still has that text (a regenerated item needs a new review).
    """

    item_table: str
    item_id: str
    clip_id: str
    decision: ReviewVerdict
    new_text: str | None
    item_text: str
    reviewer: str
    decided_at: str  # ISO 8601, UTC
    source: Literal["ui", "file"]


class ExportFile(Record):
    """Table `exports`: one file publish wrote for a version (MECAT JSONL, Audio-Entailment CSV, card, …)."""

    version: str
    path: str  # relative to the dataset directory
    format: str
    rows: int
    sha256: str


# -------------------------------------------------------------------------------------------- evaluate
class Score(Record):
    """A per-sample metric value for one prediction."""

    eval_id: str
    model_name: str
    dataset_version: str
    clip_id: str  # the scored key: a clip id (captions), `<clip>_<n>` (MECAT QA), or the clip of `item_id`
    subtask: str
    metric: str
    value: float
    prediction: str
    item_id: str | None = None  # entailment / instruction item scored (None for MECAT captions and QA)
    note: str | None = None  # how the value was decided, e.g. "pred=neutral gold=neutral by=llm"
