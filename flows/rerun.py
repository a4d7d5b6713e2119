"""rerun flow: re-run one stage (and what depends on it) of a published version, publish, and diff.

After editing a prompt or a threshold, the user re-runs only that stage from the catalog — the input
audio is not needed. Upstream shards come from the base version (default: the latest); the stage's
tasks compute their shard keys as usual, so only shards whose inputs, prompts or settings changed are
recomputed, and inside a synthesis shard only requests whose rendered messages changed reach the LLM.

- stage "synthesize" with `items` (e.g. only entailment): the other item types' shards are taken from the
  base version unchanged, then filter and publish;
- stage "filter": new QC verdicts (e.g. after a threshold change) over the base version's items;
- stage "analyze": every expert, then synthesize, filter and publish (a build without ingest).

The new version is diffed against the base (rows added / changed / removed per table); the diff is
printed, stored as `reports/diff-<base>-<new>.md` and attached to the run as an artifact.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from earmark.core.config import Config
from earmark.flows.analyze import analyze_flow
from earmark.flows.common import (
    artifact_key,
    flow_options,
    load_api_key,
    name_flow_run,
    open_catalog,
    run_tags,
    shared_runner,
    stage_tag,
    subflows_without_heartbeats,
    write_lease,
)
from earmark.flows.filter import filter_flow
from earmark.flows.publish import publish_flow
from earmark.flows.synthesize import synthesize_flow
from earmark.llm.session import preflight
from earmark.stages.rerun import check_rerun, filter_inputs, version_graph, version_tables
from earmark.stages.versions import rerun_label
from earmark.storage.diff import diff_markdown, version_diff


@flow(name="rerun", log_prints=True)
def rerun_flow(cfg: Config, stage: str, items: list[str] | None = None, version: str | None = None) -> dict[str, Any]:
    cat = open_catalog(cfg)
    base, items = check_rerun(cat, stage, items, version, cfg.synthesize.items)
    load_api_key(cfg)
    if stage in ("analyze", "synthesize") and (checked := preflight(cfg.llm)):  # fail before analyze, not after
        get_run_logger().info("preflight: %s", checked)
    g = version_graph(cat, base)
    if not g.clip_refs:
        raise ValueError(f"version {base} has no clips")
    runners = ExitStack()  # a dask run's local cluster lives as long as the rerun; the lease is released last
    run_id = cat.new_run_id()
    runners.callback(write_lease(cfg, cat, run_id, "rerun").acquire().release)
    cat.start_run("rerun", {"stage": stage, "items": items, "base": base, **cfg.model_dump(mode="json")}, run_id)
    stats: dict[str, Any] = {"stage": stage, "items": items, "base": base, "timings_s": {}, "shards": {}}
    status = "failed"
    try:
        runners.enter_context(subflows_without_heartbeats())
        runner = runners.enter_context(shared_runner(cfg))
        experts = g.experts
        t = time.perf_counter()
        if stage == "analyze":
            with stage_tag("analyze"):
                got = analyze_flow.with_options(**flow_options(cfg, "analyze", runner))(cfg, g.clip_refs, run_id)
            experts = {name: res.refs for name, res in got.items()}
            stats["shards"].update(
                {f"analyze:{n}": {"computed": r.computed, "skipped": r.skipped} for n, r in got.items()}
            )
            stats["timings_s"]["analyze"] = round(time.perf_counter() - t, 2)
        item_refs = dict(g.items)
        evidence_keys = g.evidence
        if stage in ("analyze", "synthesize"):
            t = time.perf_counter()
            kept = {k: v for k, v in g.items.items() if k not in items} if stage == "synthesize" else {}
            scfg = cfg.model_copy(update={"synthesize": cfg.synthesize.model_copy(update={"items": items})})
            with stage_tag("synthesize"):
                synth = synthesize_flow.with_options(**flow_options(cfg, "synthesize", runner))(
                    scfg, g.clip_refs, experts, run_id, kept
                )
            for name, res in synth["results"].items():
                stats["shards"][f"synthesize:{name}"] = {"computed": res.computed, "skipped": res.skipped}
            evidence_keys = synth["results"]["evidence"].keys("evidence")
            item_refs = {**kept, **{i: synth["results"][i].refs for i in items}}
            stats["llm"] = synth["llm"]
            stats["timings_s"]["synthesize"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        with stage_tag("filter"):
            qc = filter_flow.with_options(**flow_options(cfg, "filter", runner))(
                cfg, filter_inputs(g.clip_refs, experts, evidence_keys, item_refs), run_id
            )
        stats["shards"]["filter"] = {"computed": qc.computed, "skipped": qc.skipped}
        stats["timings_s"]["filter"] = round(time.perf_counter() - t, 2)

        tables = version_tables(g, experts, evidence_keys, item_refs, qc.keys("qc"), qc.keys("claims"))
        note = rerun_label(stage, items if stage == "synthesize" else None, base)
        published = publish_flow(cfg, tables, run_id, note=note)
        name_flow_run(f"rerun {stage} · {cfg.dataset} · {base} → {published['version']}")
        diffs = version_diff(cat, base, published["version"])
        report = diff_markdown(base, published["version"], diffs, cfg.dataset)
        path = cat.dataset_path("reports", f"diff-{base}-{published['version']}.md")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(report)
        create_markdown_artifact(
            key=artifact_key(cfg, "version-diff"), markdown=report, description=f"{base} → {published['version']}"
        )
        stats["diff"] = {
            d.table: {"added": d.added, "changed": d.changed, "removed": d.removed} for d in diffs if d.touched
        }
        status = "ok"
    finally:
        runners.close()
        cat.finish_run(run_id, status, stats)
    get_run_logger().info("rerun %s: %s", run_id, stats)
    return {"run_id": run_id, **published, "base": base, "diff_report": str(path), "diff_markdown": report, **stats}


def run_rerun(cfg: Config, stage: str, items: list[str] | None = None, version: str | None = None) -> dict[str, Any]:
    with run_tags(cfg, "rerun"):
        return rerun_flow.with_options(**flow_options(cfg, "rerun"))(cfg, stage, items, version)
