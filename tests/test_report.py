"""Result tables in the papers' layouts and the per-sample CDF plot."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from earmark.metrics.entailment import entailment_scores
from earmark.metrics.report import (
    caption_table_markdown,
    cdf_plot,
    entailment_table_markdown,
    ifeval_table_markdown,
    mecat_caption_overall,
    qa_table_markdown,
)

CAPTION_KEYS = (
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
# MECAT Table 2 rows (DATE %), as fractions.
PENGI = dict(zip(CAPTION_KEYS, np.array([43.5, 46.8, 27.2, 29.5, 29.3, 13.1, 42.8, 14.6, 7.1]) / 100))
QWEN7B = dict(zip(CAPTION_KEYS, np.array([61.1, 56.5, 39.9, 40.9, 32.1, 30.9, 50.7, 23.8, 17.9]) / 100))
# MECAT Table 3 columns (DATE %), as fractions.
QA_KEYS = (
    "direct_perception",
    "sound_characteristics",
    "quality_assessment",
    "environment_reasoning",
    "inference_judgement",
    "application_context",
)
KIMI_QA = dict(zip(QA_KEYS, np.array([45.6, 39.2, 18.7, 34.6, 48.9, 41.2]) / 100))
QWEN7B_QA = dict(zip(QA_KEYS, np.array([57.8, 52.9, 39.1, 44.0, 53.2, 50.8]) / 100))


def table_rows(markdown: str) -> list[list[str]]:
    """Cells of each markdown table line (header, alignment and body rows)."""
    return [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("|")
    ]


def test_caption_table_has_table2_columns_and_computes_overall():
    md = caption_table_markdown(
        {"Pengi": PENGI, "Qwen2.5-Omni 7B": {**QWEN7B, "overall": 0.430}},
        model_types={"Pengi": "Caption-Only", "Qwen2.5-Omni 7B": "LALM"},
    )
    header, align, pengi, qwen = table_rows(md)
    assert header == [
        "Type",
        "Model",
        "Long",
        "Short",
        "Speech pure",
        "Speech mixed",
        "Music pure",
        "Music mixed",
        "Sound pure",
        "Sound mixed",
        "Env",
        "Overall",
    ]
    assert align[:2] == [":--", ":--"] and set(align[2:]) == {"--:"}
    assert pengi[:5] == ["Caption-Only", "Pengi", "43.5", "46.8", "27.2"]
    assert (
        qwen[:4] == ["LALM", "Qwen2.5-Omni 7B", "**61.1**", "**56.5**"] and qwen[-1] == "**43.0**"
    )  # given overall wins
    # Pengi's overall comes from mecat-evaluate's weighting: 0.4·44.16 + 0.4·26.24 + 0.2·7.1 = 29.58
    assert pengi[-1] == "29.6" and mecat_caption_overall(PENGI) == pytest.approx(0.2958)
    assert "Systemic" in md and "Content-specific" in md and "Content-unrelated" in md


def test_caption_table_marks_missing_values_and_accepts_short_names():
    partial = {"long": 0.5, "short": 0.25}
    (header, _, row) = table_rows(caption_table_markdown({"tiny": partial}, title=None))
    assert header[0] == "Model" and row[:3] == ["tiny", "50.0", "25.0"]  # one model: nothing bold
    assert row[3:] == ["–"] * 8  # no content scores, so no overall either


def test_qa_table_groups_categories_and_reproduces_paper_score_qa():
    md = qa_table_markdown({"Kimi-Audio": KIMI_QA, "Qwen2.5-Omni 7B": QWEN7B_QA})
    header, _, *body = table_rows(md)
    assert header == ["Category", "Sub-category", "Kimi-Audio", "Qwen2.5-Omni 7B"]
    assert [r[1] for r in body] == ["DP", "SC", "QAS", "ER", "IJ", "AC", "Score_QA"]
    assert [r[0] for r in body] == ["Perception", "Analysis", "", "Reasoning", "", "", ""]
    assert body[2][2:] == ["18.7", "**39.1**"]
    # Table 3's Score_QA is the plain mean of the six categories: 38.0 and 49.6 in the paper.
    assert body[-1][2:] == ["38.0", "**49.6**"]
    without = qa_table_markdown({"m": {k: v for k, v in KIMI_QA.items() if k != "application_context"}})
    assert table_rows(without)[-1][2] == "–" and table_rows(without)[-2][2] == "–"


def test_entailment_table_per_class_columns():
    gold = ["entailment"] * 4 + ["neutral"] * 4 + ["contradiction"] * 4
    good = gold[:10] + ["entailment", None]
    bad = ["entailment"] * 12
    md = entailment_table_markdown(
        {"good": entailment_scores(gold, good), "bad": entailment_scores(gold, bad)}, data="CLE"
    )
    header, _, g, b = table_rows(md)
    assert header == ["Data", "Model", "ACC", "P", "R", "F1", "EACC", "NACC", "CACC", "n", "unparsed"]
    assert g[:3] == ["CLE", "good", "**0.8333**"] and g[6:] == ["**1.0000**", "**1.0000**", "**0.5000**", "12", "1"]
    assert b[2] == "0.3333" and b[6:9] == ["**1.0000**", "0.0000", "0.0000"]


def test_ifeval_table_rows_per_dimension_and_overall():
    def rates(ifr, scr=None, osr=None, n=10):
        return {"n": n, "n_judged": n if scr is not None else 0, "IFR": ifr, "SCR": scr, "OSR": osr}

    scores = {
        "gpt4-audio": {
            "overall": rates(0.68),
            "per_dimension": {"Content": rates(0.60, 0.70, 0.52), "Format": rates(0.92, 0.70, 0.66)},
        },
        "qwen2": {"overall": rates(0.30), "per_dimension": {"Content": rates(0.52), "Length": rates(0.20)}},
    }
    header, _, *body = table_rows(ifeval_table_markdown(scores))
    assert header == ["Dimension", "Metric", "gpt4-audio", "qwen2"]
    assert [r[0] for r in body[::3]][:3] == ["Content", "Length", "Format"]  # paper order, absent ones dropped
    assert body[0] == ["Content", "SCR", "0.70", "–"]  # no judge verdicts for qwen2: SCR is missing
    assert body[1] == ["", "IFR", "**0.60**", "0.52"]
    assert body[3][1:] == ["SCR", "–", "–"] and body[4][2:] == ["–", "0.20"]
    assert body[-1] == ["**Overall Instruction-Following Rate**", "IFR", "**0.68**", "0.30"]


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_cdf_plot_writes_a_readable_png(tmp_path):
    rng = np.random.default_rng(0)
    samples = {
        "Right": rng.beta(6, 3, 300),
        "Safe": rng.beta(4, 4, 300),
        "Wrong": rng.beta(2, 6, 300),
        "empty": np.array([]),
    }
    path = cdf_plot(samples, tmp_path / "figs" / "date_cdf.png", "DATE on captions", xlabel="DATE")
    assert path.is_file() and path.stat().st_size > 20_000  # three curves, legend and text, not a blank canvas
    assert png_size(path) == (768, 528)  # 6.4 × 4.4 in at 120 dpi
    with pytest.raises(ValueError, match="empty"):
        cdf_plot({"none": []}, tmp_path / "x.png", "nothing")
