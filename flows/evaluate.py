"""evaluate flow: a dataset version + a model's answers → the `scores` table, a report and a CDF plot.

The answers come from prediction files (`--predictions`: one file, or a directory of `<subtask>.<ext>`
files) or from running the model under test on the version's clips through an OpenAI-compatible audio chat
endpoint (`--endpoint`, earmark.llm.audio), which writes such a directory first. What is scored how, the
scoring stages and the report are earmark.stages.evaluate; this module only wires them.
"""

from __future__ import annotations

import json
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from earmark.core.config import Config
from earmark.flows.runs import artifact_key, load_api_key
from earmark.flows.shards import run_now, untagged
from earmark.llm.audio import run_model, write_predictions
from earmark.stages import evaluate
from earmark.stages.evaluate import plan
from earmark.stages.publish.formats import clip_audio
from earmark.storage import open_catalog
from earmark.storage.paths import plain_name


@task(name="run-model", cache_policy=NO_CACHE)
def run_model_task(cfg: Config, version: str, endpoint: str, model_id: str, tasks: list[str], out_dir: Path) -> dict:
    """Ask the model under test for every kept item of `tasks` in `version`; write `<subtask>.jsonl` files."""
    cat = open_catalog(cfg)
    requests = evaluate.model_requests(cat, version, tasks, cfg.synthesize.prompt_dir)
    subtasks = sorted({s for reqs in requests.values() for s, _, _ in reqs})
    preds = run_model(
        clip_audio(cat, version, list(requests)),
        dict.fromkeys(subtasks, ""),
        endpoint,
        model_id,
        requests=lambda clip_id: requests.get(clip_id, []),
        cache_dir=cfg.data_root / ".runner_cache",
        max_concurrency=cfg.llm.max_concurrency,
        timeout_s=cfg.llm.timeout_s,
        planned=sum(len(r) for r in requests.values()),
    )
    paths = write_predictions(preds, out_dir)
    (out_dir / "errors.json").write_text(json.dumps(preds.errors, indent=1))
    get_run_logger().info(
        "model %s: %d requests, %d cache hits, %d failed (listed in %s)",
        model_id,
        sum(len(r) for r in requests.values()),
        preds.cache_hits,
        preds.n_errors(),
        out_dir / "errors.json",
    )
    return {"files": paths, "errors": preds.n_errors(), "stats": preds.stats}


def _score(cfg: Config, scoring: plan.Plan, sections: list[str]) -> tuple[list[str], dict]:
    """Run the plan's scoring stages in order; their report parts go into `sections` (caption / MECAT scores
    first), their tables to artifacts. Returns the shard keys and the scores by name."""
    keys: list[str] = []
    scores: dict = {}
    for s in scoring.jobs:
        try:
            key = run_now(cfg, s.job, None, s.name).key
        finally:
            s.close()
        part = s.part(key)
        for warning in part.warnings:
            get_run_logger().warning("%s", warning)
        if part.first:
            sections.insert(0, part.markdown)
        else:
            sections.append(part.markdown)
        if part.scores is not None:
            scores[part.scores[0]] = part.scores[1]
        if part.table is not None:
            name, description, rows = part.table
            create_table_artifact(key=artifact_key(cfg, name), description=description, table=rows)
        keys.append(key)
    return keys, scores


@flow(name="evaluate", log_prints=True)
def evaluate_flow(
    cfg: Config,
    predictions: Path | None = None,
    subtask: str | None = None,
    model_name: str = "model",
    version: str | None = None,
    metric: str = "similarity",
    device: str | None = None,
    endpoint: str | None = None,
    model_id: str | None = None,
    tasks: list[str] | None = None,
    judge: str = "auto",
    sbert: str | None = None,
    error_checker: str = "auto",
    strict: bool = False,
) -> dict:
    """Check the request, run the model under test if asked, then each scoring stage the plan returns, and
    write the report (earmark.stages.evaluate.plan decides what is scored how)."""
    cat = open_catalog(cfg, create=False)
    load_api_key(cfg)
    req = plan.Request(
        predictions=predictions,
        subtask=subtask,
        model_name=model_name,
        version=version,
        metric=metric,
        device=device,
        endpoint=endpoint,
        model_id=model_id,
        tasks=tasks,
        judge=judge,
        sbert=sbert,
        error_checker=error_checker,
        strict=strict,
    )
    checked = plan.check(cat, cfg.dataset, req)
    sections = list(checked.notes)
    if endpoint is not None:
        predictions = cat.dataset_path("predictions", plain_name(model_name, "model name"), checked.version)
        predictions.mkdir(parents=True, exist_ok=True)
        with untagged():  # as the shard tasks
            ran = run_model_task(cfg, checked.version, endpoint, model_id or model_name, checked.tasks, predictions)
        if ran["errors"]:
            sections.append(
                plan.failed_requests_note(ran["errors"], model_id or model_name, predictions / "errors.json")
            )
    assert predictions is not None  # plan.check refused a request with neither
    scoring = plan.plan(
        cat, cfg.data_root, cfg.dataset, checked, req, Path(predictions), cfg.llm, cfg.synthesize.prompt_dir
    )
    for warning in scoring.warnings:
        get_run_logger().warning("%s", warning)
    sections += scoring.notes
    keys, scores = _score(cfg, scoring, sections)
    report = plan.write_report(cat, scoring, model_name, checked.version, keys, sections)
    create_markdown_artifact(
        key=artifact_key(cfg, "evaluation-report"),
        markdown=report.markdown,
        description=f"{model_name} on {checked.version}",
    )
    get_run_logger().info("report written to %s", report.path)
    result = {
        "eval_id": report.eval_id,
        "eval_keys": keys,
        "version": checked.version,
        "report": str(report.path),
        "markdown": report.markdown,
        "plot": str(report.plot) if report.plot else None,
    }
    return result if not scores else {**result, "scores": scores}
