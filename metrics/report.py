"""Markdown result tables in the layout of the benchmark papers, and per-sample score CDF plots.

- `caption_table_markdown`: MECAT Table 2 — a row per model; Systemic (long, short), Content-specific
  (speech / music / sound, each pure and mixed), Content-unrelated (environment), Overall.
- `qa_table_markdown`: MECAT Table 3 — a row per QA sub-category grouped as Perception / Analysis /
  Reasoning, a column per model, Score_QA last.
- `entailment_table_markdown`: Audio Entailment Tables 3–4 — ACC, P, R, F1, EACC, NACC, CACC per model.
- `ifeval_table_markdown`: IFEval-Audio Table 1 — SCR / IFR / OSR per dimension, overall IFR last.
- `cdf_plot`: MECAT Figure 6 — empirical CDFs of per-sample scores, one curve per group.

Scores come in as fractions in [0, 1] (what metrics/ returns); MECAT tables print them ×100 like the
paper, the others keep the papers' fractions. The best value of each column (or row) is bold when there
are several models; a missing value prints as "–".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

MISSING = "–"

# (key, header, group) in Table 2's column order; keys are mecat-evaluate's subtask names.
CAPTION_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("content_long", "Long", "Systemic"),
    ("content_short", "Short", "Systemic"),
    ("pure_speech", "Speech pure", "Content-specific"),
    ("mixed_speech", "Speech mixed", "Content-specific"),
    ("pure_music", "Music pure", "Content-specific"),
    ("mixed_music", "Music mixed", "Content-specific"),
    ("pure_sound", "Sound pure", "Content-specific"),
    ("mixed_sound", "Sound mixed", "Content-specific"),
    ("environment", "Env", "Content-unrelated"),
    ("score_caption", "Overall", "Overall"),
)
_CAPTION_ALIASES = {"long": "content_long", "short": "content_short", "overall": "score_caption"}

# (key, abbreviation, category) in Table 3's row order.
QA_ROWS: tuple[tuple[str, str, str], ...] = (
    ("direct_perception", "DP", "Perception"),
    ("sound_characteristics", "SC", "Analysis"),
    ("quality_assessment", "QAS", "Analysis"),
    ("environment_reasoning", "ER", "Reasoning"),
    ("inference_judgement", "IJ", "Reasoning"),
    ("application_context", "AC", "Reasoning"),
)
_QA_ALIASES = {"overall": "score_qa", "inference_judgment": "inference_judgement"}

ENTAILMENT_COLUMNS = ("ACC", "P", "R", "F1", "EACC", "NACC", "CACC")
IFEVAL_DIMENSIONS = ("Content", "Capitalization", "Symbol", "List Structure", "Length", "Format")
IFEVAL_METRICS = ("SCR", "IFR", "OSR")


def _fmt(value: float | None, scale: float, digits: int, bold: bool = False) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return MISSING
    text = f"{value * scale:.{digits}f}"
    return f"**{text}**" if bold else text


def _best(values: Sequence[float | None]) -> float | None:
    """The value to bold: the maximum, only when at least two are present (one model has no 'best')."""
    present = [v for v in values if v is not None and not np.isnan(v)]
    return max(present) if len(present) > 1 else None


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], n_text: int) -> str:
    align = [":--"] * n_text + ["--:"] * (len(header) - n_text)
    return "\n".join([_row(header), _row(align), *(_row(r) for r in rows)]) + "\n"


def _canonical(scores: Mapping[str, float | None], aliases: Mapping[str, str]) -> dict[str, float | None]:
    return {aliases.get(k, k): (None if v is None else float(v)) for k, v in scores.items()}


def mecat_caption_overall(s: Mapping[str, float | None]) -> float | None:
    """Score_Cap as mecat-evaluate's README defines it; None when a part is missing.

    0.4·(0.8·long + 0.2·short) + 0.4·(0.6·speech + 0.3·music + 0.1·sound) + 0.2·environment, where
    speech/music/sound are the means of their pure and mixed scores. (The paper's Table 2 'Overall'
    is within ~1.5 points of this for its models; the paper does not print its formula.)
    """
    need = [k for k, _, _ in CAPTION_COLUMNS[:-1]]
    if any(s.get(k) is None for k in need):
        return None
    pair = {c: (s[f"pure_{c}"] + s[f"mixed_{c}"]) / 2 for c in ("speech", "music", "sound")}
    systemic = 0.8 * s["content_long"] + 0.2 * s["content_short"]
    content = 0.6 * pair["speech"] + 0.3 * pair["music"] + 0.1 * pair["sound"]
    return 0.4 * systemic + 0.4 * content + 0.2 * s["environment"]


def caption_table_markdown(
    scores: Mapping[str, Mapping[str, float | None]],
    *,
    model_types: Mapping[str, str] | None = None,
    title: str | None = "Model performance (DATE %) on MECAT-Caption.",
) -> str:
    """MECAT Table 2 from {model: {subtask: fraction}}.

    Subtask keys are mecat-evaluate's (content_long, content_short, pure_speech, mixed_speech, pure_music,
    mixed_music, pure_sound, mixed_sound, environment, score_caption); long/short/overall are accepted
    too. A missing Overall is computed with `mecat_caption_overall` when every part is present.
    `model_types` adds the paper's Type column (e.g. Caption-Only, LALM).
    """
    rows_in = {m: _canonical(s, _CAPTION_ALIASES) for m, s in scores.items()}
    for s in rows_in.values():
        if s.get("score_caption") is None:
            s["score_caption"] = mecat_caption_overall(s)
    keys = [k for k, _, _ in CAPTION_COLUMNS]
    best = {k: _best([s.get(k) for s in rows_in.values()]) for k in keys}
    lead = ["Type", "Model"] if model_types else ["Model"]
    header = lead + [h for _, h, _ in CAPTION_COLUMNS]
    rows = []
    for model, s in rows_in.items():
        first = [model_types.get(model, ""), model] if model_types else [model]
        rows.append(first + [_fmt(s.get(k), 100, 1, s.get(k) is not None and s.get(k) == best[k]) for k in keys])
    groups = (
        "Column groups — Systemic: Long, Short · Content-specific: Speech, Music, Sound on pure and "
        "mixed domains · Content-unrelated: Env (environment/acoustics) · Overall."
    )
    head = f"**{title}** " if title else ""
    return f"{head}{groups}\n\n" + _table(header, rows, len(lead))


def qa_table_markdown(
    scores: Mapping[str, Mapping[str, float | None]], *, title: str | None = "Model performance (DATE %) on MECAT-QA."
) -> str:
    """MECAT Table 3 from {model: {qa_category: fraction}}: a row per sub-category, a column per model.

    Score_QA is the model's `score_qa`/`overall` when given, else the mean of the six categories
    (mecat-evaluate's definition), or missing when a category is.
    """
    cols = {m: _canonical(s, _QA_ALIASES) for m, s in scores.items()}
    for s in cols.values():
        if s.get("score_qa") is None:
            parts = [s.get(k) for k, _, _ in QA_ROWS]
            s["score_qa"] = None if any(p is None for p in parts) else float(np.mean(parts))
    models = list(cols)
    rows = []
    previous = None
    for key, abbr, category in (*QA_ROWS, ("score_qa", "Score_QA", "")):
        values = [cols[m].get(key) for m in models]
        top = _best(values)
        shown = category if category != previous else ""
        previous = category
        rows.append([shown, abbr, *(_fmt(v, 100, 1, v is not None and v == top) for v in values)])
    legend = (
        "Sub-categories — DP: Direct Perception; SC: Sound Characteristics; QAS: Quality Assessment; "
        "ER: Environment Reasoning; IJ: Inference & Judgement; AC: Application Context."
    )
    head = f"**{title}** " if title else ""
    return f"{head}{legend}\n\n" + _table(["Category", "Sub-category", *models], rows, 2)


def entailment_table_markdown(
    scores: Mapping[str, Mapping[str, float | int | None]],
    *,
    data: str | None = None,
    title: str | None = "Audio Entailment performance.",
) -> str:
    """Audio Entailment table from {model: metrics.entailment.entailment_scores(...)}.

    Columns ACC, P, R, F1 and per-class accuracy EACC/NACC/CACC (fractions, 4 decimals as in the
    paper), then n and unparsed when present. `data` (e.g. "CLE", "ACE") adds the paper's Data column.
    """
    models = list(scores)
    extra = [c for c in ("n", "unparsed") if any(c in scores[m] for m in models)]
    best = {c: _best([_num(scores[m].get(c)) for m in models]) for c in ENTAILMENT_COLUMNS}
    lead = ["Data", "Model"] if data else ["Model"]
    rows = []
    for m in models:
        s = scores[m]
        cells = [
            _fmt(_num(s.get(c)), 1, 4, _num(s.get(c)) is not None and _num(s.get(c)) == best[c])
            for c in ENTAILMENT_COLUMNS
        ]
        cells += [str(s[c]) if s.get(c) is not None else MISSING for c in extra]
        rows.append(([data] if data else []) + [m] + cells)
    head = f"**{title}** EACC/NACC/CACC: accuracy on entailment / neutral / contradiction items.\n\n" if title else ""
    return head + _table([*lead, *ENTAILMENT_COLUMNS, *extra], rows, len(lead))


def ifeval_table_markdown(
    scores: Mapping[str, Mapping], *, title: str | None = "IFEval-Audio performance across dimensions."
) -> str:
    """IFEval-Audio Table 1 from {model: metrics.ifeval.ifeval_scores(...)}.

    Rows Dimension × (SCR, IFR, OSR), a column per model, and a last row with the overall IFR. A
    dimension no model has records for is left out; SCR/OSR without judge verdicts print as "–".
    """
    models = list(scores)
    per_dim = {m: scores[m].get("per_dimension", {}) for m in models}
    rows = []
    for dim in IFEVAL_DIMENSIONS:
        if not any(dim in per_dim[m] for m in models):
            continue
        for i, metric in enumerate(IFEVAL_METRICS):
            values = [_num(per_dim[m].get(dim, {}).get(metric)) for m in models]
            top = _best(values)
            rows.append([dim if i == 0 else "", metric, *(_fmt(v, 1, 2, v is not None and v == top) for v in values)])
    overall = [_num(scores[m].get("overall", {}).get("IFR")) for m in models]
    top = _best(overall)
    rows.append(
        ["**Overall Instruction-Following Rate**", "IFR", *(_fmt(v, 1, 2, v is not None and v == top) for v in overall)]
    )
    head = (
        (
            f"**{title}** SCR: semantic correctness (LLM judge) · IFR: instruction following (rule check) · "
            "OSR: both.\n\n"
        )
        if title
        else ""
    )
    return head + _table(["Dimension", "Metric", *models], rows, 2)


def _num(value) -> float | None:
    return None if value is None else float(value)


def cdf_plot(
    samples: Mapping[str, np.ndarray | Sequence[float]], path: str | Path, title: str, *, xlabel: str = "score"
) -> Path:
    """Write a PNG of the empirical CDF of each group's per-sample scores (MECAT Figure 6).

    Each curve's legend gives its n and median, and a dotted line marks the median: the horizontal
    gap between curves is how well the metric separates the groups. Empty groups are skipped.
    """
    # The Agg canvas on a bare Figure: no pyplot global state, so safe in threads and headless workers.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups = {name: np.sort(np.asarray(v, dtype=float).ravel()) for name, v in samples.items()}
    groups = {name: v[np.isfinite(v)] for name, v in groups.items()}
    groups = {name: v for name, v in groups.items() if v.size}
    if not groups:
        raise ValueError(f"cdf_plot({title!r}): every sample group is empty; nothing to plot")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(6.4, 4.4), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name, v in groups.items():
        y = np.arange(1, v.size + 1) / v.size
        median = float(np.median(v))
        (line,) = ax.step(
            np.concatenate([[v[0]], v]),
            np.concatenate([[0.0], y]),
            where="post",
            linewidth=2,
            label=f"{name} (n={v.size}, median={median:.2f})",
        )
        ax.axvline(median, color=line.get_color(), linestyle=":", linewidth=1)
    ax.axhline(0.5, color="0.6", linewidth=0.8)
    ax.set(title=title, xlabel=xlabel, ylabel="cumulative fraction of samples", ylim=(0, 1.02))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path
