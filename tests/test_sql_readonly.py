"""`earmark sql` cannot change a dataset: every attempt a hostile or careless user made on main at 26d63bd (DROP,
DELETE, ATTACH of a new file, COPY over the catalog, DuckLake's expire / cleanup / merge, INSTALL) is refused with
one line and leaves every file of the dataset as it was; reads, joins and time travel keep working. `earmark
maintain` is where snapshots are expired and files compacted, with a dry run and a confirmation, keeping every
published version readable."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from earmark.cli.main import main
from earmark.schemas import to_table
from earmark.schemas.records import Caption
from earmark.storage import Catalog, ShardMeta, lake
from earmark.storage.catalog import _SCHEMA_READY
from support.records import caption as _caption


@pytest.fixture(scope="module")
def _template(tmp_path_factory) -> Path:
    """A dataset `ds` with two published versions (v0001: c1; v0002: c1, c2), built once per module."""
    root = tmp_path_factory.mktemp("template")
    cat = Catalog(root, "ds")
    run = cat.start_run("test", {})
    meta = ShardMeta(stage="synthesize", stage_version="1", inputs=["x"], prompt_sha="p", model="m")
    cat.write_shard("k1", {"captions": to_table(Caption, [_caption(1)])}, meta, run)
    assert cat.publish({"captions": ["k1"]}, run) == ("v0001", True)
    cat.write_shard("k2", {"captions": to_table(Caption, [_caption(2)])}, meta, run)
    assert cat.publish({"captions": ["k1", "k2"]}, run) == ("v0002", True)
    lake._discard(cat.location)
    _SCHEMA_READY.discard(cat.location)
    return root


@pytest.fixture()
def dataset(_template: Path, tmp_path: Path) -> Path:
    """A copy of the template dataset of this test's own (a dataset folder opens wherever it is copied)."""
    shutil.copytree(_template / "ds", tmp_path / "ds")
    return tmp_path


def _q(root: Path, query: str, capsys) -> str:
    """The last line `earmark sql` prints for `query` (run in this process)."""
    assert main(["sql", "--data-root", str(root), "-d", "ds", query]) == 0, query
    return capsys.readouterr().out.splitlines()[-1]


def _files(root: Path) -> dict[str, str]:
    """Every file under the data root with its sha256: what a refused statement must leave as it was."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _sql(root: Path, query: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "earmark.cli.main", "sql", "-d", "ds", "--data-root", str(root), query],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )


def test_reads_joins_and_time_travel_work_and_write_nothing(dataset: Path, capsys):
    before = _files(dataset)
    for query, expected in [
        ("SELECT count(*) FROM captions", "2"),
        ("SELECT count(*) FROM v0001.captions", "1"),  # time travel
        ("FROM v0002.captions c JOIN v0001.captions USING (item_id) SELECT count(*)", "1"),
        ("SELECT count(*) FROM lake.snapshots() WHERE commit_message LIKE 'earmark v%'", "2"),
        ("SELECT count(*) FROM ducklake_table_info('lake') WHERE table_name = 'captions'", "1"),
        ("WITH x AS (SELECT 1 AS a) SELECT a FROM x", "1"),
        ("EXPLAIN SELECT count(*) FROM captions", "physical_plan"),
        ("SHOW TABLES", "captions"),
        ("DESCRIBE captions", "item_id"),
        ("PRAGMA table_info('captions')", "item_id"),
        ("CALL pragma_table_info('captions')", "item_id"),
        ("SELECT version FROM versions ORDER BY 1 DESC LIMIT 1", "v0002"),
    ]:
        assert main(["sql", "--data-root", str(dataset), "-d", "ds", query]) == 0, query
        assert expected in capsys.readouterr().out, query
    assert _files(dataset) == before


@pytest.mark.parametrize(
    ("query", "refused", "hint"),
    [
        ("DROP TABLE published.captions", "DROP is refused", "earmark build"),
        ("DELETE FROM versions", "DELETE is refused", "earmark review"),
        ("DROP TABLE versions", "DROP is refused", "earmark maintain"),
        ("INSERT INTO versions (version) VALUES ('v9999')", "INSERT is refused", "earmark build"),
        ("UPDATE captions SET text = 'x'", "UPDATE is refused", "earmark review"),
        ("CREATE TABLE x AS SELECT 1", "CREATE is refused", "WITH x AS"),
        ("CREATE TEMP TABLE x AS SELECT 1", "CREATE is refused", ""),
        ("ATTACH '{root}/new.duckdb' AS x", "ATTACH is refused", "earmark sql -d OTHER"),
        ("COPY (SELECT 42) TO '{root}/ds/catalog.sqlite' (FORMAT csv)", "COPY is refused", "earmark export"),
        ("COPY captions TO '{root}/ds/lake/x.parquet'", "COPY is refused", "earmark export"),
        ("EXPORT DATABASE '{root}/dump'", "EXPORT is refused", "earmark export"),
        ("CALL ducklake_expire_snapshots('lake', older_than => now())", "ducklake_expire_snapshots()", "maintain"),
        ("SELECT * FROM ducklake_cleanup_old_files('lake', cleanup_all => true)", "ducklake_cleanup_old_files()", ""),
        ("SELECT (SELECT count(*) FROM ducklake_merge_adjacent_files('lake'))", "ducklake_merge_adjacent_files()", ""),
        ("CALL lake.set_option('data_inlining_row_limit', 5)", "lake.set_option()", "maintain"),
        ("SELECT * FROM query('SELECT 1')", "query() is refused", ""),
        ("SELECT * FROM sqlite_attach('{root}/new.sqlite')", "sqlite_attach() is refused", ""),
        ("INSTALL httpfs", "LOAD is refused", "nothing is installed"),
        ("LOAD httpfs", "LOAD is refused", ""),
        ("SET threads = 1", "SET is refused", ""),
        ("PRAGMA memory_limit = '1GB'", "SET is refused", ""),
        ("USE memory", "SET is refused", "earmark sql -d OTHER"),
        ("DETACH lake", "DETACH is refused", ""),
        ("CHECKPOINT", "is refused", ""),
        ("VACUUM", "VACUUM is refused", "maintain"),
        ("BEGIN", "TRANSACTION is refused", ""),
        ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{root}/x.csv'", "COPY is refused", ""),
        ("SELECT 1; DROP TABLE published.captions", "DROP is refused", ""),  # nothing runs, not even the first
    ],
)
def test_every_write_is_refused_with_one_line_and_changes_no_file(dataset: Path, query, refused, hint, capsys):
    before = _files(dataset)
    assert main(["sql", "--data-root", str(dataset), "-d", "ds", query.format(root=dataset)]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "Traceback" not in line, line
    assert line.startswith("earmark: error: earmark sql is read-only") and refused in line, line
    assert hint in line, line
    assert _files(dataset) == before  # the catalog, the lake's data, the shards: byte for byte
    assert not (dataset / "new.duckdb").exists() and not (dataset / "new.sqlite").exists()
    assert not (dataset / "dump").exists() and not (dataset / "x.csv").exists()
    assert main(["sql", "--data-root", str(dataset), "-d", "ds", "SELECT count(*) FROM captions"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2"  # still whole


def test_a_refusal_from_the_command_line_is_one_line_and_exit_2(dataset: Path):
    before = _files(dataset)
    out = _sql(dataset, f"COPY (SELECT 42) TO '{dataset}/ds/catalog.sqlite' (FORMAT csv)")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("earmark: error: earmark sql is read-only: COPY is refused (files for other tools")
    assert _files(dataset) == before


def test_the_connection_itself_is_read_only(dataset: Path):
    """Behind the statement check, the attach refuses a write that got past it (the second guard)."""
    from earmark.core.config import load_config
    from earmark.storage.catalog import existing_location
    from earmark.storage.sql import read_only_connection

    cfg = load_config(None, {"data_root": str(dataset), "dataset": "ds"})
    with read_only_connection(existing_location(cfg)) as con:
        with pytest.raises(duckdb.Error, match="read-only|readonly|read only"):
            con.execute("DELETE FROM published.captions")
        with pytest.raises(duckdb.Error):
            con.execute("SET enable_external_access = false")  # the configuration is locked


def test_print_init_attaches_read_only(dataset: Path, capsys):
    assert main(["sql", "--data-root", str(dataset), "-d", "ds", "--print-init"]) == 0
    init = capsys.readouterr().out
    attach = next(line for line in init.splitlines() if line.startswith("ATTACH"))
    assert "READ_ONLY" in attach
    con = duckdb.connect(config={"autoinstall_known_extensions": False})
    script = "\n".join(line for line in init.splitlines() if not line.startswith("--"))
    for statement in filter(str.strip, script.split(";\n")):
        con.execute(statement)
    assert con.execute("SELECT count(*) FROM captions").fetchone() == (2,)
    with pytest.raises(duckdb.Error):
        con.execute("DROP TABLE published.captions")
    con.close()


def test_missing_views_are_repaired_by_a_writer_not_by_sql(dataset: Path, capsys):
    """A publisher that died between its commit and its views: `earmark sql` no longer repairs (it writes
    nothing); the next command that opens the dataset to write does."""
    cat = Catalog(dataset, "ds")
    cat._transaction(lambda con: con.execute("DROP VIEW v0001.captions"))
    lake._discard(cat.location)
    before = _files(dataset)
    assert main(["sql", "--data-root", str(dataset), "-d", "ds", "SELECT count(*) FROM v0001.captions"]) == 2
    assert "v0001" in capsys.readouterr().err
    assert _files(dataset) == before
    cat.refresh_views()  # what a writing command runs
    assert _q(dataset, "SELECT count(*) FROM v0001.captions", capsys) == "1"


def test_maintain_dry_run_changes_nothing_and_expire_keeps_every_version(dataset: Path, capsys):
    before = _files(dataset)
    assert main(["maintain", "expire", "--data-root", str(dataset), "-d", "ds", "--older-than", "0", "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert "dry run: nothing changed" in plan and "2 kept" in plan
    assert _files(dataset) == before

    # without a terminal to ask on, it does nothing unless told --yes
    out = subprocess.run(
        [sys.executable, "-m", "earmark.cli.main", "maintain", "expire", "-d", "ds", "--data-root", str(dataset)]
        + ["--older-than", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2 and "add --yes" in out.stderr
    assert _files(dataset) == before

    snapshots = _q(dataset, "SELECT count(*) FROM lake.snapshots()", capsys)
    assert main(["maintain", "expire", "--data-root", str(dataset), "-d", "ds", "--older-than", "0", "--yes"]) == 0
    assert "done: expire" in capsys.readouterr().out
    assert int(_q(dataset, "SELECT count(*) FROM lake.snapshots()", capsys)) < int(snapshots)
    assert _q(dataset, "SELECT count(*) FROM v0001.captions", capsys) == "1"
    assert _q(dataset, "SELECT count(*) FROM v0002.captions", capsys) == "2"
    assert _q(dataset, "SELECT count(*) FROM captions", capsys) == "2"


def test_maintain_compact_keeps_what_every_version_reads(dataset: Path, capsys):
    def rows(view: str) -> list[str]:
        assert (
            main(["sql", "--data-root", str(dataset), "-d", "ds", f"SELECT item_id, text FROM {view} ORDER BY 1"]) == 0
        )
        return capsys.readouterr().out.splitlines()

    seen = {v: rows(v) for v in ("v0001.captions", "v0002.captions", "captions")}
    assert main(["maintain", "compact", "--data-root", str(dataset), "-d", "ds", "--yes"]) == 0
    assert "compact" in capsys.readouterr().out
    assert {v: rows(v) for v in seen} == seen
    assert main(["maintain", "expire", "--data-root", str(dataset), "-d", "ds", "--older-than", "0", "--yes"]) == 0
    capsys.readouterr()
    assert {v: rows(v) for v in seen} == seen
