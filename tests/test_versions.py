"""`earmark versions list|show|diff` on a hand-built catalog with three real versions: the build's publish, a
`rerun --stage filter` after a threshold change (its version says so, not "build"), and a review import."""

from __future__ import annotations

import csv

import pytest

from earmark.cli.main import main
from earmark.flows.rerun import rerun_flow
from earmark.flows.review import review_import_flow
from earmark.queries import versions as vs
from test_review import built  # noqa: F401  (the hand-built catalog, published once as v0001)


@pytest.fixture(scope="module")
def three(built, tmp_path_factory):  # noqa: F811
    cfg, cat, _, first = built
    # every short caption is now too long: rejected (not the long ones: they are the entailment premises, and a
    # hypothesis whose premise QC rejected goes with it)
    strict = cfg.model_copy(update={"filter": cfg.filter.model_copy(update={"max_short_words": 2})})
    second = rerun_flow(strict, "filter")
    sheet = tmp_path_factory.mktemp("sheet") / "sheet.csv"
    with sheet.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["item_table", "item_id", "decision", "new_text", "reviewer"])
        w.writerow(["entailment", "a1:ent:neutral", "reject", "", "bob"])
    third = review_import_flow(strict, sheet)
    assert (first["version"], second["version"], third["version"]) == ("v0001", "v0002", "v0003")
    return cfg, cat


def _run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_labels_say_what_made_each_version(three):
    _, cat = three
    infos = vs.list_versions(cat)
    assert [(v.version, v.label) for v in infos] == [
        ("v0001", "build"),
        ("v0002", "rerun filter from v0001"),
        ("v0003", "review of v0002"),
    ]
    assert infos[0].kept["captions"] > infos[1].kept["captions"]  # the short captions went
    assert infos[2].kept["entailment"] == infos[1].kept["entailment"] - 1  # the rejected hypothesis
    # a rerun published before reruns named themselves: recognised by its run
    assert vs.label("build", "rerun", '{"stage": "synthesize", "items": ["qa"], "base": "v0004"}') == (
        "rerun synthesize (qa) from v0004"
    )


def test_versions_list_show_diff_print_what_a_user_asks(three, capsys):
    cfg, _ = three
    common = ["-d", cfg.dataset, "--data-root", str(cfg.data_root)]
    code, out, _ = _run(capsys, "versions", "list", *common)
    assert code == 0 and "3 version(s)" in out
    rows = [line.split() for line in out.splitlines()[1:]]
    assert rows[0][-2:] == ["captions", "entailment"]  # item tables with rows; qa/instructions have none
    assert rows[1][0] == "v0001" and rows[1][3] == "UTC" and rows[1][4:] == ["build", "9", "6"]
    assert rows[2][4:] == ["rerun", "filter", "from", "v0001", "3", "6"]
    assert rows[3][4:] == ["review", "of", "v0002", "3", "5"]

    code, out, _ = _run(capsys, "versions", "show", *common, "--version", "1")
    assert code == 0 and out.startswith(f"dataset {cfg.dataset} v0001: build; created ")
    table = _section(out, "Rows per table")
    assert table["captions"] == ["12", "9"] and table["entailment"] == ["6", "6"] and table["clips"] == ["4", "–"]
    generators = _section(out, "Prompts and models")
    assert generators["captions"] == ["p", "0" * 16, "hand", "12", "9"]
    qc = _rows(out, "QC: rejections per check")
    assert ["captions", "hallucination", "12", "3"] in qc and ["captions", "length", "12", "0"] in qc
    assert "exports/v0001/README.md" in out and "# rv v0001" in out  # the card publish wrote

    code, out, _ = _run(capsys, "versions", "diff", *common)  # the two latest
    assert code == 0 and out.startswith(f"dataset {cfg.dataset}: v0002 → v0003")
    rows = _section(out, "dataset")
    assert rows["reviews"] == ["1", "0", "0", "0"] and rows["qc"] == ["1", "0", "0", "181"]  # a row per item and check
    assert rows["entailment"] == ["0", "0", "0", "6"]  # the rejected item stays, QC says so
    assert _section(out, "Items every QC check kept")["entailment"] == ["6", "5", "1", "0"]
    code, out, _ = _run(capsys, "versions", "diff", *common, "v0001", "v0002")
    # 8 short captions: a new length verdict, and no source_spread row (only what other checks kept is counted)
    assert _section(out, "dataset")["qc"] == ["0", "8", "6", "173"]
    assert _section(out, "Items every QC check kept")["captions"] == ["9", "3", "6", "0"]  # two were already out
    assert "Changed tables: qc;" in out


def _rows(out: str, title: str) -> list[list[str]]:
    """The indented rows under the line starting with `title` (its header row included)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        rows.append(line.split())
    return rows


def _section(out: str, title: str) -> dict[str, list[str]]:
    return {r[0]: r[1:] for r in _rows(out, title)[1:]}


def test_unknown_version_or_dataset_is_one_line_listing_what_exists(three, capsys):
    cfg, _ = three
    common = ["--data-root", str(cfg.data_root)]
    code, _, err = _run(capsys, "versions", "show", "-d", cfg.dataset, *common, "--version", "v0009")
    assert code == 2 and err.count("\n") == 1
    assert "no version 'v0009'; versions: v0001, v0002, v0003" in err
    code, _, err = _run(capsys, "versions", "diff", "-d", cfg.dataset, *common, "v0002", "v0002")
    assert code == 2 and "against itself" in err
    code, _, err = _run(capsys, "versions", "list", "-d", "nope", *common)
    assert code == 2 and err.count("\n") == 1 and "dataset 'nope' not found" in err and cfg.dataset in err
    assert not (cfg.data_root / "nope").exists()
