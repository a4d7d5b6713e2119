"""Human verification (Audio Entailment, Sec. 4.2): a person accepts, rejects or rewrites generated items.

Decisions are `ReviewDecision` rows in the `reviews` table, never edits of the items: item shards stay
immutable. Publishing folds every stored decision into an *overlay* shard (`review_overlay`):
- a `human_review` QC row per decided item: keep for accept, not kept for reject and rewrite;
- for a rewrite, a new item row `<item_id>~rev` — the original row with the reviewed field replaced, its
  `model` set to `human:<reviewer>` and confidence 1 — with its own `human_review` QC row (kept).
Every reader that selects "items every QC check kept" (exports, evaluate, the version views) then sees
the reviewed set. The latest decision per item wins; a decision applies only while the item still has the
text the reviewer saw (`item_text`), so a regenerated item goes back to review instead of inheriting a
verdict on other words.

Two ways in: a paused flow run that takes a typed `ReviewInput` in the Prefect UI (flows/review.py), or a
review sheet (CSV or JSONL) written by `write_sheet`, filled in by people, and read by `read_sheet`. The overlay is
the shard of stage `review-apply` (`review_apply`, at the end of this module), which the publish flow runs.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from earmark.core.config import FilterSection
from earmark.core.text import normalise
from earmark.schemas import ITEM_TABLES, TABLES, from_table
from earmark.schemas.outcomes import QCResult, ReviewDecision
from earmark.schemas.records import Record
from earmark.stages.base import Inputs, StageSpec
from earmark.stages.filter.qc import check_ifeval_answer
from earmark.stages.synthesize import ITEM_TYPES
from earmark.storage import Catalog

REVIEW_VERSION = "2"  # 2: hypotheses whose premise caption a person rejected or rewrote are rejected
CHECK = "human_review"
REWRITE_SUFFIX = "~rev"
# The field a rewrite replaces, and the fields shown to the reviewer as context.
SHEET_COLUMNS = ("item_table", "item_id", "clip_id", "context", "text", "qc", "decision", "new_text", "reviewer")
DECISIONS = ("accept", "reject", "rewrite")


@dataclass(frozen=True)
class ReviewItem:
    item_table: str
    item_id: str
    clip_id: str
    text: str  # the field a rewrite replaces
    context: str
    qc: str  # reasons of failed automatic checks ("" when every check kept it)
    confidence: float
    decision: str = ""  # the item's current decision, if any (the sheet shows it so it can be amended)
    new_text: str = ""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def latest_decisions(decisions: Iterable[ReviewDecision]) -> dict[tuple[str, str], ReviewDecision]:
    """The latest decision per (item_table, item_id); ties broken by the order given."""
    out: dict[tuple[str, str], ReviewDecision] = {}
    for d in decisions:
        k = (d.item_table, d.item_id)
        if k not in out or d.decided_at >= out[k].decided_at:
            out[k] = d
    return out


def review_items(
    items: Mapping[str, Sequence[Record]],
    qc: Iterable[QCResult],
    decisions: Iterable[ReviewDecision],
    *,
    tables: Sequence[str] = ITEM_TABLES,
    scope: str = "kept",
    max_items: int | None = None,
    include_decided: bool = False,
) -> list[ReviewItem]:
    """What a review round shows: generated items (never overlay rows) of `tables`, only those every automatic
    check kept when `scope == "kept"`, undecided ones unless `include_decided`, lowest confidence first."""
    failed: dict[str, list[str]] = {}
    for r in qc:
        if r.check != CHECK and not r.keep:
            failed.setdefault(r.item_id, []).append(f"{r.check}: {r.reason}")
    current = latest_decisions(decisions)
    out = []
    for table in tables:
        field = ITEM_TYPES[table].main_text
        for item in items.get(table, ()):
            iid = item.item_id  # type: ignore[attr-defined]
            if iid.endswith(REWRITE_SUFFIX) or (scope == "kept" and iid in failed):
                continue
            text = getattr(item, field)
            d = current.get((table, iid))
            if d is not None and d.item_text == text and not include_decided:
                continue
            ctx = "; ".join(
                f"{f}: {getattr(item, f)}" for f in ITEM_TYPES[table].context if str(getattr(item, f)) != ""
            )
            same = d is not None and d.item_text == text
            out.append(
                ReviewItem(
                    table,
                    iid,
                    item.clip_id,
                    text,
                    ctx,
                    " | ".join(failed.get(iid, [])),  # type: ignore[attr-defined]
                    item.confidence,
                    d.decision if same else "",
                    (d.new_text or "") if same else "",
                )
            )  # type: ignore[attr-defined]
    out.sort(key=lambda r: (r.confidence, r.item_table, r.item_id))
    return out[:max_items] if max_items else out


# -------------------------------------------------------------------------------------------- sheets
def write_sheet(items: Sequence[ReviewItem], path: Path) -> Path:
    """A review sheet: CSV (spreadsheets) or JSONL, one item per row with empty decision columns."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "item_table": i.item_table,
            "item_id": i.item_id,
            "clip_id": i.clip_id,
            "context": i.context,
            "text": i.text,
            "qc": i.qc,
            "decision": i.decision,
            "new_text": i.new_text,
            "reviewer": "",
        }
        for i in items
    ]
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    elif path.suffix == ".csv":
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=SHEET_COLUMNS)
            w.writeheader()
            w.writerows(rows)
    else:
        raise ValueError(f"review sheet {path}: use a .csv or .jsonl file name")
    return path


def read_sheet(path: Path) -> list[dict[str, str]]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"review sheet {path} not found")
    if path.suffix == ".jsonl":
        rows = []
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    rows.append({k: "" if v is None else str(v) for k, v in json.loads(line).items()})
                except json.JSONDecodeError as exc:
                    raise ValueError(f"review sheet {path} line {n} is not JSON: {exc}") from None
        return rows
    if path.suffix == ".csv":
        with path.open(newline="") as f:
            return [{k: v or "" for k, v in row.items() if k is not None} for row in csv.DictReader(f)]
    raise ValueError(f"review sheet {path}: expected a .csv or .jsonl file")


def to_decisions(
    rows: Sequence[Mapping[str, str | None]],
    items: Mapping[str, Sequence[Record]],
    *,
    reviewer: str,
    source: str,
    decided_at: str | None = None,
) -> tuple[list[ReviewDecision], list[str]]:
    """Validated decisions from filled-in rows (sheet rows or UI input) and the problems found, by row.
    Rows without a decision are skipped: a sheet may be returned half done."""
    known = {(t, x.item_id): x for t, xs in items.items() for x in xs}  # type: ignore[attr-defined]
    when = decided_at or now_iso()
    out, errors = [], []
    for n, row in enumerate(rows, 1):
        decision = (row.get("decision") or "").strip().lower()
        if not decision:
            continue
        table, iid = (row.get("item_table") or "").strip(), (row.get("item_id") or "").strip()
        new_text = (row.get("new_text") or "").strip() or None
        if decision not in DECISIONS:
            errors.append(f"row {n} ({iid}): decision {decision!r} is not one of {', '.join(DECISIONS)}")
            continue
        item = known.get((table, iid))
        if item is None:
            errors.append(f"row {n}: no {table or '?'} item {iid!r} in this dataset version")
            continue
        if decision == "rewrite" and new_text is None:
            errors.append(f"row {n} ({iid}): 'rewrite' needs the new text in new_text")
            continue
        out.append(
            ReviewDecision(
                item_table=table,
                item_id=iid,
                clip_id=item.clip_id,
                decision=decision,  # type: ignore[attr-defined]
                new_text=new_text if decision == "rewrite" else None,
                item_text=getattr(item, ITEM_TYPES[table].main_text),
                reviewer=(row.get("reviewer") or "").strip() or reviewer,
                decided_at=when,
                source=source,
            )
        )  # type: ignore[arg-type]
    return out, errors


def decisions_sha(decisions: Sequence[ReviewDecision]) -> str:
    blob = json.dumps([d.model_dump() for d in decisions], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# One `reviews` shard per review round, keyed by its content (storing the same round twice is a no-op).
REVIEWS = StageSpec("review", REVIEW_VERSION, writes=("reviews",))


def store(decisions: Sequence[ReviewDecision], inputs: object = None) -> dict[str, list[ReviewDecision]]:
    """The review stage function: a round's decisions, as they are."""
    return {"reviews": list(decisions)}


# ------------------------------------------------------------------------------------------ applying
@dataclass
class Overlay:
    qc: list[QCResult]
    items: dict[str, list[Record]]
    counts: dict[str, int]  # accept / reject / rewrite applied, stale (item text changed), missing


def review_overlay(decisions: Iterable[ReviewDecision], items: Mapping[str, Sequence[Record]]) -> Overlay:
    """The QC rows and rewritten item rows that make a version reflect the stored decisions."""
    by_key = {(t, x.item_id): x for t, xs in items.items() for x in xs}  # type: ignore[attr-defined]
    counts = {"accept": 0, "reject": 0, "rewrite": 0, "stale": 0, "missing": 0}
    qc: list[QCResult] = []
    new: dict[str, list[Record]] = {t: [] for t in ITEM_TABLES}
    for (table, iid), d in sorted(latest_decisions(decisions).items()):
        item = by_key.get((table, iid))
        if item is None:
            counts["missing"] += 1
            continue
        field = ITEM_TYPES[table].main_text
        if getattr(item, field) != d.item_text:
            counts["stale"] += 1
            continue
        counts[d.decision] += 1
        who = f"{d.reviewer} ({d.source}, {d.decided_at})"
        if d.decision == "accept":
            qc.append(_qc(table, iid, d.clip_id, True, f"accepted by {who}"))
            continue
        if d.decision == "reject":
            qc.append(_qc(table, iid, d.clip_id, False, f"rejected by {who}"))
            continue
        rid = iid + REWRITE_SUFFIX
        qc.append(_qc(table, iid, d.clip_id, False, f"rewritten by {who} as {rid}"))
        row = item.model_copy(
            update={
                field: d.new_text,
                "item_id": rid,
                "model": f"human:{d.reviewer}",
                "writer": "human",
                "confidence": 1.0,
            }
        )
        new[table].append(row)
        qc.append(_qc(table, rid, d.clip_id, True, f"written by {who} in place of {iid}"))
        if table == "instructions":  # a person's answer must still satisfy the rule it is scored with
            keep, reason, score = check_ifeval_answer(row, FilterSection())  # type: ignore[arg-type]
            qc.append(
                QCResult(
                    item_table=table,
                    item_id=rid,
                    clip_id=d.clip_id,
                    check="ifeval_answer",
                    keep=keep,
                    reason=reason,
                    score=score,
                )
            )
    return Overlay(qc + _orphaned_premises(qc, by_key), new, counts)


def _orphaned_premises(decided: Sequence[QCResult], by_key: Mapping[tuple[str, str], Record]) -> list[QCResult]:
    """Check `premise_review`: entailment hypotheses whose premise is a caption a person rejected or rewrote (a
    premise must be text that was kept; see stages/filter/audit.py `premise_rejections`)."""
    gone: dict[str, dict[str, str]] = defaultdict(dict)  # clip → normalised caption text → its item id
    for r in decided:
        if r.item_table == "captions" and not r.keep and (caption := by_key.get(("captions", r.item_id))):
            gone[r.clip_id][normalise(caption.text)] = r.item_id  # type: ignore[attr-defined]
    out = []
    for (table, _), item in by_key.items():
        if table == "entailment" and (cid := gone.get(item.clip_id, {}).get(normalise(item.premise))):  # type: ignore[attr-defined]
            out.append(
                QCResult(
                    item_table=table,
                    item_id=item.item_id,  # type: ignore[attr-defined]
                    clip_id=item.clip_id,  # type: ignore[attr-defined]
                    check="premise_review",
                    keep=False,
                    reason=f"its premise, caption {cid}, was rejected or rewritten in review",
                    score=0.0,
                )
            )
    return out


def _qc(table: str, iid: str, clip: str, keep: bool, reason: str) -> QCResult:
    return QCResult(
        item_table=table, item_id=iid, clip_id=clip, check=CHECK, keep=keep, reason=reason, score=1.0 if keep else 0.0
    )


# ------------------------------------------------------------------------------------------- reading
def version_items(cat: Catalog, shards: Mapping[str, Sequence[str]]) -> tuple[dict[str, list], list[QCResult]]:
    """A version's items by table and its QC rows, without the review overlay (decisions apply to these)."""
    overlay = set(cat.keys_where(stage="review-apply"))
    keys = {t: [k for k in ks if k not in overlay] for t, ks in shards.items()}
    items = {t: from_table(TABLES[t], cat.read(t, keys.get(t, []))) for t in ITEM_TABLES}
    return items, from_table(QCResult, cat.read("qc", keys.get("qc", [])))


def stored_decisions(cat: Catalog) -> list[ReviewDecision]:
    return from_table(ReviewDecision, cat.read("reviews", cat.keys_where(table="reviews")))


def export_sheet(
    cat: Catalog, version: str, out: Path, *, tables: Sequence[str], scope: str, max_items: int, include_decided: bool
) -> tuple[list[ReviewItem], Path]:
    """Write the review sheet of `version` (items in scope, lowest LLM confidence first)."""
    items, qc = version_items(cat, cat.version_shards(version))
    todo = review_items(
        items,
        qc,
        stored_decisions(cat),
        tables=tables,
        scope=scope,
        max_items=max_items,
        include_decided=include_decided,
    )
    return todo, write_sheet(todo, out)


# ------------------------------------------------------------------------- the review-apply stage (at publish)
def base_shards(cat: Catalog, shards: dict[str, list[str]]) -> dict[str, list[str]]:
    """`shards` without review overlay shards (they are recomputed from all stored decisions)."""
    overlay = set(cat.keys_where(stage="review-apply"))
    return {t: [k for k in keys if k not in overlay] for t, keys in shards.items() if t != "reviews"}


def review_keys(cat: Catalog) -> list[str]:
    return cat.keys_where(table="reviews")


def review_apply_spec() -> StageSpec:
    return StageSpec("review-apply", REVIEW_VERSION, writes=("qc", *ITEM_TABLES), reads=("reviews", *ITEM_TABLES))


def review_apply(inputs: Inputs) -> dict[str, list]:
    """The review overlay stage: every stored decision applied to the version's items."""
    overlay = review_overlay(inputs("reviews"), {t: inputs(t) for t in ITEM_TABLES})
    return {"qc": overlay.qc, **overlay.items}
