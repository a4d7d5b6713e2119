"""One writer per dataset: a lease row in the dataset's catalog database.

The `lease` table of a dataset's lake has one row: who writes the dataset now (run id, command, host, pid)
and when it last said it is alive (`heartbeat_at`). Taking the lease is one lake transaction that reads the
row and updates it; two processes that race for it both update the row, so DuckLake lets one commit and the
other retry, re-read and find the lease taken. It works wherever the catalog database is reachable — across
nodes with a PostgreSQL catalog, with the data on object storage — unlike a lock file. The row is stored
inline in the catalog database (DuckLake data inlining), so heartbeats write no Parquet files.

A holder that stops heartbeating for `stale_after_s` is presumed dead and its lease may be taken over; on
the holder's own host a dead pid is recognised at once, so a build killed with kill -9 can be resumed
immediately. A holder of the same run id (the publish inside a build, a review import inside its flow)
re-enters its own lease. A writing command takes the lease in its own process before Prefect starts
(earmark.cli.commands), so a busy dataset is refused at once, in one line; the flows it then runs find that
this process holds it (`write_lease` re-enters it) and write under its run id.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:
    from earmark.core.config import Config

LEASE_COLUMNS = (
    "id INTEGER, run_id VARCHAR, command VARCHAR, host VARCHAR, pid INTEGER, acquired_at TIMESTAMP, "
    "heartbeat_at TIMESTAMP"
)


_held: dict[str, Lease] = {}  # dataset → the lease this process holds for it


def held(dataset: str) -> Lease | None:
    """The lease this process holds on a dataset, if any."""
    return _held.get(dataset)


class DatasetBusyError(RuntimeError):
    """Another run holds the dataset's write lease."""


@dataclass(frozen=True)
class Holder:
    run_id: str
    command: str
    host: str
    pid: int
    acquired_at: datetime
    heartbeat_at: datetime

    def age_s(self, now: datetime) -> float:
        return (now - self.heartbeat_at).total_seconds()

    def describe(self, now: datetime) -> str:
        return (
            f"run {self.run_id} (`earmark {self.command}`, host {self.host}, pid {self.pid}, "
            f"started {self.acquired_at:%Y-%m-%d %H:%M:%S} UTC, last heartbeat {self.age_s(now):.0f} s ago)"
        )


def utc_now() -> datetime:
    """Now in UTC, naive: the catalog's and the lease's timestamps (DuckDB TIMESTAMP columns)."""
    return datetime.now(UTC).replace(tzinfo=None)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by another user
    return True


def read_holder(con: duckdb.DuckDBPyConnection) -> Holder | None:
    row = con.execute(
        "SELECT run_id, command, host, pid, acquired_at, heartbeat_at FROM main.lease WHERE id = 1"
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return Holder(*row)


def is_dead(holder: Holder, now: datetime, stale_after_s: float, host: str) -> bool:
    """A holder is gone when its heartbeat is stale, or (on its own host) when its process no longer exists."""
    if holder.age_s(now) > stale_after_s:
        return True
    return holder.host == host and not _pid_alive(holder.pid)


class Lease:
    """The write lease of one dataset for one run; `acquire()` then `release()`, or use `hold()`.

    While held, a daemon thread renews the heartbeat every `heartbeat_s`. `wait_s` > 0: wait up to that
    long for a busy dataset instead of refusing at once."""

    def __init__(
        self,
        catalog: Any,
        run_id: str | None,
        command: str,
        *,
        stale_after_s: float = 120.0,
        heartbeat_s: float = 20.0,
        wait_s: float = 0.0,
    ) -> None:
        if heartbeat_s * 2 > stale_after_s:
            raise ValueError(
                f"lease heartbeat ({heartbeat_s} s) must be at most half of stale_after ({stale_after_s} s)"
            )
        # run_id None: a step inside another command of this process (a review import's publish) that re-enters
        # the lease its command holds, or takes one of its own under a fresh id
        self.nested = run_id is None
        self.catalog, self.command = catalog, command
        self.run_id = run_id or f"{command}-{uuid.uuid4().hex[:12]}"
        self.stale_after_s, self.heartbeat_s, self.wait_s = stale_after_s, heartbeat_s, wait_s
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.took_over: Holder | None = None  # the dead holder this lease replaced, if any
        self.lost = threading.Event()  # set when a heartbeat found the lease taken by someone else
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reentered = False

    # ------------------------------------------------------------------------------------------ take
    def _try_take(self, con: duckdb.DuckDBPyConnection) -> tuple[Holder | None, bool]:
        """(the other holder, False) when busy; (a dead holder taken over or None, True) when taken."""
        now = utc_now()
        holder = read_holder(con)
        if holder is not None and holder.run_id == self.run_id:
            return None, False  # our own run already holds it (re-entered)
        if holder is not None and not is_dead(holder, now, self.stale_after_s, self.host):
            return holder, False
        con.execute(
            "UPDATE main.lease SET run_id = ?, command = ?, host = ?, pid = ?, acquired_at = ?, heartbeat_at = ? "
            "WHERE id = 1",
            [self.run_id, self.command, self.host, self.pid, now, now],
        )
        if holder is not None:  # the dead holder's run never closed its row: say what happened to it
            con.execute(
                "UPDATE main.runs SET status = 'interrupted', finished_at = ? WHERE run_id = ? AND status = 'running'",
                [holder.heartbeat_at, holder.run_id],
            )
        return holder, True

    def acquire(self) -> Lease:
        mine = _held.get(self.catalog.dataset)
        if mine is not None and (self.nested or mine.run_id == self.run_id):
            self._reentered = True
            return self
        deadline = utc_now().timestamp() + self.wait_s
        while True:
            other, taken = self.catalog._transaction(self._try_take)
            if taken:
                self.took_over = other
                break
            if other is None:  # held by this run already: the outer holder heartbeats and releases
                self._reentered = True
                return self
            if utc_now().timestamp() >= deadline:
                raise DatasetBusyError(
                    f"dataset {self.catalog.dataset!r} is being written by {other.describe(utc_now())}; "
                    f"wait for it to finish (or set [run] lease_wait_s to wait for it). If that process is gone, "
                    f"its lease expires {max(0.0, self.stale_after_s - other.age_s(utc_now())):.0f} s after its "
                    f"last heartbeat ([run] lease_stale_s = {self.stale_after_s:.0f})."
                )
            self._stop.wait(min(self.heartbeat_s, max(0.5, deadline - utc_now().timestamp())))
        self._thread = threading.Thread(target=self._beat, name=f"lease-{self.catalog.dataset}", daemon=True)
        self._thread.start()
        _held[self.catalog.dataset] = self
        return self

    # ------------------------------------------------------------------------------------- heartbeat
    def _renew(self, con: duckdb.DuckDBPyConnection) -> bool:
        holder = read_holder(con)
        if holder is None or holder.run_id != self.run_id:
            return False
        con.execute("UPDATE main.lease SET heartbeat_at = ? WHERE id = 1", [utc_now()])
        return True

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                if not self.catalog._transaction(self._renew):
                    self.lost.set()
                    return
            except duckdb.Error:
                continue  # a busy catalog: try again at the next beat (staleness allows a few misses)

    def renew(self) -> None:
        """Renew now (a long step between heartbeats, or a test)."""
        if not self._reentered and not self.catalog._transaction(self._renew):
            self.lost.set()

    # --------------------------------------------------------------------------------------- release
    def release(self) -> None:
        if self._reentered:
            return
        _held.pop(self.catalog.dataset, None)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

        def free(con: duckdb.DuckDBPyConnection) -> None:
            holder = read_holder(con)
            if holder is not None and holder.run_id == self.run_id:
                con.execute(
                    "UPDATE main.lease SET run_id = NULL, command = NULL, host = NULL, pid = NULL, "
                    "acquired_at = NULL, heartbeat_at = NULL WHERE id = 1"
                )

        self.catalog._transaction(free)

    def __enter__(self) -> Lease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def write_lease(cfg: Config, catalog: Any, run_id: str | None, command: str) -> Lease:
    """The dataset's write lease for a command with `[run]`'s settings (not yet taken: `with write_lease(...)`);
    a second writer of the same dataset waits `[run] lease_wait_s`, then refuses, naming the holder. When this
    process already holds the dataset's lease (the command took it before starting Prefect, or a build runs
    the publish), the lease returned re-enters it under the holder's run id, so `lease.run_id` is the id to
    write the run under. `run_id` None: re-enter, or take one under a fresh id."""
    outer = held(catalog.dataset)
    if outer is not None and outer.catalog.root == catalog.root:
        run_id = outer.run_id
    return Lease(
        catalog,
        run_id,
        command,
        stale_after_s=cfg.run.lease_stale_s,
        heartbeat_s=cfg.run.lease_heartbeat_s,
        wait_s=cfg.run.lease_wait_s,
    )


@contextmanager
def released(lease: Lease | None) -> Iterator[None]:
    """Give the lease up for a while (e.g. while a review waits hours for a person) and take it back after."""
    if lease is None or lease._reentered:
        yield
        return
    lease.release()
    try:
        yield
    finally:
        # coming back: wait for a writer that started meanwhile to finish, rather than lose the review's work
        lease._stop, lease.wait_s = threading.Event(), max(lease.wait_s, 3600.0)
        lease.acquire()
