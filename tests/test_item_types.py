"""An item type is one object, registered once: a toy one ("toy_notes", one rule-written note per clip on its
loudness) defined here — record, writer, request plan, QC checks, claim audit — is written, checked, audited
and published by `earmark build` like the built-in ones, with no other module touched."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from typing import Any

import pytest

from conftest import CatalogConnection
from earmark.core.config import load_config
from earmark.corpus import generate_corpus
from earmark.schemas import ITEM_TABLES, TABLES
from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.records import LLMLineage
from earmark.stages.base import ItemType
from earmark.stages.facts import bands
from earmark.stages.filter.audit import Audited, audit_fields
from earmark.stages.filter.qc import check_confidence, check_unfilled
from earmark.stages.synthesize import ITEM_TYPES, register
from earmark.stages.synthesize.common import Outcome, Synth
from earmark.stages.synthesize.registry import unregister

pytestmark = pytest.mark.slow


class ToyNote(LLMLineage):
    item_id: str
    text: str


def _write(ev: ClipEvidence, s: Synth, premises: Sequence[Any] = ()) -> Outcome:
    """ "The recording is quiet." / "… loud.": the loudness band of the clip's measured level, when it has one."""
    out = Outcome()
    fact = ev.get("levels.lufs")
    loudness = bands.word("loudness", None if fact is None else fact.number)
    if loudness is None:
        return out
    out.rows.append(
        ToyNote(
            clip_id=ev.clip_id,
            domain=ev.domain,
            prompt_name="toy_rule",
            prompt_sha="0" * 16,
            model="rule",
            confidence=1.0,
            writer="rule",
            item_id=f"{ev.clip_id}:toy:0",
            text=f"The recording is {loudness}.",
        )
    )
    return out


def _audit(item: ToyNote, ev: ClipEvidence, thr: float) -> Audited:
    return audit_fields("toy_notes", item, ev, thr, [("text", item.text, {})])


def _nothing(*args: Any) -> int:
    return 0


def _group(item: ToyNote) -> tuple[int, str]:
    return 0, "toy note"


TOY = ItemType(
    table="toy_notes",
    record=ToyNote,
    prompts=(),
    reply_schemas=list,
    write=_write,
    max_requests=_nothing,
    planned_requests=_nothing,
    checks={"confidence": check_confidence, "unfilled": check_unfilled},
    audit=_audit,
    texts=("text",),
    main_text="text",
    budget_rank=9,
    budget_group=_group,
)


@pytest.fixture
def toy():
    register(TOY)
    try:
        yield TOY
    finally:
        unregister("toy_notes")
    assert "toy_notes" not in ITEM_TYPES and "toy_notes" not in TABLES and "toy_notes" not in ITEM_TABLES


def test_a_table_name_in_use_is_refused():
    clash = ItemType(**{**TOY.__dict__, "table": "clips"})
    with pytest.raises(ValueError, match="holds Clip records"):
        register(clash)
    assert list(ITEM_TYPES) == ["captions", "qa", "entailment", "instructions"]


def test_a_toy_item_type_is_built_end_to_end(tmp_path, toy, prefect_harness):
    from earmark.flows.build import run_build

    corpus = tmp_path / "corpus"
    items = generate_corpus(corpus, per_domain=1, seed=5)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for item in items:
        if item.domain in ("S00", "0M0", "000"):
            shutil.copy(item.path, inputs / item.path.name)
    cfg = load_config(
        None,
        {
            "data_root": str(tmp_path / "data"),
            "dataset": "toy",
            "inputs": [str(inputs)],
            "synthesize.items": ["toy_notes"],
            "filter.margin_backend": "off",
        },
    )
    out = run_build(cfg)
    assert out["llm"]["calls"] == 0  # written by rule
    con = CatalogConnection(tmp_path / "data", "toy")
    notes = con.execute("SELECT clip_id, text FROM toy_notes ORDER BY clip_id").fetchall()
    levels = dict(con.execute("SELECT clip_id, lufs FROM levels").fetchall())
    assert notes, "no toy note was written"
    for clip_id, text in notes:  # true to the measurement it names
        assert text == f"The recording is {bands.word('loudness', levels[clip_id])}."
    checks = {r[0] for r in con.execute("SELECT DISTINCT \"check\" FROM qc WHERE item_table = 'toy_notes'").fetchall()}
    assert {"confidence", "unfilled", "hallucination", "claim_audit", "fact_budget", "same_source"} <= checks
    audited = con.execute(
        "SELECT keep, reason FROM qc WHERE item_table = 'toy_notes' AND \"check\" = 'claim_audit'"
    ).fetchall()
    assert audited and all(keep for keep, _ in audited), audited  # its loudness claim is supported
    claims = con.execute("SELECT claim_type, verdict FROM claims WHERE item_table = 'toy_notes'").fetchall()
    assert ("loudness", "supported") in claims
    card = (tmp_path / "data" / "toy" / "exports" / out["version"] / "README.md").read_text()
    assert "toy_notes" in card


def test_the_joint_strategy_refuses_an_item_type_it_cannot_write(toy):
    from earmark.stages import synthesize

    cfg = load_config(None, {"synthesize.items": ["captions", "toy_notes"]})
    with pytest.raises(ValueError, match='toy_notes needs \\[synthesize\\] strategy = "focused"'):
        synthesize.spec("joint", cfg.synthesize, cfg.llm, cfg.evidence, cfg.synthesize.items)
    assert synthesize.spec("toy_notes", cfg.synthesize, cfg.llm, cfg.evidence).writes == ("toy_notes", "rejections")


def test_an_unknown_item_type_is_a_config_error():
    from earmark.core.config import ConfigError

    with pytest.raises((ConfigError, ValueError), match="unknown item type 'toy_notes'"):
        load_config(None, {"synthesize.items": ["captions", "toy_notes"]})
