"""evaluate flow: a dataset version + a model's answers → the `scores` table, a report and a CDF plot.

The answers come from prediction files (`--predictions`: one file, or a directory of `<subtask>.<ext>`
files) or from running the model under test on the version's clips through an OpenAI-compatible audio
chat endpoint (`--endpoint`, earmark/runner.py), which writes such a directory first.

- captions (and MECAT QA): `metric="similarity"` (SBERT cosine, default) or MECAT's "date", "fense",
  "bleu" (comma-separated) against the version's MECAT export, in the paper's Table 2/3 layout;
- `entailment`: ACC, macro P/R/F1, per-class accuracy; answers read by an LLM classifier when a judge is
  configured, by string rules otherwise (each sample records which path decided);
- `ifeval`: IFR by AudioBench's rule checks; SCR/OSR with the paper's binary LLM judge when configured.

Every scoring task is a shard keyed by the version, the prediction files' sha, the metrics and the judge
model, so scoring the same answers again computes nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from earmark.config import Config
from earmark.stages.evaluate import (
    MECAT_SUBTASKS,
    KindSummary,
    PredictionError,
    caption_references,
    load_predictions,
    mecat_report_from_scores,
    parse_metrics,
    prediction_files,
    report_markdown,
    score_kind,
    score_mecat,
)
from earmark.stages.evaluate_items import (
    ITEM_SUBTASKS,
    ItemResult,
    classify_answers,
    entailment_items,
    instruction_items,
    judge_answers,
    llm_labels_from_rows,
    score_entailment,
    score_ifeval,
    verdicts_from_rows,
)
from earmark.llm.session import open_llm
from earmark.stages.publish import kept_items
from earmark.flows.common import computed_or_cached, open_catalog
from earmark.metrics.refcache import ReferenceCache
from earmark.metrics.report import cdf_plot, entailment_table_markdown, ifeval_table_markdown
from earmark.metrics.error_checker import load_error_checker
from earmark.metrics.similarity import load_sbert, resolve_sbert
from earmark.schemas import CAPTION_KINDS, Score, from_table, to_table
from earmark.storage import Catalog, ShardMeta, shard_key

STAGE_VERSION = "2"
JUDGE_MODES = ("auto", "llm", "off")


def _digests(files: dict[str, Path]) -> list[str]:
    return [f"{k}:{hashlib.sha256(p.read_bytes()).hexdigest()}" for k, p in sorted(files.items())]


def _stored(cat: Catalog, key: str) -> list[Score]:
    return from_table(Score, cat.read("scores", [key]))


def _judge_client(cfg: Config, mode: str):
    """The LLM that classifies entailment answers and judges IFEval answers, or None (rules only)."""
    if mode == "off" or (mode == "auto" and cfg.llm.endpoint is None):
        return None
    return open_llm(cfg.llm, cfg.data_root / ".llm_cache")


@task(name="run-model", cache_policy=NO_CACHE)
def run_model_task(cfg: Config, version: str, endpoint: str, model_id: str, tasks: list[str], out_dir: Path) -> dict:
    """Ask the model under test for every kept item of `tasks` in `version`; write `<subtask>.jsonl` files."""
    from earmark.llm.audio import MECAT_CAPTION_PROMPTS, run_model, write_predictions
    from earmark.stages.evaluate_items import model_requests

    cat = open_catalog(cfg)
    kept = kept_items(version)
    requests: dict[str, list[tuple[str, str, str]]] = {}
    if "captions" in tasks:
        for clip_id, kind in cat.query(f"SELECT DISTINCT clip_id, kind FROM {version}.captions "
                                       f"WHERE item_id IN {kept} ORDER BY 1, 2"):
            requests.setdefault(clip_id, []).append((kind, clip_id, MECAT_CAPTION_PROMPTS[kind]))
    if "qa" in tasks:
        for clip_id, idx, question in cat.query(f"SELECT clip_id, qa_index, question FROM {version}.qa "
                                                f"WHERE item_id IN {kept} ORDER BY 1, 2"):
            requests.setdefault(clip_id, []).append(("qa", f"{clip_id}_{idx}", question))
    items = (entailment_items(cat, version) if "entailment" in tasks else []) + \
        (instruction_items(cat, version) if "ifeval" in tasks else [])
    for clip_id, reqs in model_requests(items).items():
        requests.setdefault(clip_id, []).extend(reqs)
    if not requests:
        raise ValueError(f"version {version} has no kept items for {', '.join(tasks)}; nothing to ask the model")
    subtasks = sorted({s for reqs in requests.values() for s, _, _ in reqs})

    def clips():
        ids = sorted(requests)
        for i in range(0, len(ids), 64):
            yield from cat.query(f"SELECT clip_id, audio_flac FROM {version}.clips WHERE clip_id IN "
                                 f"(SELECT unnest(?::VARCHAR[]))", [ids[i:i + 64]])

    preds = run_model(clips(), dict.fromkeys(subtasks, ""), endpoint, model_id,
                      requests=lambda clip_id: requests.get(clip_id, []),
                      cache_dir=cfg.data_root / ".runner_cache", max_concurrency=cfg.llm.max_concurrency,
                      timeout_s=cfg.llm.timeout_s)
    paths = write_predictions(preds, out_dir)
    (out_dir / "errors.json").write_text(json.dumps(preds.errors, indent=1))
    logger = get_run_logger()
    logger.info("model %s: %d requests, %d cache hits, %d failed (listed in %s)", model_id,
                sum(len(r) for r in requests.values()), preds.cache_hits, preds.n_errors(), out_dir / "errors.json")
    return {"files": paths, "errors": preds.n_errors(), "stats": preds.stats}


@task(name="score-captions", cache_policy=NO_CACHE)
def score_task(cfg: Config, version: str, files: dict[str, Path], model_name: str, sbert_spec: str | None = None) -> dict:
    cat = open_catalog(cfg)
    digests = _digests(files)
    sbert_dir, sbert_name = resolve_sbert(sbert_spec)
    key = shard_key("evaluate", STAGE_VERSION, [version, *digests], model=f"sbert:{sbert_name}",
                    config={"model_name": model_name})
    summaries = []

    def compute():
        sbert = load_sbert(sbert_dir)
        rows = []
        for kind, path in files.items():
            got, summary = score_kind(key, model_name, version, kind, load_predictions(path),
                                      caption_references(cat, version, kind), sbert)
            rows += got
            summaries.append(summary)
        return {"scores": to_table(Score, rows)}

    meta = ShardMeta(stage="evaluate", stage_version=STAGE_VERSION, inputs=[version, *digests],
                     model=f"sbert:{sbert_name}", config={"model_name": model_name})
    ref = computed_or_cached(cat, key, ("scores",), meta, None, compute, "evaluate")
    if not summaries:  # skipped: rebuild the summary from the stored scores
        rows = cat.query(
            f"SELECT subtask, count(*), avg(value), count(*) FILTER (WHERE prediction <> '') "
            f"FROM read_parquet('{cat.shard_path('scores', key)}') GROUP BY 1 ORDER BY 1")
        summaries = [KindSummary(k, n, p, n - p, 0, m) for k, n, m, p in rows]
    return {"eval_id": ref.key, "summaries": summaries}


@task(name="score-mecat", cache_policy=NO_CACHE)
def score_mecat_task(cfg: Config, version: str, files: dict[str, Path], model_name: str, metrics: list[str],
                     device: str | None = None, sbert_spec: str | None = None, error_checker: str = "auto") -> dict:
    cat = open_catalog(cfg)
    ref_root = cat.root / "exports" / version
    if not ref_root.is_dir():
        raise FileNotFoundError(f"version {version} has no MECAT export at {ref_root}; re-run `earmark build` "
                                "(publish writes it)")
    digests = _digests(files)
    uses_sbert = bool({"date", "fense"} & set(metrics))
    sbert_dir, sbert_name = resolve_sbert(sbert_spec) if uses_sbert else (None, "none")
    checker, checker_note = load_error_checker(error_checker, device or "cpu") if uses_sbert else (None, "")
    model = f"sbert:{sbert_name}" if uses_sbert else "none"
    config = {"model_name": model_name, "metrics": metrics, "error_checker": getattr(checker, "name", None)}
    key = shard_key("evaluate", STAGE_VERSION, [version, *digests], model=model, config=config)
    report = None

    def compute():
        nonlocal report
        sbert = load_sbert(sbert_dir) if uses_sbert else None
        cache = ReferenceCache(cfg.data_root / ".metric_cache")  # references embedded once across runs
        rows, report = score_mecat(key, model_name, version, files, ref_root, metrics, sbert, device,
                                   reference_cache=cache, error_checker=checker)
        return {"scores": to_table(Score, rows)}

    meta = ShardMeta(stage="evaluate", stage_version=STAGE_VERSION, inputs=[version, *digests], model=model,
                     config=config)
    ref = computed_or_cached(cat, key, ("scores",), meta, None, compute, "evaluate")
    if report is None:  # skipped: rebuild the report from the stored per-sample scores
        stats = cat.query(f"SELECT subtask, metric, count(*), avg(value) FROM "
                          f"read_parquet('{cat.shard_path('scores', key)}') GROUP BY 1, 2")
        report = mecat_report_from_scores(stats, list(files), ref_root, metrics)
    notes = [f"Sentence embeddings: {sbert_name} ({sbert_dir}).", checker_note + "."] if uses_sbert else []
    return {"eval_id": ref.key, "report": report, "notes": notes}


@task(name="score-items", cache_policy=NO_CACHE)
def score_items_task(cfg: Config, version: str, subtask: str, path: Path, model_name: str, judge: str) -> dict:
    """Entailment or IFEval answers of one file against the version's kept items."""
    cat = open_catalog(cfg)
    items = entailment_items(cat, version) if subtask == "entailment" else instruction_items(cat, version)
    client = _judge_client(cfg, judge)
    judge_model = client.model if client is not None else "none"
    digest = _digests({subtask: path})
    config = {"model_name": model_name, "subtask": subtask}
    key = shard_key("evaluate", STAGE_VERSION, [version, *digest], model=f"judge:{judge_model}", config=config)
    predictions = load_predictions(path)
    result: ItemResult | None = None
    errors: list[str] = []

    def compute():
        nonlocal result, errors
        if subtask == "entailment":
            labels, errors = classify_answers(client, items, predictions) if client is not None else ({}, [])
            result = score_entailment(key, model_name, version, items, predictions, labels)
        else:
            verdicts, errors = judge_answers(client, items, predictions) if client is not None else (None, [])
            result = score_ifeval(key, model_name, version, items, predictions, verdicts)
        return {"scores": to_table(Score, result.rows)}

    meta = ShardMeta(stage="evaluate", stage_version=STAGE_VERSION, inputs=[version, *digest],
                     model=f"judge:{judge_model}", config=config)
    try:
        ref = computed_or_cached(cat, key, ("scores",), meta, None, compute, f"evaluate:{subtask}")
    finally:
        if client is not None:
            client.close()
    if result is None:  # skipped: the same answers were scored before; rebuild from the stored decisions
        rows = _stored(cat, key)
        if subtask == "entailment":
            result = score_entailment(key, model_name, version, items, predictions, llm_labels_from_rows(rows))
        else:
            verdicts = verdicts_from_rows(rows) if judge_model != "none" else None
            result = score_ifeval(key, model_name, version, items, predictions, verdicts)
    if errors:
        result.notes.append(f"{len(errors)} judge requests failed (first: {errors[0][:160]}); rules decided those")
    unknown = set(predictions) - {it.item_id for it in items}
    if unknown:
        result.notes.append(f"{len(unknown)} answers name items not in {version} (ignored), e.g. {sorted(unknown)[0]}")
    return {"eval_id": ref.key, "result": result, "judge_model": judge_model}


def _item_markdown(model_name: str, subtask: str, out: dict) -> str:
    res: ItemResult = out["result"]
    if subtask == "entailment":
        table = entailment_table_markdown({model_name: res.scores}, title="Audio Entailment.")
    else:
        table = ifeval_table_markdown({model_name: res.scores}, title="IFEval-Audio.")
    decided = ", ".join(f"{k} {v}" for k, v in sorted(res.decided_by.items()))
    lines = [table, "", f"Decided by ({'judge ' + out['judge_model'] if out['judge_model'] != 'none' else 'no judge'}): "
             f"{decided}."]
    lines += [f"- {n}" for n in res.notes]
    return "\n".join(lines) + "\n"


def _cdf(cat: Catalog, keys: list[str], metric: str | None, path: Path, title: str) -> Path | None:
    """Per-sample score CDF by subtask (MECAT Figure 6) from the stored rows, or None when nothing to plot."""
    samples: dict[str, list[float]] = {}
    for key in keys:
        for r in _stored(cat, key):
            if metric is None or r.metric == metric:
                samples.setdefault(r.subtask, []).append(r.value)
    return cdf_plot(samples, path, title, xlabel=metric or "score") if samples else None


@flow(name="evaluate", log_prints=True)
def evaluate_flow(cfg: Config, predictions: Path | None = None, subtask: str | None = None,
                  model_name: str = "model", version: str | None = None, metric: str = "similarity",
                  device: str | None = None, endpoint: str | None = None, model_id: str | None = None,
                  tasks: list[str] | None = None, judge: str = "auto", sbert: str | None = None,
                  error_checker: str = "auto") -> dict:
    cat = open_catalog(cfg)
    version = version or cat.latest_version()
    if version is None or version not in cat.versions():
        raise ValueError(f"dataset {cfg.dataset!r} has no version {version!r}; run `earmark build` first "
                         f"(versions: {', '.join(cat.versions()) or 'none'})")
    if judge not in JUDGE_MODES:
        raise ValueError(f"judge must be one of {', '.join(JUDGE_MODES)}, got {judge!r}")
    metrics = parse_metrics(metric)
    logger = get_run_logger()
    sections: list[str] = []
    if endpoint is not None:
        if predictions is not None:
            raise ValueError("give either --predictions (score existing answers) or --endpoint (ask a model), not both")
        tasks = tasks or ["captions", "qa", "entailment", "ifeval"]
        bad = set(tasks) - {"captions", "qa", "entailment", "ifeval"}
        if bad:
            raise ValueError(f"unknown task(s) {', '.join(sorted(bad))}; use captions, qa, entailment, ifeval")
        if metrics == ["similarity"] and "qa" in tasks:
            tasks = [t for t in tasks if t != "qa"]
            sections.append("QA not run: the similarity metric scores captions only; use --metric date (MECAT).\n")
        model_id = model_id or model_name
        predictions = cat.root / "predictions" / model_name / version
        predictions.mkdir(parents=True, exist_ok=True)
        ran = run_model_task(cfg, version, endpoint, model_id, tasks, predictions)
        if ran["errors"]:
            sections.append(f"{ran['errors']} requests to {model_id} failed for good; their answers are empty and "
                            f"score as misses (see {predictions / 'errors.json'}).\n")
    if predictions is None:
        raise ValueError("nothing to score: give --predictions FILE|DIR or --endpoint URL (a model to run)")
    predictions = Path(predictions)

    # which files score what
    item_files: dict[str, Path] = {}
    if predictions.is_dir():
        item_files = {p.stem: p for p in sorted(predictions.iterdir()) if p.stem in ITEM_SUBTASKS and p.is_file()}
    elif subtask in ITEM_SUBTASKS:
        item_files = {subtask: predictions}
    text_kinds = CAPTION_KINDS if metrics == ["similarity"] else MECAT_SUBTASKS
    text_files: dict[str, Path] = {}
    if not (predictions.is_file() and subtask in ITEM_SUBTASKS):
        try:
            text_files = prediction_files(predictions, subtask, text_kinds)
        except PredictionError:
            if not item_files:
                raise

    eval_keys: list[str] = []
    scores: dict = {}
    cdf_metric = None
    if text_files:
        if metrics == ["similarity"]:
            out = score_task(cfg, version, text_files, model_name, sbert)
            sections.insert(0, report_markdown(model_name, version, out["summaries"]))
        else:
            out = score_mecat_task(cfg, version, text_files, model_name, metrics, device, sbert, error_checker)
            sections.insert(0, out["report"].markdown(f"{model_name} on {cfg.dataset} {version}: MECAT "
                                                      f"{', '.join(metrics)}") + "".join(f"\n{n}" for n in out["notes"]))
            scores["mecat"] = out["report"].to_dict()
            cdf_metric = metrics[0]
            create_table_artifact(key="mecat-scores", description=f"{model_name} on {version}: per group ×100",
                                  table=[{"group": g, "samples": v["n_samples"], "references": v["n_references"],
                                          **{m: round(x, 2) for m, x in v["scores"].items()}}
                                         for g, v in scores["mecat"]["groups"].items()])
        eval_keys.append(out["eval_id"])
    for sub, path in item_files.items():
        out = score_items_task(cfg, version, sub, path, model_name, judge)
        sections.append(_item_markdown(model_name, sub, out))
        scores[sub] = {**out["result"].scores, "decided_by": out["result"].decided_by}
        eval_keys.append(out["eval_id"])
        create_table_artifact(key=f"{sub}-scores", table=[{"metric": k, "value": v} for k, v in
                                                          out["result"].scores.items() if not isinstance(v, dict)],
                              description=f"{model_name} on {version}: {sub}")

    eval_id = eval_keys[0] if len(eval_keys) == 1 else hashlib.sha256("|".join(eval_keys).encode()).hexdigest()[:24]
    reports = cat.root / "reports"
    plot = None
    if text_files:
        plot = _cdf(cat, eval_keys[:1], cdf_metric, reports / f"{eval_id}.cdf.png",
                    f"{model_name} on {version}: per-sample {cdf_metric or 'similarity'}")
    report = "\n".join(sections)
    if plot is not None:
        report += f"\nPer-sample score CDF (MECAT Figure 6 style): {plot}\n"
    path = reports / f"{eval_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report)
    create_markdown_artifact(key="evaluation-report", markdown=report, description=f"{model_name} on {version}")
    logger.info("report written to %s", path)
    result = {"eval_id": eval_id, "eval_keys": eval_keys, "version": version, "report": str(path),
              "markdown": report, "plot": str(plot) if plot else None}
    return result if not scores else {**result, "scores": scores}
