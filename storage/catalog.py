"""The DuckDB catalog of one dataset: runs, shards, versions, and a view per table.

Layout: `<data_root>/<dataset>/catalog.duckdb` and `<data_root>/<dataset>/<table>/<key>.parquet`.
Connections are opened per operation and closed at once, so several tasks (threads or worker processes)
can share the file: DuckDB allows one writing process at a time, and a busy file is retried, not failed.
Views in the main schema show the latest published version; `v0003.captions` shows version v0003.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from earmark.schemas import TABLES, arrow_schema
from earmark.storage.shards import ShardFile, read_shard, write_shard

_DDL = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, flow VARCHAR, started_at TIMESTAMP, finished_at TIMESTAMP,
    status VARCHAR, config_json VARCHAR, stats_json VARCHAR);
CREATE TABLE IF NOT EXISTS shards (
    key VARCHAR, table_name VARCHAR, stage VARCHAR, stage_version VARCHAR, inputs VARCHAR[],
    prompt_sha VARCHAR, model VARCHAR, config_json VARCHAR, path VARCHAR, rows BIGINT, bytes BIGINT,
    sha256 VARCHAR, run_id VARCHAR, created_at TIMESTAMP, PRIMARY KEY (key, table_name));
CREATE TABLE IF NOT EXISTS versions (
    version VARCHAR PRIMARY KEY, created_at TIMESTAMP, run_id VARCHAR, parent VARCHAR, note VARCHAR,
    stats_json VARCHAR);
CREATE TABLE IF NOT EXISTS version_shards (version VARCHAR, key VARCHAR, table_name VARCHAR);
CREATE TABLE IF NOT EXISTS manifest (
    source VARCHAR PRIMARY KEY, shard INTEGER, run_id VARCHAR, added_at TIMESTAMP);
"""


@dataclass(frozen=True)
class ShardRef:
    """What a stage task returns: the key of a shard and the tables it wrote under that key."""

    key: str
    tables: tuple[str, ...]
    rows: int = 0
    skipped: bool = False


@dataclass(frozen=True)
class ShardMeta:
    stage: str
    stage_version: str
    inputs: Sequence[str]
    prompt_sha: str | None = None
    model: str | None = None
    config: Mapping[str, Any] | None = None


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Catalog:
    _locks: dict[str, threading.RLock] = {}
    _locks_guard = threading.Lock()

    def __init__(self, data_root: Path, dataset: str, *, busy_timeout_s: float = 120.0):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", dataset):
            raise ValueError(f"dataset name {dataset!r}: use letters, digits, '_', '-', '.' only")
        self.root = Path(data_root).resolve() / dataset
        self.dataset = dataset
        self.path = self.root / "catalog.duckdb"
        self.busy_timeout_s = busy_timeout_s
        self.root.mkdir(parents=True, exist_ok=True)
        with Catalog._locks_guard:
            self._lock = Catalog._locks.setdefault(str(self.path), threading.RLock())
        with self.connect() as con:
            con.execute(_DDL)
        self._ensure_empty_shards()

    # ------------------------------------------------------------------------------------ connection
    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        deadline = time.monotonic() + self.busy_timeout_s
        with self._lock:
            while True:
                try:
                    con = duckdb.connect(str(self.path), read_only=read_only)
                    break
                except duckdb.IOException as exc:  # another process holds the write lock
                    if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            try:
                yield con
            finally:
                con.close()

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        with self.connect() as con:
            return con.execute(sql, params or []).fetchall()

    # -------------------------------------------------------------------------------------- manifest
    def manifest(self) -> dict[str, int]:
        """Which ingest shard every input file ever built into this dataset belongs to (display path → shard)."""
        return dict(self.query("SELECT source, shard FROM manifest"))

    def extend_manifest(self, assigned: Mapping[str, int], run_id: str | None) -> None:
        """Append new files' shard assignments; a file already in the manifest keeps its shard (append-only)."""
        if not assigned:
            return
        rows = [(source, shard, run_id, _now()) for source, shard in assigned.items()]
        with self.connect() as con:
            con.executemany("INSERT OR IGNORE INTO manifest VALUES (?, ?, ?, ?)", rows)

    # ---------------------------------------------------------------------------------------- shards
    def shard_path(self, table: str, key: str) -> Path:
        return self.root / table / f"{key}.parquet"

    def has_shard(self, key: str, tables: Sequence[str]) -> bool:
        """True when every table of the shard is registered and its file is still on disk."""
        rows = self.query(
            "SELECT table_name, path FROM shards WHERE key = ? AND list_contains(?, table_name)", [key, list(tables)]
        )
        found = {t: p for t, p in rows}
        return all(t in found and (self.root / found[t]).exists() for t in tables)

    def shard_rows(self, key: str, tables: Sequence[str]) -> int:
        rows = self.query(
            "SELECT coalesce(sum(rows), 0) FROM shards WHERE key = ? AND list_contains(?, table_name)",
            [key, list(tables)],
        )
        return int(rows[0][0])

    def write_shard(self, key: str, tables: Mapping[str, pa.Table], meta: ShardMeta, run_id: str | None) -> ShardRef:
        """Write every table's file atomically, then register them all in one transaction."""
        files: dict[str, ShardFile] = {}
        for name, table in tables.items():
            expected = arrow_schema(TABLES[name])
            if not table.schema.equals(expected):
                table = table.cast(expected)
            files[name] = write_shard(self.shard_path(name, key), table)
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            for name, f in files.items():
                con.execute("DELETE FROM shards WHERE key = ? AND table_name = ?", [key, name])
                con.execute(
                    "INSERT INTO shards VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        key,
                        name,
                        meta.stage,
                        meta.stage_version,
                        list(meta.inputs),
                        meta.prompt_sha,
                        meta.model,
                        json.dumps(dict(meta.config or {}), sort_keys=True, default=str),
                        str(f.path.relative_to(self.root)),
                        f.rows,
                        f.bytes,
                        f.sha256,
                        run_id,
                        _now(),
                    ],
                )
            con.execute("COMMIT")
        return ShardRef(key=key, tables=tuple(tables), rows=sum(f.rows for f in files.values()))

    def read(self, table: str, keys: Sequence[str]) -> pa.Table:
        """Concatenate one table's shards for the given keys (in the order given)."""
        parts = [read_shard(self.shard_path(table, k)) for k in keys if self.shard_path(table, k).exists()]
        if not parts:
            return arrow_schema(TABLES[table]).empty_table()
        return pa.concat_tables(parts, promote_options="default")

    # --------------------------------------------------------------------------------------- lineage
    def shard_inputs(self, table: str, keys: Sequence[str]) -> dict[str, list[str]]:
        """shard key → the input identities it was computed from (its catalog lineage)."""
        if not keys:
            return {}
        rows = self.query(
            "SELECT key, inputs FROM shards WHERE table_name = ? AND list_contains(?, key)", [table, list(keys)]
        )
        return {k: list(inputs) for k, inputs in rows}

    def keys_where(self, *, stage: str | None = None, table: str | None = None) -> list[str]:
        """Every registered shard key of a stage and/or table, sorted."""
        rows = self.query(
            "SELECT DISTINCT key FROM shards WHERE (? IS NULL OR stage = ?) "
            "AND (? IS NULL OR table_name = ?) ORDER BY key",
            [stage, stage, table, table],
        )
        return [k for (k,) in rows]

    # ------------------------------------------------------------------------------------------ runs
    def start_run(self, flow: str, config: Mapping[str, Any]) -> str:
        run_id = uuid.uuid4().hex[:12]
        with self.connect() as con:
            con.execute(
                "INSERT INTO runs VALUES (?, ?, ?, NULL, 'running', ?, NULL)",
                [run_id, flow, _now(), json.dumps(dict(config), sort_keys=True, default=str)],
            )
        return run_id

    def finish_run(self, run_id: str, status: str, stats: Mapping[str, Any]) -> None:
        with self.connect() as con:
            con.execute(
                "UPDATE runs SET finished_at = ?, status = ?, stats_json = ? WHERE run_id = ?",
                [_now(), status, json.dumps(dict(stats), sort_keys=True, default=str), run_id],
            )

    # -------------------------------------------------------------------------------------- versions
    def versions(self) -> list[str]:
        return [r[0] for r in self.query("SELECT version FROM versions ORDER BY version")]

    def latest_version(self) -> str | None:
        v = self.versions()
        return v[-1] if v else None

    def version_shards(self, version: str) -> dict[str, list[str]]:
        rows = self.query(
            "SELECT table_name, key FROM version_shards WHERE version = ? ORDER BY table_name, key", [version]
        )
        out: dict[str, list[str]] = {}
        for table, key in rows:
            out.setdefault(table, []).append(key)
        return out

    def publish(
        self,
        shards: Mapping[str, Sequence[str]],
        run_id: str | None,
        note: str = "",
        stats: Mapping[str, Any] | None = None,
    ) -> tuple[str, bool]:
        """Record an immutable version = a set of shards. Returns (version, created); an identical set
        to the latest version is not published again."""
        wanted = {t: sorted(set(keys)) for t, keys in shards.items() if keys}
        latest = self.latest_version()
        if latest is not None and self.version_shards(latest) == wanted:
            return latest, False
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            n = con.execute("SELECT count(*) FROM versions").fetchone()[0]
            version = f"v{n + 1:04d}"
            con.execute(
                "INSERT INTO versions VALUES (?, ?, ?, ?, ?, ?)",
                [version, _now(), run_id, latest, note, json.dumps(dict(stats or {}), default=str)],
            )
            for table, keys in wanted.items():
                for key in keys:
                    con.execute("INSERT INTO version_shards VALUES (?, ?, ?)", [version, key, table])
            con.execute("COMMIT")
        self.refresh_views()
        return version, True

    # ----------------------------------------------------------------------------------------- views
    def _ensure_empty_shards(self) -> None:
        # A typed empty file per table lets a view exist before any shard does.
        for table, model in TABLES.items():
            path = self.root / table / "_empty.parquet"
            if not path.exists():
                write_shard(path, arrow_schema(model).empty_table())

    def _view_sql(self, table: str, keys: Sequence[str]) -> str:
        paths = [str(self.root / table / "_empty.parquet")]
        paths += [str(self.shard_path(table, k)) for k in keys]
        listing = ", ".join("'" + p.replace("'", "''") + "'" for p in paths)
        return f"SELECT * FROM read_parquet([{listing}], union_by_name = true)"

    def refresh_views(self) -> None:
        """(Re)create `vNNNN.<table>` views for every version and `<table>` views for the latest."""
        versions = self.versions()
        with self.connect() as con:
            for version in versions:
                rows = con.execute(
                    "SELECT table_name, key FROM version_shards WHERE version = ? ORDER BY key", [version]
                ).fetchall()
                by_table: dict[str, list[str]] = {}
                for table, key in rows:
                    by_table.setdefault(table, []).append(key)
                con.execute(f"CREATE SCHEMA IF NOT EXISTS {version}")
                for table in TABLES:
                    con.execute(
                        f"CREATE OR REPLACE VIEW {version}.{table} AS " + self._view_sql(table, by_table.get(table, []))
                    )
                    if version == versions[-1]:
                        con.execute(f"CREATE OR REPLACE VIEW main.{table} AS SELECT * FROM {version}.{table}")
