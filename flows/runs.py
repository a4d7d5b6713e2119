"""A flow run's envelope and names: its options, tags and name, the write lease, the API key, the run row and its
summary artifact (`run_envelope`: one for build and rerun)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from prefect import tags
from prefect.task_runners import TaskRunner

from earmark.core.config import Config
from earmark.flows.runners import shared_runner, subflows_without_heartbeats, task_runner
from earmark.storage import Catalog
from earmark.storage.lease import write_lease
from earmark.storage.shards import remove_stale_temp_files


def artifact_key(cfg: Config, name: str) -> str:
    """A Prefect artifact key scoped by dataset (keys allow lowercase letters, digits and dashes only)."""
    slug = re.sub(r"[^a-z0-9-]+", "-", cfg.dataset.lower()).strip("-") or "dataset"
    return f"{slug}-{name}"


def flow_options(cfg: Config, stage: str, runner: TaskRunner | None = None) -> dict[str, Any]:
    """Options of a stage's flow run: named after the stage and dataset, on the configured task runner."""
    return {"flow_run_name": f"{stage} · {cfg.dataset}", "task_runner": runner or task_runner(cfg)}


def name_flow_run(name: str) -> None:
    """Rename the current flow run once its name is known in full (e.g. with the version it published)."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    if flow_run.id:
        with get_client(sync_client=True) as client:
            client.update_flow_run(flow_run.id, name=name)


def stage_tag(stage: str) -> Any:
    """Tag the flow and task runs started inside with their stage (`stage:analyze`), beside dataset/profile."""
    return tags(f"stage:{stage}")


def run_tags(cfg: Config, *extra: str) -> Any:
    """Tags on every flow and task run started inside (dataset, profile, and e.g. the command)."""
    return tags(f"dataset:{cfg.dataset}", f"profile:{cfg.analyze.profile}", *extra)


def load_api_key(cfg: Config) -> None:
    """When `[llm] api_key_secret` names a Prefect Secret block and the variable `[llm] api_key_env` is unset,
    read the block into that variable of this process (never into the config, parameters or logs)."""
    llm = cfg.llm
    if not llm.api_key_secret or os.environ.get(llm.api_key_env):
        return
    from prefect.blocks.system import Secret

    try:
        os.environ[llm.api_key_env] = str(Secret.load(llm.api_key_secret).get())
    except ValueError as exc:
        raise ValueError(
            f"[llm] api_key_secret = {llm.api_key_secret!r}: no such Prefect Secret block on the server "
            f"({exc}); create it in the UI (Blocks → Secret) or set ${llm.api_key_env}"
        ) from None


def run_summary(
    cfg: Config, cat: Catalog, run_id: str, status: str, until: str, stats: dict[str, Any], published: dict[str, Any]
) -> str:
    """The markdown run summary of a build: outcome, where its outputs are, per-stage shards and time."""
    version = published.get("version")
    slug = artifact_key(cfg, "")
    lines = [
        f"# build · {cfg.dataset}: {status}",
        "",
        f"- run `{run_id}`, until `{until}`, profile `{cfg.analyze.profile}`, runner `{cfg.run.task_runner}`",
        f"- version **{version or '(none)'}**"
        + (" (new)" if published.get("created") else " (unchanged)" if version else ""),
        f"- exports: `{published.get('exports', '-')}`",
        f"- catalog: DuckLake `{cat.location.metadata}`, data `{cat.location.data_path}`; query with "
        f'`earmark sql -d {cfg.dataset} "FROM {version or "captions"}.captions LIMIT 5"`'
        if version
        else f"- catalog: DuckLake `{cat.location.metadata}`",
        f"- artifacts: `{slug}<stage>-progress`, `{slug}<stage>-shards`, `{slug}qc-summary`, `{slug}dataset-card`",
        "",
        "| stage | shards computed | shards skipped | wall s |",
        "|---|---|---|---|",
    ]
    timings = stats.get("timings_s", {})
    for stage, n in stats.get("shards", {}).items():
        lines.append(f"| {stage} | {n['computed']} | {n['skipped']} | {timings.get(stage, '')} |")
    llm = stats.get("llm") or {}
    if llm:
        lines += [
            "",
            f"LLM: {llm.get('calls', 0)} requests, {llm.get('cache_hits', 0)} cache hits, "
            f"{llm.get('completion_tokens', 0)} completion tokens.",
        ]
    return "\n".join(lines) + "\n"


@dataclass
class Run:
    """A build's or rerun's bookkeeping inside its envelope: the run id, the task runner its sub-flows share,
    per-stage wall times and shard counts, what the command adds to its stats, and its outcome."""

    cfg: Config
    cat: Catalog
    run_id: str
    runner: TaskRunner | None = None  # set once the run's runner has started
    timings: dict[str, float] = field(default_factory=dict)
    shards: dict[str, dict[str, int]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # e.g. the LLM's counts, a rerun's base and diff
    published: dict[str, Any] = field(default_factory=dict)
    status: str = "failed"

    def options(self, stage: str) -> dict[str, Any]:
        """A stage sub-flow's options: named after the stage and dataset, on the run's shared runner."""
        return flow_options(self.cfg, stage, self.runner)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage (its wall seconds in the stats) and tag its flow and task runs with it."""
        t = time.perf_counter()
        try:
            with stage_tag(name):
                yield
        finally:
            self.timings[name] = time.perf_counter() - t

    def count(self, name: str, computed: int, skipped: int) -> None:
        self.shards[name] = {"computed": computed, "skipped": skipped}

    def stats(self) -> dict[str, Any]:
        return {"timings_s": {k: round(v, 2) for k, v in self.timings.items()}, "shards": self.shards, **self.info}


@contextmanager
def run_envelope(
    cfg: Config, cat: Catalog, command: str, params: dict[str, Any], on_finish: Callable[[Run], None] | None = None
) -> Iterator[Run]:
    """One build or rerun of a dataset: its write lease (a second writer waits, then refuses; a lease the command
    took before starting Prefect is re-entered, and the run is written under its id), stale temporary files of
    crashed runs removed, its row in `runs` (status "ok" when the block ends normally, "failed"
    otherwise, with the stats), and one task runner for its sub-flows (a dask run's local cluster lives as
    long as the run). `on_finish` runs last, whatever the outcome (the run summary artifact); the lease is
    released after the run row is finished."""
    lease = write_lease(cfg, cat, cat.new_run_id(), command).acquire()  # one writer per dataset
    run_id = lease.run_id  # the lease row and the run row name the same run (a take-over closes the row)
    try:
        remove_stale_temp_files(cat.root)
        cat.refresh_views()  # a version whose publisher died before its views: repaired by a writer, not by `sql`
        cat.start_run(command, params, run_id=run_id)
        runners = ExitStack()
        run = Run(cfg, cat, run_id)
        try:
            runners.enter_context(subflows_without_heartbeats())
            run.runner = runners.enter_context(shared_runner(cfg))
            yield run
            run.status = "ok"
        finally:
            runners.close()
            cat.finish_run(run_id, run.status, run.stats())
            if on_finish is not None:
                on_finish(run)
    finally:
        lease.release()
