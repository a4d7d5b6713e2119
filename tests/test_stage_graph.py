"""The stage graph (earmark.stages.graph) is what build, rerun and `--until` read: the stages in order, what a run
runs, and how a version's tables are assembled from the stages' shards."""

from __future__ import annotations

import pytest

from earmark.core.config import load_config
from earmark.stages.graph import (
    FILTER_EXPERTS,
    GRAPH,
    RERUN,
    UNTIL,
    VersionGraph,
    filter_inputs,
    plan_build,
    plan_rerun,
    version_tables,
)
from earmark.storage import ShardRef


def test_the_stages_in_order_and_what_a_build_runs() -> None:
    assert [s.name for s in GRAPH] == ["ingest", "analyze", "synthesize", "filter", "review", "publish"]
    assert UNTIL == ("ingest", "analyze", "synthesize", "filter", "publish")
    assert RERUN == ("analyze", "synthesize", "filter")
    cfg = load_config(None, {})
    assert plan_build(cfg).stages == ("ingest", "analyze", "synthesize", "filter", "publish")
    assert plan_build(cfg, "analyze").stages == ("ingest", "analyze", "publish")  # a version of what was made
    assert not plan_build(cfg, "analyze").llm and plan_build(cfg, "synthesize").llm
    review = load_config(None, {"review.mode": "file"})
    assert plan_build(review).stages == ("ingest", "analyze", "synthesize", "filter", "review", "publish")
    assert "review" not in plan_build(review, "synthesize").stages  # review needs the QC verdicts
    with pytest.raises(ValueError, match="--until must be one of ingest, analyze"):
        plan_build(cfg, "review")


def test_what_a_rerun_runs() -> None:
    assert plan_rerun("filter").stages == ("filter", "publish")
    assert plan_rerun("synthesize").stages == ("synthesize", "filter", "publish")
    assert plan_rerun("analyze").llm and not plan_rerun("filter").llm
    with pytest.raises(ValueError, match="re-run one of analyze, synthesize, filter"):
        plan_rerun("ingest")
    with pytest.raises(KeyError, match="no stage 'mix'"):
        plan_rerun("filter").runs("mix")


def test_the_cli_offers_the_graphs_stages() -> None:
    from earmark.cli.main import parser as cli_parser

    parser = cli_parser()
    subs = next(a for a in parser._actions if a.dest == "command").choices
    until = next(a for a in subs["build"]._actions if a.dest == "until")
    stage = next(a for a in subs["rerun"]._actions if a.dest == "stage")
    assert tuple(until.choices) == UNTIL and tuple(stage.choices) == RERUN


def _refs(prefix: str, tables: tuple[str, ...], n: int = 2) -> list[ShardRef]:
    return [ShardRef(f"{prefix}{i}", tables) for i in range(n)]


def test_one_assembly_of_a_versions_tables_for_build_and_rerun() -> None:
    clips = _refs("c", ("clips", "quarantine"))
    experts = {"asr": _refs("a", ("asr",)), "vad": _refs("v", ("vad",))}
    items = {"captions": _refs("k", ("captions", "rejections")), "qa": _refs("q", ("qa", "rejections"))}
    qc = _refs("f", ("qc", "claims"))
    built = version_tables({}, clips=clips, experts=experts, evidence=["e0", "e1"], items=items, qc=qc)
    assert built == {
        "clips": ["c0", "c1"],
        "quarantine": ["c0", "c1"],
        "asr": ["a0", "a1"],
        "vad": ["v0", "v1"],
        "evidence": ["e0", "e1"],
        "captions": ["k0", "k1"],
        "qa": ["q0", "q1"],
        "rejections": ["k0", "k1", "q0", "q1"],
        "qc": ["f0", "f1"],
        "claims": ["f0", "f1"],
    }
    assert version_tables({}, clips=clips, experts=experts) == {
        k: built[k] for k in ("clips", "quarantine", "asr", "vad")
    }
    # a re-run of the QA items: the base's other tables stand, the re-run stages' are replaced
    new_qa = {"captions": items["captions"], "qa": _refs("Q", ("qa", "rejections"))}
    rerun = version_tables(built, experts=experts, evidence=["e0", "e1"], items=new_qa, qc=_refs("F", ("qc", "claims")))
    assert rerun["qa"] == ["Q0", "Q1"] and rerun["rejections"] == ["Q0", "Q1", "k0", "k1"]
    assert rerun["qc"] == rerun["claims"] == ["F0", "F1"] and rerun["clips"] == built["clips"]


def test_filter_reads_what_the_graph_says() -> None:
    g = VersionGraph({}, _refs("c", ("clips", "quarantine")))
    experts = {t: _refs(t, (t,)) for t in ("asr", "vad", "yamnet")}
    inputs = filter_inputs(g.clip_refs, experts, ["e0", "e1"], {"qa": _refs("q", ("qa", "rejections"))})
    assert inputs[1] == {
        "qa": ["q1"],
        "rejections": ["q1"],
        "evidence": ["e1"],
        "clips": ["c1"],
        "asr": ["asr1"],
        "yamnet": ["yamnet1"],
    }
    assert set(FILTER_EXPERTS) == {"asr", "asr_check", "yamnet"}
