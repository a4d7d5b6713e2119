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

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from earmark.core.config import Config
from earmark.flows.analyze import analyze_flow
from earmark.flows.filter import filter_flow
from earmark.flows.publish import publish_flow
from earmark.flows.runs import Run, artifact_key, flow_options, load_api_key, name_flow_run, run_envelope, run_tags
from earmark.flows.synthesize import synthesize_flow
from earmark.llm.session import preflight
from earmark.queries.versions import rerun_label
from earmark.stages.graph import (
    Plan,
    VersionGraph,
    check_rerun,
    filter_inputs,
    plan_rerun,
    version_graph,
    version_tables,
)
from earmark.storage import open_catalog
from earmark.storage.diff import diff_markdown, version_diff


@flow(name="rerun", log_prints=True)
def rerun_flow(cfg: Config, stage: str, items: list[str] | None = None, version: str | None = None) -> dict[str, Any]:
    cat = open_catalog(cfg)
    base, items = check_rerun(cat, stage, items, version, cfg.synthesize.items)
    plan = plan_rerun(stage)
    load_api_key(cfg)
    if plan.llm and (checked := preflight(cfg.llm)):  # fail before analyze, not after
        get_run_logger().info("preflight: %s", checked)
    g = version_graph(cat, base)
    if not g.clip_refs:
        raise ValueError(f"version {base} has no clips")
    params = {"stage": stage, "items": items, "base": base, **cfg.model_dump(mode="json")}
    with run_envelope(cfg, cat, "rerun", params) as run:
        run.info.update(stage=stage, items=items, base=base)
        report, path = _rerun(run, g, plan, stage, items, base)
    stats = run.stats()
    get_run_logger().info("rerun %s: %s", run.run_id, stats)
    return {
        "run_id": run.run_id,
        **run.published,
        "base": base,
        "diff_report": str(path),
        "diff_markdown": report,
        **stats,
    }


def _rerun(run: Run, g: VersionGraph, plan: Plan, stage: str, items: list[str], base: str) -> tuple[str, Path]:
    """The plan's stages over the base version's shards (earmark.stages.graph), publish, and the diff against
    `base` (its markdown and file)."""
    cfg, cat, run_id = run.cfg, run.cat, run.run_id
    experts = g.experts
    if plan.runs("analyze"):
        with run.stage("analyze"):
            got = analyze_flow.with_options(**run.options("analyze"))(cfg, g.clip_refs, run_id)
        experts = {name: res.refs for name, res in got.items()}
        for n, r in got.items():
            run.count(f"analyze:{n}", r.computed, r.skipped)
    item_refs = dict(g.items)
    evidence_keys = g.evidence
    if plan.runs("synthesize"):
        kept = {k: v for k, v in g.items.items() if k not in items} if stage == "synthesize" else {}
        scfg = cfg.model_copy(update={"synthesize": cfg.synthesize.model_copy(update={"items": items})})
        with run.stage("synthesize"):
            synth = synthesize_flow.with_options(**run.options("synthesize"))(scfg, g.clip_refs, experts, run_id, kept)
        for name, res in synth["results"].items():
            run.count(f"synthesize:{name}", res.computed, res.skipped)
        evidence_keys = synth["results"]["evidence"].keys("evidence")
        item_refs = {**kept, **{i: synth["results"][i].refs for i in items}}
        run.info["llm"] = synth["llm"]
    with run.stage("filter"):
        qc = filter_flow.with_options(**run.options("filter"))(
            cfg, filter_inputs(g.clip_refs, experts, evidence_keys, item_refs), run_id
        )
    run.count("filter", qc.computed, qc.skipped)
    tables = version_tables(g.shards, experts=experts, evidence=evidence_keys, items=item_refs, qc=qc.refs)
    note = rerun_label(stage, items if stage == "synthesize" else None, base)
    run.published = publish_flow(cfg, tables, run_id, note=note)
    new = run.published["version"]
    name_flow_run(f"rerun {stage} · {cfg.dataset} · {base} → {new}")
    diffs = version_diff(cat, base, new)
    report = diff_markdown(base, new, diffs, cfg.dataset)
    path = cat.dataset_path("reports", f"diff-{base}-{new}.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report)
    create_markdown_artifact(key=artifact_key(cfg, "version-diff"), markdown=report, description=f"{base} → {new}")
    run.info["diff"] = {
        d.table: {"added": d.added, "changed": d.changed, "removed": d.removed} for d in diffs if d.touched
    }
    return report, path


def run_rerun(cfg: Config, stage: str, items: list[str] | None = None, version: str | None = None) -> dict[str, Any]:
    with run_tags(cfg, "rerun"):
        return rerun_flow.with_options(**flow_options(cfg, "rerun"))(cfg, stage, items, version)
