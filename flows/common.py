"""What every stage flow shares: the one generic shard task, the catalog, and a task runner per config.

`stage_task` wraps `earmark.stages.base.run_job` (key → catalog lookup → run → write → register), so a
stage whose key is already registered returns at once, without loading a model or calling an LLM. Its task
run is named after the stage and shard (`analyze/asr/shard-0003`). Prefect's own result caching is off
(`NO_CACHE`): the shard key, derived from the stage's description, is what decides.

A shard of a GPU-using stage (`ShardJob.gpu`) computes inside the Prefect global concurrency limit `gpu`
(slots = `[run] gpus`, created by `earmark server` / `earmark deploy`), so builds sharing a GPU box queue
for it. Where no such limit exists (a plain local build) Prefect does not wait: the shard runs at once.

Write-behind (`[run] write_behind`, on by default): a process runs twice as many task threads as it computes
shards at once (`compute_slots`); a task holds a compute slot (and the GPU slot) only while its stage function
runs, so one shard's Parquet write, fsync and catalog commit overlap the next shard's computation.
With `[run] task_runner = "dask"` the tasks (config, shard job) are pickled to Dask worker processes.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from prefect import get_run_logger, tags, task
from prefect.artifacts import create_progress_artifact, create_table_artifact, update_progress_artifact
from prefect.cache_policies import NO_CACHE
from prefect.concurrency.sync import concurrency
from prefect.context import TagsContext
from prefect.exceptions import UnfinishedRun
from prefect.futures import PrefectFuture, as_completed
from prefect.states import State
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from earmark.core import progress, threads
from earmark.core.config import Config
from earmark.experts.base import gpu_sections
from earmark.llm import LLMEndpointError
from earmark.stages.base import ShardJob, run_job
from earmark.storage import Catalog, ShardRef, open_catalog
from earmark.storage.lease import Lease


def artifact_key(cfg: Config, name: str) -> str:
    """A Prefect artifact key scoped by dataset (keys allow lowercase letters, digits and dashes only)."""
    slug = re.sub(r"[^a-z0-9-]+", "-", cfg.dataset.lower()).strip("-") or "dataset"
    return f"{slug}-{name}"


GPU_LIMIT = "gpu"  # the global concurrency limit GPU-using shards hold a slot of
PROGRESS_INTERVAL_S = 1.0  # a stage's progress artifact is updated at most this often (each update is an API call)


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


def dask_cluster_kwargs(cfg: Config) -> dict[str, Any]:
    """A local Dask cluster of `dask_workers` processes (models load once per process). With write-behind each
    has two threads, one computing and one writing finished shards (`compute_slots`); `shared_runner` readies
    Prefect's client on every worker before the first task (`prefect_ready`)."""
    threads = 2 if cfg.run.write_behind else 1
    return {
        "n_workers": cfg.run.dask_workers,
        "threads_per_worker": threads,
        "processes": True,
        "dashboard_address": ":0",
    }


def cpu_threads(cfg: Config) -> int:
    """Math-library threads of one stage function (`[run] cpu_threads`; by default the cores shared evenly among
    the stage functions that compute at once on this machine). The same for the threads runner and a local Dask
    cluster of as many workers, so both compute the same tables."""
    if cfg.run.cpu_threads:
        return cfg.run.cpu_threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if cfg.run.task_runner == "sequential":
        concurrent = 1
    elif cfg.run.task_runner == "dask":
        # an external scheduler's workers: each process on this host computes compute_slots shards at once
        concurrent = _dask_processes_here() * compute_slots(cfg) if cfg.run.dask_address else cfg.run.dask_workers
    else:
        concurrent = cfg.run.max_workers
    return max(1, cores // concurrent)


@functools.cache
def _dask_processes_here() -> int:
    """Inside a worker of an external Dask scheduler: the worker processes on this worker's host (the
    scheduler knows them; `dask worker --nworkers N` starts N); 1 outside a worker or when it cannot say.
    Asked once per process: every shard task sizes its pools, and this is a call to the scheduler."""
    try:
        from distributed import get_worker

        worker = get_worker()
        host = worker.address.rsplit(":", 1)[0]
        workers = worker.client.scheduler_info(n_workers=-1)["workers"]
        return max(1, sum(1 for address in workers if address.rsplit(":", 1)[0] == host))
    except (ImportError, ValueError, OSError, KeyError):  # not in a worker (ValueError), or no answer: one
        return 1


def prefect_ready(cfg: Config) -> str:
    """Run once on every local Dask worker before any task: open a Prefect client, which starts the worker's
    ephemeral Prefect server when the run has no API URL. Two tasks starting at once in a fresh worker would
    otherwise both start it, and the run hung (seen in CI with two threads per worker,
    tests/test_lake_concurrency.py). It also opens the dataset's catalog (kept per process), as the flow's
    process has: in a fresh worker that took 0.8 s (DuckDB extensions, ATTACH), paid by its first shard task."""
    from prefect.client.orchestration import get_client

    threads.apply(cpu_threads(cfg))
    open_catalog(cfg)
    with get_client(sync_client=True) as client:
        return str(client.api_url)


_SLOTS: dict[int, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


def compute_slots(cfg: Config) -> int:
    """How many stage functions this process runs at once: the thread runner's `max_workers` (1 sequential);
    in a Dask worker half its threads (at least 1), the other half writing finished shards."""
    if cfg.run.task_runner == "sequential":
        return 1
    if cfg.run.task_runner == "dask":
        try:
            from distributed import get_worker

            threads = get_worker().state.nthreads
        except (ImportError, ValueError):  # not inside a Dask worker (a task called from the flow itself)
            return 1
        return max(1, threads // 2) if cfg.run.write_behind else threads
    return cfg.run.max_workers


def _compute_semaphore(slots: int) -> threading.BoundedSemaphore:
    with _SLOTS_LOCK:
        return _SLOTS.setdefault(slots, threading.BoundedSemaphore(slots))


@contextmanager
def compute_slot(cfg: Config, gpu: bool, sections: bool = False) -> Iterator[None]:
    """Held while one shard's stage function runs: one of this process's compute slots, then (GPU-using
    stages) a slot of the global concurrency limit `gpu`. The local slot comes first, so a task never holds
    a GPU while it waits for this process's CPU. `sections`: the expert takes the GPU slot itself, only around
    its GPU work (`gpu_section()`), so its CPU work runs while other shards use the GPU."""
    with _compute_semaphore(compute_slots(cfg)):
        if gpu and sections:
            with gpu_sections(lambda: concurrency(GPU_LIMIT, occupy=1)):
                yield
        elif gpu:
            with concurrency(GPU_LIMIT, occupy=1):
                yield
        else:
            yield


def _worker_environ(cfg: Config) -> None:
    """Local Dask workers start with the run's thread budget (`cpu_threads`) in their math libraries'
    variables, read when those load; `prefect_ready` / `stage_task` size the pools that are already loaded.
    Dask's own default caps them at 1, and Whisper's and the domain probe's outputs depend on the thread count
    (float reduction order): the same shard would differ between runners. Dask's default
    MALLOC_TRIM_THRESHOLD_ (64 KiB) is dropped too: it made every stage function ~2× slower in the workers
    (audio arrays are allocated and freed by the megabyte; measured, benchmarks/pipeline/orchestration_overhead.py)."""
    import dask
    import distributed  # noqa: F401  (registers its config defaults, which are changed here)

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}))
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    environ.update(threads.environ(cpu_threads(cfg)))
    dask.config.set({"distributed.nanny.pre-spawn-environ": environ})


def task_runner(cfg: Config, address: str | None = None) -> TaskRunner:
    """The configured task runner; `address`: a Dask scheduler to use instead of `[run] dask_address`."""
    if cfg.run.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        _worker_environ(cfg)

        if address or cfg.run.dask_address:
            return DaskTaskRunner(address=address or cfg.run.dask_address)
        # A cluster this runner starts itself (a stage flow run on its own) gets no `prefect_ready`: one thread.
        return DaskTaskRunner(cluster_kwargs={**dask_cluster_kwargs(cfg), "threads_per_worker": 1})
    if cfg.run.task_runner == "sequential":
        return ThreadPoolTaskRunner(max_workers=1)
    return ThreadPoolTaskRunner(max_workers=cfg.run.max_workers * (2 if cfg.run.write_behind else 1))


@contextmanager
def subflows_without_heartbeats() -> Iterator[None]:
    """Sub-flows started inside send no heartbeats of their own. Prefect 3.8.8 ends every flow run by joining
    its heartbeat thread, which sleeps in 1 s steps: each sub-flow took ~1.1 s longer than its work (measured,
    benchmarks/pipeline/orchestration_overhead.py). The parent run's heartbeats still report the process alive."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


@contextmanager
def shared_runner(cfg: Config) -> Iterator[TaskRunner]:
    """One task runner for all sub-flows of a run. With dask and no scheduler address, one local cluster is
    started here for the whole run (each sub-flow's runner would otherwise start and stop its own, and its
    worker processes would load the models again)."""
    if cfg.run.task_runner != "dask" or cfg.run.dask_address:
        yield task_runner(cfg)
        return
    from distributed import LocalCluster

    _worker_environ(cfg)
    kwargs = dask_cluster_kwargs(cfg)
    with LocalCluster(**kwargs) as cluster:
        if kwargs["threads_per_worker"] > 1:
            from distributed import Client

            with Client(cluster) as client:
                client.run(prefect_ready, cfg)
        yield task_runner(cfg, cluster.scheduler_address)


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


def write_lease(cfg: Config, cat: Catalog, run_id: str | None, command: str) -> Lease:
    """The dataset's write lease for a command (`with write_lease(...)`): build, rerun, publish and review
    import take it; a second writer of the same dataset waits `[run] lease_wait_s`, then refuses, naming the
    holder. `run_id` None: re-enter the lease this process's command already holds (a nested publish)."""
    return cat.lease(
        run_id,
        command,
        stale_after_s=cfg.run.lease_stale_s,
        heartbeat_s=cfg.run.lease_heartbeat_s,
        wait_s=cfg.run.lease_wait_s,
    )


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
    with TagsContext(current_tags=set()):
        return stage_task.with_options(**options).submit(cfg, job, run_id, wait_for=list(wait_for or []))


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
