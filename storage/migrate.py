"""Move a dataset built before the DuckLake catalog (`<dataset>/catalog.duckdb`) into its DuckLake catalog.

Runs, shard registrations and the ingest manifest are copied as they are; every old version is published
again, in order, from the same shard files, so it keeps its number and its rows and becomes a lake snapshot.
The old file is then renamed `catalog.duckdb.migrated` (kept, not deleted).
"""

from __future__ import annotations

import json
from functools import partial

import duckdb

from earmark.core.config import Config
from earmark.storage.catalog import Catalog, catalog_options
from earmark.storage.lease import write_lease

_COPIED = ("runs", "shards", "manifest")


def migrate_legacy(cfg: Config) -> str:
    root = cfg.data_root.resolve() / cfg.dataset
    legacy = root / "catalog.duckdb"
    if not legacy.exists():
        raise FileNotFoundError(f"{legacy} not found: dataset {cfg.dataset!r} has no pre-DuckLake catalog to migrate")
    old = duckdb.connect(str(legacy), read_only=True)
    try:
        have = {t for (t,) in old.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        rows = {t: old.execute(f"SELECT * FROM {t}").fetchall() if t in have else [] for t in _COPIED}
        versions = old.execute("SELECT version, run_id, note, stats_json FROM versions ORDER BY version").fetchall()
        members = old.execute("SELECT version, table_name, key FROM version_shards ORDER BY 1, 2, 3").fetchall()
    finally:
        old.close()

    cat = Catalog(cfg.data_root, cfg.dataset, _migrating=True, **catalog_options(cfg))
    with write_lease(cfg, cat, cat.new_run_id(), "migrate"):  # a second migrate at once is refused, naming this one
        if cat.versions():
            raise RuntimeError(
                f"the DuckLake catalog of {cfg.dataset!r} already has versions {cat.versions()}; not migrating twice"
            )
        cat._transaction(partial(_copy, rows))
        for version, run_id, note, stats_json in versions:
            shards: dict[str, list[str]] = {}
            for v, table, key in members:
                if v == version:
                    shards.setdefault(table, []).append(key)
            got, _ = cat.publish(shards, run_id, note or "", json.loads(stats_json or "{}"))
            if got != version:
                raise RuntimeError(f"migrating {version}: the lake numbered it {got}")
        legacy.rename(legacy.with_name("catalog.duckdb.migrated"))
    counts = ", ".join(f"{len(v)} {t}" for t, v in rows.items())
    return f"migrated {cfg.dataset!r}: {counts}, {len(versions)} versions → DuckLake {cat.location.metadata}"


def _copy(rows: dict[str, list[tuple]], con: duckdb.DuckDBPyConnection) -> None:
    for table, data in rows.items():
        if data:
            width = len(data[0])
            con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * width)})", data)
