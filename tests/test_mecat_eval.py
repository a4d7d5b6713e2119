"""metrics.fense and metrics.mecat_eval against mecat 1.1.0's own FENSE path and `mecat.evaluate.evaluate`.

References: a few clips per domain from the mecat wheel, rewritten in the official layout
(caption/<domain>.jsonl[.gz], qa/<domain>.jsonl[.gz]). Network boundaries replaced for both sides: the
FENSE error-checker checkpoint (a tiny rule checker, see test_date) and the SBERT hub name
(paraphrase-TinyBERT-L6-v2 → the local all-MiniLM-L6-v2 wheel).
"""

from __future__ import annotations

import gzip
import json
import os
from importlib.resources import files

import numpy as np
import pandas as pd
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from earmark.metrics.fense import fense_scores  # noqa: E402
from earmark.metrics.mecat_eval import ALL_SUBSETS, MecatReport, evaluate_mecat, load_references  # noqa: E402
from earmark.metrics.similarity import default_sbert_path, load_sbert  # noqa: E402
from test_date import RepetitionChecker, _caption_case  # noqa: E402

CLIPS_PER_DOMAIN = 4
FIELDS = ("long", "short", "speech", "music", "sound", "environment")


@pytest.fixture(scope="module")
def sbert():
    return load_sbert()


@pytest.fixture(scope="module")
def upstream():
    """mecat.DATE with its two downloads (checker checkpoint, SBERT hub name) pointed at local stand-ins."""
    import mecat.DATE as up

    threads = torch.get_num_threads()
    saved = up.RefinedErrorChecker, up.DATEEvaluator

    class LocalEvaluator(saved[1]):
        def __init__(self, *args, **kwargs):
            kwargs["sbert_model"] = str(default_sbert_path())
            super().__init__(*args, **kwargs)

    up.RefinedErrorChecker, up.DATEEvaluator = RepetitionChecker, LocalEvaluator
    try:
        yield up
    finally:
        up.RefinedErrorChecker, up.DATEEvaluator = saved
        torch.set_num_threads(threads)  # importing mecat.DATE pins torch to one thread


@pytest.fixture(scope="module")
def subset(tmp_path_factory):
    """The first clips of each domain (captions) and all their QA pairs, official layout; half gzipped."""
    root = tmp_path_factory.mktemp("mecat_ref")
    wheel = files("mecat") / "reference"
    for i, dom in enumerate(ALL_SUBSETS):
        with gzip.open(str(wheel / "caption" / "test" / f"{dom}.jsonl.gz"), "rt", encoding="utf-8") as fh:
            caps = [json.loads(next(fh)) for _ in range(CLIPS_PER_DOMAIN)]
        clips = {k for line in caps for k in line}
        with gzip.open(str(wheel / "qa" / "test" / f"{dom}.jsonl.gz"), "rt", encoding="utf-8") as fh:
            qa = [obj for line in fh if (obj := json.loads(line)) and next(iter(obj)).rsplit("_", 1)[0] in clips]
        for kind, rows in (("caption", caps), ("qa", qa)):
            (root / kind).mkdir(exist_ok=True)
            text = "".join(json.dumps(r) + "\n" for r in rows)
            if i % 2:
                with gzip.open(root / kind / f"{dom}.jsonl.gz", "wt", encoding="utf-8") as out:
                    out.write(text)
            else:
                (root / kind / f"{dom}.jsonl").write_text(text)
    return root


def _caption_predictions(root) -> dict[str, dict[str, str]]:
    """Per field: mostly another field's first reference; some swapped between clips, generic or erroneous."""
    recs = {k: v for dom in ALL_SUBSETS for k, v in load_caption_file(root, dom).items()}
    keys = sorted(recs)
    other = {
        "long": "short",
        "short": "long",
        "speech": "long",
        "music": "short",
        "sound": "long",
        "environment": "short",
    }
    preds: dict[str, dict[str, str]] = {}
    for f in FIELDS:
        p = {}
        for i, k in enumerate(keys):
            if i % 5 == 0:
                p[k] = recs[keys[(i + 3) % len(keys)]][other[f]][0]
            elif i % 7 == 0:
                p[k] = "Music is playing."
            else:
                p[k] = recs[k][other[f]][0]
        p[keys[1]] = "a dog dog barks barks"
        del p[keys[2]]  # a missing prediction is dropped from its groups, as upstream does
        preds[f] = p
    return preds


def load_caption_file(root, dom) -> dict[str, dict]:
    path = root / "caption" / f"{dom}.jsonl"
    text = path.read_text() if path.exists() else gzip.open(path.with_suffix(".jsonl.gz"), "rt").read()
    return {k: v for line in text.splitlines() for k, v in json.loads(line).items()}


def _qa_predictions(root) -> dict[str, str]:
    out = {}
    for cat in (
        "direct_perception",
        "sound_characteristics",
        "quality_assessment",
        "environment_reasoning",
        "inference_judgement",
        "application_context",
    ):
        refs = load_references(root, cat)
        keys = sorted(refs)
        for i, k in enumerate(keys):
            ans = refs[k][0]
            out[k] = refs[keys[(i + 2) % len(keys)]][0] if i % 3 == 0 else ans.split(".")[0] + "."
    return out


def _official(up_module, task, predicted, root):
    from mecat.evaluate import evaluate

    threads = torch.get_num_threads()
    try:
        frame = evaluate(
            predicted_data=predicted, task=task, metrics=["bleu", "fense", "date"], reference_dir=str(root / task)
        )
    finally:
        torch.set_num_threads(threads)
    return frame.set_index("subtask")


def test_fense_matches_official_per_sample(sbert, upstream):
    cands, refs = _caption_case("long", "short", ("000", "S00", "0M0", "SMA"), 24)
    evaluator = upstream.DATEEvaluator(device="cpu", return_type="fense")
    keys = [f"s{i:05d}" for i in range(len(cands))]
    frame = pd.DataFrame(columns=["sample_id", "field_type", "delta", "similarity", "discrimination", "date"])
    _, frame = evaluator.date_model(
        ref_data={k: {"long": list(r)} for k, r in zip(keys, refs)},
        val_data={k: {"long": [c]} for k, c in zip(keys, cands)},
        group_name="content_long",
        dataframe=frame,
        field_type="long",
    )
    ours = fense_scores(cands, refs, sbert=sbert, error_checker=RepetitionChecker())
    diff = np.abs(ours.astype(np.float64) - frame["similarity"].to_numpy(dtype=np.float64))
    print(f"fense: max |Δ| per sample vs official {diff.max():.2e}")
    assert diff.max() <= 1e-4, f"max |Δ| {diff.max():.2e} at sample {diff.argmax()}"
    assert ours[3] < 0.2 < np.median(ours)  # "music music plays plays loudly" is penalised ×0.1
    cache: dict = {}
    warm = fense_scores(cands, refs, sbert=sbert, error_checker=RepetitionChecker(), reference_cache=cache)
    again = fense_scores(cands, refs, sbert=sbert, error_checker=RepetitionChecker(), reference_cache=cache)
    np.testing.assert_allclose(warm, ours, atol=1e-6)
    np.testing.assert_array_equal(warm, again)


@pytest.mark.parametrize("task", ["caption", "qa"])
def test_aggregate_matches_official_evaluate(task, subset, sbert, upstream):
    if task == "caption":
        predicted = _caption_predictions(subset)
        ours_in = predicted
    else:
        predicted = _qa_predictions(subset)
        ours_in = {"qa": predicted}
    theirs = _official(upstream, task, predicted, subset)
    report, per_sample = evaluate_mecat(
        ours_in, subset, ("date", "fense", "bleu"), sbert=sbert, error_checker=RepetitionChecker()
    )
    total = "score_caption" if task == "caption" else "score_qa"
    assert total in theirs.index and total in report.aggregate
    worst = 0.0
    for group, row in theirs.iterrows():
        mine = report.aggregate[total] if group == total else report.groups[group]["scores"]
        if group != total:
            assert report.groups[group]["n_samples"] == row["num_samples"], group
        for metric in ("Bleu_1", "Bleu_4", "fense", "date"):
            worst = max(worst, abs(mine[metric] - float(row[metric])))
    print(f"{task}: max |Δ| vs official {worst:.2e}")
    assert worst <= 1e-4, f"max |Δ| {worst:.2e}"
    # meaningful: groups differ, DATE ≠ FENSE, and the ×100 report carries the aggregate
    dates = [v["scores"]["date"] for v in report.groups.values()]
    assert np.ptp(dates) > 0.02
    assert report.to_dict()["aggregate"][total]["date"] == pytest.approx(100 * report.aggregate[total]["date"])
    md = report.markdown("t")
    assert ("Score_Cap" if task == "caption" else "Score_QA") in md
    assert sum(len(g.keys) for g in per_sample) == sum(v["n_samples"] for v in report.groups.values())


def test_partial_subtasks_have_no_aggregate(subset, sbert):
    preds = {"long": {k: "a man speaks while music plays" for k in load_references(subset, "content_long")}}
    report, _ = evaluate_mecat(preds, subset, ("fense", "bleu"), sbert=sbert)
    assert set(report.groups) == {"content_long"} and report.aggregate == {}
    assert report.metrics == ["fense", "Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4"]
    assert "| fense |" in report.markdown() and "—" in report.markdown()
    # an evaluated group without any sample counts as 0 in Score_Cap (upstream rule)
    groups = {
        g: {"n_samples": 1, "scores": {"date": 0.5}}
        for g in (
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
    }
    groups["pure_music"] = {"n_samples": 0, "scores": {"date": 0.0}}
    agg = MecatReport.from_groups(["date"], groups).aggregate["score_caption"]["date"]
    assert agg == pytest.approx(0.5 - 0.4 * 0.3 * 0.25)


def test_input_errors(subset, tmp_path):
    with pytest.raises(ValueError, match="unknown MECAT metric"):
        evaluate_mecat({"long": {}}, subset, ("cider",))
    with pytest.raises(ValueError, match="unknown MECAT subtask"):
        evaluate_mecat({"captions": {}}, subset, ("bleu",))
    with pytest.raises(FileNotFoundError, match="neither caption/ nor qa/"):
        load_references(tmp_path, "content_long")


def test_evaluate_stage_rows_and_rebuilt_report(subset, sbert, tmp_path):
    """earmark.stages.evaluate: per-sample Score rows per group/metric, and the report rebuilt from them (cache skip)."""
    from earmark.stages.evaluate.captions import mecat_report_from_scores, score_groups
    from earmark.stages.evaluate.predictions import MECAT_SUBTASKS, prediction_files

    preds = _caption_predictions(subset)
    (tmp_path / "long.jsonl").write_text("".join(json.dumps({k: v}) + "\n" for k, v in preds["long"].items()))
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps({k: v}) + "\n" for k, v in _qa_predictions(subset).items()))
    files = prediction_files(tmp_path, None, MECAT_SUBTASKS)
    assert set(files) == {"long", "qa"}
    rows, report = score_groups("e1", "m", "v0001", files, subset, ["date", "bleu"], sbert)
    assert {r.metric for r in rows} == {
        "date",
        "date_similarity",
        "date_discrimination",
        *[f"Bleu_{n}" for n in range(1, 5)],
    }
    assert {r.subtask for r in rows} == {"content_long", *report.groups} and "score_qa" in report.aggregate
    stats: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        stats.setdefault((r.subtask, r.metric), []).append(r.value)
    rebuilt = mecat_report_from_scores(
        [(g, m, len(v), float(np.mean(v))) for (g, m), v in stats.items()], list(files), subset, ["date", "bleu"]
    )
    assert rebuilt.groups.keys() == report.groups.keys()
    assert rebuilt.aggregate["score_qa"]["date"] == pytest.approx(report.aggregate["score_qa"]["date"], abs=1e-6)
    assert rebuilt.groups["content_long"]["n_samples"] == report.groups["content_long"]["n_samples"] == 4 * 8 - 1


def test_mecat_score_cli_writes_per_sample_details(tmp_path, capsys):
    from earmark.cli.main import main

    refs = {
        "c1": ["a dog barks twice", "a dog is barking", "barking of a dog"],
        "c2": ["rain falls on a roof", "steady rain on a tin roof", "heavy rainfall"],
        "c3": ["a man speaks", "a male voice talks", "a man is talking"],
    }
    (tmp_path / "ref" / "caption").mkdir(parents=True)
    (tmp_path / "ref" / "caption" / "00A.jsonl").write_text(
        "\n".join(json.dumps({k: {"long": v, "domain": "00A"}}) for k, v in refs.items()) + "\n"
    )
    preds = tmp_path / "long.csv"
    preds.write_text("c1,a dog barks\nc2,rain on a roof\nc3,music plays\n")
    rc = main(
        [
            "mecat-score",
            "-p",
            str(preds),
            "--subtask",
            "long",
            "--references",
            str(tmp_path / "ref"),
            "--metric",
            "date,bleu",
            "--details",
            str(tmp_path / "d.jsonl"),
            "--error-checker",
            "off",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "| long |" in out and "FENSE error checker: off (not requested)" in out
    rows = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert [r["key"] for r in rows] == ["c1", "c2", "c3"] and all(r["group"] == "content_long" for r in rows)
    by_key = {r["key"]: r for r in rows}
    assert by_key["c3"]["date_similarity"] < by_key["c1"]["date_similarity"]
    assert set(rows[0]) >= {"date", "date_similarity", "date_discrimination", "Bleu_1", "Bleu_4", "prediction"}
