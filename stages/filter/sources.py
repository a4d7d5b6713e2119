"""QC checks that keep one source file from flooding a benchmark (the ingest side: earmark.stages.ingest.sources).

- per clip shard (`same_source_rejections`): a clip whose confident evidence says what an earlier clip of the same
  source says (`evidence_similarity`: the Jaccard overlap of the lines of their rendered evidence notes,
  measurements in words only inside their bands, ≥ `[filter] same_source_evidence_similarity`) would get the same
  items: they are rejected, naming that clip (check `same_source`) — stationary noise or room tone differs sample by
  sample, not in what the experts say about it;
- over all shards (`spread_rejections`): a text kept on clips of more than `[filter] max_sources_per_text`
  different sources is rejected on every further source (check `source_spread`); absence sentences ("No music is
  present in this audio.", written by rule on purpose, as MECAT's references do) are counted apart, against
  `max_sources_per_absence_text` (0: no limit).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from earmark.core.text import normalise
from earmark.prompts import Phrases
from earmark.schemas import QCResult
from earmark.schemas.evidence import ClipEvidence
from earmark.stages.base import ItemType
from earmark.stages.facts.render import render_all
from earmark.stages.filter.audit import qc_row


# ---------------------------------------------------------------------------------------- evidence
def evidence_signature(ev: ClipEvidence, phrases: Phrases, min_confidence: float) -> frozenset[str]:
    """The clip's confident evidence as the prompts and the rule writers read it: the lines of its rendered notes
    (measurements in words only inside their bands, so 0.3 dB apart reads the same)."""
    return frozenset(line.strip() for line in render_all(ev, phrases, min_confidence).splitlines() if line.strip())


def evidence_similarity(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def same_source_rejections(
    items: Mapping[str, Sequence[Any]],
    sources: Mapping[str, tuple[str, int]],
    signatures: Mapping[str, frozenset[str]],
    threshold: float,
) -> list[QCResult]:
    """Check `same_source` on every item of the shard: rejected when its clip's evidence (`evidence_signature`)
    repeats (≥ threshold) an earlier clip's of the same source file. `sources`: clip id → (source path, clip
    index)."""
    like: dict[str, tuple[str, float]] = {}
    by_source: dict[str, list[str]] = defaultdict(list)
    for clip_id, (source, _) in sorted(sources.items(), key=lambda kv: kv[1]):
        if clip_id in signatures:
            by_source[source].append(clip_id)
    for clips in by_source.values():
        kept: list[str] = []
        for c in clips:
            best = max(((evidence_similarity(signatures[c], signatures[k]), k) for k in kept), default=(0.0, ""))
            if kept and best[0] >= threshold:
                like[c] = (best[1], best[0])
            else:
                kept.append(c)
    out = []
    for table, rows in items.items():
        for item in rows:
            if item.clip_id not in sources:
                continue
            if hit := like.get(item.clip_id):
                other, sim = hit
                why = (
                    f"its clip's evidence repeats clip {other} of the same source file {sources[other][0]} "
                    f"(#{sources[other][1]}; the lines of their evidence notes {sim:.0%} alike ≥ "
                    f"filter.same_source_evidence_similarity): that clip's items say the same"
                )
                out.append(qc_row(table, item, "same_source", False, why, sim))
            else:
                out.append(qc_row(table, item, "same_source", True, None, None))
    return out


# ------------------------------------------------------------------------------------------ spread
def is_absence(table: str, item: Any) -> bool:
    return table == "captions" and getattr(item, "model", "") == "rule" and item.prompt_name == "absent_rule"


def spread_rejections(
    items: Mapping[str, Sequence[Any]],
    sources: Mapping[str, str],
    rejected: set[tuple[str, str]],
    max_sources: int,
    max_absence_sources: int,
    kinds: Mapping[str, ItemType],
) -> list[QCResult]:
    """Check `source_spread` (`kinds`: the item types, whose main text is compared): per table, a (normalised) text that other checks kept on clips of more than
    `max_sources` different source files is kept on the first of them (in source path order) and rejected on
    the rest; absence sentences (the texts of rule-written absence captions, in any table) against
    `max_absence_sources` (0: no limit). `rejected`: (table, item id) pairs some other check rejected (they do
    not count)."""
    # an absence sentence is one, whichever table repeats it (a QA answer or an instruction's answer may be)
    absence = {normalise(c.text) for c in items.get("captions", ()) if is_absence("captions", c)}
    out = []
    for table, rows in items.items():
        field = kinds[table].main_text
        groups: dict[str, list[Any]] = defaultdict(list)
        for item in rows:
            if (table, item.item_id) not in rejected:
                groups[normalise(getattr(item, field))].append(item)
        for text, group in groups.items():
            limit = max_absence_sources if text in absence else max_sources
            order = sorted({sources.get(i.clip_id, i.clip_id) for i in group})
            allowed = set(order[:limit]) if limit else set(order)
            for item in group:
                src = sources.get(item.clip_id, item.clip_id)
                if src in allowed:
                    out.append(qc_row(table, item, "source_spread", True, None, float(len(order))))
                    continue
                setting = "max_sources_per_absence_text" if text in absence else "max_sources_per_text"
                shown = ", ".join(order[:3]) + (", …" if limit > 3 else "")
                why = (
                    f"the same {field} is kept on clips of {len(order)} source files; at most filter.{setting} = "
                    f"{limit} keep it ({shown})"
                )
                out.append(qc_row(table, item, "source_spread", False, why, float(len(order))))
    return _whole_sets(out)


def _whole_sets(rows: list[QCResult]) -> list[QCResult]:
    """An entailment set ships whole: when one hypothesis of a clip's set is rejected, so are the others."""
    broken = {r.clip_id: r.item_id for r in rows if r.item_table == "entailment" and not r.keep}
    return [
        r.model_copy(
            update={"keep": False, "reason": f"its set's hypothesis {broken[r.clip_id]} is rejected: a set ships whole"}
        )
        if r.item_table == "entailment" and r.keep and r.clip_id in broken
        else r
        for r in rows
    ]
