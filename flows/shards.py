"""Shard tasks, what every stage flow shares: the one generic shard task (`stage_task`), submitting a stage's
shard jobs and collecting them as they finish (`submit`, `collect`, `ShardStream`), and what a stage returns
(`StageResult`).

`stage_task` wraps `earmark.stages.base.run_job` (key → catalog lookup → run → write → register), so a
stage whose key is already registered returns at once, without loading a model or calling an LLM. Its task
run is named after the stage and shard (`analyze/asr/shard-0003`). Prefect's own result caching is off
(`NO_CACHE`): the shard key, derived from the stage's description, is what decides.

A shard of a GPU-using stage (`ShardJob.gpu`) computes inside the Prefect global concurrency limit `gpu`
(earmark.flows.slots).

Write-behind (`[run] write_behind`, on by default): a process runs twice as many task threads as it computes
shards at once (`compute_slots`); a task holds a compute slot (and the GPU slot) only while its stage function
runs, so one shard's Parquet write, fsync and catalog commit overlap the next shard's computation.
With `[run] task_runner = "dask"` the tasks (config, shard job) are pickled to Dask worker processes.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_progress_artifact, create_table_artifact, update_progress_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import TagsContext
from prefect.exceptions import UnfinishedRun
from prefect.futures import PrefectFuture, as_completed
from prefect.states import State

from earmark.core import progress, threads
from earmark.core.config import Config
from earmark.flows.runners import cpu_threads
from earmark.flows.runs import artifact_key
from earmark.flows.slots import compute_slot
from earmark.llm import LLMEndpointError
from earmark.stages.base import ShardJob, run_job
from earmark.storage import Catalog, ShardRef, open_catalog

PROGRESS_INTERVAL_S = 1.0  # a stage's progress artifact is updated at most this often (each update is an API call)


def retry_unless_llm_endpoint(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect retries a failed shard task, unless the LLM endpoint failed it: the LLM client already retried
    within its budgets (llm/client.py), and retrying here multiplied them (5 HTTP tries × 3 task runs)."""
    try:
        state.result()
    except LLMEndpointError:
        return False
    except Exception:
        return True
    return True


@task(
    name="stage", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=5, retry_condition_fn=retry_unless_llm_endpoint
)
def stage_task(cfg: Config, job: ShardJob, run_id: str | None) -> ShardRef:
    threads.apply(cpu_threads(cfg))  # once per process: the pools of a worker that prefect_ready did not ready
    cat, logger = open_catalog(cfg), get_run_logger()
    return run_job(cat, job, run_id, logger, slot=lambda: compute_slot(cfg, job.gpu, job.gpu_sections))


def mark_unregistered(cfg: Config, jobs: Sequence[ShardJob]) -> list[ShardJob]:
    """The jobs, those whose key has no catalog row flagged `unregistered`: one catalog query for a stage's
    plan instead of one per shard task (each ≈ 16 ms inside a busy run)."""
    keys = [job.plan()[0] for job in jobs]
    known = open_catalog(cfg).registered_keys(keys)
    return [job if key in known else dataclasses.replace(job, unregistered=True) for job, key in zip(jobs, keys)]


def submit(
    cfg: Config,
    job: ShardJob,
    run_id: str | None,
    wait_for: Sequence[PrefectFuture] | None = None,
    retries: int | None = None,
) -> PrefectFuture:
    """Submit one shard job as a task run named after its stage and shard. The task run carries no tags (the
    flow runs do: dataset, profile, stage): Prefect checks a tagged task run against tag concurrency limits with
    one request to the server, cached for 5 s, and on a SQLite-backed server that request took ~2 s under a
    build's load (benchmarks/pipeline/overhead_breakdown.py: 8 s of 44 s idle at 1,000 clips). earmark's GPU guard is
    the global limit `gpu`, not a tag limit."""
    options = {"task_run_name": job.task_name}
    if retries is not None:
        options["retries"] = retries
    with untagged():
        return stage_task.with_options(**options).submit(cfg, job, run_id, wait_for=list(wait_for or []))


def untagged() -> TagsContext:
    """A context in which task runs carry no tags: a tagged task run first asks the server for tag concurrency
    slots (5.6 s beside a 0.3 s publish on an idle 2-core VM, 2026-11-28); earmark's GPU guard is the global
    limit `gpu`, not a tag limit."""
    return TagsContext(current_tags=set())


def run_now(cfg: Config, job: ShardJob, run_id: str | None, name: str | None = None) -> ShardRef:
    """Run one shard job as a task run in this thread (publish, review, evaluation stages), untagged as `submit`'s
    are."""
    with untagged():
        return stage_task.with_options(task_run_name=name or job.task_name)(cfg, job, run_id)


def collect(
    cfg: Config,
    stage: str,
    futures: Sequence[PrefectFuture],
    gpu: Sequence[bool] = (),
    llm: bool = False,
    items: Sequence[float] = (),
    item_unit: str = "clips",
    stream: ShardStream | None = None,
) -> list[ShardRef]:
    """Wait for a stage's shard tasks (results in submission order). In the UI: a progress artifact
    `<dataset>-<stage>-progress` moves as shards finish (at most once per second, and at 100 %), and a table
    artifact `<dataset>-<stage>-shards` lists every shard (status, seconds inside the stage function, GPU-seconds, rows per table written, for qc
    the items kept / rejected, and for a stage that asks an LLM (`llm`) its requests, cache hits and tokens)
    once all are done. On the command line (earmark.core.progress): shards done / total per stage, and `items`
    (per future, e.g. its clips, in `item_unit`) done per second. `stream`: each finished shard is also put
    there, for a downstream stage running beside this one."""
    if not futures:
        return []
    artifact = create_progress_artifact(
        0.0, key=artifact_key(cfg, f"{stage}-progress"), description=f"{stage} · {cfg.dataset}: % of shards finished"
    )
    index = {f.task_run_id: i for i, f in enumerate(futures)}
    per_task: dict[Any, float] = {}  # a future listed twice (one joint task for several item types) counts once
    for f, n in zip(futures, items or [0.0] * len(futures)):
        per_task[f.task_run_id] = per_task.get(f.task_run_id, 0.0) + n
    progress.report(stage, "shards", planned=len(per_task))
    refs: list[ShardRef | None] = [None] * len(futures)
    not_run, last_update = 0, time.monotonic()
    for done, fut in enumerate(as_completed(list(futures)), start=1):
        try:
            ref = refs[index[fut.task_run_id]] = fut.result()
        except UnfinishedRun:  # not run (NotReady): a task it waits for failed, raised when the loop reaches it
            not_run += 1
            continue
        if stream is not None:
            stream.put(index[fut.task_run_id], ref, fut.state)
        progress.report(stage, "shards", done=1, items=per_task.get(fut.task_run_id, 0.0), item_unit=item_unit)
        now = time.monotonic()
        if done == len(futures) or now - last_update >= PROGRESS_INTERVAL_S:  # one API call per second at most
            update_progress_artifact(artifact, round(100.0 * done / len(futures), 1))
            last_update = now
    if not_run:
        raise RuntimeError(f"{not_run} {stage} shard task(s) did not run: a task they wait for did not finish")
    out = [r for r in refs if r is not None]
    uses_gpu = list(gpu) or [False] * len(out)
    create_table_artifact(
        key=artifact_key(cfg, f"{stage}-shards"),
        table=shard_table(open_catalog(cfg), out, uses_gpu, llm),
        description=f"{stage} · {cfg.dataset}: one row per shard task",
    )
    return out


def shard_table(cat: Catalog, refs: Sequence[ShardRef], gpu: Sequence[bool], llm: bool = False) -> list[dict[str, Any]]:
    """Rows of a stage's shard table artifact (see `collect`). The LLM columns count what this run sent for
    the shard: `llm_requests` are HTTP requests (retries included), a skipped shard made none."""
    keys = sorted({r.key for r in refs})
    written = {
        (k, t): n
        for k, t, n in cat.query("SELECT key, table_name, rows FROM shards WHERE list_contains(?, key)", [keys])
    }
    rows = []
    for ref, on_gpu in zip(refs, gpu):
        row: dict[str, Any] = {
            "shard": ref.task or ref.key,
            "status": "skipped (in catalog)" if ref.skipped else "computed",
            "seconds": round(ref.seconds, 2),
            "gpu_s": round(ref.seconds, 2) if on_gpu and not ref.skipped else 0.0,
        }
        row.update({f"rows:{t}": written.get((ref.key, t), 0) for t in ref.tables})
        if "qc" in ref.tables:  # items (not checks): an item is kept when every check kept it
            qc = cat.read("qc", [ref.key]).select(["item_table", "item_id", "keep"]).to_pylist()
            verdict: dict[tuple[str, str], bool] = {}
            for r in qc:
                item = (r["item_table"], r["item_id"])
                verdict[item] = verdict.get(item, True) and bool(r["keep"])
            row["items_kept"] = sum(verdict.values())
            row["items_rejected"] = len(verdict) - row["items_kept"]
        if llm:
            usage = ref.llm_usage or {}
            row["llm_requests"] = usage.get("calls", 0)
            row["llm_cache_hits"] = usage.get("cache_hits", 0)
            row["prompt_tokens"] = usage.get("prompt_tokens", 0)
            row["completion_tokens"] = usage.get("completion_tokens", 0)
        row["key"] = ref.key
        rows.append(row)
    return rows


def clip_counts(cfg: Config, keys: Sequence[str]) -> list[int]:
    """Clips in each of these clip shards (what a shard task's progress stands for); zeros when nobody
    listens to progress (earmark.core.progress), so a plain run asks the catalog nothing more."""
    if not progress.active() or not keys:
        return [0] * len(keys)
    rows = open_catalog(cfg).query(
        "SELECT key, sum(rows) FROM shards WHERE table_name = 'clips' AND list_contains(?, key) GROUP BY 1",
        [list(keys)],
    )
    found = {k: int(n) for k, n in rows}
    return [found.get(k, 0) for k in keys]


class ShardStream:
    """An upstream stage's shards as its tasks finish, read by a downstream stage's flow running beside it in
    this process: build analyses a clip shard as soon as ingest has written it, instead of after ingest's last
    shard (`[run] pipeline`). An entry is (the shard's position in the upstream's result, its ref, its task's
    final state: a downstream task waits for that state, so the run graph has the shard-to-shard edge)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._entries: list[tuple[int, ShardRef, State]] = []
        self._closed = False
        self.error: BaseException | None = None  # why the upstream stopped early, once closed

    def __reduce__(self) -> tuple[type[ShardStream], tuple[()]]:
        """A stream stays in its process: a copy sent elsewhere is new and empty (Prefect sends the flow's
        parameters, this one among them, with every task it submits to a Dask worker)."""
        return ShardStream, ()

    def put(self, position: int, ref: ShardRef, state: State) -> None:
        with self._cond:
            self._entries.append((position, ref, state))
            self._cond.notify_all()

    def close(self, error: BaseException | None = None) -> None:
        """No more shards will come (idempotent); `error`: the upstream failed, those put so far are all."""
        with self._cond:
            if not self._closed:
                self._closed, self.error = True, error
            self._cond.notify_all()

    def wait_first(self) -> None:
        """Wait until the first shard was put, or the stream closed."""
        with self._cond:
            while not self._entries and not self._closed:
                self._cond.wait()

    def take(self) -> list[tuple[int, ShardRef, State]] | None:
        """Every entry put since the last call, waiting for one; None once closed and drained."""
        with self._cond:
            while not self._entries and not self._closed:
                self._cond.wait()
            entries, self._entries = self._entries, []
            return entries or None


@dataclass
class StageResult:
    """Shards a stage produced, in clip-shard order, plus counters."""

    refs: list[ShardRef] = field(default_factory=list)

    @property
    def computed(self) -> int:
        return sum(not r.skipped for r in self.refs)

    @property
    def skipped(self) -> int:
        return sum(r.skipped for r in self.refs)

    def keys(self, table: str) -> list[str]:
        return [r.key for r in self.refs if table in r.tables]
