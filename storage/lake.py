"""DuckLake plumbing: the offline extensions, where a dataset's lake lives, one connection per process.

DuckLake keeps table metadata in a catalog database (SQLite for one machine, PostgreSQL for a cluster) and
the rows in Parquet files under a data path; DuckDB reads it. The extensions come from PyPI wheels
(`duckdb-extension-ducklake`, `-sqlite`, `-postgres`, `-httpfs`, pinned to the DuckDB version), so nothing
is downloaded at run time. DuckDB names an extension's entry point after its file name, and the wheels ship
`sqlite.duckdb_extension` for the extension DuckDB calls `sqlite_scanner`: the files are copied once,
under their real names, into `~/.cache/earmark/duckdb-extensions/<duckdb version>/`.

The data path is a local folder or `s3://bucket/prefix` on any S3-compatible store (`S3Access`): then `httpfs`
is loaded too and each connection gets a temporary DuckDB S3 secret whose key is read from the environment
when the connection opens, so it is never written to the config, the catalog or an init file.

Several processes may commit to one lake at once; a commit that loses a race raises a transaction error
("conflict", or SQLite's "database is locked") and is simply run again (`retrying`). Inside one process,
transactions on one lake are serialized by a lock: concurrent DuckLake transactions from threads of one
process can deadlock on the SQLite catalog.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import duckdb

ALIAS = "lake"
_WHEELS = {"ducklake": "ducklake", "sqlite_scanner": "sqlite", "postgres_scanner": "postgres", "httpfs": "httpfs"}
T = TypeVar("T")


class LakeSetupError(RuntimeError):
    """The DuckLake extensions are missing or do not match the installed DuckDB."""


def extension_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "earmark" / "duckdb-extensions"
    return base / duckdb.__version__


def extension_path(name: str) -> Path:
    """Path of an extension (`ducklake`, `sqlite_scanner`, `postgres_scanner`, `httpfs`) under its real file name."""
    wheel = _WHEELS[name]
    try:
        module = importlib.import_module(f"duckdb_extension_{wheel}")
    except ImportError as exc:
        raise LakeSetupError(
            f"DuckDB extension wheel duckdb-extension-{wheel} is not installed; "
            f"install it with `pip install duckdb-extension-{wheel}=={duckdb.__version__}` (or run `make setup`)"
        ) from exc
    src = Path(module.__file__).parent / "extensions" / f"v{duckdb.__version__}" / f"{wheel}.duckdb_extension"
    if not src.exists():
        raise LakeSetupError(
            f"{src} not found: duckdb-extension-{wheel} does not match duckdb {duckdb.__version__}; "
            f"pin both to the same version (requirements/core.txt)"
        )
    dst = extension_dir() / f"{name}.duckdb_extension"
    if not dst.exists() or dst.stat().st_size != src.stat().st_size:
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    return dst


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class S3Access:
    """How DuckDB reaches an `s3://` data path: the endpoint's settings, and the *names* of the environment
    variables holding the key (their values are read when a connection opens, never stored)."""

    endpoint: str | None = None  # host[:port] of an S3-compatible store (MinIO, Ceph, …); None: AWS
    region: str = "us-east-1"  # what requests are signed for (DuckDB signs for "" when a secret names none)
    url_style: str | None = None  # "path" for most self-hosted stores; None: DuckDB's default (vhost)
    use_ssl: bool = True
    key_id_env: str = "AWS_ACCESS_KEY_ID"
    secret_env: str = "AWS_SECRET_ACCESS_KEY"
    session_token_env: str = "AWS_SESSION_TOKEN"  # optional: temporary credentials

    def secret_sql(self, *, from_cli_env: bool = False) -> str:
        """`CREATE SECRET` for this store. The key comes from the environment: read here (`from_cli_env`
        False), or by the DuckDB CLI's `getenv()` when it runs an init file (so the file holds no key)."""
        options = ["TYPE s3"]
        if from_cli_env:
            options += [f"KEY_ID getenv({_quote(self.key_id_env)})", f"SECRET getenv({_quote(self.secret_env)})"]
            options.append(f"SESSION_TOKEN getenv({_quote(self.session_token_env)})")
        else:
            key_id, secret = os.environ.get(self.key_id_env), os.environ.get(self.secret_env)
            if not key_id or not secret:
                raise LakeSetupError(
                    f"the lake's data path is on S3: set ${self.key_id_env} and ${self.secret_env} to the store's "
                    f"access key (the names come from [catalog] s3_key_id_env / s3_secret_env)"
                )
            options += [f"KEY_ID {_quote(key_id)}", f"SECRET {_quote(secret)}"]
            if token := os.environ.get(self.session_token_env):
                options.append(f"SESSION_TOKEN {_quote(token)}")
        if self.endpoint:
            options.append(f"ENDPOINT {_quote(self.endpoint)}")
        if self.region:
            options.append(f"REGION {_quote(self.region)}")
        if self.url_style:
            options.append(f"URL_STYLE {_quote(self.url_style)}")
        options.append(f"USE_SSL {str(self.use_ssl).lower()}")
        return f"CREATE OR REPLACE TEMPORARY SECRET earmark_s3 ({', '.join(options)})"


def is_remote(data_path: str) -> bool:
    return "://" in data_path


@dataclass(frozen=True)
class LakeLocation:
    """Where one dataset's lake lives: its catalog database and its data path.

    `metadata` is DuckLake's catalog string: `sqlite:<file>` or `postgres:<libpq DSN>`; with PostgreSQL every
    dataset has its own metadata schema, so version numbers stay per dataset."""

    metadata: str
    data_path: str
    metadata_schema: str | None = None
    s3: S3Access | None = None  # set when data_path is s3://…
    # True when catalog and data both sit in the dataset's folder (SQLite, no [catalog] data_path): DuckLake
    # records the data path when the lake is created, and a moved or copied folder must still open (its data
    # files are stored relative to that path)
    in_dataset_folder: bool = False

    @classmethod
    def for_dataset(
        cls,
        root: Path,
        dataset: str,
        postgres: str | None = None,
        data_path: str | None = None,
        s3: S3Access | None = None,
    ) -> LakeLocation:
        data = data_path.rstrip("/") + f"/{dataset}/" if data_path else str(root / "lake") + "/"
        if is_remote(data) and not data.startswith("s3://"):
            raise ValueError(f"[catalog] data_path {data_path!r}: use a local folder or s3://bucket/prefix")
        s3 = (s3 or S3Access()) if data.startswith("s3://") else None
        if postgres:
            safe = "".join(c if c.isalnum() else "_" for c in dataset.lower())
            if safe != dataset:  # `a-b`, `a_b` and `A_b` must not share a schema (and so their versions)
                safe += "_" + hashlib.sha1(dataset.encode()).hexdigest()[:8]
            return cls(metadata=f"postgres:{postgres}", data_path=data, metadata_schema=f"earmark_{safe}", s3=s3)
        return cls(metadata=f"sqlite:{root / 'catalog.sqlite'}", data_path=data, s3=s3, in_dataset_folder=not data_path)

    @property
    def backend(self) -> str:
        return self.metadata.split(":", 1)[0]

    def extensions(self) -> list[str]:
        names = ["ducklake", "postgres_scanner" if self.backend == "postgres" else "sqlite_scanner"]
        return names + (["httpfs"] if self.s3 else [])

    def attach_sql(self, alias: str = ALIAS, *, read_only: bool = False) -> str:
        options = [f"DATA_PATH {_quote(self.data_path)}"]
        if self.metadata_schema:
            options.append(f"METADATA_SCHEMA {_quote(self.metadata_schema)}")
        if self.in_dataset_folder:
            options.append("OVERRIDE_DATA_PATH true")
        if read_only:
            options.append("READ_ONLY")
        return f"ATTACH {_quote('ducklake:' + self.metadata)} AS {alias} ({', '.join(options)})"

    def init_sql(self) -> str:
        """A DuckDB CLI init file (`duckdb -init FILE`): load the extensions, attach the lake READ_ONLY, use it.
        An S3 secret reads its key from the environment of the `duckdb` process (the CLI's `getenv`)."""
        lines = [f"-- earmark lake: {self.metadata} (data {self.data_path})"]
        lines += [f"LOAD {_quote(str(extension_path(name)))};" for name in self.extensions()]
        if self.s3:
            lines += [
                f"-- the S3 key is read from ${self.s3.key_id_env} and ${self.s3.secret_env} "
                f"(and ${self.s3.session_token_env} if set) when duckdb starts",
                self.s3.secret_sql(from_cli_env=True) + ";",
            ]
        lines += [
            "-- attached READ_ONLY: a dataset changes only through earmark (build, rerun, review, maintain)",
            self.attach_sql(read_only=True) + ";",
            f"USE {ALIAS};",
        ]
        return "\n".join(lines) + "\n"


class _Lake:
    """One DuckDB connection with the lake attached, shared by every Catalog of this process."""

    def __init__(self, location: LakeLocation):
        if location.backend == "sqlite":
            Path(location.metadata.split(":", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        if not is_remote(location.data_path):
            Path(location.data_path).mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(config={"autoinstall_known_extensions": False})
        for name in location.extensions():
            self.con.execute(f"LOAD {_quote(str(extension_path(name)))}")
        if location.s3:
            self.con.execute(location.s3.secret_sql())
        try:
            self.con.execute(location.attach_sql())
        except duckdb.Error as exc:
            if "does not match existing data path" not in str(exc):
                raise
            self.con.close()
            raise LakeSetupError(
                f"the catalog {location.metadata} was created with another data path than {location.data_path} "
                f"([catalog] data_path): set data_path back to the one it was created with, or move its data "
                f"files there ({str(exc).splitlines()[0]})"
            ) from None
        self.con.execute(f"USE {ALIAS}")
        self.lock = threading.RLock()
        self.closed = False


_lakes: dict[tuple[int, LakeLocation], _Lake] = {}  # insertion order = least recently used first
_lakes_guard = threading.Lock()
MAX_OPEN_LAKES = 16


def _lake(location: LakeLocation) -> _Lake:
    key = (os.getpid(), location)  # a forked child opens its own connection
    with _lakes_guard:
        lake = _lakes.pop(key, None)
        if lake is None:
            lake = _retrying(lambda: _Lake(location), 120.0)
            for old_key in [k for k in _lakes if k[0] == key[0]][: max(0, len(_lakes) - MAX_OPEN_LAKES + 1)]:
                old = _lakes[old_key]
                if old.lock.acquire(blocking=False):  # idle: close it (a later use reopens it)
                    del _lakes[old_key]
                    old.closed = True
                    old.con.close()
                    old.lock.release()
        _lakes[key] = lake
        return lake


@contextmanager
def connection(location: LakeLocation) -> Iterator[duckdb.DuckDBPyConnection]:
    """The process's connection to the lake, held exclusively (a cursor would share its transaction state)."""
    while True:
        lake = _lake(location)
        with lake.lock:
            if lake.closed:  # evicted between lookup and lock: open it again
                continue
            yield lake.con
            return


def is_retryable(exc: BaseException) -> bool:
    """A lost race with another writer: a DuckLake commit conflict or a busy catalog database."""
    text = str(exc).lower()
    return isinstance(exc, duckdb.Error) and any(
        s in text for s in ("conflict", "database is locked", "failed to commit", "could not serialize", "busy")
    )


def _retrying(fn: Callable[[], T], timeout_s: float) -> T:
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while True:
        try:
            return fn()
        except duckdb.Error as exc:
            if not is_retryable(exc) or time.monotonic() > deadline:
                raise
            if os.environ.get("EARMARK_LAKE_DEBUG"):
                print(f"[lake {os.getpid()}] retry after: {str(exc)[:300]}", flush=True)
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 1.0)


def _discard(location: LakeLocation) -> None:
    """Close this process's connection to a lake; the next use opens a fresh one."""
    with _lakes_guard:
        lake = _lakes.pop((os.getpid(), location), None)
    if lake is not None:
        lake.closed = True
        lake.con.close()


def transaction(location: LakeLocation, fn: Callable[[duckdb.DuckDBPyConnection], T], timeout_s: float = 120.0) -> T:
    """Run `fn(con)` in one lake transaction; a commit that loses a race is rolled back and run again.

    After a failed transaction the connection is closed and the retry opens a new one: a DuckDB connection
    whose DuckLake commit failed on a PostgreSQL catalog was seen to hang in its next transaction."""

    def attempt() -> T:
        with connection(location) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                out = fn(con)
                con.execute("COMMIT")
                return out
            except BaseException:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass  # a failed COMMIT has already ended the transaction
                _discard(location)
                raise

    return _retrying(attempt, timeout_s)


def read(location: LakeLocation, fn: Callable[[duckdb.DuckDBPyConnection], T], timeout_s: float = 120.0) -> T:
    """Run a read-only `fn(con)`, retried while the catalog database is busy."""

    def attempt() -> T:
        with connection(location) as con:
            return fn(con)

    return _retrying(attempt, timeout_s)
