"""How many of a build's kept items state something specific, read by the claim audit, and why the rest do not.

    .venv/bin/python benchmarks/quality/item_specificity.py data/fresh18 [--version v0001] [--sheet SHEET --verdicts V]

An item is *specific* when the audit finds in it a claim of a specific kind that the evidence decides (supported,
or contradicted in a contradiction hypothesis): quoted words, a speaker count, a voice's gender or age, an emotion,
an instrument, genre or mood, tempo, key or beat, a named sound event, a moment, the order or count of events.
Presence and absence of speech, music and sound, broad timing words ("throughout"), and recording conditions
(loudness, noise, echo, bandwidth, quality) are not: the blind checks' rubric grades those GENERIC, or sets them
aside. The rest is split by why:

- *silent clip*: the evidence says the clip is silent, so nothing in it can be named;
- *absence only*: every claim denies something ("No music is present."), which MECAT's content captions must say
  of absent content;
- *conditions by kind*: an environment caption (MECAT's content-unrelated caption) or a quality-assessment
  question, which are about recording conditions by their kind;
- *conditions only*: any other item that states recording conditions, beside at most the kinds of content heard
  ("One or more people speak throughout. A recording of speech, clean.");
- *presence only*: what is heard is named only by its kind ("One or more people speak throughout.").

Silent clips, absence only and conditions by kind are generic by MECAT's design: the share left is the ceiling a blind "specific" share can reach
with these item kinds, whatever the experts hear. With `--sheet` and `--verdicts` (a blind check's sheet and its
verdicts, benchmarks/quality/hand_check_sample.py) it also prints how this reading agrees with the reviewer's.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

from earmark.core.config import EvidenceSection
from earmark.schemas import ClipEvidence, from_table
from earmark.stages.facts import bands
from earmark.stages.filter.claims import SUPPORTED, UNSUPPORTED
from earmark.stages.publish import kept_items
from earmark.stages.synthesize import ITEM_TYPES
from earmark.storage import Catalog

SPECIFIC = {
    "quote",
    "speakers",
    "gender",
    "age",
    "emotion",
    "instrument",
    "genre",
    "mood",
    "tempo",
    "key",
    "beat",
    "event",
    "moment",
    "order",
    "count",
}
CONDITIONS = {*bands.RECORDING, "descriptor", "clipping", "quality"}
WHY = ("specific", "silent clip", "absence only", "conditions by kind", "conditions only", "presence only")


ABOUT_CONDITIONS = {"environment", "quality_assessment"}  # MECAT's content-unrelated caption; QA's QAS category


def reading(found: list, silent: bool, about_conditions: bool = False) -> str:
    """Why one kept item is specific or not, from the claims the audit found in it."""
    if any(c.claim_type in SPECIFIC and c.verdict != UNSUPPORTED for c in found):
        return "specific"
    if silent:
        return "silent clip"
    if about_conditions:
        return "conditions by kind"
    types = {c.claim_type for c in found if c.verdict == SUPPORTED or c.claim_type == "absence"}
    if types and types <= {"absence", "silence"}:
        return "absence only"
    if types & CONDITIONS and types <= CONDITIONS | {"presence", "absence", "silence", "when"}:
        return "conditions only"
    return "presence only"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", type=Path)
    ap.add_argument("--version")
    ap.add_argument("--sheet", type=Path, help="a blind check's sheet (hand_check_sample.py --blind)")
    ap.add_argument("--verdicts", type=Path, help="its verdicts file")
    args = ap.parse_args()
    cat = Catalog(args.dataset_dir.parent, args.dataset_dir.name)
    v = args.version or cat.latest_version()
    thr = EvidenceSection().min_confidence
    shards = cat.version_shards(v)["evidence"]
    evidence = {e.clip_id: e for e in from_table(ClipEvidence, cat.read("evidence", shards))}  # as specificity.py
    tally: dict[str, Counter[str]] = {}
    by_text: dict[str, str] = {}
    for table, kind in ITEM_TYPES.items():
        tally[table] = Counter()
        for (row,) in cat.query(f"SELECT to_json(t) FROM {v}.{table} t WHERE t.item_id IN {kept_items(v)}"):
            item = kind.record.model_validate_json(row)
            ev = evidence.get(item.clip_id)
            if ev is None:
                continue
            silent = ev.get("content.silent") is not None and ev.get("content.silent").value == "silent"
            _, _, _, found = kind.audit(item, ev, thr)
            kind_of = getattr(item, "kind", None) or getattr(item, "category", None)
            why = reading(found, silent, kind_of in ABOUT_CONDITIONS)
            tally[table][why] += 1
            for f in kind.texts:
                if text := getattr(item, f, None):
                    by_text[_norm(str(text))] = why
    print(f"{args.dataset_dir.name} {v}: kept items by what they state\n")
    print("| items | kept | " + " | ".join(WHY) + " |\n|---|---|" + "---|" * len(WHY))
    total: Counter[str] = Counter()
    for table, c in tally.items():
        total.update(c)
        print(f"| {table} | {sum(c.values())} | " + " | ".join(str(c[w]) for w in WHY) + " |")
    n = sum(total.values())
    print(f"| **all** | {n} | " + " | ".join(f"{total[w]} ({total[w] / n:.0%})" for w in WHY) + " |")
    by_design = total["silent clip"] + total["absence only"] + total["conditions by kind"]
    print(
        f"\nspecific: {total['specific'] / n:.1%}; generic by the item kinds' design: {by_design / n:.1%} (ceiling "
        f"of a specific share: {1 - by_design / n:.1%})"
    )
    if args.sheet and args.verdicts:
        agreement(args.sheet, args.verdicts, by_text)


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def agreement(sheet: Path, verdicts: Path, by_text: dict[str, str]) -> None:
    """The reviewer's verdict beside this reading, item by item (matched by the item's text on the sheet)."""
    texts: dict[int, str] = {}
    for block in re.split(r"\n(?=#+ *\d+[.:)])", sheet.read_text()):
        if m := re.match(r"#+ *(\d+)[.:)]", block):
            texts[int(m.group(1))] = _norm(block.split("truth:")[0].split("\n", 1)[-1])
    grades: dict[int, str] = {}
    for line in verdicts.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1].isdigit():
            grade = next((c for c in cells if c in ("SPECIFIC", "GENERIC", "NOT CHECKABLE", "WRONG")), None)
            if grade:
                grades[int(cells[1])] = grade
    pairs: Counter[tuple[str, str]] = Counter()
    for i, grade in grades.items():
        block = texts.get(i, "")
        why = next((w for t, w in sorted(by_text.items(), key=lambda kv: -len(kv[0])) if t and t in block), None)
        pairs[(grade, why or "not matched")] += 1
    print("\n| reviewer | this reading | items |\n|---|---|---|")
    for (grade, why), k in sorted(pairs.items()):
        print(f"| {grade} | {why} | {k} |")


if __name__ == "__main__":
    main()
