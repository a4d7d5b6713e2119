"""An evaluation run: which files score what, the scoring stages, the model-under-test requests, the report.

Each scoring stage is a shard of table `scores` keyed by the version, the prediction files' sha, the metrics,
the embedding/judge models and the judge prompts, so scoring the same answers again computes nothing. The
report is always rebuilt from the stored per-sample scores, so a first run and a cached re-run read the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from earmark.metrics.error_checker import load_error_checker
from earmark.metrics.refcache import ReferenceCache
from earmark.metrics.report import cdf_plot, entailment_table_markdown, ifeval_table_markdown
from earmark.metrics.similarity import load_sbert, resolve_sbert
from earmark.prompts import load_prompt, request_sha
from earmark.schemas import CAPTION_KINDS, Score
from earmark.stages.base import Inputs, StageSpec
from earmark.stages.evaluate import captions, items
from earmark.stages.evaluate.predictions import MECAT_SUBTASKS, PredictionError, load_predictions, prediction_files
from earmark.stages.publish import kept_items
from earmark.storage import Catalog

STAGE_VERSION = "3"
JUDGE_MODES = ("auto", "llm", "off")
TASKS = ("captions", "qa", "entailment", "ifeval")


def digests(files: Mapping[str, Path]) -> list[str]:
    return [f"{k}:{hashlib.sha256(p.read_bytes()).hexdigest()}" for k, p in sorted(files.items())]


@dataclass
class Plan:
    """What an evaluation scores: text subtasks (captions / MECAT QA) and item subtasks (entailment, ifeval)."""

    text_files: dict[str, Path] = field(default_factory=dict)
    item_files: dict[str, Path] = field(default_factory=dict)


def plan_files(predictions: Path, subtask: str | None, metrics: Sequence[str]) -> Plan:
    plan = Plan()
    if predictions.is_dir():
        plan.item_files = {
            p.stem: p for p in sorted(predictions.iterdir()) if p.stem in items.ITEM_SUBTASKS and p.is_file()
        }
    elif subtask in items.ITEM_SUBTASKS:
        plan.item_files = {subtask: predictions}
    kinds = CAPTION_KINDS if list(metrics) == ["similarity"] else MECAT_SUBTASKS
    if not (predictions.is_file() and subtask in items.ITEM_SUBTASKS):
        try:
            plan.text_files = prediction_files(predictions, subtask, kinds)
        except PredictionError:
            if not plan.item_files:
                raise
    return plan


# ----------------------------------------------------------------------------------- scoring stages
def similarity_spec(version: str, model_name: str, sbert_name: str) -> StageSpec:
    return StageSpec(
        "evaluate:similarity",
        STAGE_VERSION,
        writes=("scores",),
        reads=("captions", "qc"),
        model=f"sbert:{sbert_name}",
        config={"model_name": model_name, "version": version},
    )


def score_similarity(
    cat: Catalog,
    version: str,
    files: Mapping[str, Path],
    model_name: str,
    sbert_dir: Path,
    eval_id: str,
    inputs: Inputs,
) -> dict[str, list[Score]]:
    sbert = load_sbert(sbert_dir)
    rows = []
    for kind, path in files.items():
        got, _ = captions.score_kind(
            eval_id,
            model_name,
            version,
            kind,
            load_predictions(path),
            captions.caption_references(cat, version, kind),
            sbert,
        )
        rows += got
    return {"scores": rows}


def mecat_spec(version: str, model_name: str, metrics: Sequence[str], model: str, checker: str | None) -> StageSpec:
    return StageSpec(
        "evaluate:mecat",
        STAGE_VERSION,
        writes=("scores",),
        reads=("exports",),
        model=model,
        config={"model_name": model_name, "metrics": list(metrics), "error_checker": checker, "version": version},
    )


def score_mecat(
    data_root: Path,
    version: str,
    files: Mapping[str, Path],
    model_name: str,
    metrics: list[str],
    ref_root: Path,
    sbert_dir: Path | None,
    device: str | None,
    checker,
    eval_id: str,
    inputs: Inputs,
) -> dict[str, list[Score]]:
    sbert = load_sbert(sbert_dir) if sbert_dir is not None else None
    cache = ReferenceCache(data_root / ".metric_cache")  # references embedded once across runs
    rows, _ = captions.score_groups(
        eval_id,
        model_name,
        version,
        files,
        ref_root,
        metrics,
        sbert,
        device,
        reference_cache=cache,
        error_checker=checker,
    )
    return {"scores": rows}


def items_spec(version: str, subtask: str, model_name: str, judge_model: str, prompt_dir: Path | None) -> StageSpec:
    judge_prompt = "entailment_judge" if subtask == "entailment" else "ifeval_judge"
    return StageSpec(
        f"evaluate:{subtask}",
        STAGE_VERSION,
        writes=("scores",),
        reads=(subtask, "qc"),
        model=f"judge:{judge_model}",
        config={"model_name": model_name, "version": version},
        prompt_files=(judge_prompt,),
        prompt_sha=request_sha((judge_prompt,), prompt_dir) if judge_model != "none" else None,
    )


def score_items(
    cat: Catalog,
    version: str,
    subtask: str,
    path: Path,
    model_name: str,
    client,
    eval_id: str,
    prompt_dir: Path | None,
    errors: list[str],
    inputs: Inputs,
) -> dict[str, list[Score]]:
    """Entailment or IFEval answers of one file against the version's kept items; failed judge requests are
    appended to `errors` (the rules decide those samples)."""
    predictions = load_predictions(path)
    if subtask == "entailment":
        todo = items.entailment_items(cat, version)
        labels, errs = items.classify_answers(client, todo, predictions, prompt_dir=prompt_dir) if client else ({}, [])
        errors += errs
        return {"scores": items.score_entailment(eval_id, model_name, version, todo, predictions, labels).rows}
    todo = items.instruction_items(cat, version)
    verdicts, errs = items.judge_answers(client, todo, predictions, prompt_dir=prompt_dir) if client else (None, [])
    errors += errs
    return {"scores": items.score_ifeval(eval_id, model_name, version, todo, predictions, verdicts).rows}


def sbert_and_checker(metrics: Sequence[str], sbert_spec: str | None, error_checker: str, device: str | None):
    """(sbert dir or None, its name, checker, checker note) for MECAT metrics."""
    if not {"date", "fense"} & set(metrics):
        return None, "none", None, ""
    sbert_dir, sbert_name = resolve_sbert(sbert_spec)
    checker, note = load_error_checker(error_checker, device or "cpu")
    return sbert_dir, sbert_name, checker, note


# ------------------------------------------------------------------------------------------ reports
def similarity_summaries(cat: Catalog, key: str) -> list[captions.KindSummary]:
    rows = cat.query(
        f"SELECT subtask, count(*), avg(value), count(*) FILTER (WHERE prediction <> '') "
        f"FROM read_parquet('{cat.shard_path('scores', key)}') GROUP BY 1 ORDER BY 1"
    )
    return [captions.KindSummary(k, n, p, n - p, 0, m) for k, n, m, p in rows]


def mecat_report(cat: Catalog, key: str, subtasks: list[str], ref_root: Path, metrics: list[str]):
    stats = cat.query(
        f"SELECT subtask, metric, count(*), avg(value) FROM "
        f"read_parquet('{cat.shard_path('scores', key)}') GROUP BY 1, 2"
    )
    return captions.mecat_report_from_scores(stats, subtasks, ref_root, metrics)


def items_result(
    cat: Catalog, key: str, version: str, subtask: str, path: Path, model_name: str, judged: bool
) -> items.ItemResult:
    """The item subtask's scores from its stored per-sample rows (the LLM's decisions are in the notes)."""
    rows = [Score.model_validate(r) for r in cat.read("scores", [key]).to_pylist()]
    predictions = load_predictions(path)
    if subtask == "entailment":
        result = items.score_entailment(
            key,
            model_name,
            version,
            items.entailment_items(cat, version),
            predictions,
            items.llm_labels_from_rows(rows),
        )
    else:
        verdicts = items.verdicts_from_rows(rows) if judged else None
        result = items.score_ifeval(
            key, model_name, version, items.instruction_items(cat, version), predictions, verdicts
        )
    known = {r.item_id for r in result.rows}
    unknown = set(predictions) - known
    if unknown:
        result.notes.append(f"{len(unknown)} answers name items not in {version} (ignored), e.g. {sorted(unknown)[0]}")
    return result


def item_markdown(model_name: str, subtask: str, result: items.ItemResult, judge_model: str) -> str:
    if subtask == "entailment":
        table = entailment_table_markdown({model_name: result.scores}, title="Audio Entailment.")
    else:
        table = ifeval_table_markdown({model_name: result.scores}, title="IFEval-Audio.")
    decided = ", ".join(f"{k} {v}" for k, v in sorted(result.decided_by.items()))
    who = f"judge {judge_model}" if judge_model != "none" else "no judge"
    return "\n".join([table, "", f"Decided by ({who}): {decided}.", *[f"- {n}" for n in result.notes]]) + "\n"


def cdf(cat: Catalog, keys: list[str], metric: str | None, path: Path, title: str) -> Path | None:
    """Per-sample score CDF by subtask (MECAT Figure 6) from the stored rows, or None when nothing to plot."""
    samples: dict[str, list[float]] = {}
    for r in cat.read("scores", keys).to_pylist():
        if metric is None or r["metric"] == metric:
            samples.setdefault(r["subtask"], []).append(r["value"])
    return cdf_plot(samples, path, title, xlabel=metric or "score") if samples else None


# ------------------------------------------------------------------------------------- model under test
def model_requests(
    cat: Catalog, version: str, tasks: Sequence[str], prompt_dir: Path | None = None
) -> dict[str, list[tuple[str, str, str]]]:
    """clip_id → [(subtask, key, prompt)] for every kept item of `tasks` in `version`."""
    captions = load_prompt("mecat_eval", prompt_dir).data["captions"]
    kept = kept_items(version)
    requests: dict[str, list[tuple[str, str, str]]] = {}
    if "captions" in tasks:
        for clip_id, kind in cat.query(
            f"SELECT DISTINCT clip_id, kind FROM {version}.captions WHERE item_id IN {kept} ORDER BY 1, 2"
        ):
            requests.setdefault(clip_id, []).append((kind, clip_id, captions[kind]))
    if "qa" in tasks:
        for clip_id, idx, question in cat.query(
            f"SELECT clip_id, qa_index, question FROM {version}.qa WHERE item_id IN {kept} ORDER BY 1, 2"
        ):
            requests.setdefault(clip_id, []).append(("qa", f"{clip_id}_{idx}", question))
    todo = (items.entailment_items(cat, version) if "entailment" in tasks else []) + (
        items.instruction_items(cat, version) if "ifeval" in tasks else []
    )
    for clip_id, reqs in items.model_requests(todo, prompt_dir).items():
        requests.setdefault(clip_id, []).extend(reqs)
    if not requests:
        raise ValueError(f"version {version} has no kept items for {', '.join(tasks)}; nothing to ask the model")
    return requests
