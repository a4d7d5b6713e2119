import os
import shutil
import tempfile

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

import pytest  # noqa: E402

# Commands the tests run without a Prefect API (`earmark build` in a subprocess) share one local Prefect server
# (flows/local_server.py) for the session, in a folder of its own, never the user's; stopped at the end.
PREFECT_LOCAL_HOME = tempfile.mkdtemp(prefix="earmark-test-prefect-")
os.environ["EARMARK_PREFECT__HOME"] = PREFECT_LOCAL_HOME

# tests/paper/ needs the paper venv (requirements/paper.txt); `make test-paper` sets this and runs it there.
collect_ignore = [] if os.environ.get("EARMARK_PAPER_TESTS") else ["paper"]


@pytest.fixture(scope="session", autouse=True)
def _local_prefect_server_stopped_at_the_end():
    yield
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
