"""The lake's data path on S3-compatible object storage: a real S3 server (moto) on loopback.

The catalog database stays local (SQLite); the lake's Parquet goes to `s3://bucket/…` through DuckDB's httpfs
extension and an S3 secret whose key is read from the environment. Stage shard files stay under data_root."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
import duckdb
import numpy as np
import pytest
import soundfile as sf

from earmark.schemas import to_table
from earmark.schemas.records import Caption
from earmark.storage import Catalog, ShardMeta
from earmark.storage.lake import LakeSetupError, S3Access, extension_path
from support.records import caption as _caption

BUCKET = "earmark-lake"
KEYS = {"AWS_ACCESS_KEY_ID": "testing-key", "AWS_SECRET_ACCESS_KEY": "testing-secret"}


def _moto() -> tuple[subprocess.Popen, int, object]:
    """A moto server on a port found free, with the bucket created; None when the server exited (another process
    took the port between our check and its bind: then the caller tries another)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"],
    )
    while proc.poll() is None:  # as long as it takes to start on a busy machine, while it lives
        try:
            client.create_bucket(Bucket=BUCKET)
            return proc, port, client
        except Exception:
            time.sleep(0.2)
    return proc, port, None


@pytest.fixture(scope="module")
def s3_endpoint():
    """A moto S3 server in its own process on a free loopback port, with an empty bucket."""
    for _ in range(3):
        proc, port, client = _moto()
        if client is not None:
            break
    else:
        raise AssertionError("the moto server exited at start three times (its ports taken?)")
    try:
        yield f"127.0.0.1:{port}", client
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _objects(client, prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def _s3(endpoint: str) -> S3Access:
    return S3Access(endpoint=endpoint, region="us-east-1", url_style="path", use_ssl=False)


def test_a_lake_on_s3_publishes_versions_and_time_travels(tmp_path: Path, s3_endpoint, monkeypatch):
    endpoint, client = s3_endpoint
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    cat = Catalog(tmp_path, "ds", data_path=f"s3://{BUCKET}/lake", s3=_s3(endpoint))
    assert cat.location.data_path == f"s3://{BUCKET}/lake/ds/"
    run = cat.start_run("test", {})
    meta = ShardMeta(stage="synthesize", stage_version="1", inputs=["x"])
    # more rows than DuckLake inlines into the catalog database (10), so they are written as Parquet
    cat.write_shard("k1", {"captions": to_table(Caption, [_caption(i) for i in range(30)])}, meta, run)
    assert cat.publish({"captions": ["k1"]}, run) == ("v0001", True)
    cat.write_shard("k2", {"captions": to_table(Caption, [_caption(i) for i in range(30, 50)])}, meta, run)
    assert cat.publish({"captions": ["k2"]}, run) == ("v0002", True)  # k1's rows deleted, k2's inserted
    cat.finish_run(run, "ok", {})

    q = lambda sql: cat.query(sql)[0][0]
    assert q("SELECT count(*) FROM captions") == 20 and q("SELECT min(text) FROM captions") == "caption number 30"
    assert q("SELECT count(*) FROM v0001.captions") == 30  # time travel reads v0001's files back from S3
    assert q("SELECT status FROM runs") == "ok"

    # the lake's Parquet is in the bucket, under the dataset's prefix; nothing local but the catalog and shards
    objects = _objects(client, "lake/ds/")
    assert any("captions" in key and key.endswith(".parquet") for key in objects), objects
    assert not (tmp_path / "ds" / "lake").exists()
    assert cat.shard_path("captions", "k1").exists()  # the stage's shard cache stays on the filesystem

    # the DuckDB CLI reads the same lake; its init file names the key's variables, never their values
    init = cat.init_sql()
    assert "getenv('AWS_ACCESS_KEY_ID')" in init and KEYS["AWS_SECRET_ACCESS_KEY"] not in init
    (tmp_path / "lake.sql").write_text(init)
    out = subprocess.run(
        [str(Path(sys.executable).with_name("duckdb")), "-init", str(tmp_path / "lake.sql"), "-csv", "-noheader"]
        + ["-c", "SELECT count(*) FROM v0001.captions"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **KEYS},
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "30", out


def test_requests_are_signed_with_the_key_from_the_environment_by_earmark_and_by_the_cli(monkeypatch):
    """moto accepts any key, so what is sent is checked on a server that records the request headers."""
    seen: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(
                self.headers.get("Authorization", "") + " token=" + self.headers.get("x-amz-security-token", "")
            )
            self.send_response(404)
            self.end_headers()

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    access = _s3(f"127.0.0.1:{srv.server_address[1]}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {**KEYS, "AWS_SESSION_TOKEN": "tok"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        con = duckdb.connect(config={"autoinstall_known_extensions": False})
        con.execute(f"LOAD '{extension_path('httpfs')}'")
        con.execute(access.secret_sql())
        with pytest.raises(duckdb.Error, match="404"):
            con.execute("SELECT * FROM 's3://b/x.parquet'")
        script = f"LOAD '{extension_path('httpfs')}';\n{access.secret_sql(from_cli_env=True)};\n"
        cli = [str(Path(sys.executable).with_name("duckdb")), "-c", script + "SELECT * FROM 's3://b/x.parquet';"]
        subprocess.run(cli, env=env, capture_output=True, timeout=60)
        del env["AWS_SESSION_TOKEN"]  # unset: the CLI's getenv gives '' and no token is sent
        subprocess.run(cli, env=env, capture_output=True, timeout=60)
    finally:
        srv.shutdown()
    signed = "AWS4-HMAC-SHA256 Credential=testing-key/"
    assert seen and all(h.startswith(signed) and "/us-east-1/s3/aws4_request" in h for h in seen), seen
    assert {h.rsplit("token=", 1)[1] for h in seen} == {"tok", ""}


def test_missing_keys_and_other_schemes_are_refused_with_what_to_do(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(LakeSetupError, match=r"set \$MY_KEY and \$AWS_SECRET_ACCESS_KEY"):
        Catalog(tmp_path, "nokey", data_path="s3://b/lake", s3=S3Access(key_id_env="MY_KEY"))
    with pytest.raises(ValueError, match="local folder or s3://"):
        Catalog(tmp_path, "gcs", data_path="gs://b/lake")


def _recording(folder: Path, seconds: float = 24.0) -> Path:
    folder.mkdir(parents=True)
    t = np.arange(int(16000 * seconds)) / 16000
    x = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.01 * np.random.default_rng(0).standard_normal(t.size)
    sf.write(folder / "long.wav", x.astype(np.float32), 16000)
    return folder


def test_a_build_with_its_lake_on_s3(tmp_path: Path, s3_endpoint):
    """The real command line, configured by environment: `build --until analyze`, then `earmark sql`. One 24 s
    recording cut into 12 clips of 2 s: more rows than DuckLake inlines, so the clips table is Parquet on S3."""
    endpoint, client = s3_endpoint
    env = {
        **os.environ,
        **KEYS,
        "EARMARK_LLM__N_THREADS": "1",
        "EARMARK_CATALOG__DATA_PATH": f"s3://{BUCKET}/builds",
        "EARMARK_CATALOG__S3_ENDPOINT": endpoint,
        "EARMARK_CATALOG__S3_URL_STYLE": "path",
        "EARMARK_CATALOG__S3_USE_SSL": "false",
        "EARMARK_CATALOG__S3_REGION": "us-east-1",
        "EARMARK_INGEST__MAX_CLIP_S": "2",
        "EARMARK_INGEST__MAX_CLIPS_PER_SOURCE": "0",  # all 12 pieces of the one file (the default keeps 8)
    }
    data = tmp_path / "data"
    cmd = [sys.executable, "-m", "earmark.cli.main", "build", str(_recording(tmp_path / "in")), "-d", "onS3"]
    cmd += ["--data-root", str(data), "--until", "analyze", "--experts", "levels"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "version v0001" in out.stdout

    sql = [sys.executable, "-m", "earmark.cli.main", "sql", "-d", "onS3", "--data-root", str(data)]
    rows = subprocess.run(sql + ["SELECT count(*) FROM clips"], env=env, capture_output=True, text=True, timeout=120)
    assert rows.returncode == 0 and rows.stdout.splitlines()[-1] == "12", rows.stderr[-2000:]
    objects = _objects(client, "builds/onS3/")
    assert any("/clips/" in key and key.endswith(".parquet") for key in objects), objects
    assert not (data / "onS3" / "lake").exists() and (data / "onS3" / "catalog.sqlite").exists()
