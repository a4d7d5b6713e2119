"""`earmark sql`: a user's SQL on a dataset's lake, read-only by construction.

Two guards, because neither is enough alone:
- the connection is the command's own (never the writers' shared one), with the lake attached `READ_ONLY`
  and its configuration locked once set up: DuckLake then refuses every write to the catalog or its tables;
- every statement is checked before any runs: only reads pass (`SELECT` and its spellings — `FROM`, `SHOW`,
  `DESCRIBE`, `SUMMARIZE`, `VALUES`, `WITH`; `EXPLAIN` of a read; a read `PRAGMA`; a `CALL` of a read function).
  A read-only attach still lets `COPY … TO` (any file, the catalog included), `ATTACH` of a new file, `INSTALL`
  and `LOAD` through, and some DuckLake maintenance functions (`ducklake_cleanup_old_files`,
  `ducklake_merge_adjacent_files`, …) run as table functions inside a `SELECT`; those are refused by name, found
  in the statement's parse tree (`json_serialize_sql`), wherever they sit in the query.
`enable_external_access = false` is not used: it stops DuckLake reading its own data files, so time travel
(`vNNNN.<table>`) would break.

Each refusal is one line naming what was refused and, where there is one, the command that does it properly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from earmark.storage import lake
from earmark.storage.lake import LakeLocation, extension_path

# DuckLake's functions that only read the catalog (duckdb_functions() WHERE function_name LIKE 'ducklake%',
# DuckLake 1.5.5); every other `ducklake_*` function writes the catalog or deletes / rewrites data files.
DUCKLAKE_READS = frozenset(
    {
        "current_snapshot",
        "last_committed_snapshot",
        "list_files",
        "options",
        "settings",
        "snapshots",
        "table_changes",
        "table_deletions",
        "table_info",
        "table_insertions",
    }
)
# functions that attach a database, run SQL hidden in a string (out of this check's sight), or run SQL on a
# foreign database: refused wherever they appear
_REFUSED_FUNCTIONS = {
    "query": "write the query itself, not a string of it",
    "sqlite_attach": "earmark sql attaches nothing",
    "postgres_attach": "earmark sql attaches nothing",
    "postgres_execute": "earmark sql runs nothing on the catalog database",
    "postgres_query": "earmark sql runs nothing on the catalog database",
    "sqlite_query": "earmark sql runs nothing on the catalog database",
}
# PRAGMAs DuckDB turns into a read (`PRAGMA table_info('x')` is `SELECT * FROM pragma_table_info('x')`)
_READ_PRAGMAS = frozenset(
    {
        "table_info",
        "show",
        "show_tables",
        "show_tables_expanded",
        "show_databases",
        "database_list",
        "database_size",
        "storage_info",
        "metadata_info",
        "functions",
        "collations",
        "version",
        "platform",
        "user_agent",
    }
)
_MAINTAIN = "old snapshots and small files: earmark maintain -d {dataset} expire|compact (with --dry-run)"
_HINTS = {
    "INSERT": "a dataset changes only through earmark build / rerun / review",
    "UPDATE": "to change items: earmark review export/import or earmark view, which publish a new version",
    "DELETE": "to drop items: earmark review (decision reject), which publishes a new version",
    "MERGE_INTO": "a dataset changes only through earmark build / rerun / review",
    "CREATE": "query with SELECT (a CTE: WITH x AS (…) SELECT …)",
    "DROP": "a dataset changes only through earmark build / rerun / review; " + _MAINTAIN,
    "ALTER": "a dataset's tables change only through earmark build",
    "COPY": "files for other tools: earmark export -d {dataset} --format hf|mecat|audiobench|entailment|lhotse -o DIR",
    "EXPORT": "files for other tools: earmark export -d {dataset} --format … -o DIR",
    "ATTACH": "another dataset: earmark sql -d OTHER",
    "DETACH": "earmark sql keeps its lake attached",
    "LOAD": "earmark loads the extensions it needs from its wheels; nothing is installed or downloaded",
    "SET": "settings are fixed in earmark sql (put a LIMIT in the query instead of a memory setting)",
    "VACUUM": _MAINTAIN,
    "TRANSACTION": "each earmark sql call is one read",
    "PREPARE": "write the values into the query",
    "EXECUTE": "write the values into the query",
}


class ReadOnlyRefusal(ValueError):
    """A statement `earmark sql` will not run: it could write, attach, copy out, install or maintain."""


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def _statement_kind(statement: Any) -> str:
    return str(statement.type).rsplit(".", 1)[-1]


def _functions(tree: Any) -> Iterator[tuple[str, str, str]]:
    """(catalog, schema, name) of every function a serialized statement calls, at any depth."""
    if isinstance(tree, dict):
        if "function_name" in tree:
            yield str(tree.get("catalog") or ""), str(tree.get("schema") or ""), str(tree["function_name"])
        for value in tree.values():
            yield from _functions(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _functions(value)


def _check_function(catalog: str, schema: str, name: str, dataset: str) -> None:
    low = name.lower()
    qualified = ".".join(p for p in (catalog, schema, name) if p)
    if low in _REFUSED_FUNCTIONS:
        raise ReadOnlyRefusal(f"earmark sql is read-only: {qualified}() is refused ({_REFUSED_FUNCTIONS[low]})")
    bare = low.removeprefix("ducklake_")
    in_lake = lake.ALIAS in (catalog.lower(), schema.lower())  # lake.snapshots(), lake.set_option(…)
    if (low.startswith("ducklake_") or in_lake) and bare not in DUCKLAKE_READS:
        raise ReadOnlyRefusal(
            f"earmark sql is read-only: {qualified}() changes the lake and is refused "
            f"({_MAINTAIN.format(dataset=dataset)})"
        )


def _check_select(con: duckdb.DuckDBPyConnection, text: str, dataset: str) -> None:
    (serialized,) = con.execute("SELECT json_serialize_sql(?)", [text]).fetchone()  # type: ignore[misc]
    tree = json.loads(serialized)
    if tree.get("error"):
        pragma = re.match(r"\s*PRAGMA\s+(\w+)", text, re.IGNORECASE)
        if pragma and pragma.group(1).lower() in _READ_PRAGMAS:
            return
        raise ReadOnlyRefusal(
            f"earmark sql is read-only: this statement could not be checked as a read and is refused "
            f"({text.strip()[:60]!r}); write it as a SELECT"
        )
    for catalog, schema, name in _functions(tree):
        _check_function(catalog, schema, name, dataset)


_EXPLAIN = re.compile(r"\s*EXPLAIN\s+(?:ANALY[SZ]E\s+|\([^)]*\)\s*)?", re.IGNORECASE)
_CALL = re.compile(r"\s*CALL\s+", re.IGNORECASE)


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str, dataset: str) -> list[str]:
    """The statements of `sql` when every one is a read; else ReadOnlyRefusal naming the first that is not."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error:  # IMPORT DATABASE is expanded while parsing; a syntax error is the user's
        if re.match(r"\s*IMPORT\b", sql, re.IGNORECASE):
            raise ReadOnlyRefusal(f"earmark sql is read-only: IMPORT is refused ({_HINTS['INSERT']})") from None
        raise
    if not statements:
        raise ReadOnlyRefusal("earmark sql: the query holds no statement")
    out = []
    for statement in statements:
        kind, text = _statement_kind(statement), statement.query
        if kind == "EXPLAIN":
            inner = _EXPLAIN.sub("", text, count=1)
            if inner == text:
                raise ReadOnlyRefusal("earmark sql is read-only: this EXPLAIN could not be checked; EXPLAIN a SELECT")
            check_read_only(con, inner, dataset)
        elif kind == "CALL" and _CALL.match(text):  # CALL f(…) runs f as SELECT * FROM f(…): check it as that
            _check_select(con, "SELECT * FROM " + _CALL.sub("", text, count=1), dataset)
        elif kind == "CALL":  # CHECKPOINT, FORCE CHECKPOINT: a CALL of a maintenance function
            word = text.split()[0].upper() if text.split() else kind
            raise ReadOnlyRefusal(f"earmark sql is read-only: {word} is refused ({_MAINTAIN.format(dataset=dataset)})")
        elif kind == "SELECT":
            _check_select(con, text, dataset)
        else:
            hint = _HINTS.get(kind)
            if kind == "SET" and re.match(r"\s*USE\b", text, re.IGNORECASE):
                hint = "earmark sql reads one dataset's lake; another dataset: earmark sql -d OTHER"
            where = f" ({hint.format(dataset=dataset)})" if hint else ""
            raise ReadOnlyRefusal(f"earmark sql is read-only: {kind.replace('_', ' ')} is refused{where}")
        out.append(text)
    return out


@contextmanager
def read_only_connection(location: LakeLocation, timeout_s: float = 120.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection of its own with the lake attached READ_ONLY (`USE lake`), its configuration locked."""

    def connect() -> duckdb.DuckDBPyConnection:
        con = duckdb.connect(config={"autoinstall_known_extensions": False, "allow_community_extensions": False})
        try:
            for name in location.extensions():
                con.execute(f"LOAD '{extension_path(name)}'")
            if location.s3:
                con.execute(location.s3.secret_sql())
            con.execute(location.attach_sql(read_only=True))
            con.execute(f"USE {lake.ALIAS}")
            con.execute("SET lock_configuration = true")
        except BaseException:
            con.close()
            raise
        return con

    con = lake._retrying(connect, timeout_s)
    try:
        yield con
    finally:
        con.close()


def run_read_only(location: LakeLocation, sql: str, dataset: str) -> tuple[list[str], list[tuple]]:
    """(column names, rows) of the last statement of `sql`, after every statement passed `check_read_only`."""
    with read_only_connection(location) as con:
        statements = check_read_only(con, sql, dataset)
        columns: list[str] = []
        rows: list[tuple] = []
        for text in statements:
            cur = con.execute(text)
            columns, rows = [d[0] for d in cur.description or []], cur.fetchall()
        return columns, rows
