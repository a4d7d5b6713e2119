"""Lake maintenance a dataset's owner needs now and then, and `earmark sql` never runs: expiring old snapshots
and deleting the files only they used, and compacting small data files.

Every published version stays readable: its snapshot (`version_snapshots`) is never expired, so `vNNNN.<table>`
time travel keeps working; only the snapshots in between (shard registrations, runs, leases) go. Compaction
merges files without changing what any snapshot reads. Each operation plans first (`dry_run`: the plan is all
that happens), and runs under the dataset's write lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import duckdb

from earmark.storage import lake
from earmark.storage.catalog import Catalog


@dataclass(frozen=True)
class MaintenancePlan:
    """What an operation will do (or did): snapshots expired, files deleted, tables compacted."""

    operation: str
    snapshots: tuple[int, ...] = ()  # snapshot ids to expire
    kept_versions: int = 0  # snapshots kept because a published version points to them
    files: int = 0  # data files to delete (no snapshot left reads them) or to merge
    tables: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.operation == "expire":
            head = f"expire {len(self.snapshots)} snapshot(s)"
            return (
                f"{head} ({self.kept_versions} kept: one per published version) and delete {self.files} data "
                "file(s) no kept snapshot reads"
            )
        return f"compact {self.files} data file(s) of {len(self.tables)} table(s): {', '.join(self.tables) or '-'}"


def plan_expire(cat: Catalog, older_than: timedelta) -> MaintenancePlan:
    """The snapshots older than `older_than` that no version points to and that are not the latest."""

    def plan(con: duckdb.DuckDBPyConnection) -> MaintenancePlan:
        kept = {int(s) for (s,) in con.execute("SELECT snapshot_id FROM version_snapshots").fetchall()}
        rows = con.execute(
            f"SELECT snapshot_id, snapshot_time < now() - to_seconds(?::DOUBLE) FROM {lake.ALIAS}.snapshots()",
            [older_than.total_seconds()],
        ).fetchall()
        latest = max((int(s) for s, _ in rows), default=-1)
        expire = tuple(sorted(int(s) for s, old in rows if int(s) not in kept and int(s) != latest and old))
        (files,) = con.execute(
            f"SELECT count(*) FROM ducklake_cleanup_old_files('{lake.ALIAS}', dry_run => true, cleanup_all => true)"
        ).fetchone()  # type: ignore[misc]
        return MaintenancePlan("expire", expire, len(kept), int(files))

    return lake.read(cat.location, plan, cat.busy_timeout_s)


def expire(cat: Catalog, plan: MaintenancePlan) -> MaintenancePlan:
    """Expire the plan's snapshots, then delete every data file no remaining snapshot reads."""
    if plan.snapshots:
        ids = ", ".join(str(int(s)) for s in plan.snapshots)
        cat._transaction(
            lambda con: con.execute(f"CALL ducklake_expire_snapshots('{lake.ALIAS}', versions => [{ids}])")
        )
    deleted = lake.read(
        cat.location,
        lambda con: con.execute(
            f"SELECT count(*) FROM ducklake_cleanup_old_files('{lake.ALIAS}', cleanup_all => true)"
        ).fetchone()[0],  # type: ignore[index]
        cat.busy_timeout_s,
    )
    return MaintenancePlan("expire", plan.snapshots, plan.kept_versions, int(deleted))


def plan_compact(cat: Catalog) -> MaintenancePlan:
    """The published tables whose rows are spread over more than one data file."""

    def plan(con: duckdb.DuckDBPyConnection) -> MaintenancePlan:
        rows = con.execute(
            f"SELECT table_name, file_count FROM ducklake_table_info('{lake.ALIAS}') WHERE file_count > 1 ORDER BY 1"
        ).fetchall()
        tables = tuple(t for t, _ in rows)
        return MaintenancePlan("compact", files=sum(int(n) for *_, n in rows), tables=tables)

    return lake.read(cat.location, plan, cat.busy_timeout_s)


def compact(cat: Catalog, plan: MaintenancePlan) -> MaintenancePlan:
    """Merge adjacent small data files (DuckLake keeps each row's snapshot range, so time travel is unchanged);
    the replaced files are deleted by the next `expire`."""
    if plan.tables:
        cat._transaction(lambda con: con.execute(f"CALL ducklake_merge_adjacent_files('{lake.ALIAS}')").fetchall())
    return plan
