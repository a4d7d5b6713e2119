"""An evaluation planned before anything runs: the checks that need no prediction file (`check`), then the
scoring stages as ready jobs, each with the part of the report it reads back from its stored rows (`plan`),
then the report file (`write_report`). The flow (earmark.flows.evaluate) runs the jobs in order, logs and
publishes what they report; every decision about what is scored how is made here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from earmark.core.config import LLMSection
from earmark.llm.session import open_llm
from earmark.stages import evaluate
from earmark.stages.base import ShardJob
from earmark.stages.evaluate import captions
from earmark.stages.evaluate.predictions import PredictionError, malformed_message, parse_metrics, prediction_problems
from earmark.storage import Catalog
from earmark.storage.paths import inside


@dataclass(frozen=True)
class Request:
    """What the user asked for (`earmark evaluate`'s options)."""

    predictions: Path | None = None
    subtask: str | None = None
    model_name: str = "model"
    version: str | None = None
    metric: str = "similarity"
    device: str | None = None
    endpoint: str | None = None
    model_id: str | None = None
    tasks: Sequence[str] | None = None
    judge: str = "auto"
    sbert: str | None = None
    error_checker: str = "auto"
    strict: bool = False


@dataclass(frozen=True)
class Checked:
    """A request that passed the checks: the version, the metrics, the model-under-test tasks (none when
    scoring files) and the report's notes so far."""

    version: str
    metrics: list[str]
    tasks: list[str]
    notes: list[str]


def check(cat: Catalog, dataset: str, req: Request) -> Checked:
    """Everything that can be refused before a model runs or a file is read, each with what to do instead."""
    version = req.version or cat.latest_version()
    if version is None or version not in cat.versions():
        raise ValueError(
            f"dataset {dataset!r} has no version {version!r}; run `earmark build` first "
            f"(versions: {', '.join(cat.versions()) or 'none'})"
        )
    if req.judge not in evaluate.JUDGE_MODES:
        raise ValueError(f"judge must be one of {', '.join(evaluate.JUDGE_MODES)}, got {req.judge!r}")
    metrics = parse_metrics(req.metric)
    notes: list[str] = []
    tasks: list[str] = []
    if req.endpoint is not None:
        if req.predictions is not None:
            raise ValueError("give either --predictions (score existing answers) or --endpoint (ask a model), not both")
        tasks = list(req.tasks or evaluate.TASKS)
        bad = set(tasks) - set(evaluate.TASKS)
        if bad:
            raise ValueError(f"unknown task(s) {', '.join(sorted(bad))}; use {', '.join(evaluate.TASKS)}")
        if metrics == ["similarity"] and "qa" in tasks:
            tasks = [t for t in tasks if t != "qa"]
            notes.append("QA not run: the similarity metric scores captions only; use --metric date (MECAT).\n")
    elif req.predictions is None:
        raise ValueError("nothing to score: give --predictions FILE|DIR or --endpoint URL (a model to run)")
    return Checked(version, metrics, tasks, notes)


def failed_requests_note(n_errors: int, model: str, errors_file: Path) -> str:
    return (
        f"{n_errors} requests to {model} failed for good; their answers are empty and score as misses "
        f"(see {errors_file}).\n"
    )


@dataclass
class Part:
    """One scoring stage's part of the report, read back from its stored rows."""

    markdown: str
    first: bool = False  # caption / MECAT scores lead the report
    scores: tuple[str, dict] | None = None  # (name, value) for the flow's result
    table: tuple[str, str, list[dict]] | None = None  # (artifact name, description, rows)
    warnings: list[str] = field(default_factory=list)


def _nothing() -> None:
    return None


@dataclass
class Scoring:
    """A scoring stage ready to run: its job (whose function binds the shard key once it is known, since the
    rows carry it as `eval_id`), how its report part is read back, and what to release after it ran."""

    name: str
    job: ShardJob
    part: Callable[[str], Part]
    close: Callable[[], None] = _nothing


@dataclass
class Plan:
    jobs: list[Scoring]
    notes: list[str]  # report sections known before scoring (files skipped)
    warnings: list[str]  # to log
    cdf_metric: str | None  # the metric of the per-sample plot; None: similarity
    plotted: bool  # caption / QA scores exist to plot


def _bound(job: ShardJob, fn: Callable[..., Any]) -> ShardJob:
    job.fn = partial(fn, job.plan()[0])
    return job


def plan(
    cat: Catalog,
    data_root: Path,
    dataset: str,
    checked: Checked,
    req: Request,
    predictions: Path,
    llm: LLMSection,
    prompt_dir: Path | None,
) -> Plan:
    """The scoring stages of `predictions` (a file or a directory of `<subtask>.<ext>` files), in the order
    they run: captions or MECAT groups first, then each item subtask. Malformed files stop the run only with
    `strict`; otherwise they are skipped and named in the report."""
    version, metrics = checked.version, checked.metrics
    files = evaluate.plan_files(predictions, req.subtask, metrics)
    problems = prediction_problems([*files.text_files.values(), *files.item_files.values()])
    notes: list[str] = []
    warnings: list[str] = []
    if problems:
        if req.strict:
            raise PredictionError(malformed_message(problems) + "\n(--strict: nothing was scored)")
        warnings.append(f"{malformed_message(problems)} (skipped)")
        notes.append(f"Skipped: {malformed_message(problems)}\n".replace("\n  ", "\n- "))
    jobs: list[Scoring] = []
    cdf_metric = None
    if files.text_files:
        if metrics == ["similarity"]:
            jobs.append(_similarity(cat, version, files.text_files, req))
        else:
            jobs.append(_mecat(cat, data_root, dataset, version, files.text_files, metrics, req))
            cdf_metric = metrics[0]
    for sub, path in files.item_files.items():
        jobs.append(_items(cat, data_root, version, sub, path, req, llm, prompt_dir))
    return Plan(jobs, notes, warnings, cdf_metric, bool(files.text_files))


def _similarity(cat: Catalog, version: str, text_files: dict[str, Path], req: Request) -> Scoring:
    sbert_dir, sbert_name = evaluate.resolve_sbert(req.sbert)
    job = ShardJob(
        evaluate.similarity_spec(version, req.model_name, sbert_name),
        evaluate.score_similarity,
        sources=evaluate.digests(text_files),
    )
    fn = partial(evaluate.score_similarity, cat, version, text_files, req.model_name, sbert_dir)

    def part(key: str) -> Part:
        summaries = evaluate.similarity_summaries(cat, key)
        return Part(captions.report_markdown(req.model_name, version, summaries), first=True)

    return Scoring("evaluate/similarity", _bound(job, fn), part)


def _mecat(
    cat: Catalog,
    data_root: Path,
    dataset: str,
    version: str,
    text_files: dict[str, Path],
    metrics: list[str],
    req: Request,
) -> Scoring:
    ref_root = cat.root / "exports" / version
    if not ref_root.is_dir():
        raise FileNotFoundError(
            f"version {version} has no MECAT export at {ref_root}; re-run `earmark build` (publish writes it)"
        )
    sbert_dir, sbert_name, checker, note = evaluate.sbert_and_checker(metrics, req.sbert, req.error_checker, req.device)
    model = f"sbert:{sbert_name}" if sbert_dir is not None else "none"
    spec = evaluate.mecat_spec(version, req.model_name, metrics, model, getattr(checker, "name", None))
    job = ShardJob(spec, evaluate.score_mecat, sources=evaluate.digests(text_files))
    fn = partial(
        evaluate.score_mecat,
        data_root,
        version,
        text_files,
        req.model_name,
        metrics,
        ref_root,
        sbert_dir,
        req.device,
        checker,
    )

    def part(key: str) -> Part:
        report = evaluate.mecat_report(cat, key, list(text_files), ref_root, metrics)
        notes = [f"Sentence embeddings: {sbert_name} ({sbert_dir}).", note + "."] if sbert_dir is not None else []
        markdown = report.markdown(f"{req.model_name} on {dataset} {version}: MECAT {', '.join(metrics)}") + "".join(
            f"\n{n}" for n in notes
        )
        scores = report.to_dict()
        table = [
            {
                "group": g,
                "samples": v["n_samples"],
                "references": v["n_references"],
                **{m: round(x, 2) for m, x in v["scores"].items()},
            }
            for g, v in scores["groups"].items()
        ]
        description = f"{req.model_name} on {version}: per group ×100"
        return Part(markdown, first=True, scores=("mecat", scores), table=("mecat-scores", description, table))

    return Scoring("evaluate/mecat", _bound(job, fn), part)


def _items(
    cat: Catalog,
    data_root: Path,
    version: str,
    sub: str,
    path: Path,
    req: Request,
    llm: LLMSection,
    prompt_dir: Path | None,
) -> Scoring:
    """An item subtask (entailment, ifeval); the judge is the configured LLM unless `judge` is off, or "auto"
    with no endpoint configured."""
    off = req.judge == "off" or (req.judge == "auto" and llm.endpoint is None)
    client = None if off else open_llm(llm, data_root / ".llm_cache")
    judge_model = client.model if client is not None else "none"
    errors: list[str] = []
    job = ShardJob(
        evaluate.items_spec(version, sub, req.model_name, judge_model, prompt_dir),
        evaluate.score_items,
        sources=evaluate.digests({sub: path}),
    )
    fn = partial(evaluate.score_items, cat, version, sub, path, req.model_name, client)

    def run(key: str, inputs: Any) -> dict:
        return fn(key, prompt_dir, errors, inputs)

    def part(key: str) -> Part:
        result = evaluate.items_result(cat, key, version, sub, path, req.model_name, judge_model != "none")
        if errors:
            result.notes.append(f"{len(errors)} judge requests failed (first: {errors[0][:160]}); rules decided those")
        table = [
            {"metric": k, "value": len(v) if isinstance(v, list) else v}
            for k, v in result.scores.items()
            if not isinstance(v, dict)
        ]
        return Part(
            evaluate.item_markdown(req.model_name, sub, result, judge_model),
            scores=(sub, {**result.scores, "decided_by": result.decided_by}),
            table=(f"{sub}-scores", f"{req.model_name} on {version}: {sub}", table),
            warnings=[f"{sub}: {w}" for w in result.scores.get("warnings", [])],  # AudioBench's fallbacks
        )

    close = client.close if client is not None else _nothing
    return Scoring(f"evaluate/{sub}", _bound(job, run), part, close)


@dataclass(frozen=True)
class Report:
    eval_id: str
    path: Path
    markdown: str
    plot: Path | None


def write_report(
    cat: Catalog, plan_: Plan, model_name: str, version: str, keys: list[str], sections: list[str]
) -> Report:
    """The report file (and the per-sample CDF plot of the caption / QA scores) under the dataset's reports/."""
    eval_id = keys[0] if len(keys) == 1 else hashlib.sha256("|".join(keys).encode()).hexdigest()[:24]
    reports = cat.dataset_path("reports")
    plot = None
    if plan_.plotted:
        plot = evaluate.cdf(
            cat,
            keys[:1],
            plan_.cdf_metric,
            inside(reports, f"{eval_id}.cdf.png"),
            f"{model_name} on {version}: per-sample {plan_.cdf_metric or 'similarity'}",
        )
    text = "\n".join(sections)
    if plot is not None:
        text += f"\nPer-sample score CDF (MECAT Figure 6 style): {plot}\n"
    path = inside(reports, f"{eval_id}.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return Report(eval_id, path, text, plot)
