"""build flow: ingest → analyze → synthesize → filter → [review] → publish, each a sub-flow visible in the UI.

Re-running build on unchanged inputs recomputes no shard and calls no LLM; the run's counters (shards
computed/skipped per stage, LLM calls and cache hits, stage wall times) go to the catalog's `runs` table.
"""

from __future__ import annotations

import time
from typing import Any

from prefect import flow, get_run_logger

from earmark.config import Config
from earmark.flows.analyze import analyze_flow
from earmark.flows.common import open_catalog, task_runner
from earmark.flows.filter import filter_flow
from earmark.flows.ingest import ingest_flow
from earmark.flows.publish import publish_flow
from earmark.flows.review import review_flow
from earmark.flows.synthesize import synthesize_flow
from earmark.stages.rerun import filter_inputs
from earmark.storage.shards import remove_stale_temp_files


@flow(name="build", log_prints=True)
def build_flow(cfg: Config) -> dict[str, Any]:
    cat = open_catalog(cfg)
    remove_stale_temp_files(cat.root)
    run_id = cat.start_run("build", cfg.model_dump(mode="json"))
    runner = task_runner(cfg)
    timings: dict[str, float] = {}
    shards: dict[str, dict[str, int]] = {}
    status = "failed"
    synth: dict[str, Any] = {}
    try:
        t = time.perf_counter()
        ingest = ingest_flow.with_options(task_runner=runner)(cfg, run_id)
        timings["ingest"] = time.perf_counter() - t
        shards["ingest"] = {"computed": ingest.computed, "skipped": ingest.skipped}

        t = time.perf_counter()
        experts = analyze_flow.with_options(task_runner=runner)(cfg, ingest.refs, run_id)
        timings["analyze"] = time.perf_counter() - t
        for name, res in experts.items():
            shards[f"analyze:{name}"] = {"computed": res.computed, "skipped": res.skipped}

        t = time.perf_counter()
        synth = synthesize_flow.with_options(task_runner=runner)(
            cfg, ingest.refs, {name: res.refs for name, res in experts.items()}, run_id
        )
        timings["synthesize"] = time.perf_counter() - t
        for name, res in synth["results"].items():
            shards[f"synthesize:{name}"] = {"computed": res.computed, "skipped": res.skipped}

        t = time.perf_counter()
        qc = filter_flow.with_options(task_runner=runner)(
            cfg,
            filter_inputs(
                ingest.refs,
                {n: r.refs for n, r in experts.items()},
                synth["results"]["evidence"].refs,
                {i: synth["results"][i].refs for i in cfg.synthesize.items},
            ),
            run_id,
        )
        timings["filter"] = time.perf_counter() - t
        shards["filter"] = {"computed": qc.computed, "skipped": qc.skipped}

        t = time.perf_counter()
        tables: dict[str, list[str]] = {
            "clips": ingest.keys("clips"),
            "quarantine": ingest.keys("quarantine"),
            "qc": qc.keys("qc"),
        }
        for name, res in experts.items():
            tables[name] = res.keys(name)
        for name, res in synth["results"].items():
            tables[name] = res.keys(name)
        tables["rejections"] = [k for item in cfg.synthesize.items for k in synth["results"][item].keys("rejections")]
        if cfg.review.mode != "off":  # human verification before publishing (pauses in "ui" mode)
            review_flow(cfg, tables, run_id)
            timings["review"] = time.perf_counter() - t
            t = time.perf_counter()
        published = publish_flow(cfg, tables, run_id)
        timings["publish"] = time.perf_counter() - t
        shards["publish"] = {"computed": int(not published["skipped"]), "skipped": int(published["skipped"])}
        status = "ok"
    finally:
        stats = {"timings_s": {k: round(v, 2) for k, v in timings.items()}, "shards": shards, "llm": synth.get("llm")}
        cat.finish_run(run_id, status, stats)
    get_run_logger().info("build %s: %s", run_id, stats)
    return {"run_id": run_id, **{k: v for k, v in published.items() if k != "skipped"}, **stats}


def run_build(cfg: Config) -> dict[str, Any]:
    return build_flow.with_options(task_runner=task_runner(cfg))(cfg)
