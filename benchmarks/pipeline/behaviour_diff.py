"""Compare the *content* of two builds of the same corpus, table by table (behaviour-preservation check).

    .venv/bin/python benchmarks/pipeline/behaviour_diff.py OLD_DATASET_DIR NEW_DATASET_DIR [--show 20]

`--every-column` (two builds of the same code and input: a reproducibility check) compares every column, the
lineage columns, `evidence_json`, `facts` and `audio_flac` included, and floats exactly.

Each directory is a dataset directory (`data/<dataset>`): its DuckLake catalog (or, for a dataset built
before DuckLake, its `catalog.duckdb`); the main views (the latest version) are read with DuckDB. Lineage columns (prompt sha, model/backend version strings, shard
keys, evidence sha) are left out: the question is whether the texts, labels, scores and keep/reason
verdicts are the same. Rows are matched by their natural key (item_id, or clip_id + the table's index
columns); floats are compared to 1e-6. A table whose key is not unique (e.g. `claims`, several per clip) is
compared as a multiset of whole rows (floats rounded to 6 decimals): identical = rows in both, the rest old- or
new-only. A rejection's `qc` row is named by its position among the shard's rejections
(`<clip>:<prompt>:rejected:<i>`), which follows the order of the rejection shards' keys: it is compared
without the position (`:rejected:#`). Prints, per table: rows in each, identical, changed, only-old,
only-new, and the first changed rows with the columns that differ.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections import Counter
from pathlib import Path

import duckdb

from earmark.storage import Catalog

LINEAGE = {"prompt_sha", "expert_version", "evidence_sha", "audio_flac", "evidence_json", "facts", "eval_id"}
KEYS = {
    "captions": ("item_id",),
    "qa": ("item_id",),
    "entailment": ("item_id",),
    "instructions": ("item_id",),
    "qc": ("item_table", "item_id", "check"),
    "rejections": ("clip_id", "table", "reason"),
    "clips": ("clip_id",),
    "quarantine": ("source_path",),
    "reviews": ("item_table", "item_id", "decided_at"),
}


class _Source:
    """A dataset directory's latest version: its DuckLake catalog, or a pre-DuckLake `catalog.duckdb`."""

    def __init__(self, directory: Path):
        legacy = directory / "catalog.duckdb"
        self.con = duckdb.connect(str(legacy), read_only=True) if legacy.exists() else None
        self.cat = None if self.con else Catalog(directory.parent, directory.name)

    def run(self, sql: str) -> tuple[list[str], list[tuple]]:
        if self.con is not None:
            cur = self.con.execute(sql)
            return [d[0] for d in cur.description], cur.fetchall()
        return self.cat.cursor_query(sql)

    def views(self) -> set[str]:
        return {
            r[0]
            for r in self.run(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' AND table_type = 'VIEW'"
            )[1]
        }


_REJECTED = re.compile(r":rejected:\d+$")


def _rows(src: _Source, table: str) -> tuple[list[str], list[tuple]]:
    cols, rows = src.run(f"SELECT * FROM {table}")
    if table == "qc" and "item_id" in cols:
        i = cols.index("item_id")
        rows = [(*r[:i], _REJECTED.sub(":rejected:#", r[i]), *r[i + 1 :]) for r in rows]
    return cols, rows


def _hashable(row: tuple) -> str:
    def fix(x):
        return round(x, 6) if isinstance(x, float) and not math.isnan(x) else x

    return json.dumps([fix(x) for x in row], default=str, sort_keys=True)


TOLERANCE = 1e-6  # floats; 0 with --every-column (two builds of one code: identical, not close)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= TOLERANCE
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def compare(old: Path, new: Path, show: int, lineage: frozenset[str] = frozenset(LINEAGE)) -> int:
    a, b = _Source(old), _Source(new)
    tables = sorted(a.views() & b.views())
    print("| table | old rows | new rows | identical | changed | only old | only new |\n|---|---|---|---|---|---|---|")
    changes: list[str] = []
    total_changed = 0
    for table in tables:
        cols_a, rows_a = _rows(a, table)
        cols_b, rows_b = _rows(b, table)
        cols = [c for c in cols_a if c in cols_b and c not in lineage]
        key = [c for c in KEYS.get(table, ("clip_id",)) if c in cols]
        idx_a, idx_b = [cols_a.index(c) for c in cols], [cols_b.index(c) for c in cols]
        by_a = {tuple(r[cols_a.index(k)] for k in key): tuple(r[i] for i in idx_a) for r in rows_a}
        by_b = {tuple(r[cols_b.index(k)] for k in key): tuple(r[i] for i in idx_b) for r in rows_b}
        if len(by_a) < len(rows_a) or len(by_b) < len(rows_b):  # the key is not unique: whole rows, as multisets
            ca = Counter(_hashable(tuple(r[i] for i in idx_a)) for r in rows_a)
            cb = Counter(_hashable(tuple(r[i] for i in idx_b)) for r in rows_b)
            only_a, only_b = sum((ca - cb).values()), sum((cb - ca).values())
            total_changed += only_a + only_b
            print(f"| {table} | {len(rows_a)} | {len(rows_b)} | {sum((ca & cb).values())} | – | {only_a} | {only_b} |")
            for row in sorted((ca - cb).elements())[: max(0, show - len(changes))]:
                changes.append(f"- {table} {row[:200]}: only in old")
            for row in sorted((cb - ca).elements())[: max(0, show - len(changes))]:
                changes.append(f"- {table} {row[:200]}: only in new")
            continue
        same = changed = 0
        for k in by_a.keys() & by_b.keys():
            if _same(by_a[k], by_b[k]):
                same += 1
                continue
            changed += 1
            diff = {c: (x, y) for c, x, y in zip(cols, by_a[k], by_b[k]) if not _same(x, y)}
            if len(changes) < show:
                changes.append(
                    f"- {table} {k}: "
                    + "; ".join(f"{c}: {str(x)[:90]!r} → {str(y)[:90]!r}" for c, (x, y) in diff.items())
                )
        only_a, only_b = len(by_a.keys() - by_b.keys()), len(by_b.keys() - by_a.keys())
        total_changed += changed + only_a + only_b
        print(f"| {table} | {len(rows_a)} | {len(rows_b)} | {same} | {changed} | {only_a} | {only_b} |")
        for k in sorted(by_a.keys() - by_b.keys(), key=str)[: max(0, show - len(changes))]:
            changes.append(f"- {table} {k}: only in old")
        for k in sorted(by_b.keys() - by_a.keys(), key=str)[: max(0, show - len(changes))]:
            changes.append(f"- {table} {k}: only in new")
    only = sorted(a.views() ^ b.views())
    if only:
        print(f"\nviews in one build only: {', '.join(only)}")
    if changes:
        print("\nFirst differences:\n" + "\n".join(changes))
    return total_changed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--show", type=int, default=30, help="how many differing rows to print")
    ap.add_argument(
        "--every-column",
        action="store_true",
        help="two builds of the same code (reproducibility): compare every column, lineage, evidence_json, facts "
        "and audio_flac included, and floats exactly",
    )
    args = ap.parse_args()
    global TOLERANCE
    if args.every_column:
        TOLERANCE = 0.0
    n = compare(args.old, args.new, args.show, frozenset() if args.every_column else frozenset(LINEAGE))
    print(f"\n{n} rows differ in content")


if __name__ == "__main__":
    main()
