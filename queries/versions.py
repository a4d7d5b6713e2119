"""A dataset's versions, read back: what each one is, what it holds, what changed between two.

Everything here reads the catalog (`versions`, `runs` and the `vNNNN.<table>` time-travel views); nothing is
written. `earmark versions list|show|diff` prints what these functions return.

- `list_versions`: per version its creation time, what made it (`label`: build, rerun of a stage, review …)
  and the items every QC check kept, per item table;
- `show_version`: rows per table (total, and kept for item tables), the prompts and models that wrote the
  items, the QC rejections per check, and the dataset card publish wrote;
- `diff_versions`: rows added / changed / removed per table (`storage.diff`, the rerun's diff) and how the
  kept items moved.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from earmark.schemas import ITEM_TABLES, TABLES
from earmark.stages.publish import dataset_card, kept_items
from earmark.storage import Catalog
from earmark.storage.diff import TableDiff, version_diff


@dataclass(frozen=True)
class VersionInfo:
    version: str
    created_at: datetime | None
    label: str  # what made it: "build", "rerun synthesize (entailment)", "review of v0001", …
    parent: str | None
    run_id: str | None
    kept: dict[str, int | None]  # item table → items every QC check kept (None: the version has no QC)


@dataclass(frozen=True)
class Generator:
    """One (prompt, model) that wrote items of a table, and how many of them the version holds / kept."""

    table: str
    prompt_name: str
    prompt_sha: str
    model: str
    items: int
    kept: int | None  # None: the version has no QC


@dataclass(frozen=True)
class CheckSummary:
    table: str
    check: str
    checked: int
    rejected: int


@dataclass
class VersionDetail:
    info: VersionInfo
    counts: dict[str, tuple[int, int | None]]  # table → (rows, kept items or None for non-item tables)
    generators: list[Generator] = field(default_factory=list)
    qc: list[CheckSummary] = field(default_factory=list)
    card: str = ""
    card_path: str | None = None  # the card publish wrote, or None when it was rendered here


@dataclass
class VersionsDiff:
    old: str
    new: str
    tables: list[TableDiff]
    kept: list[KeptChange]


@dataclass(frozen=True)
class KeptChange:
    """How the kept items of one table moved: counts in each version, items that left or joined the set."""

    table: str
    old: int | None  # None: that version has no QC (or not this table)
    new: int | None
    left: int
    joined: int


# ------------------------------------------------------------------------------------------ resolving
def resolve_version(cat: Catalog, version: str | None) -> str:
    """`version` as stored (`v0003`; `3` and `latest` are accepted), or ValueError listing the versions."""
    versions = cat.versions()
    if not versions:
        raise ValueError(
            f"dataset {cat.dataset!r} has no published version yet; run `earmark build … -d {cat.dataset}`"
        )
    if version is None or version == "latest":
        return versions[-1]
    name = f"v{int(version):04d}" if str(version).isdigit() else str(version)
    if name not in versions:
        raise ValueError(f"dataset {cat.dataset!r} has no version {version!r}; versions: {_span(versions)}")
    return name


def _span(versions: list[str], limit: int = 12) -> str:
    if len(versions) <= limit:
        return ", ".join(versions)
    return f"{', '.join(versions[:3])}, …, {', '.join(versions[-(limit - 3) :])} ({len(versions)} in all)"


def _views(cat: Catalog, versions: list[str]) -> set[tuple[str, str]]:
    """(version, table) of every time-travel view that exists (an old version may lack a newer table's)."""
    if not versions:
        return set()
    rows = cat.query(
        "SELECT table_schema, table_name FROM information_schema.tables WHERE list_contains(?, table_schema)",
        [versions],
    )
    return {(s, t) for s, t in rows}


# ---------------------------------------------------------------------------------------------- list
def label(note: str | None, flow: str | None, run_config: str | None) -> str:
    """What made a version, from its publish note; a rerun published before reruns named themselves (their
    note said "build") is recognised by its run's flow and config."""
    note = (note or "").strip()
    if flow == "rerun" and note in ("", "build"):
        cfg = json.loads(run_config or "{}")
        return rerun_label(cfg.get("stage", "?"), cfg.get("items"), cfg.get("base"))
    return note or "(no note)"


def rerun_label(stage: str, items: list[str] | None = None, base: str | None = None) -> str:
    """The publish note of `earmark rerun`: the stage, for synthesis the item types regenerated, the base."""
    what = f" ({', '.join(items)})" if stage == "synthesize" and items else ""
    return f"rerun {stage}{what}" + (f" from {base}" if base else "")


def _kept_counts(cat: Catalog, version: str, views: set[tuple[str, str]]) -> dict[str, int | None]:
    """Item table → items every QC check kept (None: no QC in the version); tables without rows are left out."""
    tables = [
        t for t in ITEM_TABLES if (version, t) in views and cat.query(f"SELECT count(*) FROM {version}.{t}")[0][0]
    ]
    if (version, "qc") not in views or not cat.query(f"SELECT count(*) FROM {version}.qc")[0][0]:
        return dict.fromkeys(tables)
    return {t: len(_kept_ids(cat, version, t)) for t in tables}


def _kept_ids(cat: Catalog, version: str, table: str) -> set[str]:
    return {i for (i,) in cat.query(f"SELECT item_id FROM {version}.{table} WHERE item_id IN {kept_items(version)}")}


def list_versions(cat: Catalog, only: Sequence[str] | None = None) -> list[VersionInfo]:
    """Every published version (or `only` these), oldest first."""
    rows = cat.query(
        "SELECT v.version, v.created_at, v.note, v.parent, v.run_id, r.flow, r.config_json "
        "FROM versions v LEFT JOIN (SELECT run_id, any_value(flow) AS flow, any_value(config_json) AS config_json "
        "FROM runs GROUP BY run_id) r USING (run_id) WHERE ? IS NULL OR list_contains(?, v.version) "
        "ORDER BY v.version",
        [None if only is None else list(only)] * 2,
    )
    views = _views(cat, [r[0] for r in rows])
    return [
        VersionInfo(version, created, label(note, flow, config), parent, run_id, _kept_counts(cat, version, views))
        for version, created, note, parent, run_id, flow, config in rows
    ]


# ---------------------------------------------------------------------------------------------- show
def show_version(cat: Catalog, version: str) -> VersionDetail:
    """One version's contents (see the module doc); `version` as `resolve_version` returns it."""
    (info,) = list_versions(cat, [version])
    views = _views(cat, [version])
    kept_sql = kept_items(version)
    has_qc = any(v is not None for v in info.kept.values())
    counts: dict[str, tuple[int, int | None]] = {}
    for table in TABLES:
        if (version, table) not in views:
            continue
        n = int(cat.query(f"SELECT count(*) FROM {version}.{table}")[0][0])
        if n:
            counts[table] = (n, info.kept.get(table) if table in ITEM_TABLES else None)
    generators = []
    for table in ITEM_TABLES:
        if (version, table) not in views:
            continue
        kept_col = f"count(*) FILTER (WHERE item_id IN {kept_sql})" if has_qc else "NULL"
        for name, sha, model, n, kept in cat.query(
            f"SELECT prompt_name, prompt_sha, model, count(*), {kept_col} FROM {version}.{table} "
            "GROUP BY 1, 2, 3 ORDER BY 1, 3"
        ):
            generators.append(Generator(table, name, sha, model, int(n), None if kept is None else int(kept)))
    qc = (
        [
            CheckSummary(t, c, int(n), int(r))
            for t, c, n, r in cat.query(
                f'SELECT item_table, "check", count(*), count(*) FILTER (WHERE NOT keep) FROM {version}.qc '
                "GROUP BY 1, 2 ORDER BY 1, 2"
            )
        ]
        if (version, "qc") in views
        else []
    )
    card_file = cat.dataset_path("exports", version, "README.md")
    if card_file.is_file():
        card, card_path = card_file.read_text(), str(card_file)
    else:  # e.g. exports deleted: the same card, from the catalog
        exported = {f"{t} (kept)": n for t, n in info.kept.items() if n is not None}
        card, card_path = dataset_card(cat, version, exported), None
    return VersionDetail(info, counts, generators, qc, card, card_path)


# ---------------------------------------------------------------------------------------------- diff
def default_pair(cat: Catalog) -> tuple[str, str]:
    """The two latest versions (ValueError when there are fewer than two)."""
    versions = cat.versions()
    if len(versions) < 2:
        raise ValueError(
            f"dataset {cat.dataset!r} has {len(versions)} version(s) ({_span(versions) or 'none'}); a diff needs two "
            "(a build on new inputs, `earmark rerun` or `earmark review import` publishes the next)"
        )
    return versions[-2], versions[-1]


def diff_versions(cat: Catalog, old: str, new: str) -> VersionsDiff:
    """Rows added / changed / removed per table between two versions, and how the kept items moved."""
    infos = {v.version: v for v in list_versions(cat, [old, new])}
    kept = []
    for t in ITEM_TABLES:
        a, b = infos[old].kept.get(t), infos[new].kept.get(t)
        if t not in infos[old].kept and t not in infos[new].kept:
            continue
        ids_a = _kept_ids(cat, old, t) if a is not None else set()
        ids_b = _kept_ids(cat, new, t) if b is not None else set()
        kept.append(KeptChange(t, a, b, len(ids_a - ids_b), len(ids_b - ids_a)))
    return VersionsDiff(old, new, version_diff(cat, old, new), kept)
