"""build flow: ingest → analyze → synthesize → filter → [review] → publish, each a sub-flow visible in the UI.

A build that will reach synthesis first asks a configured LLM endpoint one cheap request, so an endpoint
that is down fails the build in seconds instead of after ingest and analyze. Re-running build on unchanged
inputs recomputes no shard and calls no LLM; the run's counters (shards
computed/skipped per stage, LLM calls and cache hits, stage wall times) go to the catalog's `runs` table.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from functools import partial
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.task_runners import TaskRunner

from earmark.core.config import Config
from earmark.flows.analyze import analyze_flow
from earmark.flows.filter import filter_flow
from earmark.flows.ingest import ingest_flow
from earmark.flows.publish import publish_flow
from earmark.flows.runs import (
    Run,
    artifact_key,
    flow_options,
    load_api_key,
    name_flow_run,
    run_envelope,
    run_summary,
    run_tags,
    stage_tag,
)
from earmark.flows.shards import ShardStream, StageResult
from earmark.flows.synthesize import synthesize_flow
from earmark.llm.session import preflight
from earmark.stages.graph import Plan, filter_inputs, plan_build, version_tables
from earmark.storage import ShardRef, open_catalog


@flow(name="build", log_prints=True)
def build_flow(cfg: Config, until: str = "publish") -> dict[str, Any]:
    """Every stage up to `until`, then a version of the tables made so far (`until="analyze"`: the expert
    annotations only, no LLM)."""
    plan = plan_build(cfg, until)
    load_api_key(cfg)
    if plan.llm and (checked := preflight(cfg.llm)):  # a configured endpoint that is down fails now, not after analyze
        get_run_logger().info("preflight: %s", checked)
    cat = open_catalog(cfg)
    params = {**cfg.model_dump(mode="json"), "until": until}
    with run_envelope(cfg, cat, "build", params, on_finish=partial(_summary, until)) as run:
        _build(run, until, plan)
    stats = run.stats()
    get_run_logger().info("build %s: %s", run.run_id, stats)
    published = {k: v for k, v in run.published.items() if k != "skipped"}
    return {"run_id": run.run_id, **published, **stats, "until": until}


def _summary(until: str, run: Run) -> None:
    create_markdown_artifact(
        key=artifact_key(run.cfg, "run-summary"),
        markdown=run_summary(run.cfg, run.cat, run.run_id, run.status, until, run.stats(), run.published),
        description=f"build · {run.cfg.dataset}: {run.status}",
    )


def _build(run: Run, until: str, plan: Plan) -> None:
    """The plan's stages in the graph's order (earmark.stages.graph), then publish."""
    cfg, run_id = run.cfg, run.run_id
    run.info["llm"] = None
    upstream: list[Any] = []  # each stage's returned result: Prefect draws the run graph's edges from them
    ingest, got = ingest_and_analyze(cfg, run.runner, run_id, run.timings, analyze=plan.runs("analyze"))
    run.count("ingest", ingest.computed, ingest.skipped)
    upstream.append(ingest)
    experts = {name: res.refs for name, res in got.items()}
    if plan.runs("analyze"):
        upstream.append(got)
        for name, res in got.items():
            run.count(f"analyze:{name}", res.computed, res.skipped)
    evidence: list[str] | None = None
    items: dict[str, list[ShardRef]] | None = None
    qc: StageResult | None = None
    if plan.runs("synthesize"):
        with run.stage("synthesize"):
            synth = synthesize_flow.with_options(**run.options("synthesize"))(cfg, ingest.refs, experts, run_id)
        run.info["llm"] = synth.get("llm")
        upstream.append(synth)
        for name, res in synth["results"].items():
            run.count(f"synthesize:{name}", res.computed, res.skipped)
        evidence = synth["results"]["evidence"].keys("evidence")
        items = {i: synth["results"][i].refs for i in cfg.synthesize.items}
    if plan.runs("filter"):
        inputs = filter_inputs(ingest.refs, experts, synth["results"]["evidence"].refs, items or {})
        # `inputs` is new data (shard keys), so Prefect would draw no edge into filter: name its upstream runs
        with run.stage("filter"):
            qc = filter_flow.with_options(**run.options("filter"))(cfg, inputs, run_id, wait_for=list(upstream))
        upstream.append(qc)
        run.count("filter", qc.computed, qc.skipped)
    tables = version_tables(
        {}, clips=ingest.refs, experts=experts, evidence=evidence, items=items, qc=None if qc is None else qc.refs
    )
    if plan.runs("review"):  # human verification before publishing (pauses in "ui" mode)
        # imported here: the module's four flows each build a JSON schema of Config when defined (0.2 s of every
        # build command's start-up), and only a reviewed build runs one
        from earmark.flows.review import review_flow

        with run.stage("review"):
            review_flow(cfg, tables, run_id)
    with run.stage("publish"):
        run.published = publish_flow.with_options(flow_run_name=f"publish · {cfg.dataset}")(
            cfg, tables, run_id, note="build" if until == "publish" else f"build --until {until}", wait_for=upstream
        )
    skipped = run.published["skipped"]
    run.count("publish", int(not skipped), int(skipped))
    name_flow_run(f"build · {cfg.dataset} · {run.published['version']}")  # the UI's run list shows the version


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
        if stream.error is not None and not isinstance(stream.error, Exception):
            return  # the build was interrupted (Ctrl-C, SIGTERM) before this thread got to start analyze
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
        _silence_thread(beside.name)
        raise
    finally:
        timings["ingest"] = time.perf_counter() - t
    stream.close()
    try:
        beside.join()
    except BaseException:  # Ctrl-C once ingest is done, while analyze runs beside it: stop now, its thread quiet
        _silence_thread(beside.name)
        raise
    if "error" in outcome:
        raise outcome["error"]
    return ingest, outcome["experts"]


class _FromThread(logging.Filter):
    def __init__(self, thread_name: str) -> None:
        super().__init__()
        self.thread_name = thread_name

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != self.thread_name


def _silence_thread(thread_name: str) -> None:
    """After an interrupt, the analyze flow left running beside ingest (a daemon thread the build does not wait for)
    says nothing more: its flow engine would log a traceback once the interrupted build has closed the Prefect
    client ("Cannot send a request, as the client has been closed"), after earmark's clean stop message."""
    quiet = _FromThread(thread_name)
    loggers = [
        logging.getLogger(),
        *(lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)),
    ]
    for handler in {h for lg in loggers for h in lg.handlers}:
        handler.addFilter(quiet)


def run_build(cfg: Config, until: str = "publish") -> dict[str, Any]:
    with run_tags(cfg, "build"):
        return build_flow.with_options(**flow_options(cfg, "build"))(cfg, until)
