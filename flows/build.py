"""build flow: ingest → analyze → synthesize → filter → [review] → publish, each a sub-flow visible in the UI.

A build that will reach synthesis first asks a configured LLM endpoint one cheap request, so an endpoint
that is down fails the build in seconds instead of after ingest and analyze. Re-running build on unchanged
inputs recomputes no shard and calls no LLM; the run's counters (shards
computed/skipped per stage, LLM calls and cache hits, stage wall times) go to the catalog's `runs` table.
"""

from __future__ import annotations

import contextvars
import threading
import time
from contextlib import ExitStack
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.task_runners import TaskRunner

from earmark.core.config import Config, check_build
from earmark.flows.analyze import analyze_flow
from earmark.flows.common import (
    ShardStream,
    StageResult,
    artifact_key,
    flow_options,
    load_api_key,
    name_flow_run,
    open_catalog,
    run_summary,
    run_tags,
    shared_runner,
    stage_tag,
    subflows_without_heartbeats,
    write_lease,
)
from earmark.flows.filter import filter_flow
from earmark.flows.ingest import ingest_flow
from earmark.flows.publish import publish_flow
from earmark.flows.review import review_flow
from earmark.flows.synthesize import synthesize_flow
from earmark.llm.session import preflight
from earmark.stages.rerun import filter_inputs
from earmark.storage import Catalog
from earmark.storage.shards import remove_stale_temp_files


def _count(res: StageResult) -> dict[str, int]:
    return {"computed": res.computed, "skipped": res.skipped}


@flow(name="build", log_prints=True)
def build_flow(cfg: Config, until: str = "publish") -> dict[str, Any]:
    """Every stage up to `until`, then a version of the tables made so far (`until="analyze"`: the expert
    annotations only, no LLM)."""
    stop = check_build(cfg, until)
    load_api_key(cfg)
    if stop >= 2 and (checked := preflight(cfg.llm)):  # a configured endpoint that is down fails now, not after analyze
        get_run_logger().info("preflight: %s", checked)
    cat = open_catalog(cfg)
    run_id = cat.new_run_id()
    lease = write_lease(cfg, cat, run_id, "build").acquire()  # one writer per dataset: refuses if another holds it
    try:
        return _build(cfg, cat, run_id, until, stop)
    finally:
        lease.release()


def _build(cfg: Config, cat: Catalog, run_id: str, until: str, stop: int) -> dict[str, Any]:
    remove_stale_temp_files(cat.root)
    cat.start_run("build", {**cfg.model_dump(mode="json"), "until": until}, run_id=run_id)
    timings: dict[str, float] = {}
    shards: dict[str, dict[str, int]] = {}
    status = "failed"
    synth: dict[str, Any] = {}
    published: dict[str, Any] = {}
    upstream: list[Any] = []  # each stage's returned result: Prefect draws the run graph's edges from them
    runners = ExitStack()  # a dask run's local cluster lives as long as the build
    try:
        runners.enter_context(subflows_without_heartbeats())
        runner = runners.enter_context(shared_runner(cfg))
        ingest, experts = ingest_and_analyze(cfg, runner, run_id, timings, analyze=stop >= 1)
        shards["ingest"] = _count(ingest)
        upstream.append(ingest)
        tables: dict[str, list[str]] = {"clips": ingest.keys("clips"), "quarantine": ingest.keys("quarantine")}
        if stop >= 1:
            upstream.append(experts)
            for name, res in experts.items():
                shards[f"analyze:{name}"] = _count(res)
                tables[name] = res.keys(name)
        if stop >= 2:
            t = time.perf_counter()
            with stage_tag("synthesize"):
                synth = synthesize_flow.with_options(**flow_options(cfg, "synthesize", runner))(
                    cfg, ingest.refs, {name: res.refs for name, res in experts.items()}, run_id
                )
            timings["synthesize"] = time.perf_counter() - t
            upstream.append(synth)
            for name, res in synth["results"].items():
                shards[f"synthesize:{name}"] = _count(res)
                tables[name] = res.keys(name)
            tables["rejections"] = [k for i in cfg.synthesize.items for k in synth["results"][i].keys("rejections")]
        if stop >= 3:
            t = time.perf_counter()
            inputs = filter_inputs(
                ingest.refs,
                {n: r.refs for n, r in experts.items()},
                synth["results"]["evidence"].refs,
                {i: synth["results"][i].refs for i in cfg.synthesize.items},
            )
            # `inputs` is new data (shard keys), so Prefect would draw no edge into filter: name its upstream runs
            with stage_tag("filter"):
                qc = filter_flow.with_options(**flow_options(cfg, "filter", runner))(
                    cfg, inputs, run_id, wait_for=list(upstream)
                )
            timings["filter"] = time.perf_counter() - t
            upstream.append(qc)
            shards["filter"] = _count(qc)
            tables["qc"], tables["claims"] = qc.keys("qc"), qc.keys("claims")
        t = time.perf_counter()
        if cfg.review.mode != "off" and stop >= 3:  # human verification before publishing (pauses in "ui" mode)
            review_flow(cfg, tables, run_id)
            timings["review"] = time.perf_counter() - t
            t = time.perf_counter()
        with stage_tag("publish"):
            published = publish_flow.with_options(flow_run_name=f"publish · {cfg.dataset}")(
                cfg, tables, run_id, note="build" if until == "publish" else f"build --until {until}", wait_for=upstream
            )
        timings["publish"] = time.perf_counter() - t
        shards["publish"] = {"computed": int(not published["skipped"]), "skipped": int(published["skipped"])}
        name_flow_run(f"build · {cfg.dataset} · {published['version']}")  # the UI's run list shows the version
        status = "ok"
    finally:
        runners.close()
        stats = {"timings_s": {k: round(v, 2) for k, v in timings.items()}, "shards": shards, "llm": synth.get("llm")}
        cat.finish_run(run_id, status, stats)
        create_markdown_artifact(
            key=artifact_key(cfg, "run-summary"),
            markdown=run_summary(cfg, cat, run_id, status, until, stats, published),
            description=f"build · {cfg.dataset}: {status}",
        )
    get_run_logger().info("build %s: %s", run_id, stats)
    return {"run_id": run_id, **{k: v for k, v in published.items() if k != "skipped"}, **stats, "until": until}


def ingest_and_analyze(
    cfg: Config, runner: TaskRunner, run_id: str, timings: dict[str, float], analyze: bool = True
) -> tuple[StageResult, dict[str, StageResult]]:
    """The ingest sub-flow, then (`analyze`) the analyze sub-flow on its clip shards. With `[run] pipeline`
    (default) analyze's flow runs beside ingest's, in a thread of this process, and plans a clip shard's experts
    as soon as ingest has registered it: the workers never wait for ingest's last shard, its manifest update
    and the change of sub-flow (0.65 s of idle compute slot per 1,000 clips at 256 files per shard, measured,
    benchmarks/pipeline/overhead_breakdown.py). Their stage wall times (`timings`) then overlap. A failed ingest
    fails the build once the shards it did write are analysed (they are kept for the next run)."""
    if not analyze or not cfg.run.pipeline:
        t = time.perf_counter()
        with stage_tag("ingest"):
            ingest = ingest_flow.with_options(**flow_options(cfg, "ingest", runner))(cfg, run_id)
        timings["ingest"] = time.perf_counter() - t
        if not analyze:
            return ingest, {}
        t = time.perf_counter()
        with stage_tag("analyze"):
            experts = analyze_flow.with_options(**flow_options(cfg, "analyze", runner))(cfg, ingest.refs, run_id)
        timings["analyze"] = time.perf_counter() - t
        return ingest, experts
    stream = ShardStream()
    outcome: dict[str, Any] = {}

    def analyze_beside() -> None:
        # created once ingest's first shard is in, not beside ingest's own start: with both sub-flow runs
        # created at once, a SQLite-backed Prefect server answered one creation 1.8-2.3 s late (the server's
        # contention, not traced further); when it was ingest's, the workers waited (docs/benchmarks.md,
        # "Analyze beside ingest"). Analyze has nothing to do before that first shard anyway.
        stream.wait_first()
        t = time.perf_counter()
        try:
            with stage_tag("analyze"):
                outcome["experts"] = analyze_flow.with_options(**flow_options(cfg, "analyze", runner))(
                    cfg, [], run_id, stream=stream
                )
        except BaseException as exc:  # re-raised in the build's thread
            outcome["error"] = exc
        finally:
            timings["analyze"] = time.perf_counter() - t

    # a copy of this thread's context: the sub-flow finds the build's flow run (its parent), tags and settings
    beside = threading.Thread(target=contextvars.copy_context().run, args=(analyze_beside,), name="analyze-flow")
    beside.daemon = True  # an interrupted build does not wait for it (earmark.core.interrupts)
    beside.start()
    t = time.perf_counter()
    try:
        with stage_tag("ingest"):
            ingest = ingest_flow.with_options(**flow_options(cfg, "ingest", runner))(cfg, run_id, stream=stream)
    except Exception as exc:
        stream.close(exc)
        beside.join()
        raise
    except BaseException as exc:  # Ctrl-C: stop now
        stream.close(exc)
        raise
    finally:
        timings["ingest"] = time.perf_counter() - t
    stream.close()
    beside.join()
    if "error" in outcome:
        raise outcome["error"]
    return ingest, outcome["experts"]


def run_build(cfg: Config, until: str = "publish") -> dict[str, Any]:
    with run_tags(cfg, "build"):
        return build_flow.with_options(**flow_options(cfg, "build"))(cfg, until)
