import os
import shutil
import tempfile

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def _seed_numba_cache(folder: str) -> None:
    """Copy librosa's numba cache, compiled by `make setup` in one process (earmark/experts/compiled.py), into
    `folder` where numba looks for it under NUMBA_CACHE_DIR (its UserProvidedCacheLocator's sub-folder per source
    folder): compiling it again cost 35 s of CPU per worker."""
    import importlib.util
    from pathlib import Path

    from numba.core.caching import UserProvidedCacheLocator

    spec = importlib.util.find_spec("librosa")
    if spec is None or spec.origin is None:
        return
    for cache in Path(spec.origin).parent.rglob("__pycache__"):
        files = [f for f in cache.iterdir() if f.suffix in (".nbi", ".nbc")]
        if files:
            into = Path(folder) / UserProvidedCacheLocator.get_suitable_cache_subpath(str(cache.parent / "_.py"))
            into.mkdir(parents=True, exist_ok=True)
            for f in files:
                shutil.copy2(f, into / f.name)


# numba (librosa's beat tracker in the music expert) caches what it compiles beside the package. Two processes
# compiling the same function at once on a fresh venv left a cache that segfaulted every later load (2026-11-28: a
# fresh clone's parallel `make test` beside `make demo`; a private cache folder loaded fine). Each xdist worker,
# and the commands it runs, gets a cache folder of its own for the session, seeded with what `make setup` compiled.
if os.environ.get("PYTEST_XDIST_WORKER") and "NUMBA_CACHE_DIR" not in os.environ:
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"earmark-test-numba-{os.environ['PYTEST_XDIST_WORKER']}-")
    _seed_numba_cache(os.environ["NUMBA_CACHE_DIR"])
    import atexit

    atexit.register(shutil.rmtree, os.environ["NUMBA_CACHE_DIR"], True)

import pytest  # noqa: E402

# Commands the tests run without a Prefect API (`earmark build` in a subprocess) share one local Prefect server
# (flows/local_server.py) for the session, in a folder of its own, never the user's; stopped at the end. Under
# pytest-xdist the controller makes the folder before it starts its workers, which inherit it (_SHARED_HOME): the
# workers' commands attach to one server, as commands of one user do (the server's locks are made for that), and
# the controller, the last process of the session, stops it; a worker does not stop it under the other's feet.
_SHARED_HOME = "EARMARK_TEST_PREFECT_HOME"
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_SHARED_HOME):
    PREFECT_LOCAL_HOME, _OWN_HOME = os.environ[_SHARED_HOME], False
else:
    PREFECT_LOCAL_HOME, _OWN_HOME = tempfile.mkdtemp(prefix="earmark-test-prefect-"), True
    os.environ[_SHARED_HOME] = PREFECT_LOCAL_HOME
os.environ["EARMARK_PREFECT__HOME"] = PREFECT_LOCAL_HOME

# tests/paper/ needs the paper venv (requirements/paper.txt); `make test-paper` sets this and runs it there.
collect_ignore = [] if os.environ.get("EARMARK_PAPER_TESTS") else ["paper"]


def pytest_unconfigure(config):
    """The session's local Prefect server stopped and its folder removed, by the process that made the folder
    (with pytest-xdist: the controller, once every worker has finished)."""
    if not _OWN_HOME:
        return
    from pathlib import Path

    from earmark.flows.local_server import stop

    stop(Path(PREFECT_LOCAL_HOME))
    shutil.rmtree(PREFECT_LOCAL_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def prefect_harness():
    """One real (SQLite-backed) Prefect server for the whole session: it takes ~13 s to start."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


class CatalogConnection:
    """A DuckDB-connection look-alike over a dataset's DuckLake catalog (`execute(...).fetchall()` as before),
    for tests that read the published views."""

    def __init__(self, data_root, dataset: str):
        from earmark.storage import Catalog

        self.cat = Catalog(data_root, dataset)

    def execute(self, sql: str, params=None):
        return _Result(*self.cat.cursor_query(sql, params))

    def close(self) -> None:
        pass


class _Result:
    def __init__(self, columns, rows):
        self.description = [(c,) for c in columns]
        self._rows = rows

    def fetchall(self):
        return list(self._rows)

    def fetchone(self):
        return self._rows[0] if self._rows else None


# The slowest files first (serial `--durations`, 2026-11-28: 70-420 s each; together about half the suite): with
# `make test`'s `-n 2 --dist loadfile --no-loadscope-reorder` the workers take files in this order, so the long
# ones start early and the many short files fill the gaps, instead of one long file running alone at the end.
# Only the order changes; a file not named here keeps its place after these.
SLOW_FILES = (
    "test_build_e2e.py",
    "test_kill_points.py",
    "test_training_smoke.py",
    "test_lake_concurrency.py",
    "test_sigterm.py",
    "test_prompt_edits.py",
    "test_deploy.py",
    "test_dask_runner.py",
    "test_date.py",
    "test_lease.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(SLOW_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FILES)))
