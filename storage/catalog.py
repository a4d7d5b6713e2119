"""The catalog of one dataset: a DuckLake (a catalog database + Parquet data) that DuckDB reads.

Where it lives (`earmark.storage.lake.LakeLocation`): the catalog database is `<data_root>/<dataset>/
catalog.sqlite` on one machine, or a PostgreSQL schema `earmark_<dataset>` for a cluster (`[catalog] postgres`);
the lake's Parquet data is under `<data_root>/<dataset>/lake/` (or `[catalog] data_path`, a folder or
`s3://bucket/prefix`). Each stage's shard
files, the content-addressed cache that makes re-runs cheap, stay where every worker can read them:
`<data_root>/<dataset>/<table>/<key>.parquet` (a shared filesystem on a cluster).

Lake tables:
  runs, shards, manifest        what ran, every shard file a stage wrote (committed as each shard finishes),
                                which ingest shard every input file belongs to (append-only)
  versions, version_shards      each published version and the shards it is made of
  version_snapshots             version → the DuckLake snapshot its publish committed
  published.<table>             the rows of the latest published version (`_shard`: the shard they came from)
Views: `<table>` is the latest published version (without `_shard`); `vNNNN.<table>` is that version, read by
time travel (`published.<table> AT (VERSION => snapshot)`). Publishing a version is one transaction: the
published tables change from the previous version's shards to the new one's, and the commit is tagged
`earmark vNNNN`; `ducklake_table_changes` between two versions' snapshots lists the rows that changed.
Several processes and nodes may write at once: each shard registration is one small transaction, and a
transaction that loses a race is run again (see lake.py).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from earmark.core.config import Config
from earmark.schemas import TABLES, arrow_schema
from earmark.storage import lake
from earmark.storage.lake import LakeLocation, S3Access
from earmark.storage.lease import LEASE_COLUMNS, Lease, utc_now
from earmark.storage.paths import inside, plain_name
from earmark.storage.shards import ShardFile, read_shard, write_shard

_BOOKKEEPING = {
    "runs": "run_id VARCHAR, flow VARCHAR, started_at TIMESTAMP, finished_at TIMESTAMP, status VARCHAR, "
    "config_json VARCHAR, stats_json VARCHAR",
    "shards": "key VARCHAR, table_name VARCHAR, stage VARCHAR, stage_version VARCHAR, inputs VARCHAR[], "
    "prompt_sha VARCHAR, model VARCHAR, config_json VARCHAR, path VARCHAR, rows BIGINT, bytes BIGINT, "
    "sha256 VARCHAR, run_id VARCHAR, created_at TIMESTAMP",
    "versions": "version VARCHAR, created_at TIMESTAMP, run_id VARCHAR, parent VARCHAR, note VARCHAR, "
    "stats_json VARCHAR",
    "version_shards": "version VARCHAR, key VARCHAR, table_name VARCHAR",
    "version_snapshots": "version VARCHAR, snapshot_id BIGINT",
    "manifest": "source VARCHAR, shard INTEGER, run_id VARCHAR, added_at TIMESTAMP",
    "publish_lock": "id INTEGER, counter BIGINT",
    "lease": LEASE_COLUMNS,
}
_SCHEMA_READY: set[LakeLocation] = set()


class DatasetNotFoundError(FileNotFoundError):
    """A reading command named a dataset that does not exist (reading never creates one)."""


class LegacyCatalogError(RuntimeError):
    """A dataset built before the DuckLake catalog: it must be migrated first."""


@dataclass(frozen=True)
class ShardRef:
    """What a stage task returns: the key of a shard and the tables it wrote under that key."""

    key: str
    tables: tuple[str, ...]
    rows: int = 0
    skipped: bool = False
    seconds: float = 0.0  # time inside the stage function (0 when skipped)
    # when the stage function began (Unix time, comparable across a cluster's processes; 0 when skipped):
    # with `seconds`, a run's timeline of computation, e.g. a worker's idle gaps. Not part of the identity.
    started_at: float = field(default=0.0, compare=False)
    task: str = ""  # the task name, e.g. analyze/asr/shard-0003
    # LLM requests the stage function made for this shard (calls, cache_hits, prompt_tokens, completion_tokens);
    # None when it made none or the shard was skipped. Not part of the shard's identity.
    llm_usage: Mapping[str, int] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ShardMeta:
    stage: str
    stage_version: str
    inputs: Sequence[str]
    prompt_sha: str | None = None
    model: str | None = None
    config: Mapping[str, Any] | None = None


def check_dataset_name(dataset: str) -> str:
    """`dataset` when it is a name a dataset may have (one plain path component), else a ValueError saying so."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", dataset):
        raise ValueError(
            f"dataset name {dataset!r}: use 1-64 letters, digits, '_', '-', '.', starting with a letter or digit"
        )
    return dataset


def dataset_folder(data_root: Path, dataset: str, *, must_exist: bool) -> Path:
    """`<data_root>/<dataset>` (the name checked); with `must_exist`, DatasetNotFoundError listing the datasets
    there when it holds no catalog. Writes nothing."""
    check_dataset_name(dataset)
    root = Path(data_root).resolve() / dataset  # the name is checked above: one plain component
    if must_exist and not any((root / name).exists() for name in ("catalog.sqlite", "catalog.duckdb")):
        existing = sorted(p.name for p in Path(data_root).resolve().glob("*") if (p / "catalog.sqlite").exists())
        raise DatasetNotFoundError(
            f"dataset {dataset!r} not found under {Path(data_root).resolve()}; "
            f"existing datasets: {', '.join(existing) or 'none'} (build one with `earmark build … -d {dataset}`)"
        )
    return root


def refuse_legacy(data_root: Path, dataset: str) -> None:
    """LegacyCatalogError when the dataset's folder holds a catalog from before DuckLake."""
    root = Path(data_root).resolve() / dataset
    legacy = root / "catalog.duckdb"
    if legacy.exists():
        raise LegacyCatalogError(
            f"{legacy} is a catalog from before earmark used DuckLake; migrate it once with "
            f"`earmark migrate --data-root {Path(data_root)} -d {dataset}` (or delete {root} to rebuild)"
        )


def existing_location(cfg: Config) -> LakeLocation:
    """Where the configured dataset's lake is, for a command that only reads it (`earmark sql`): an unknown
    dataset is an error listing the existing ones, and nothing is created, repaired or written."""
    root = dataset_folder(cfg.data_root, cfg.dataset, must_exist=not cfg.catalog.postgres)
    refuse_legacy(cfg.data_root, cfg.dataset)
    options = catalog_options(cfg)
    return LakeLocation.for_dataset(root, cfg.dataset, options["postgres"], options["data_path"], options["s3"])


class Catalog:
    def __init__(
        self,
        data_root: Path,
        dataset: str,
        *,
        postgres: str | None = None,
        data_path: str | None = None,
        s3: S3Access | None = None,
        busy_timeout_s: float = 120.0,
        create: bool = True,
        _migrating: bool = False,
    ):
        self.root = dataset_folder(data_root, dataset, must_exist=not create and not postgres)
        self.dataset = dataset
        self.location = LakeLocation.for_dataset(self.root, dataset, postgres, data_path, s3)
        self.busy_timeout_s = busy_timeout_s
        if not _migrating:
            refuse_legacy(data_root, dataset)
        self.root.mkdir(parents=True, exist_ok=True)
        self._ensure_empty_shards()
        if self.location not in _SCHEMA_READY:
            self._transaction(self._create_schema)
            self._transaction(self._create_lease_row)
            _SCHEMA_READY.add(self.location)

    # ------------------------------------------------------------------------------------ connection
    def _transaction(self, fn: Any) -> Any:
        return lake.transaction(self.location, fn, self.busy_timeout_s)

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        """Run one SQL statement on the lake (the `<table>` and `vNNNN.<table>` views, the bookkeeping tables)."""
        return lake.read(self.location, lambda con: con.execute(sql, params or []).fetchall(), self.busy_timeout_s)

    def cursor_query(self, sql: str, params: Sequence[Any] | None = None) -> tuple[list[str], list[tuple]]:
        """(column names, rows) of one statement, for `earmark sql`."""

        def run(con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[tuple]]:
            cur = con.execute(sql, params or [])
            return [d[0] for d in cur.description or []], cur.fetchall()

        return lake.read(self.location, run, self.busy_timeout_s)

    def init_sql(self) -> str:
        """A DuckDB CLI init file that attaches this dataset's lake (`duckdb -init FILE`)."""
        return self.location.init_sql()

    def _create_schema(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create what is missing (tables, columns added to a record since, views); existing objects are kept,
        so opening a catalog commits nothing when it is up to date."""
        have = {
            (schema, name, kind)
            for schema, name, kind in con.execute(
                "SELECT schema_name, table_name, 'table' FROM duckdb_tables() WHERE database_name = ? "
                "UNION ALL SELECT schema_name, view_name, 'view' FROM duckdb_views() WHERE database_name = ?",
                [lake.ALIAS, lake.ALIAS],
            ).fetchall()
        }
        for name, columns in _BOOKKEEPING.items():
            if ("main", name, "table") not in have:
                con.execute(f"CREATE TABLE main.{name} ({columns})")
        if ("main", "publish_lock", "table") not in have:
            con.execute("INSERT INTO main.publish_lock VALUES (1, 0)")
        schemas = {
            n
            for (n,) in con.execute(
                "SELECT schema_name FROM duckdb_schemas() WHERE database_name = ?", [lake.ALIAS]
            ).fetchall()
        }
        if "published" not in schemas:
            con.execute("CREATE SCHEMA published")
        for table in TABLES:
            empty = str(self.root / table / "_empty.parquet").replace("'", "''")
            if ("published", table, "table") not in have:
                con.execute(
                    f"CREATE TABLE published.{table} AS SELECT *, NULL::VARCHAR AS _shard FROM read_parquet('{empty}')"
                )
            else:
                existing = {
                    c
                    for (c,) in con.execute(
                        "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND schema_name = "
                        "'published' AND table_name = ?",
                        [lake.ALIAS, table],
                    ).fetchall()
                }
                described = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{empty}')").fetchall()
                for column, dtype, *_ in described:
                    if column not in existing:  # a field added to the record since the lake was made
                        con.execute(f'ALTER TABLE published.{table} ADD COLUMN "{column}" {dtype}')
            if ("main", table, "view") not in have:
                con.execute(f"CREATE VIEW main.{table} AS SELECT * EXCLUDE (_shard) FROM published.{table}")

    def _create_lease_row(self, con: duckdb.DuckDBPyConnection) -> None:
        """The lease table's one row, stored inline in the catalog database (DuckLake data inlining), so
        heartbeats write no Parquet files. A table's options can be set only once it is committed."""
        if con.execute("SELECT count(*) FROM main.lease").fetchone()[0]:  # type: ignore[index]
            return
        con.execute(f"CALL {lake.ALIAS}.set_option('data_inlining_row_limit', 10, table_name => 'lease')")
        con.execute("INSERT INTO main.lease (id) VALUES (1)")

    # -------------------------------------------------------------------------------------- manifest
    def manifest(self) -> dict[str, int]:
        """Which ingest shard every input file ever built into this dataset belongs to (display path → shard)."""
        return dict(self.query("SELECT source, min(shard) FROM manifest GROUP BY source"))

    def extend_manifest(self, assigned: Mapping[str, int], run_id: str | None) -> None:
        """Append new files' shard assignments; a file already in the manifest keeps its shard (append-only)."""
        if not assigned:
            return

        def add(con: duckdb.DuckDBPyConnection) -> None:
            known = {s for (s,) in con.execute("SELECT source FROM manifest").fetchall()}
            rows = [(src, shard, run_id, utc_now()) for src, shard in assigned.items() if src not in known]
            _insert_rows(con, "manifest", ("source", "shard", "run_id", "added_at"), rows)

        self._transaction(add)

    # ---------------------------------------------------------------------------------------- shards
    def dataset_path(self, *parts: str) -> Path:
        """A path under this dataset's folder built from names (`"exports", version`); ValueError if it would
        leave the folder (earmark.storage.paths.inside)."""
        return inside(self.root, *parts)

    def shard_path(self, table: str, key: str) -> Path:
        """`<root>/<table>/<key>.parquet`; a table earmark does not define or a key that is not a plain name
        (a `/`, `..`) is a ValueError, so no shard file can be written outside the dataset's folder."""
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
        return inside(self.root, table, f"{plain_name(key, 'shard key')}.parquet")

    def has_shard(self, key: str, tables: Sequence[str]) -> bool:
        """True when every table of the shard is registered and its file is still on disk."""
        rows = self.query(
            "SELECT table_name, path FROM shards WHERE key = ? AND list_contains(?, table_name)", [key, list(tables)]
        )
        found = {t: p for t, p in rows}
        return all(t in found and inside(self.root, found[t]).exists() for t in tables)

    def registered_keys(self, keys: Sequence[str]) -> set[str]:
        """Which of these shard keys have any catalog row (one query for a whole stage's plan)."""
        if not keys:
            return set()
        rows = self.query("SELECT DISTINCT key FROM shards WHERE list_contains(?, key)", [sorted(set(keys))])
        return {k for (k,) in rows}

    def shard_rows(self, key: str, tables: Sequence[str]) -> int:
        rows = self.query(
            "SELECT coalesce(sum(rows), 0) FROM shards WHERE key = ? AND list_contains(?, table_name)",
            [key, list(tables)],
        )
        return int(rows[0][0])

    def write_shard(self, key: str, tables: Mapping[str, pa.Table], meta: ShardMeta, run_id: str | None) -> ShardRef:
        """Write every table's file atomically, then register them all in one lake transaction."""
        files: dict[str, ShardFile] = {}
        for name, table in tables.items():
            expected = arrow_schema(TABLES[name])
            if not table.schema.equals(expected):
                table = table.cast(expected)
            files[name] = write_shard(self.shard_path(name, key), table)
        config = json.dumps(dict(meta.config or {}), sort_keys=True, default=str)

        def register(con: duckdb.DuckDBPyConnection) -> None:
            names = list(files)
            (stale,) = con.execute(
                "SELECT count(*) FROM shards WHERE key = ? AND list_contains(?, table_name)", [key, names]
            ).fetchone()
            if stale:  # re-written (its file had gone): only then touch existing rows
                con.execute("DELETE FROM shards WHERE key = ? AND list_contains(?, table_name)", [key, names])
            con.executemany(
                "INSERT INTO shards VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    [
                        key,
                        name,
                        meta.stage,
                        meta.stage_version,
                        list(meta.inputs),
                        meta.prompt_sha,
                        meta.model,
                        config,
                        str(f.path.relative_to(self.root)),
                        f.rows,
                        f.bytes,
                        f.sha256,
                        run_id,
                        utc_now(),
                    ]
                    for name, f in files.items()
                ],
            )

        self._transaction(register)
        return ShardRef(key=key, tables=tuple(tables), rows=sum(f.rows for f in files.values()))

    def read(self, table: str, keys: Sequence[str], columns: Sequence[str] | None = None) -> pa.Table:
        """Concatenate one table's shards for the given keys (in the order given); `columns`: only these."""
        parts = [read_shard(self.shard_path(table, k), columns) for k in keys if self.shard_path(table, k).exists()]
        if not parts:
            empty = arrow_schema(TABLES[table]).empty_table()
            return empty.select(list(columns)) if columns is not None else empty
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

    # ----------------------------------------------------------------------------------------- lease
    def lease(
        self, run_id: str, command: str, *, stale_after_s: float = 120.0, heartbeat_s: float = 20.0, wait_s: float = 0.0
    ) -> Lease:
        """The dataset's write lease for `run_id` (not yet taken: `with cat.lease(...)` or `.acquire()`)."""
        return Lease(self, run_id, command, stale_after_s=stale_after_s, heartbeat_s=heartbeat_s, wait_s=wait_s)

    # ------------------------------------------------------------------------------------------ runs
    @staticmethod
    def new_run_id() -> str:
        return uuid.uuid4().hex[:12]

    def start_run(self, flow: str, config: Mapping[str, Any], run_id: str | None = None) -> str:
        run_id = run_id or self.new_run_id()
        row = [run_id, flow, utc_now(), json.dumps(dict(config), sort_keys=True, default=str)]
        self._transaction(lambda con: con.execute("INSERT INTO runs VALUES (?, ?, ?, NULL, 'running', ?, NULL)", row))
        return run_id

    def finish_run(self, run_id: str, status: str, stats: Mapping[str, Any]) -> None:
        row = [utc_now(), status, json.dumps(dict(stats), sort_keys=True, default=str), run_id]
        self._transaction(
            lambda con: con.execute("UPDATE runs SET finished_at = ?, status = ?, stats_json = ? WHERE run_id = ?", row)
        )

    # -------------------------------------------------------------------------------------- versions
    def versions(self) -> list[str]:
        return [r[0] for r in self.query("SELECT version FROM versions ORDER BY version")]

    def latest_version(self) -> str | None:
        v = self.versions()
        return v[-1] if v else None

    def version_shards(self, version: str) -> dict[str, list[str]]:
        return _version_shards(self.query, version)

    def version_snapshot(self, version: str) -> int | None:
        """The DuckLake snapshot a version's publish committed (time travel: `AT (VERSION => n)`)."""
        rows = self.query("SELECT snapshot_id FROM version_snapshots WHERE version = ?", [version])
        return int(rows[0][0]) if rows else None

    def publish(
        self,
        shards: Mapping[str, Sequence[str]],
        run_id: str | None,
        note: str = "",
        stats: Mapping[str, Any] | None = None,
    ) -> tuple[str, bool]:
        """Record an immutable version = a set of shards, as one lake snapshot. Returns (version, created); an
        identical set to the latest version is not published again."""
        wanted = {t: sorted(set(keys)) for t, keys in shards.items() if keys}
        unknown = sorted(set(wanted) - set(TABLES))
        if unknown:
            raise ValueError(f"publish: unknown tables {unknown}")

        def publish(con: duckdb.DuckDBPyConnection) -> tuple[str, bool]:
            q = lambda sql, params=None: con.execute(sql, params or []).fetchall()
            # Serializes publishers of this dataset: two transactions that both update the one lock row conflict.
            con.execute("UPDATE publish_lock SET counter = counter + 1 WHERE id = 1")
            versions = [v for (v,) in q("SELECT version FROM versions ORDER BY version")]
            latest = versions[-1] if versions else None
            before = _version_shards(q, latest) if latest else {}
            if latest is not None and before == wanted:
                return latest, False
            version = f"v{len(versions) + 1:04d}"
            for table in TABLES:
                old, new = set(before.get(table, [])), set(wanted.get(table, []))
                if old - new:
                    con.execute(f"DELETE FROM published.{table} WHERE list_contains(?, _shard)", [sorted(old - new)])
                for key in sorted(new - old):
                    path = self.shard_path(table, key)
                    if not path.exists():
                        raise FileNotFoundError(f"publish {version}: shard file {path} is missing; re-run the build")
                    con.execute(
                        f"INSERT INTO published.{table} BY NAME SELECT *, ? AS _shard FROM read_parquet(?)",
                        [key, str(path)],
                    )
            con.execute(
                "INSERT INTO versions VALUES (?, ?, ?, ?, ?, ?)",
                [version, utc_now(), run_id, latest, note, json.dumps(dict(stats or {}), default=str)],
            )
            rows = [(version, key, table) for table, keys in wanted.items() for key in keys]
            _insert_rows(con, "version_shards", ("version", "key", "table_name"), rows)
            con.execute(
                f"CALL {lake.ALIAS}.set_commit_message('earmark', ?, extra_info => ?)",
                [f"earmark {version}", json.dumps({"dataset": self.dataset, "version": version})],
            )
            return version, True

        version, created = self._transaction(publish)
        # also when unchanged: a publisher killed between its commit and its views left them missing
        self.refresh_views(only=version)
        return version, created

    # ----------------------------------------------------------------------------------------- views
    def _ensure_empty_shards(self) -> None:
        # A typed empty file per table: the schema the lake's tables are created from, and the one `_create_schema`
        # adds new columns from. Rewritten when its record gained a field since (a stale file kept the lake's table
        # without the column, and publishing a shard that has it failed).
        for table, model in TABLES.items():
            path = self.root / table / "_empty.parquet"
            schema = arrow_schema(model)
            if not path.exists() or not pq.read_schema(path).equals(schema, check_metadata=False):
                write_shard(path, schema.empty_table())

    def refresh_views(self, only: str | None = None) -> None:
        """Create what is missing for each version (or `only` that one): its snapshot id and its `vNNNN.<table>`
        time-travel views. A publisher makes its own version's views right after its commit; the sweep over all
        versions (`earmark sql`, `earmark migrate`) repairs a publisher that died in between. Publishers never
        sweep: racing to create the same views would make concurrent publishers conflict over and over."""

        def refresh(con: duckdb.DuckDBPyConnection) -> None:
            known = dict(con.execute("SELECT version, snapshot_id FROM version_snapshots").fetchall())
            commits = {
                json.loads(extra)["version"]: snap
                for snap, extra in con.execute(
                    f"SELECT snapshot_id, commit_extra_info FROM {lake.ALIAS}.snapshots() "
                    "WHERE commit_message LIKE 'earmark v%' AND commit_extra_info IS NOT NULL"
                ).fetchall()
            }
            views = {
                (schema, name)
                for schema, name in con.execute(
                    "SELECT schema_name, view_name FROM duckdb_views() WHERE database_name = ?", [lake.ALIAS]
                ).fetchall()
            }
            created: dict[str, int] = {}  # the snapshot that created each published table (a new expert's is late)
            for snap_id, changes in con.execute(
                f"SELECT snapshot_id, changes FROM {lake.ALIAS}.snapshots() ORDER BY snapshot_id"
            ).fetchall():
                for name in (changes or {}).get("tables_created", []):
                    schema, _, table = name.partition(".")
                    if schema == "published":
                        created.setdefault(table.strip('"'), snap_id)
            for (version,) in con.execute("SELECT version FROM versions ORDER BY version").fetchall():
                if only is not None and version != only:
                    continue
                snap = known.get(version, commits.get(version))
                if snap is None:
                    continue
                if version not in known:
                    con.execute("INSERT INTO version_snapshots VALUES (?, ?)", [version, snap])
                if not all((version, t) in views for t in TABLES):
                    con.execute(f"CREATE SCHEMA IF NOT EXISTS {version}")
                for table in TABLES:
                    if (version, table) in views:
                        continue
                    if created.get(table, 0) > snap:  # the table came after this version: it had no rows then
                        source = f"published.{table} WHERE false"
                    else:
                        source = f"published.{table} AT (VERSION => {int(snap)})"
                    con.execute(f"CREATE VIEW {version}.{table} AS SELECT * EXCLUDE (_shard) FROM {source}")

        self._transaction(refresh)


def _insert_rows(
    con: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Append rows to a bookkeeping table in one statement (an Arrow table scanned by DuckDB): executemany runs one
    INSERT per row, 0.40 s for 1,000 manifest rows against 0.02 s this way."""
    if not rows:
        return
    data = pa.table({c: [r[i] for r in rows] for i, c in enumerate(columns)})
    con.register("_earmark_rows", data)
    try:
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(columns)} FROM _earmark_rows")
    finally:
        con.unregister("_earmark_rows")


def _version_shards(query: Any, version: str) -> dict[str, list[str]]:
    rows = query("SELECT table_name, key FROM version_shards WHERE version = ? ORDER BY table_name, key", [version])
    out: dict[str, list[str]] = {}
    for table, key in rows:
        out.setdefault(table, []).append(key)
    return out


def open_catalog(cfg: Config, create: bool = True) -> Catalog:
    """The catalog of the configured dataset (`[catalog]` decides SQLite or PostgreSQL); `create=False` for
    commands that only read: an unknown dataset is an error listing the existing ones."""
    return Catalog(cfg.data_root, cfg.dataset, create=create, **catalog_options(cfg))


def catalog_options(cfg: Config) -> dict[str, Any]:
    """`[catalog]` as Catalog's keyword arguments: the catalog database, the data path, how to reach S3."""
    c = cfg.catalog
    s3 = S3Access(
        endpoint=c.s3_endpoint,
        region=c.s3_region,
        url_style=c.s3_url_style,
        use_ssl=c.s3_use_ssl,
        key_id_env=c.s3_key_id_env,
        secret_env=c.s3_secret_env,
        session_token_env=c.s3_session_token_env,
    )
    return {"postgres": c.postgres, "data_path": c.data_path, "s3": s3}
