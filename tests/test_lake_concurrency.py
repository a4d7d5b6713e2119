"""Many writers on one DuckLake catalog: processes registering shards and publishing versions at once.

On SQLite (one machine) and on a real PostgreSQL (a cluster), started here on a socket directory the test owns:
two datasets built side by side, and several worker processes of one dataset, all committing concurrently. No
shard may be lost or registered twice, and every version must hold exactly the rows of its shards.
"""

from __future__ import annotations

import glob
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from earmark.schemas import to_table
from earmark.schemas.records import Caption
from earmark.storage import Catalog, ShardMeta

pytestmark = pytest.mark.slow

WORKERS = 3  # processes per dataset
SHARDS = 6  # shards each worker writes
PUBLISH_EVERY = 2  # a worker publishes everything registered so far after every 2nd shard


def _caption(worker: int, shard: int, row: int) -> Caption:
    return Caption(
        clip_id=f"w{worker}-s{shard}-c{row}",
        domain="S00",
        prompt_name="short",
        prompt_sha="0" * 12,
        model="test",
        confidence=1.0,
        item_id=f"w{worker}-s{shard}-r{row}",
        kind="short",
        ref_index=0,
        text=f"worker {worker} shard {shard} row {row}",
    )


def _writer(root: str, dataset: str, postgres: str | None, worker: int, start: mp.Event) -> None:
    cat = Catalog(Path(root), dataset, postgres=postgres)
    start.wait(60)
    for shard in range(SHARDS):
        rows = [_caption(worker, shard, r) for r in range(1 + (worker + shard) % 3)]
        cat.write_shard(
            f"w{worker}-s{shard}",
            {"captions": to_table(Caption, rows)},
            ShardMeta(stage="test", stage_version="1", inputs=[f"w{worker}"]),
            run_id=f"run-{worker}",
        )
        if shard % PUBLISH_EVERY == PUBLISH_EVERY - 1:
            cat.publish({"captions": cat.keys_where(table="captions")}, run_id=f"run-{worker}")


def _check(cat: Catalog) -> None:
    expected = {f"w{w}-s{s}": 1 + (w + s) % 3 for w in range(WORKERS) for s in range(SHARDS)}
    registered = cat.query("SELECT key, rows FROM shards WHERE table_name = 'captions'")
    assert len(registered) == len(expected), "a shard was lost or registered twice"
    assert dict(registered) == expected
    versions = cat.versions()
    assert versions == [f"v{i:04d}" for i in range(1, len(versions) + 1)]  # numbered without gaps or duplicates
    assert len(cat.query("SELECT DISTINCT version FROM versions")) == len(versions)
    for v in versions:
        keys = cat.version_shards(v)["captions"]
        rows = cat.query(f"SELECT count(*), count(DISTINCT item_id) FROM {v}.captions")[0]
        assert rows == (sum(expected[k] for k in keys),) * 2, f"{v} does not hold exactly its shards' rows"
    # a worker publishes the shards it saw registered; one more publish after all of them holds every shard
    version, _ = cat.publish({"captions": cat.keys_where(table="captions")}, run_id="final")
    assert cat.version_shards(version)["captions"] == sorted(expected)
    assert cat.query("SELECT count(*) FROM captions")[0][0] == sum(expected.values())


def _run_writers(root: Path, datasets: list[str], postgres: str | None) -> None:
    ctx = mp.get_context("spawn")
    for ds in datasets:  # create each lake's tables once before the race (creating them is a race of its own)
        Catalog(root, ds, postgres=postgres)
    start = ctx.Event()
    procs = [
        ctx.Process(target=_writer, args=(str(root), ds, postgres, w, start)) for ds in datasets for w in range(WORKERS)
    ]
    for p in procs:
        p.start()
    time.sleep(1.0)
    start.set()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0, f"writer {p.name} failed (exit code {p.exitcode})"


def test_sqlite_catalog_many_writers(tmp_path: Path):
    _run_writers(tmp_path, ["alpha", "beta"], postgres=None)
    for ds in ("alpha", "beta"):
        cat = Catalog(tmp_path, ds)
        _check(cat)
        # datasets are separate lakes: versions are numbered per dataset
        assert cat.query("SELECT count(*) FROM shards WHERE key NOT LIKE 'w%'")[0][0] == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def postgres(tmp_path: Path):
    """A real PostgreSQL server on a Unix socket in a directory this test owns (initdb refuses root, so as
    root it runs as the `postgres` user)."""
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    assert bins, "PostgreSQL is not installed: `make test` installs it (apt package postgresql)"
    bindir = Path(bins[-1])
    base = Path(f"/tmp/earmark-pg-{os.getpid()}-{tmp_path.name}")
    base.mkdir(parents=True)
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    subprocess.run(
        [*as_user, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "earmark"],
        check=True,
        capture_output=True,
    )
    log = open(base / "postgres.log", "wb")  # noqa: SIM115 (closed in the finally below)
    server = subprocess.Popen(
        [
            *as_user,
            str(bindir / "postgres"),
            "-D",
            str(data),
            "-k",
            str(sock),
            "-p",
            str(port),
            "-c",
            "listen_addresses=",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,  # a file, not a pipe: a full pipe would block every backend that logs (each conflict does)
    )
    try:
        for _ in range(300):
            ready = subprocess.run(
                [str(bindir / "pg_isready"), "-h", str(sock), "-p", str(port)], capture_output=True
            ).returncode
            if ready == 0:
                break
            if server.poll() is not None:
                raise RuntimeError(f"postgres exited: {(base / 'postgres.log').read_text()[-2000:]}")
            time.sleep(0.1)
        subprocess.run(
            [str(bindir / "createdb"), "-h", str(sock), "-p", str(port), "-U", "earmark", "earmark"],
            check=True,
            capture_output=True,
        )
        yield f"host={sock} port={port} dbname=earmark user=earmark"
    finally:
        # fast shutdown (ends open sessions; SIGTERM would wait for them), signalled to the postmaster itself by
        # pg_ctl: a SIGINT to `runuser` (as root) did not reach it, and the wait below ran its 30 s every time
        subprocess.run(
            [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "stop", "-m", "fast", "-w", "-t", "60"],
            capture_output=True,
        )
        server.send_signal(signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        shutil.rmtree(base, ignore_errors=True)


def test_postgres_catalog_many_writers(tmp_path: Path, postgres: str):
    _run_writers(tmp_path, ["alpha", "beta"], postgres=postgres)
    for ds in ("alpha", "beta"):
        cat = Catalog(tmp_path, ds, postgres=postgres)
        assert cat.location.metadata.startswith("postgres:") and cat.location.metadata_schema == f"earmark_{ds}"
        _check(cat)
    assert not (tmp_path / "alpha" / "catalog.sqlite").exists()  # nothing went to a local SQLite catalog


def test_real_builds_write_concurrently_into_postgres(tmp_path: Path, postgres: str):
    """Two builds of different datasets (threads) and a third whose shards are written by 2 Dask worker
    processes, all at once, all committing into one PostgreSQL: every clip of every dataset arrives once."""
    from earmark.corpus import generate_corpus

    corpus = generate_corpus(tmp_path / "in", per_domain=1, seed=3, hostile=False)
    runs = {"alpha": "threads", "beta": "threads", "gamma": "dask"}
    env = {**os.environ, "EARMARK_CATALOG__POSTGRES": postgres, "EARMARK_INGEST__FILES_PER_SHARD": "2"}
    env.pop("PREFECT_API_URL", None)  # no API: the three builds race to start the local server, one does, all use it
    cli = [str(Path(sys.executable).with_name("earmark")), "build", str(tmp_path / "in"), "--data-root", str(tmp_path)]
    procs = {
        ds: subprocess.Popen(
            [*cli, "-d", ds, "--until", "analyze", "--experts", "levels"],
            env={**env, "EARMARK_RUN__TASK_RUNNER": runner, "EARMARK_RUN__DASK_WORKERS": "2"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for ds, runner in runs.items()
    }
    for ds, p in procs.items():
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, f"build {ds} failed: {err[-3000:]}"
    clips = {}
    for ds in runs:
        cat = Catalog(tmp_path, ds, postgres=postgres)
        assert cat.versions() == ["v0001"]
        shards = cat.query("SELECT count(*), count(DISTINCT (key, table_name)) FROM shards")[0]
        assert shards[0] == shards[1] >= 3 * len(corpus) // 2  # clips + quarantine + levels per shard, once each
        n, distinct = cat.query("SELECT count(*), count(DISTINCT clip_id) FROM clips")[0]
        assert n == distinct >= len(corpus)  # a file longer than 10 s gives two clips
        assert cat.query("SELECT count(*) FROM v0001.levels")[0][0] == n
        clips[ds] = sorted(r[0] for r in cat.query("SELECT clip_id FROM clips"))
    assert clips["alpha"] == clips["beta"] == clips["gamma"]  # the same corpus, whichever runner wrote it
