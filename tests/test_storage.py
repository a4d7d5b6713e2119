"""Shard writer and DuckDB catalog on a real DuckDB file."""

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from earmark.schemas import TABLES, arrow_schema, from_table, to_table
from earmark.schemas.records import Caption, QuarantineRow
from earmark.storage import Catalog, ShardMeta, shard_key, write_shard
from earmark.storage.shards import remove_stale_temp_files


def _caption(i: int, domain: str = "S00") -> Caption:
    return Caption(
        clip_id=f"c{i}",
        domain=domain,
        prompt_name="p",
        prompt_sha="s",
        model="m",
        confidence=0.9,
        item_id=f"c{i}:short:0",
        kind="short",
        ref_index=0,
        text=f"caption number {i}",
    )


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

    con = duckdb.connect(str(cat.path), read_only=True)
    assert con.execute("SELECT count(*) FROM captions").fetchone()[0] == 3  # latest version
    assert con.execute("SELECT count(*) FROM v0001.captions").fetchone()[0] == 2
    assert con.execute("SELECT count(*) FROM captions WHERE domain = 'SMA'").fetchone()[0] == 1
    assert con.execute("SELECT count(*) FROM clips").fetchone()[0] == 0  # typed empty view
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "ok"
    con.close()


def test_bad_dataset_name_is_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="dataset name"):
        Catalog(tmp_path, "../escape")
