"""What the browser view (`earmark view`) shows of a version: every clip with its domain, its expert facts and
its items, each item with its automatic QC verdicts and the reviewer's current decision.

Items are the version's generated items without the review overlay (the rows decisions are about, as in a
review sheet); a decision shown is the latest stored one whose `item_text` is still the item's text, stored
or not yet published. Filters: domain, item table, and status — `kept` (every automatic check kept it),
`rejected` (some check did not), `all`.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass, field

import numpy as np
import soundfile as sf

from earmark.schemas import ITEM_TABLES, from_table
from earmark.schemas.evidence import ClipEvidence
from earmark.stages import review
from earmark.stages.publish import formats
from earmark.stages.review import CHECK, REWRITE_SUFFIX
from earmark.stages.synthesize import ITEM_TYPES
from earmark.storage import Catalog
from earmark.storage.paths import version_name

STATUSES = ("all", "kept", "rejected")


@dataclass
class Verdict:
    check: str
    keep: bool
    reason: str


@dataclass
class ItemView:
    table: str
    item_id: str
    label: str  # caption kind, QA category, entailment label, instruction dimension
    text: str  # the field a review decision is about (its item type's main_text)
    context: str
    confidence: float
    kept: bool  # every automatic QC check kept it (an item no check has seen is not kept, as in exports)
    qc: list[Verdict]
    decision: str = ""
    new_text: str = ""


@dataclass
class ClipView:
    clip_id: str
    domain: str
    source_path: str
    offset_s: float
    duration_s: float
    facts: list[dict] = field(default_factory=list)
    items: list[ItemView] = field(default_factory=list)


class VersionView:
    """One version read once (clips, facts, items, QC); decisions are read again on every `page`."""

    def __init__(self, cat: Catalog, version: str):
        self.cat, self.version = cat, version_name(version)
        v = self.version
        self.shards = cat.version_shards(v)
        items, qc = review.version_items(cat, self.shards)
        verdicts: dict[str, list[Verdict]] = {}
        for r in qc:
            if r.check != CHECK:
                verdicts.setdefault(r.item_id, []).append(Verdict(r.check, r.keep, r.reason))
        domains = dict(cat.query(f"SELECT clip_id, domain FROM {v}.domain"))
        self.clips: dict[str, ClipView] = {}
        for clip_id, source, offset, duration in cat.query(
            f"SELECT clip_id, source_path, offset_s, duration_s FROM {v}.clips ORDER BY source_path, offset_s"
        ):
            self.clips[clip_id] = ClipView(clip_id, domains.get(clip_id, "?"), source, offset, duration)
        for ev in from_table(ClipEvidence, cat.read("evidence", self.shards.get("evidence", []))):
            if ev.clip_id in self.clips:
                if self.clips[ev.clip_id].domain == "?":  # a version without a domain table: the evidence's
                    self.clips[ev.clip_id].domain = ev.domain
                self.clips[ev.clip_id].facts = [
                    {k: x for k, x in f.model_dump().items() if x not in (None, "")} for f in ev.facts
                ]
        for table in ITEM_TABLES:
            for item in items.get(table, ()):
                iid = item.item_id  # type: ignore[attr-defined]
                clip = self.clips.get(item.clip_id)  # type: ignore[attr-defined]
                if clip is None or iid.endswith(REWRITE_SUFFIX):
                    continue
                checks = sorted(verdicts.get(iid, []), key=lambda c: (c.keep, c.check))
                context = "; ".join(
                    f"{f}: {getattr(item, f)}"
                    for f in ITEM_TYPES[table].context
                    if f != ITEM_TYPES[table].label and str(getattr(item, f))
                )
                clip.items.append(
                    ItemView(
                        table,
                        iid,
                        str(getattr(item, ITEM_TYPES[table].label)) if ITEM_TYPES[table].label else "",
                        str(getattr(item, ITEM_TYPES[table].main_text)),
                        context,
                        float(item.confidence),  # type: ignore[attr-defined]
                        bool(checks) and all(c.keep for c in checks),  # as kept_items: checked, never rejected
                        checks,
                    )
                )
        self.domains = sorted({c.domain for c in self.clips.values()})

    def page(
        self, *, domain: str = "", table: str = "", status: str = "all", page: int = 0, per_page: int = 25
    ) -> dict:
        """One page of clips matching the filters (a clip matches when one of its items does, or — with no
        item filter — always), each with its matching items and their current decisions."""
        if status not in STATUSES:
            raise ValueError(f"status {status!r}: use one of {', '.join(STATUSES)}")
        if table and table not in ITEM_TABLES:
            raise ValueError(f"item table {table!r}: use one of {', '.join(ITEM_TABLES)}")
        current = review.latest_decisions(review.stored_decisions(self.cat))

        def wanted(item: ItemView) -> bool:
            return (not table or item.table == table) and (status == "all" or item.kept == (status == "kept"))

        matching = []
        for clip in self.clips.values():
            if domain and clip.domain != domain:
                continue
            items = [i for i in clip.items if wanted(i)]
            if items or (not table and status == "all"):
                matching.append((clip, items))
        per_page = max(1, min(per_page, 200))
        pages = max(1, -(-len(matching) // per_page))
        page = max(0, min(page, pages - 1))
        out = []
        for clip, items in matching[page * per_page : (page + 1) * per_page]:
            shown = []
            for item in items:
                d = current.get((item.table, item.item_id))
                same = d is not None and d.item_text == item.text
                shown.append(
                    {
                        **asdict(item),
                        "decision": d.decision if same else "",
                        "new_text": (d.new_text or "") if same else "",
                    }
                )
            out.append({**asdict(clip), "items": shown})
        return {"total": len(matching), "page": page, "pages": pages, "clips": out}

    def summary(self) -> dict:
        items = [i for c in self.clips.values() for i in c.items]
        return {
            "version": self.version,
            "clips": len(self.clips),
            "domains": self.domains,
            "tables": [t for t in ITEM_TABLES if any(i.table == t for i in items)],
            "items": len(items),
            "kept": sum(i.kept for i in items),
            "decisions": len(review.latest_decisions(review.stored_decisions(self.cat))),
        }

    def wav(self, clip_id: str) -> bytes:
        """The clip's audio as 16-bit PCM WAV (every browser plays it; FLAC support varies)."""
        if clip_id not in self.clips:
            raise KeyError(clip_id)
        for _, flac in formats.clip_audio(self.cat, self.version, [clip_id]):
            audio, sr = sf.read(io.BytesIO(flac), dtype="int16")
            buf = io.BytesIO()
            sf.write(buf, np.asarray(audio), sr, format="WAV", subtype="PCM_16")
            return buf.getvalue()
        raise KeyError(clip_id)
