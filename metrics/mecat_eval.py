"""MECAT's Score_Cap and Score_QA, aggregated as mecat 1.1.0's `evaluate.py` does (the code wins).

Groups (mecat/utils.py): a caption group reads one caption field from the domain files of its subsets;
a QA group is one question category over all domains (all difficulty levels unless `levels` is given).
Per group, each metric is the plain mean over the samples that have both a prediction and a reference
(upstream intersects the keys: a missing prediction is dropped, not scored 0). DATE uses the group's δ
(`metrics.date.GROUP_DELTA`) and idf over the group; FENSE and BLEU are per sample.

    Score_Cap = 0.4·(0.8·long + 0.2·short)
              + 0.4·(0.6·speech + 0.3·music + 0.1·sound)      with x = (pure_x + mixed_x) / 2
              + 0.2·environment
    Score_QA  = mean of the 6 category scores

Upstream only reports Score_Cap when all 9 caption groups were evaluated (all 6 caption fields
predicted) and Score_QA when all 6 categories were; a group that was evaluated but has no sample scores
0 and still counts in the aggregate. Both rules are kept. Upstream rounds a group's DATE/FENSE mean to 4
decimals; here it is not rounded (|Δ| ≤ 5e-5).
BLEU is upstream's `PyTorchBleuScorer`: per-sentence BLEU-1..4 on lower-cased whitespace tokens, averaged.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from earmark.metrics.bleu import bleu
from earmark.metrics.date import GROUP_DELTA, QA_GROUPS, date_scores
from earmark.metrics.fense import fense_scores

ALL_SUBSETS = ("000", "00A", "0M0", "0MA", "S00", "S0A", "SM0", "SMA")
MIXED_SUBSETS = ("SMA", "SM0", "S0A", "0MA")
# mecat.utils.CaptionEvaluationConfig.GROUP_CONFIGS: group -> (caption field, domain subsets)
CAPTION_GROUPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "content_long": ("long", ALL_SUBSETS),
    "content_short": ("short", ALL_SUBSETS),
    "pure_speech": ("speech", ("S00",)),
    "mixed_speech": ("speech", MIXED_SUBSETS),
    "pure_music": ("music", ("0M0",)),
    "mixed_music": ("music", MIXED_SUBSETS),
    "pure_sound": ("sound", ("00A",)),
    "mixed_sound": ("sound", MIXED_SUBSETS),
    "environment": ("environment", ALL_SUBSETS),
}
CAPTION_FIELDS = ("long", "short", "speech", "music", "sound", "environment")
QA_LEVELS = ("basic", "intermediate", "advanced", "complex")
METRICS = ("date", "fense", "bleu")
BLEU_KEYS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4")
# column order of the paper's Table 2 / Table 3
_CAPTION_COLUMNS = (
    "content_long",
    "content_short",
    "pure_speech",
    "mixed_speech",
    "pure_music",
    "mixed_music",
    "pure_sound",
    "mixed_sound",
    "environment",
)
_HEADERS = {
    "content_long": "long",
    "content_short": "short",
    "pure_speech": "speech (pure)",
    "mixed_speech": "speech (mixed)",
    "pure_music": "music (pure)",
    "mixed_music": "music (mixed)",
    "pure_sound": "sound (pure)",
    "mixed_sound": "sound (mixed)",
    "environment": "environment",
}


def metric_keys(metrics: Sequence[str]) -> list[str]:
    """Upstream's result columns for the selected metrics (bleu → Bleu_1..4), in upstream order."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown MECAT metric(s) {', '.join(unknown)}; choose from {', '.join(METRICS)}")
    out: list[str] = []
    for m in METRICS:
        if m in metrics:
            out += list(BLEU_KEYS) if m == "bleu" else [m]
    return out


def groups_for(subtask: str) -> list[str]:
    """Evaluation groups a prediction subtask feeds: a caption field, a QA category, or "qa" (all six)."""
    if subtask in CAPTION_FIELDS:
        return [g for g, (f, _) in CAPTION_GROUPS.items() if f == subtask]
    if subtask in QA_GROUPS:
        return [subtask]
    if subtask == "qa":
        return list(QA_GROUPS)
    raise ValueError(
        f"unknown MECAT subtask {subtask!r}; use a caption field ({', '.join(CAPTION_FIELDS)}), "
        f"a QA category ({', '.join(QA_GROUPS)}) or 'qa'"
    )


def _read_domain(path_stem: Path) -> tuple[tuple[str, dict], ...]:
    for path, gz in ((path_stem.with_suffix(".jsonl.gz"), True), (path_stem.with_suffix(".jsonl"), False)):
        if path.exists():
            stat = path.stat()
            return _parsed_domain(str(path), stat.st_mtime_ns, stat.st_size, gz)
    return ()  # upstream skips a missing domain file


@functools.lru_cache(maxsize=64)
def _parsed_domain(path: str, mtime_ns: int, size: int, gz: bool) -> tuple[tuple[str, dict], ...]:
    """One domain file's (key, record) pairs, parsed once per process and file version: every QA group reads all
    eight QA files, and the caption groups share theirs (the full test set's inputs were parsed 6× over: 7 s of a
    cold DATE run's input reading). The MECAT test set's 16 files hold about 180 MB of the process while cached.
    Callers copy what they keep; the records are not to be changed."""
    opener = gzip.open if gz else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return tuple(kv for line in fh if line.strip() for kv in json.loads(line).items())


def load_references(root: Path | str, group: str, levels: Sequence[str] | None = None) -> dict[str, list[str]]:
    """{key: references} of one group from `root/caption|qa/<domain>.jsonl[.gz]` (the official layout)."""
    root = Path(root)
    if not (root / "caption").is_dir() and not (root / "qa").is_dir():
        raise FileNotFoundError(
            f"{root} holds neither caption/ nor qa/: give a MECAT reference directory "
            "(an earmark export data/<dataset>/exports/<version>/ or mecat's reference/…/test)"
        )
    refs: dict[str, list[str]] = {}
    if group in CAPTION_GROUPS:
        fld, subsets = CAPTION_GROUPS[group]
        for dom in subsets:
            for key, value in _read_domain(root / "caption" / dom):
                if fld in value:
                    refs[key] = [value[fld]] if isinstance(value[fld], str) else list(value[fld])
        return refs
    if group not in QA_GROUPS:
        raise ValueError(f"unknown MECAT group {group!r}")
    wanted = tuple(levels or QA_LEVELS)
    for dom in ALL_SUBSETS:
        for key, value in _read_domain(root / "qa" / dom):
            if value.get("category") == group and value.get("difficulty") in wanted:
                ans = value.get("answer", "")
                refs[key] = [ans] if isinstance(ans, str) else list(ans)
    return refs


def wheel_reference_root(split: str = "test") -> Path:
    """A directory in the official layout (caption/, qa/) pointing at the `mecat` wheel's references."""
    import importlib.util
    import tempfile

    spec = importlib.util.find_spec("mecat")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the MECAT references ship in the `mecat` wheel: pip install mecat==1.1.0, "
            "or give --references DIR (a directory with caption/ and qa/)"
        )
    ref = Path(next(iter(spec.submodule_search_locations))) / "reference"
    root = Path(tempfile.mkdtemp(prefix=f"mecat_{split}_"))
    for kind in ("caption", "qa"):
        if not (ref / kind / split).is_dir():
            raise FileNotFoundError(f"the installed mecat wheel has no {kind}/{split} references under {ref}")
        (root / kind).symlink_to(ref / kind / split, target_is_directory=True)
    return root


def write_details(groups: Sequence[GroupScores], path: Path | str) -> Path:
    """Per-sample details as JSONL: {group, key, prediction, <metric>: value, …} (written atomically)."""
    import os

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for g in groups:
            for i, key in enumerate(g.keys):
                row = {
                    "group": g.group,
                    "key": key,
                    "prediction": g.predictions[i],
                    **{m: round(float(v[i]), 6) for m, v in g.values.items()},
                }
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


@dataclass
class GroupScores:
    """Per-sample scores of one group (0–1); `values` also holds DATE's components (date_similarity, …)."""

    group: str
    keys: list[str]
    predictions: list[str]
    values: dict[str, np.ndarray]
    n_references: int
    metrics: list[str] = field(default_factory=list)

    def means(self) -> dict[str, float]:
        return {m: float(self.values[m].mean()) if len(self.keys) else 0.0 for m in self.metrics}


def _official_bleu(cand: str, refs: list[str]) -> list[float]:
    if not cand.split():  # upstream divides by zero here; an empty prediction scores 0
        return [0.0] * len(BLEU_KEYS)
    got = bleu([cand], [refs or [""]], average="sentence", tokenize=lambda s: s.lower().split())
    return [got[k] for k in BLEU_KEYS]


def score_group(
    group: str,
    predictions: Mapping[str, str],
    references: Mapping[str, list[str]],
    metrics: Sequence[str],
    *,
    sbert=None,
    device: str | None = None,
    error_checker: Callable[[list[str]], object] | None = None,
    batch_size: int = 32,
    reference_cache: dict | None = None,
) -> GroupScores:
    keys = sorted(set(predictions) & set(references))
    cands = [predictions[k] for k in keys]
    refs = [list(references[k]) for k in keys]
    values: dict[str, np.ndarray] = {}
    if keys and "date" in metrics:
        d = date_scores(
            cands,
            refs,
            delta=GROUP_DELTA[group],
            sbert=sbert,
            error_checker=error_checker,
            device=device,
            batch_size=batch_size,
            reference_cache=reference_cache,
        )
        values.update(date=d.date, date_similarity=d.similarity, date_discrimination=d.discrimination)
    if keys and "fense" in metrics:
        values["fense"] = fense_scores(
            cands,
            refs,
            sbert=sbert,
            error_checker=error_checker,
            device=device,
            batch_size=batch_size,
            reference_cache=reference_cache,
        )
    if keys and "bleu" in metrics:
        per = np.asarray([_official_bleu(c, r) for c, r in zip(cands, refs)], dtype=np.float64)
        values.update({k: per[:, i] for i, k in enumerate(BLEU_KEYS)})
    return GroupScores(group, keys, cands, values, len(references), metric_keys(metrics))


def aggregate(group_means: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Score_Cap / Score_QA per metric, only when all their groups are present (mecat evaluate.py)."""
    out: dict[str, dict[str, float]] = {}
    if set(_CAPTION_COLUMNS) <= set(group_means):
        metrics = list(group_means["content_long"])
        out["score_caption"] = {}
        for m in metrics:
            g = {k: group_means[k].get(m, 0.0) for k in _CAPTION_COLUMNS}
            systematic = 0.8 * g["content_long"] + 0.2 * g["content_short"]
            focused = (
                0.6 * (g["pure_speech"] + g["mixed_speech"]) / 2
                + 0.3 * (g["pure_music"] + g["mixed_music"]) / 2
                + 0.1 * (g["pure_sound"] + g["mixed_sound"]) / 2
            )
            out["score_caption"][m] = 0.4 * systematic + 0.4 * focused + 0.2 * g["environment"]
    if set(QA_GROUPS) <= set(group_means):
        metrics = list(group_means[QA_GROUPS[0]])
        out["score_qa"] = {m: float(np.mean([group_means[q].get(m, 0.0) for q in QA_GROUPS])) for m in metrics}
    return out


@dataclass
class MecatReport:
    """Group and aggregate scores on the 0–1 scale; `to_dict()`/`markdown()` give ×100 like the paper."""

    metrics: list[str]
    groups: dict[str, dict]  # group -> {"n_samples", "n_references", "scores": {metric: mean}}
    aggregate: dict[str, dict[str, float]]

    @classmethod
    def from_groups(cls, metrics: Sequence[str], groups: Mapping[str, dict]) -> MecatReport:
        cols = metric_keys(metrics)
        full = {
            g: {
                "n_samples": v["n_samples"],
                "n_references": v.get("n_references", 0),
                "scores": {m: float(v["scores"].get(m, 0.0)) for m in cols},
            }
            for g, v in groups.items()
        }
        return cls(cols, full, aggregate({g: v["scores"] for g, v in full.items()}))

    def to_dict(self, scale: float = 100.0) -> dict:
        return {
            "metrics": self.metrics,
            "groups": {
                g: {**v, "scores": {m: scale * s for m, s in v["scores"].items()}} for g, v in self.groups.items()
            },
            "aggregate": {a: {m: scale * s for m, s in v.items()} for a, v in self.aggregate.items()},
        }

    def _table(self, columns: list[str], total: str, total_header: str) -> list[str]:
        cols = [c for c in columns if c in self.groups]
        if not cols:
            return []
        lines = [
            "| metric | " + " | ".join(_HEADERS.get(c, c) for c in cols) + f" | {total_header} |",
            "|---" * (len(cols) + 2) + "|",
        ]
        for m in self.metrics:
            cells = [f"{100 * self.groups[c]['scores'][m]:.1f}" for c in cols]
            agg = self.aggregate.get(total, {}).get(m)
            lines.append(f"| {m} | " + " | ".join(cells) + f" | {'—' if agg is None else f'{100 * agg:.1f}'} |")
        counts = [f"{self.groups[c]['n_samples']}/{self.groups[c]['n_references']}" for c in cols]
        lines.append("| scored/refs | " + " | ".join(counts) + " | |")
        return lines

    def markdown(self, title: str = "MECAT evaluation") -> str:
        lines = [f"# {title} (×100)", ""]
        cap = self._table(list(_CAPTION_COLUMNS), "score_caption", "Score_Cap")
        if cap:
            lines += ["## Captioning (Table 2 layout)", "", *cap, ""]
        qa = self._table(list(QA_GROUPS), "score_qa", "Score_QA")
        if qa:
            lines += ["## Open QA (Table 3 layout)", "", *qa, ""]
        lines.append(
            "Score_Cap/Score_QA need every group of their task (—: not all evaluated); an evaluated group "
            "without samples counts as 0, as in mecat. scored/refs: samples with a prediction / references."
        )
        return "\n".join(lines) + "\n"


def evaluate_mecat(
    predictions: Mapping[str, Mapping[str, str]],
    reference_root: Path | str,
    metrics: Sequence[str] = ("date",),
    *,
    sbert=None,
    device: str | None = None,
    error_checker: Callable[[list[str]], object] | None = None,
    batch_size: int = 32,
    levels: Sequence[str] | None = None,
    reference_cache: dict | None = None,
    on_group: Callable[[GroupScores], None] | None = None,
) -> tuple[MecatReport, list[GroupScores]]:
    """Score {subtask: {key: text}} against a MECAT reference directory; returns the report and per-sample scores."""
    metric_keys(metrics)  # validate before any model load
    if sbert is None and ("date" in metrics or "fense" in metrics):
        from earmark.metrics.similarity import load_sbert

        sbert = load_sbert()
    results: list[GroupScores] = []
    for subtask, preds in predictions.items():
        for group in groups_for(subtask):
            refs = load_references(reference_root, group, levels)
            res = score_group(
                group,
                preds,
                refs,
                metrics,
                sbert=sbert,
                device=device,
                error_checker=error_checker,
                batch_size=batch_size,
                reference_cache=reference_cache,
            )
            results.append(res)
            if on_group is not None:
                on_group(res)
    groups = {r.group: {"n_samples": len(r.keys), "n_references": r.n_references, "scores": r.means()} for r in results}
    return MecatReport.from_groups(metrics, groups), results
