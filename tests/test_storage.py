"""Shard writer and DuckDB catalog on a real DuckDB file."""

import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from earmark.schemas import TABLES, arrow_schema, from_table, to_table
from earmark.schemas.records import Caption, QuarantineRow
from earmark.storage import Catalog, ShardMeta, shard_key, write_shard
from earmark.storage.shards import remove_stale_temp_files
from support.records import caption as _caption


def test_every_table_has_an_arrow_schema_that_roundtrips():
    for name, model in TABLES.items():
        schema = arrow_schema(model)
        assert schema.names == list(model.model_fields), name
    rows = [_caption(1), _caption(2, "SMA")]
    table = to_table(Caption, rows)
    assert from_table(Caption, table) == rows


def test_shard_key_changes_with_every_component():
    base = dict(stage="captions", stage_version="1", inputs=["a", "b"], prompt_sha="p", model="m", config={"t": 1})
    k = shard_key(**base)
    assert k == shard_key(**{**base, "inputs": ["b", "a"]})  # order of inputs does not matter
    for field, value in [
        ("stage", "qa"),
        ("stage_version", "2"),
        ("inputs", ["a"]),
        ("prompt_sha", "q"),
        ("model", "n"),
        ("config", {"t": 2}),
    ]:
        assert shard_key(**{**base, field: value}) != k, field


def test_atomic_write_leaves_no_temp_and_replaces(tmp_path: Path):
    path = tmp_path / "t" / "k.parquet"
    f1 = write_shard(path, to_table(Caption, [_caption(1)]))
    f2 = write_shard(path, to_table(Caption, [_caption(1), _caption(2)]))
    assert f1.rows == 1 and f2.rows == 2 and f1.sha256 != f2.sha256
    assert [p.name for p in path.parent.iterdir()] == ["k.parquet"]
    # a temp file left by a crashed writer is cleaned up and never read as a shard
    (path.parent / ".x.parquet.dead.tmp").write_bytes(b"partial")
    assert remove_stale_temp_files(tmp_path) == 1


def test_failed_write_registers_nothing(tmp_path: Path):
    cat = Catalog(tmp_path, "ds")
    meta = ShardMeta(stage="s", stage_version="1", inputs=[])
    bad = pa.table({"nonsense": [1]})
    with pytest.raises((pa.ArrowInvalid, KeyError, ValueError)):  # the table cannot be cast to captions' schema
        cat.write_shard("k1", {"captions": bad}, meta, run_id=None)
    assert not cat.has_shard("k1", ["captions"])
    assert cat.query("SELECT count(*) FROM shards")[0][0] == 0


def test_catalog_registers_skips_publishes_and_views(tmp_path: Path):
    cat = Catalog(tmp_path, "ds")
    run = cat.start_run("test", {"a": 1})
    meta = ShardMeta(stage="synthesize", stage_version="1", inputs=["x"], prompt_sha="p", model="m")
    assert not cat.has_shard("k1", ["captions", "quarantine"])
    ref = cat.write_shard(
        "k1",
        {"captions": to_table(Caption, [_caption(1), _caption(2, "SMA")]), "quarantine": to_table(QuarantineRow, [])},
        meta,
        run,
    )
    assert ref.rows == 2
    assert cat.has_shard("k1", ["captions", "quarantine"])
    # a deleted file means the shard is not really there: it will be recomputed
    (cat.shard_path("quarantine", "k1")).unlink()
    assert not cat.has_shard("k1", ["captions", "quarantine"])

    v1, created = cat.publish({"captions": ["k1"]}, run)
    assert (v1, created) == ("v0001", True)
    assert cat.publish({"captions": ["k1"]}, run) == ("v0001", False)  # identical set: no new version
    cat.write_shard("k2", {"captions": to_table(Caption, [_caption(3)])}, meta, run)
    v2, _ = cat.publish({"captions": ["k1", "k2"]}, run)
    assert v2 == "v0002"
    cat.finish_run(run, "ok", {"llm_calls": 0})

    q = lambda sql: cat.query(sql)[0][0]
    assert q("SELECT count(*) FROM captions") == 3  # latest version
    assert q("SELECT count(*) FROM v0001.captions") == 2  # time travel to v0001's snapshot
    assert q("SELECT count(*) FROM captions WHERE domain = 'SMA'") == 1
    assert q("SELECT count(*) FROM clips") == 0  # typed empty table
    assert q("SELECT status FROM runs") == "ok"
    assert [c for (c,) in cat.query("SELECT column_name FROM (DESCRIBE captions)")] == list(Caption.model_fields)
    # a version is a DuckLake snapshot: the rows v0002 added, by DuckLake's own change feed
    s1, s2 = cat.version_snapshot("v0001"), cat.version_snapshot("v0002")
    assert s1 is not None and s2 is not None and s2 > s1
    changes = cat.query(
        f"SELECT change_type, item_id FROM ducklake_table_changes('lake', 'published', 'captions', {s1 + 1}, {s2})"
    )
    assert changes == [("insert", _caption(3).item_id)]

    # the DuckDB CLI reads the same lake through the init file `earmark sql --print-init` writes
    init = tmp_path / "lake.sql"
    init.write_text(cat.init_sql())
    cli = Path(sys.executable).with_name("duckdb")
    out = subprocess.run(
        [str(cli), "-init", str(init), "-csv", "-noheader", "-c", "SELECT count(*) FROM v0001.captions"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "2", out


def test_bad_dataset_name_is_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="dataset name"):
        Catalog(tmp_path, "../escape")


def test_migrate_moves_a_pre_ducklake_catalog(tmp_path: Path):
    """A dataset built before DuckLake (catalog.duckdb) is refused with the fix named, then migrated: same
    versions, same rows."""
    from earmark.cli.main import main
    from earmark.storage import LegacyCatalogError

    root = tmp_path / "old"
    shards = {"k1": [_caption(1), _caption(2)], "k2": [_caption(3)]}
    for key, rows in shards.items():
        write_shard(root / "captions" / f"{key}.parquet", to_table(Caption, rows))
    con = duckdb.connect(str(root / "catalog.duckdb"))
    con.execute(
        "CREATE TABLE runs (run_id VARCHAR, flow VARCHAR, started_at TIMESTAMP, finished_at TIMESTAMP, status VARCHAR,"
        " config_json VARCHAR, stats_json VARCHAR);"
        "CREATE TABLE shards (key VARCHAR, table_name VARCHAR, stage VARCHAR, stage_version VARCHAR, inputs VARCHAR[],"
        " prompt_sha VARCHAR, model VARCHAR, config_json VARCHAR, path VARCHAR, rows BIGINT, bytes BIGINT,"
        " sha256 VARCHAR, run_id VARCHAR, created_at TIMESTAMP);"
        "CREATE TABLE versions (version VARCHAR, created_at TIMESTAMP, run_id VARCHAR, parent VARCHAR, note VARCHAR,"
        " stats_json VARCHAR);"
        "CREATE TABLE version_shards (version VARCHAR, key VARCHAR, table_name VARCHAR);"
        "CREATE TABLE manifest (source VARCHAR, shard INTEGER, run_id VARCHAR, added_at TIMESTAMP);"
        "INSERT INTO runs VALUES ('r1', 'build', now(), now(), 'ok', '{}', '{}');"
        "INSERT INTO shards SELECT k, 'captions', 'synthesize', '1', [], NULL, NULL, '{}', 'captions/' || k || "
        "'.parquet', n, 0, '', 'r1', now() FROM (VALUES ('k1', 2), ('k2', 1)) t(k, n);"
        "INSERT INTO versions VALUES ('v0001', now(), 'r1', NULL, 'first', '{}'), ('v0002', now(), 'r1', 'v0001', '', '{}');"
        "INSERT INTO version_shards VALUES ('v0001', 'k1', 'captions'), ('v0002', 'k1', 'captions'),"
        " ('v0002', 'k2', 'captions');"
        "INSERT INTO manifest VALUES ('a.wav', 0, 'r1', now())"
    )
    con.close()
    with pytest.raises(LegacyCatalogError, match="earmark migrate"):
        Catalog(tmp_path, "old")
    assert main(["migrate", "--data-root", str(tmp_path), "-d", "old"]) == 0
    cat = Catalog(tmp_path, "old")
    assert cat.versions() == ["v0001", "v0002"]
    assert cat.query("SELECT count(*) FROM v0001.captions")[0][0] == 2
    assert cat.query("SELECT count(*) FROM captions")[0][0] == 3
    assert cat.manifest() == {"a.wav": 0}
    assert (root / "catalog.duckdb.migrated").exists() and not (root / "catalog.duckdb").exists()


def test_a_publisher_killed_before_its_views_is_repaired_by_the_rerun(tmp_path: Path):
    """Publishing is one lake transaction; the version's time-travel views come in a second one. A crash in
    between leaves a complete version without views: publishing the same shards again makes them."""
    cat = Catalog(tmp_path, "ds")
    meta = ShardMeta(stage="test", stage_version="1", inputs=[])
    cat.write_shard("k1", {"captions": to_table(Caption, [_caption(1)])}, meta, None)
    assert cat.publish({"captions": ["k1"]}, None) == ("v0001", True)

    def crash_state(con):  # what a kill -9 right after the publish commit leaves
        for (table,) in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE database_name = 'lake' AND schema_name = 'v0001'"
        ).fetchall():
            con.execute(f"DROP VIEW v0001.{table}")
        con.execute("DELETE FROM version_snapshots")

    cat._transaction(crash_state)
    with pytest.raises(duckdb.CatalogException):
        cat.query("SELECT count(*) FROM v0001.captions")
    assert cat.publish({"captions": ["k1"]}, None) == ("v0001", False)  # the re-run: nothing new, views repaired
    assert cat.query("SELECT count(*) FROM v0001.captions")[0][0] == 1
    assert cat.version_snapshot("v0001") is not None


@pytest.mark.parametrize("name", [".", "..", "-rf", "a/b", "x" * 65, ""])
def test_dataset_names_that_could_escape_or_confuse_are_refused(tmp_path: Path, name: str):
    with pytest.raises(ValueError, match="dataset name"):
        Catalog(tmp_path, name)


def test_reading_an_unknown_dataset_creates_nothing_and_lists_the_existing_ones(tmp_path: Path):
    from earmark.cli.main import main
    from earmark.storage.catalog import DatasetNotFoundError

    Catalog(tmp_path, "real")
    with pytest.raises(DatasetNotFoundError, match="existing datasets: real"):
        Catalog(tmp_path, "typo", create=False)
    assert main(["sql", "--data-root", str(tmp_path), "-d", "typo", "SELECT 1"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real"]


def test_every_dataset_gets_its_own_postgres_metadata_schema():
    from earmark.storage.lake import LakeLocation

    names = ["alpha", "a-b", "a_b", "A_b", "a.b"]
    schemas = {LakeLocation.for_dataset(Path("/data") / n, n, postgres="dbname=earmark").metadata_schema for n in names}
    assert len(schemas) == len(names) and "earmark_alpha" in schemas


def test_a_moved_dataset_folder_still_opens(tmp_path: Path):
    """DuckLake records the data path at creation; a dataset folder copied or moved elsewhere (a backup, a
    new disk) must open with its versions, and write new ones."""
    import shutil

    cat = Catalog(tmp_path / "a", "ds")
    run = cat.start_run("test", {})
    meta = ShardMeta(stage="synthesize", stage_version="1", inputs=["x"], prompt_sha="p", model="m")
    cat.write_shard("k1", {"captions": to_table(Caption, [_caption(1), _caption(2)])}, meta, run)
    cat.publish({"captions": ["k1"]}, run)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    shutil.rmtree(tmp_path / "a")

    moved = Catalog(tmp_path / "b", "ds", create=False)
    assert moved.query("SELECT count(*) FROM v0001.captions")[0][0] == 2
    moved.write_shard("k2", {"captions": to_table(Caption, [_caption(3)])}, meta, run)
    assert moved.publish({"captions": ["k1", "k2"]}, run) == ("v0002", True)
    assert moved.query("SELECT count(*) FROM captions")[0][0] == 3
    assert not (tmp_path / "a").exists()  # nothing written to the old place


def test_a_version_published_before_a_table_existed_reads_it_as_empty(tmp_path: Path, monkeypatch):
    """A dataset whose v0001 was published before an expert's table existed (the `events` table came later):
    `earmark sql`'s sweep over the versions' views failed on it ("Table with name events does not exist at
    version 90"), so no query ran on the dataset at all. The old version now reads the table as empty."""
    from earmark.storage import catalog

    monkeypatch.setattr(catalog, "TABLES", {t: m for t, m in TABLES.items() if t != "events"})
    cat = Catalog(tmp_path, "ds")
    run = cat.start_run("test", {})
    meta = ShardMeta(stage="synthesize", stage_version="1", inputs=["x"], prompt_sha="p", model="m")
    cat.write_shard("k1", {"captions": to_table(Caption, [_caption(1)])}, meta, run)
    assert cat.publish({"captions": ["k1"]}, run) == ("v0001", True)
    monkeypatch.setattr(catalog, "TABLES", TABLES)
    catalog._SCHEMA_READY.discard(cat.location)

    reopened = Catalog(tmp_path, "ds", create=False)  # makes the new table
    reopened.refresh_views()  # what `earmark sql` does first
    assert reopened.query("SELECT count(*) FROM v0001.events") == [(0,)]
    assert reopened.query("SELECT count(*) FROM v0001.captions") == [(1,)]


def test_a_lake_made_before_a_record_gained_a_field_takes_shards_that_have_it(tmp_path: Path):
    """A dataset built by an older earmark: its lake's tables (and their typed empty file) lack a field added to
    the record since. Opening it adds the column, and publishing a new shard with the field works (it failed:
    'Table "music" does not have a column with name "window_tags"'); the old version reads the column as NULL."""
    from earmark.storage import catalog

    cat = Catalog(tmp_path, "ds")
    run = cat.start_run("test", {})
    meta = ShardMeta(stage="synthesize", stage_version="1", inputs=["x"], prompt_sha="p", model="m")
    cat.write_shard("k1", {"captions": to_table(Caption, [_caption(1)])}, meta, run)
    cat.publish({"captions": ["k1"]}, run)
    cat._transaction(lambda con: con.execute("ALTER TABLE published.captions DROP COLUMN writer"))  # as it was
    write_shard(cat.root / "captions" / "_empty.parquet", arrow_schema(Caption).empty_table().drop_columns(["writer"]))
    catalog._SCHEMA_READY.discard(cat.location)

    reopened = Catalog(tmp_path, "ds", create=False)
    reopened.write_shard("k2", {"captions": to_table(Caption, [_caption(2)])}, meta, run)
    assert reopened.publish({"captions": ["k1", "k2"]}, run) == ("v0002", True)
    assert sorted(reopened.query("SELECT clip_id, writer FROM captions")) == [("c1", None), ("c2", "llm")]
