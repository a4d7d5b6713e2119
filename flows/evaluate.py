"""evaluate flow: a dataset version + a model's answers → the `scores` table, a report and a CDF plot.

The answers come from prediction files (`--predictions`: one file, or a directory of `<subtask>.<ext>`
files) or from running the model under test on the version's clips through an OpenAI-compatible audio chat
endpoint (`--endpoint`, earmark.llm.audio), which writes such a directory first. What is scored how, the
scoring stages and the report are earmark.stages.evaluation; this module only wires them.
"""

from __future__ import annotations

import hashlib
import json
from functools import partial
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from earmark.core.config import Config
from earmark.flows.common import artifact_key, load_api_key, open_catalog, stage_task
from earmark.llm.audio import run_model, write_predictions
from earmark.llm.session import open_llm
from earmark.stages import evaluate as ev
from earmark.stages import evaluation as evn
from earmark.stages.base import ShardJob
from earmark.stages.formats import clip_audio
from earmark.storage.paths import inside, plain_name


@task(name="run-model", cache_policy=NO_CACHE)
def run_model_task(cfg: Config, version: str, endpoint: str, model_id: str, tasks: list[str], out_dir: Path) -> dict:
    """Ask the model under test for every kept item of `tasks` in `version`; write `<subtask>.jsonl` files."""
    cat = open_catalog(cfg)
    requests = evn.model_requests(cat, version, tasks, cfg.synthesize.prompt_dir)
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


def _run(cfg: Config, job: ShardJob, name: str) -> str:
    return stage_task.with_options(task_run_name=name)(cfg, job, None).key


def _with_key(job: ShardJob, fn) -> ShardJob:
    """The scoring functions write the shard key into every row as `eval_id`: bind it once it is known."""
    job.fn = partial(fn, job.plan()[0])
    return job


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
    cat = open_catalog(cfg, create=False)
    load_api_key(cfg)
    version = version or cat.latest_version()
    if version is None or version not in cat.versions():
        raise ValueError(
            f"dataset {cfg.dataset!r} has no version {version!r}; run `earmark build` first "
            f"(versions: {', '.join(cat.versions()) or 'none'})"
        )
    if judge not in evn.JUDGE_MODES:
        raise ValueError(f"judge must be one of {', '.join(evn.JUDGE_MODES)}, got {judge!r}")
    metrics = ev.parse_metrics(metric)
    sections: list[str] = []
    if endpoint is not None:
        if predictions is not None:
            raise ValueError("give either --predictions (score existing answers) or --endpoint (ask a model), not both")
        tasks = tasks or list(evn.TASKS)
        bad = set(tasks) - set(evn.TASKS)
        if bad:
            raise ValueError(f"unknown task(s) {', '.join(sorted(bad))}; use {', '.join(evn.TASKS)}")
        if metrics == ["similarity"] and "qa" in tasks:
            tasks = [t for t in tasks if t != "qa"]
            sections.append("QA not run: the similarity metric scores captions only; use --metric date (MECAT).\n")
        predictions = cat.dataset_path("predictions", plain_name(model_name, "model name"), version)
        predictions.mkdir(parents=True, exist_ok=True)
        ran = run_model_task(cfg, version, endpoint, model_id or model_name, tasks, predictions)
        if ran["errors"]:
            sections.append(
                f"{ran['errors']} requests to {model_id or model_name} failed for good; their answers are "
                f"empty and score as misses (see {predictions / 'errors.json'}).\n"
            )
    if predictions is None:
        raise ValueError("nothing to score: give --predictions FILE|DIR or --endpoint URL (a model to run)")
    plan = evn.plan_files(Path(predictions), subtask, metrics)
    problems = ev.prediction_problems([*plan.text_files.values(), *plan.item_files.values()])
    if problems:
        if strict:
            raise ev.PredictionError(ev.malformed_message(problems) + "\n(--strict: nothing was scored)")
        get_run_logger().warning("%s (skipped)", ev.malformed_message(problems))
        sections.append(f"Skipped: {ev.malformed_message(problems)}\n".replace("\n  ", "\n- "))
    eval_keys: list[str] = []
    scores: dict = {}
    cdf_metric = None
    if plan.text_files:
        digests = evn.digests(plan.text_files)
        if metrics == ["similarity"]:
            sbert_dir, sbert_name = evn.resolve_sbert(sbert)
            job = ShardJob(evn.similarity_spec(version, model_name, sbert_name), evn.score_similarity, sources=digests)
            key = _run(
                cfg,
                _with_key(
                    job,
                    lambda k, inputs: evn.score_similarity(
                        cat, version, plan.text_files, model_name, sbert_dir, k, inputs
                    ),
                ),
                "evaluate/similarity",
            )
            sections.insert(0, ev.report_markdown(model_name, version, evn.similarity_summaries(cat, key)))
        else:
            ref_root = cat.root / "exports" / version
            if not ref_root.is_dir():
                raise FileNotFoundError(
                    f"version {version} has no MECAT export at {ref_root}; re-run `earmark build` (publish writes it)"
                )
            sbert_dir, sbert_name, checker, note = evn.sbert_and_checker(metrics, sbert, error_checker, device)
            model = f"sbert:{sbert_name}" if sbert_dir is not None else "none"
            spec = evn.mecat_spec(version, model_name, metrics, model, getattr(checker, "name", None))
            job = ShardJob(spec, evn.score_mecat, sources=digests)
            key = _run(
                cfg,
                _with_key(
                    job,
                    lambda k, inputs: evn.score_mecat(
                        cfg.data_root,
                        version,
                        plan.text_files,
                        model_name,
                        metrics,
                        ref_root,
                        sbert_dir,
                        device,
                        checker,
                        k,
                        inputs,
                    ),
                ),
                "evaluate/mecat",
            )
            report = evn.mecat_report(cat, key, list(plan.text_files), ref_root, metrics)
            notes = [f"Sentence embeddings: {sbert_name} ({sbert_dir}).", note + "."] if sbert_dir is not None else []
            sections.insert(
                0,
                report.markdown(f"{model_name} on {cfg.dataset} {version}: MECAT {', '.join(metrics)}")
                + "".join(f"\n{n}" for n in notes),
            )
            scores["mecat"] = report.to_dict()
            cdf_metric = metrics[0]
            create_table_artifact(
                key=artifact_key(cfg, "mecat-scores"),
                description=f"{model_name} on {version}: per group ×100",
                table=[
                    {
                        "group": g,
                        "samples": v["n_samples"],
                        "references": v["n_references"],
                        **{m: round(x, 2) for m, x in v["scores"].items()},
                    }
                    for g, v in scores["mecat"]["groups"].items()
                ],
            )
        eval_keys.append(key)
    for sub, path in plan.item_files.items():
        client = (
            None
            if judge == "off" or (judge == "auto" and cfg.llm.endpoint is None)
            else open_llm(cfg.llm, cfg.data_root / ".llm_cache")
        )
        judge_model = client.model if client is not None else "none"
        errors: list[str] = []
        job = ShardJob(
            evn.items_spec(version, sub, model_name, judge_model, cfg.synthesize.prompt_dir),
            evn.score_items,
            sources=evn.digests({sub: path}),
        )
        try:
            key = _run(
                cfg,
                _with_key(
                    job,
                    lambda k, inputs, sub=sub, path=path, client=client, errors=errors: evn.score_items(
                        cat, version, sub, path, model_name, client, k, cfg.synthesize.prompt_dir, errors, inputs
                    ),
                ),
                f"evaluate/{sub}",
            )
        finally:
            if client is not None:
                client.close()
        result = evn.items_result(cat, key, version, sub, path, model_name, judge_model != "none")
        for warning in result.scores.get("warnings", []):  # items scored by AudioBench's fallbacks
            get_run_logger().warning("%s: %s", sub, warning)
        if errors:
            result.notes.append(f"{len(errors)} judge requests failed (first: {errors[0][:160]}); rules decided those")
        sections.append(evn.item_markdown(model_name, sub, result, judge_model))
        scores[sub] = {**result.scores, "decided_by": result.decided_by}
        eval_keys.append(key)
        create_table_artifact(
            key=artifact_key(cfg, f"{sub}-scores"),
            description=f"{model_name} on {version}: {sub}",
            table=[
                {"metric": k, "value": len(v) if isinstance(v, list) else v}
                for k, v in result.scores.items()
                if not isinstance(v, dict)
            ],
        )
    eval_id = eval_keys[0] if len(eval_keys) == 1 else hashlib.sha256("|".join(eval_keys).encode()).hexdigest()[:24]
    reports = cat.dataset_path("reports")
    plot = None
    if plan.text_files:
        plot = evn.cdf(
            cat,
            eval_keys[:1],
            cdf_metric,
            inside(reports, f"{eval_id}.cdf.png"),
            f"{model_name} on {version}: per-sample {cdf_metric or 'similarity'}",
        )
    report_text = "\n".join(sections)
    if plot is not None:
        report_text += f"\nPer-sample score CDF (MECAT Figure 6 style): {plot}\n"
    path = inside(reports, f"{eval_id}.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report_text)
    create_markdown_artifact(
        key=artifact_key(cfg, "evaluation-report"), markdown=report_text, description=f"{model_name} on {version}"
    )
    get_run_logger().info("report written to %s", path)
    result = {
        "eval_id": eval_id,
        "eval_keys": eval_keys,
        "version": version,
        "report": str(path),
        "markdown": report_text,
        "plot": str(plot) if plot else None,
    }
    return result if not scores else {**result, "scores": scores}
