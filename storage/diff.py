"""What changed between two dataset versions, table by table: rows added, changed, removed, unchanged.

A row's identity is its item (`item_id`), its clip (`clip_id`) for per-clip tables, (item, check) for
`qc`, the source file for `quarantine`; `rejections` have no identity, so a changed rejection counts as
one removed and one added. "Changed" means same identity, different content (any column).
"""

from __future__ import annotations

from dataclasses import dataclass

from earmark.schemas import TABLES
from earmark.storage.catalog import Catalog

_IDENTITY = {
    "qc": "item_table || '/' || item_id || '/' || \"check\"",
    "quarantine": "source_path",
    "rejections": "md5(CAST(t AS VARCHAR))",
    "scores": None,
}


def _identity(table: str) -> str | None:
    if table in _IDENTITY:
        return _IDENTITY[table]
    fields = TABLES[table].model_fields
    return "item_id" if "item_id" in fields else "clip_id" if "clip_id" in fields else None


@dataclass(frozen=True)
class TableDiff:
    table: str
    added: int
    changed: int
    removed: int
    unchanged: int

    @property
    def touched(self) -> bool:
        return bool(self.added or self.changed or self.removed)


def version_diff(cat: Catalog, old: str, new: str) -> list[TableDiff]:
    views = {
        (s, t)
        for s, t in cat.query(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema IN (?, ?)", [old, new]
        )
    }
    out = []
    for table in TABLES:
        ident = _identity(table)
        if ident is None or not ({(old, table), (new, table)} & views):
            continue

        def rows(version: str, table: str = table, ident: str = ident) -> str:  # no view (older version): no rows
            if (version, table) in views:
                return f"SELECT {ident} AS id, md5(CAST(t AS VARCHAR)) AS h FROM {version}.{table} t"
            return "SELECT NULL::VARCHAR AS id, NULL::VARCHAR AS h WHERE false"

        sql = f"""
            WITH a AS ({rows(old)}), b AS ({rows(new)})
            SELECT count(*) FILTER (WHERE a.id IS NULL),
                   count(*) FILTER (WHERE a.id IS NOT NULL AND b.id IS NOT NULL AND a.h <> b.h),
                   count(*) FILTER (WHERE b.id IS NULL),
                   count(*) FILTER (WHERE a.h = b.h)
            FROM a FULL OUTER JOIN b ON a.id = b.id"""
        added, changed, removed, same = cat.query(sql)[0]
        out.append(TableDiff(table, int(added), int(changed), int(removed), int(same)))
    return out


def diff_markdown(old: str, new: str, diffs: list[TableDiff], dataset: str = "") -> str:
    lines = [f"# {dataset} {old} → {new}".strip(), ""]
    if old == new:
        return "\n".join(lines + ["Nothing changed: the re-run published no new version.", ""])
    lines += ["| table | added | changed | removed | unchanged |", "|---|---|---|---|---|"]
    lines += [
        f"| {d.table} | {d.added} | {d.changed} | {d.removed} | {d.unchanged} |"
        for d in diffs
        if d.touched or d.unchanged
    ]
    untouched = [d.table for d in diffs if not d.touched and d.unchanged]
    lines += ["", f"Tables without any change: {', '.join(untouched) or 'none'}.", ""]
    return "\n".join(lines)
