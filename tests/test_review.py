"""filter → publish → human review → publish on a hand-built catalog under a real Prefect server.

The catalog holds real lineage (clips → asr / asr_check → evidence → captions / entailment shards), so the
filter flow finds transcripts and hallucination verdicts the way it does after a build. The review flow is
paused with `pause_flow_run(wait_for_input=ReviewInput…)`, found through the Prefect API and resumed with
`resume_flow_run(flow_run_id, run_input=…)`, and the next version's export and views reflect the decisions.
"""

from __future__ import annotations

import csv
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from earmark.core.config import load_config
from earmark.flows.filter import filter_flow
from earmark.flows.publish import publish_flow
from earmark.flows.review import review_flow, review_import_flow
from earmark.schemas import (
    Caption,
    Clip,
    ClipEvidence,
    EntailmentHypothesis,
    QCResult,
    ReviewDecision,
    Transcript,
    TranscriptCheck,
    arrow_schema,
    from_table,
    to_table,
)
from earmark.stages.ingest import encode_flac
from earmark.stages.review import Overlay, review_items, review_overlay, to_decisions, write_sheet
from earmark.storage import Catalog, ShardMeta, ShardRef
from test_qc import _evidence

SR = 16_000
CLIPS = {
    "s1": ("S00", "the weather will be sunny tomorrow"),
    "s2": ("S00", "Thank you for watching."),
    "m1": ("0M0", None),
    "a1": ("00A", None),
}
LONG = {
    "s1": "A man reads a weather forecast saying it will be sunny tomorrow in a calm voice.",
    "s2": "A woman speaks briefly and says thank you for watching at the end of a video.",
    "m1": "Music with a steady beat at a moderate tempo and sustained chords fills the clip.",
    "a1": "Short impulsive knocks and hits sound at irregular moments in a quiet room.",
}


def _lin(clip):
    return dict(clip_id=clip, domain=CLIPS[clip][0], prompt_name="p", prompt_sha="0" * 16, model="hand", confidence=0.9)


def _write(cat, key, tables, stage, inputs):
    cat.write_shard(key, tables, ShardMeta(stage=stage, stage_version="t", inputs=inputs), None)
    return ShardRef(key, tuple(tables))


def _empty(table):
    from earmark.schemas import TABLES

    return arrow_schema(TABLES[table]).empty_table()


@pytest.fixture(scope="module")
def built(tmp_path_factory, prefect_harness):
    root = tmp_path_factory.mktemp("review")
    cfg = load_config(
        None,
        {
            "data_root": str(root),
            "dataset": "rv",
            "review.mode": "ui",
            "review.poll_s": 1,
            "review.tables": ["captions", "entailment"],
            "review.timeout_s": 120,
            # hand-written items about review mechanics, not about these clips' evidence (tests/test_claims.py)
            "filter.claim_audit": False,
        },
    )
    cat = Catalog(cfg.data_root, cfg.dataset)
    t = np.arange(SR * 2) / SR
    clips = [
        Clip(
            clip_id=c,
            source_path=f"{c}.wav",
            source_sha256=c,
            source_format="wav",
            clip_index=0,
            offset_s=0,
            duration_s=2.0,
            sample_rate=SR,
            audio_flac=encode_flac((3000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16), SR),
        )
        for c in CLIPS
    ]
    _write(cat, "k_clips", {"clips": to_table(Clip, clips), "quarantine": _empty("quarantine")}, "ingest", [])
    asr = [
        Transcript(
            clip_id=c,
            expert="asr",
            backend="b",
            expert_version="1",
            text=tr,
            language="en",
            language_prob=1,
            words=[],
            avg_logprob=-0.2,
            no_speech_prob=0.1,
            vad_speech_s=1.5,
            skipped_reason=None,
        )
        for c, (_, tr) in CLIPS.items()
        if tr
    ]
    chk = [
        TranscriptCheck(
            clip_id="s1",
            expert="asr_check",
            backend="heuristic:x",
            expert_version="1",
            flags=[],
            hallucination_score=0.0,
            vad_support=1.0,
        ),
        TranscriptCheck(
            clip_id="s2",
            expert="asr_check",
            backend="heuristic:x",
            expert_version="1",
            flags=["known_phrase", "no_vad_support"],
            hallucination_score=0.94,
            vad_support=0.0,
        ),
    ]
    _write(cat, "k_asr", {"asr": to_table(Transcript, asr)}, "analyze:asr", ["k_clips"])
    _write(cat, "k_chk", {"asr_check": to_table(TranscriptCheck, chk)}, "analyze:asr_check", ["k_clips"])
    ev = [_evidence(c, d, tr, tags={"impulsive sound": 0.9} if d == "00A" else None) for c, (d, tr) in CLIPS.items()]
    _write(cat, "k_ev", {"evidence": to_table(ClipEvidence, ev)}, "synthesize:evidence", ["k_clips", "k_asr", "k_chk"])
    caps = [Caption(**_lin(c), item_id=f"{c}:long:0", kind="long", ref_index=0, text=LONG[c]) for c in CLIPS]
    caps += [
        Caption(
            **_lin(c),
            item_id=f"{c}:short:{i}",
            kind="short",
            ref_index=i,
            text=f"{LONG[c].split(' in ')[0].split(' at ')[0]}{'.' if i == 0 else ', clearly.'}",
        )
        for c in CLIPS
        for i in range(2)
    ]
    ents = []
    for c in ("s1", "a1"):
        for label, hyp in (
            ("entailment", f"The clip contains {'speech' if c == 's1' else 'knocking'}."),
            ("neutral", f"The recording was made on a {'Monday' if c == 's1' else 'farm'}."),
            ("contradiction", f"The clip contains only {'birdsong' if c == 's1' else 'a choir'}."),
        ):
            ents.append(
                EntailmentHypothesis(
                    **_lin(c),
                    item_id=f"{c}:ent:{label}",
                    premise_kind="long",
                    premise=LONG[c],
                    label=label,
                    hypothesis=hyp,
                )
            )
    rej = _empty("rejections")
    refs = [
        _write(cat, "k_cap", {"captions": to_table(Caption, caps), "rejections": rej}, "synthesize:captions", ["k_ev"]),
        _write(
            cat,
            "k_ent",
            {"entailment": to_table(EntailmentHypothesis, ents), "rejections": rej},
            "synthesize:entailment",
            ["k_ev"],
        ),
    ]
    qc = filter_flow(
        cfg,
        [
            {
                "captions": [refs[0].key],
                "entailment": [refs[1].key],
                "rejections": [r.key for r in refs],
                "evidence": ["k_ev"],
                "clips": ["k_clips"],
                "asr": ["k_asr"],
                "asr_check": ["k_chk"],
            }
        ],
    )
    shards = {
        "clips": ["k_clips"],
        "asr": ["k_asr"],
        "asr_check": ["k_chk"],
        "evidence": ["k_ev"],
        "captions": ["k_cap"],
        "entailment": ["k_ent"],
        "rejections": ["k_cap", "k_ent"],
        "qc": qc.keys("qc"),
    }
    first = publish_flow(cfg, shards)
    return cfg, cat, shards, first


def _kept(cat, version, table, field):
    return dict(
        cat.query(
            f"SELECT item_id, {field} FROM {version}.{table} WHERE item_id IN "
            f"(SELECT item_id FROM {version}.qc GROUP BY 1 HAVING bool_and(keep))"
        )
    )


def test_filter_flow_reads_transcripts_and_evidence_of_its_shard(built):
    cfg, cat, _, first = built
    qc = {
        (r[0], r[1]): (r[2], r[3])
        for r in cat.query(f'SELECT item_id, "check", keep, reason FROM {first["version"]}.qc')
    }
    keep, reason = qc[("s2:long:0", "hallucination")]
    assert not keep and "known_phrase" in reason and "thank you for" in reason
    assert qc[("s1:long:0", "hallucination")][0]
    margins = {k[0]: v for k, v in qc.items() if k[1] == "margin:evidence-sbert"}
    assert set(margins) == {f"{c}:long:0" for c in CLIPS}
    assert all(qc[(f"{c}:ent:entailment", "duplicate_hypothesis")][0] for c in ("s1", "a1"))
    assert {"s1:long:0", "m1:long:0", "a1:long:0"} <= set(_kept(cat, first["version"], "captions", "text"))


def _paused_run(deadline_s=60):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    flt = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED])))
    end = time.monotonic() + deadline_s
    with get_client(sync_client=True) as client:
        while time.monotonic() < end:
            runs = client.read_flow_runs(flow_run_filter=flt, limit=5, sort=FlowRunSort.START_TIME_DESC)
            if runs and runs[0].state.state_details.run_input_keyset:
                return runs[0]
            time.sleep(0.5)
    raise AssertionError("no paused review flow run appeared")


def test_paused_review_resumed_through_the_api_shapes_the_next_version(built):
    from prefect.flow_runs import resume_flow_run
    from prefect.input.actions import read_flow_run_input

    cfg, cat, shards, first = built
    out: dict = {}
    worker = threading.Thread(target=lambda: out.update(review_flow(cfg, shards, "run1")), daemon=True)
    worker.start()
    run = _paused_run()
    keyset = run.state.state_details.run_input_keyset
    schema = read_flow_run_input(keyset["schema"], flow_run_id=run.id)
    offered = {d["item_id"] for d in schema["properties"]["decisions"]["default"]}
    assert {"s1:ent:neutral", "a1:short:0", "s1:short:1"} <= offered
    assert "s2:long:0" not in offered  # QC rejected it: not offered for review (scope "kept")
    description = read_flow_run_input(keyset["description"], flow_run_id=run.id)
    assert "s1:ent:neutral" in description and "accept" in description
    resume_flow_run(
        run.id,
        run_input={
            "reviewer": "alice",
            "decisions": [
                {"item_table": "entailment", "item_id": "s1:ent:entailment", "decision": "accept"},
                {
                    "item_table": "entailment",
                    "item_id": "s1:ent:neutral",
                    "decision": "rewrite",
                    "new_text": "The forecast is read by a professional announcer.",
                },
                {"item_table": "captions", "item_id": "a1:short:0", "decision": "reject"},
                {
                    "item_table": "captions",
                    "item_id": "s1:short:1",
                    "decision": "rewrite",
                    "new_text": "A man calmly reads tomorrow's sunny weather forecast.",
                },
                {"item_table": "captions", "item_id": "nope:short:0", "decision": "reject"},
            ],
        },
    )
    worker.join(60)
    assert not worker.is_alive()
    assert out["decisions"] == 4 and len(out["errors"]) == 1 and "nope:short:0" in out["errors"][0]

    second = publish_flow(cfg, shards)
    v = second["version"]
    assert second["created"] and v != first["version"]
    reviews = cat.query(f"SELECT item_id, decision, reviewer, source FROM {v}.reviews ORDER BY 1")
    assert [r[1] for r in reviews] == ["reject", "accept", "rewrite", "rewrite"] and {r[2] for r in reviews} == {
        "alice"
    }
    assert {r[3] for r in reviews} == {"ui"}
    ent = _kept(cat, v, "entailment", "hypothesis")
    assert ent["s1:ent:neutral~rev"] == "The forecast is read by a professional announcer."
    assert "s1:ent:neutral" not in ent and "s1:ent:entailment" in ent
    assert cat.query(f"SELECT model FROM {v}.entailment WHERE item_id = 's1:ent:neutral~rev'") == [("human:alice",)]
    # the original rows are untouched, in the same shard as before
    assert cat.query(f"SELECT hypothesis FROM {v}.entailment WHERE item_id = 's1:ent:neutral'") == [
        ("The recording was made on a Monday.",)
    ]
    # the MECAT export: rejected caption gone, rewritten one in place of the original
    lines = [
        json.loads(x) for x in (Path(second["exports"]) / "caption").joinpath("S00.jsonl").read_text().splitlines()
    ]
    s1 = next(e["s1"] for e in lines if "s1" in e)
    assert "A man calmly reads tomorrow's sunny weather forecast." in s1["short"] and len(s1["short"]) == 2
    a1 = [json.loads(x) for x in (Path(second["exports"]) / "caption" / "00A.jsonl").read_text().splitlines()][0]["a1"]
    old_a1 = _kept(cat, first["version"], "captions", "text")["a1:short:0"]
    assert old_a1 not in a1["short"] and len(a1["short"]) == 1
    card = (Path(second["exports"]) / "README.md").read_text()
    assert "## Human review" in card and "| entailment | rewritten | 1 |" in card
    assert "| entailment | a reviewer's rewrite | human:alice | 1 |" in card  # who wrote the kept items
    assert cat.query(f"SELECT writer FROM {v}.entailment WHERE item_id = 's1:ent:neutral~rev'") == [("human",)]
    # a second round offers only what is still undecided, and publishing again changes nothing
    assert publish_flow(cfg, shards)["created"] is False


def test_review_sheet_round_trip_publishes_a_new_version(built, tmp_path):
    cfg, cat, shards, _ = built
    items = {
        t: from_table(m, cat.read(t, shards[t]))
        for t, m in (("captions", Caption), ("entailment", EntailmentHypothesis))
    }
    qc = from_table(QCResult, cat.read("qc", shards["qc"]))
    todo = review_items(items, qc, [], tables=["captions"], scope="all")
    sheet = write_sheet(todo, tmp_path / "sheet.csv")
    rows = list(csv.DictReader(sheet.open()))
    assert {"s2:long:0", "m1:long:0"} <= {r["item_id"] for r in rows}
    assert next(r for r in rows if r["item_id"] == "s2:long:0")["qc"].startswith("hallucination:")
    for r in rows:
        if r["item_id"] == "m1:long:0":
            r["decision"] = "reject"
        if r["item_id"] == "s2:long:0":
            r["decision"], r["new_text"], r["reviewer"] = (
                "rewrite",
                "A woman speaks briefly at the end of a video.",
                "bob",
            )
    with sheet.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=rows[0].keys())
        w.writeheader()
        w.writerows(rows)
    before = cat.latest_version()
    res = review_import_flow(cfg, sheet, reviewer="carol")
    v = res["version"]
    assert res["created"] and v != before and res["decisions"] == 2
    caps = _kept(cat, v, "captions", "text")
    assert "m1:long:0" not in caps
    assert caps["s2:long:0~rev"] == "A woman speaks briefly at the end of a video."  # QC had rejected the original
    assert cat.query(f"SELECT reviewer, source FROM {v}.reviews WHERE item_id = 's2:long:0'") == [("bob", "file")]
    # decisions from the UI round are still applied
    assert "s1:ent:neutral~rev" in _kept(cat, v, "entailment", "hypothesis")
    # a sheet with problems stores nothing and says which rows are wrong
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"item_table": "captions", "item_id": "s1:long:0", "decision": "rewrite"})
        + "\n"
        + json.dumps({"item_table": "captions", "item_id": "s1:long:0", "decision": "maybe"})
        + "\n"
    )
    with pytest.raises(ValueError, match=r"row 1 \(s1:long:0\): 'rewrite' needs the new text(.|\n)*row 2"):
        review_import_flow(cfg, bad)
    assert cat.latest_version() == v


def test_stale_decisions_are_not_applied_and_latest_wins():
    cap = Caption(**_lin("s1"), item_id="s1:short:0", kind="short", ref_index=0, text="A man talks.")
    d = dict(item_table="captions", item_id="s1:short:0", clip_id="s1", new_text=None, reviewer="r", source="file")
    old = ReviewDecision(**d, decision="reject", item_text="A man talks.", decided_at="2025-01-01T00:00:00+00:00")
    new = ReviewDecision(**d, decision="accept", item_text="A man talks.", decided_at="2025-01-02T00:00:00+00:00")
    ov: Overlay = review_overlay([new, old], {"captions": [cap]})
    assert ov.counts["accept"] == 1 and ov.counts["reject"] == 0 and [r.keep for r in ov.qc] == [True]
    regenerated = cap.model_copy(update={"text": "A woman sings."})
    ov = review_overlay([new], {"captions": [regenerated]})
    assert ov.counts["stale"] == 1 and ov.qc == []
    decisions, errors = to_decisions(
        [{"item_table": "captions", "item_id": "s1:short:0", "decision": "Accept"}],
        {"captions": [cap]},
        reviewer="r",
        source="file",
    )
    assert not errors and decisions[0].decision == "accept" and decisions[0].item_text == "A man talks."


def test_cli_review_export_and_import(built, tmp_path, capsys):
    from earmark.cli.main import main

    cfg, cat, _, _ = built
    common = ["--data-root", str(cfg.data_root), "-d", cfg.dataset]
    sheet = tmp_path / "todo.jsonl"
    assert main(["review", "export", *common, "-o", str(sheet), "--tables", "entailment"]) == 0
    rows = [json.loads(x) for x in sheet.read_text().splitlines()]
    ids = {r["item_id"] for r in rows}
    assert "a1:ent:neutral" in ids and "s1:ent:neutral" not in ids  # already decided in the UI round
    assert all(not i.endswith("~rev") for i in ids)
    for r in rows:
        r["decision"] = "accept" if r["item_id"] == "a1:ent:neutral" else ""
    sheet.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = cat.latest_version()
    assert main(["review", "import", *common, str(sheet), "--reviewer", "dana"]) == 0
    assert "1 decisions stored" in capsys.readouterr().out
    v = cat.latest_version()
    assert v != before
    assert cat.query(f"SELECT reason FROM {v}.qc WHERE item_id = 'a1:ent:neutral' AND \"check\" = 'human_review'")[0][
        0
    ].startswith("accepted by dana (file,")
    assert main(["review", "import", *common, str(tmp_path / "missing.csv")]) == 2


def test_file_mode_writes_a_sheet_and_does_not_wait(built):
    cfg, cat, shards, _ = built
    file_cfg = cfg.model_copy(
        update={"review": cfg.review.model_copy(update={"mode": "file", "tables": ["qa", "captions"]})}
    )
    before = cat.latest_version()
    out = review_flow(file_cfg, shards, "run-file")
    assert out["mode"] == "file" and out["items"] > 0
    rows = list(csv.DictReader(open(out["sheet"])))
    assert Path(out["sheet"]).name == "run-file.csv" and len(rows) == out["items"]
    assert all(r["decision"] == "" for r in rows) and "s2:long:0" not in {r["item_id"] for r in rows}
    assert cat.latest_version() == before  # nothing published or stored by writing a sheet
