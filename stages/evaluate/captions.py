"""Caption and QA scores against a version's references, with two metric families:
- `similarity` (default): mean SBERT cosine of a caption to its references, a missing clip scores 0.
- MECAT's `date`, `fense`, `bleu` (any comma-separated mix): groups and Score_Cap/Score_QA exactly as
  mecat's evaluate (metrics/mecat_eval.py), against the version's MECAT export directory; QA subtasks
  (the 6 categories, or `qa` for one file holding all of them) are allowed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from earmark.metrics.mecat_eval import MecatReport, evaluate_mecat, groups_for, load_references, metric_keys
from earmark.metrics.similarity import mean_reference_cosine
from earmark.schemas.outcomes import Score
from earmark.stages.evaluate.predictions import load_predictions
from earmark.stages.publish import kept_items
from earmark.storage import Catalog


def caption_references(cat: Catalog, version: str, kind: str) -> dict[str, list[str]]:
    rows = cat.query(
        f"SELECT clip_id, text FROM {version}.captions WHERE kind = ? AND item_id IN "
        f"{kept_items(version)} ORDER BY clip_id, ref_index",
        [kind],
    )
    refs: dict[str, list[str]] = {}
    for clip_id, text in rows:
        refs.setdefault(clip_id, []).append(text)
    return refs


@dataclass(frozen=True)
class KindSummary:
    kind: str
    n_refs: int
    n_predicted: int
    n_missing: int
    n_unknown: int
    mean: float


def score_kind(
    eval_id: str,
    model_name: str,
    version: str,
    kind: str,
    preds: Mapping[str, str],
    refs: Mapping[str, list[str]],
    sbert=None,
) -> tuple[list[Score], KindSummary]:
    """Mean cosine of each prediction to its 3 references; a clip without prediction scores 0."""
    keys = sorted(refs)
    have = [k for k in keys if k in preds and preds[k].strip()]
    sims = mean_reference_cosine([preds[k] for k in have], [refs[k] for k in have], sbert)
    value = dict(zip(have, sims.tolist()))
    rows = [
        Score(
            eval_id=eval_id,
            model_name=model_name,
            dataset_version=version,
            clip_id=k,
            subtask=kind,
            metric="sbert_cosine",
            value=float(value.get(k, 0.0)),
            prediction=preds.get(k, ""),
        )
        for k in keys
    ]
    mean = float(np.mean([r.value for r in rows])) if rows else 0.0
    return rows, KindSummary(kind, len(keys), len(have), len(keys) - len(have), len(set(preds) - set(refs)), mean)


def report_markdown(model_name: str, version: str, summaries: list[KindSummary]) -> str:
    lines = [
        f"# {model_name} on {version} (sentence-embedding similarity ×100)",
        "",
        "| caption kind | score | clips | predicted | missing | unknown keys |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {s.kind} | {100 * s.mean:.1f} | {s.n_refs} | {s.n_predicted} | {s.n_missing} | {s.n_unknown} |"
        for s in summaries
    ]
    return "\n".join(lines) + "\n"


def score_groups(
    eval_id: str,
    model_name: str,
    version: str,
    files: Mapping[str, Path],
    ref_root: Path,
    metrics: list[str],
    sbert=None,
    device: str | None = None,
    reference_cache=None,
    error_checker=None,
) -> tuple[list[Score], MecatReport]:
    """Per-sample rows (subtask = MECAT group, metric = date/date_similarity/…/fense/Bleu_n) and the report."""
    preds = {sub: load_predictions(p) for sub, p in files.items()}
    report, groups = evaluate_mecat(
        preds,
        ref_root,
        metrics,
        sbert=sbert,
        device=device,
        reference_cache=reference_cache,
        error_checker=error_checker,
    )
    rows = [
        Score(
            eval_id=eval_id,
            model_name=model_name,
            dataset_version=version,
            clip_id=key,
            subtask=g.group,
            metric=metric,
            value=float(vals[i]),
            prediction=g.predictions[i],
        )
        for g in groups
        for metric, vals in g.values.items()
        for i, key in enumerate(g.keys)
    ]
    return rows, report


def mecat_report_from_scores(
    stats: list[tuple[str, str, int, float]], subtasks: list[str], ref_root: Path, metrics: list[str]
) -> MecatReport:
    """Rebuild the report from stored (group, metric, count, mean) rows; groups without rows score 0."""
    cols = set(metric_keys(metrics))
    groups: dict[str, dict] = {}
    for sub in subtasks:
        for g in groups_for(sub):
            groups[g] = {"n_samples": 0, "n_references": len(load_references(ref_root, g)), "scores": {}}
    for group, metric, n, mean in stats:
        if group in groups and metric in cols:
            groups[group]["n_samples"] = int(n)
            groups[group]["scores"][metric] = float(mean)
    return MecatReport.from_groups(metrics, groups)
