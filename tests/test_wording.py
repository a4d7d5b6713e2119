"""QC of an item's wording (stages/filter/wording.py): cut-off words, claims only a picture could support, and
persons the transcript does not say. Each planted item was kept by every rule check before these checks; each
true item beside it stays kept."""

from __future__ import annotations

import pytest

from earmark.core.config import FilterSection
from earmark.schemas.records import CAPTION_KINDS, InstructionTriple, QAPair
from earmark.stages.filter.qc import ClipContext, kept_ids, run_checks
from earmark.stages.filter.wording import WORDING_CHECKS, english_words
from earmark.stages.synthesize import ITEM_TYPES
from earmark.stages.synthesize.item_types.captions import write as captions
from earmark.stages.synthesize.item_types.captions.rules import combined_captions, rule_captions
from earmark.stages.synthesize.item_types.entailment.rules import rule_entailment
from earmark.stages.synthesize.item_types.instructions.rules import rule_instructions
from earmark.stages.synthesize.item_types.qa.rules import rule_qa
from test_qc import _cap, _hyp, _lin
from test_rule_qa import CLIPS
from test_rule_qa import S as RULE_SYNTH

S = FilterSection()


def _qa(answer: str, question: str = "Who is speaking?", i: int = 0) -> QAPair:
    return QAPair(
        **_lin(),
        item_id=f"c:qa:{i}",
        qa_index=i,
        category="direct_perception",
        difficulty="basic",
        question=question,
        answer=answer,
    )


def _ins(answer: str, i: int = 0) -> InstructionTriple:
    return InstructionTriple(
        **_lin(),
        item_id=f"c:if:{i}",
        dimension="Format",
        instruction='Answer in JSON with exactly the keys "main_sound" and "recording".',
        answer=answer,
        rule=13,
        rule_content='{"main_sound": "", "recording": ""}',
    )


def _verdicts(items: dict, transcript: str) -> tuple[set[str], dict[tuple[str, str], str]]:
    """(ids every rule check kept, (item id, check) → reason of each rejection)."""
    rows = run_checks(items, [], S, ITEM_TYPES, context={"c": ClipContext(transcript, 0.0, ())})
    return kept_ids(rows), {(r.item_id, r.check): r.reason for r in rows if not r.keep}


def test_cut_off_words_are_rejected_real_words_kept():
    said = "I think it sounded like choifrusky, honestly."
    planted = {
        "c:long:0": _cap("long", "A woman speaks, sounding lik. Rain patters on a roof for the whole clip.", i=0),
        "c:long:1": _cap("long", "A woman speaks while rain patters on a roof and a car honki", i=1),  # token limit
    }
    true = [
        _cap("long", "Percussive, tonal sounds with vibrato, then a full-range, reverberant hum.", i=2),
        _cap("long", 'A voice says "it sounded like choifrusky" over a 120 bpm beat at 2 s.', i=3),
        _cap("long", "The colours of the orchestration are recognised: a narrowband, untranscribed voice.", i=4),
    ]
    shouted, whole = (
        _ins('{"main_sound": "MUSIC WITH A CLEAR MELOD", "recording": "LOUD"}'),
        _ins('{"main_sound": "MUSIC WITH A CLEAR MELODY", "recording": "LOUD"}', 1),
    )
    kept, why = _verdicts({"captions": [*planted.values(), *true], "instructions": [shouted, whole]}, said)
    assert why[("c:long:0", "cut_word")] == "text: 'lik' is no word (cut off or misspelt; not in the transcript either)"
    assert "'honki'" in why[("c:long:1", "cut_word")]
    assert "'MELOD'" in why[("c:if:0", "cut_word")]
    assert not kept & {*planted, "c:if:0"}
    assert {c.item_id for c in true} | {"c:if:1"} <= kept


def test_a_lone_letter_that_ends_a_sentence_is_cut_off_a_note_is_not():
    """fresh13 kept "The farm animal is described as a small non-sound event. The sound events are d." A lone letter
    was never read as a word; now one that ends a sentence is cut off, unless a note ("in the key of c", "e and g")."""
    planted = [
        _cap("long", "The farm animal is a small event. The sound events are d.", i=0),
        _ins('{"main_sound": "A", "recording": "LOUD"}'),
    ]
    true = [
        _cap("long", "A slow piano melody with soft chords in the key of c.", i=1),
        _cap("long", "A flute plays two long notes over the strings, e and g.", i=2),
    ]
    kept, why = _verdicts({"captions": [planted[0], *true], "instructions": [planted[1]]}, "")
    assert why[("c:long:0", "cut_word")] == "text: 'd' is no word (a lone letter: cut off)"
    assert "c:if:0" not in kept and {c.item_id for c in true} <= kept


def test_claims_only_a_picture_supports_are_rejected():
    said = "Look, the car is red and this video is in 4K."
    planted = [
        _cap("long", "A woman speaks softly. Recorded at 4K resolution.", i=0),
        _cap("long", "A man in a blue shirt talks while traffic passes.", i=1),
        _cap("long", "No one is seen in the footage; a dog barks.", i=2),
    ]
    true = [
        _cap("long", "White noise hisses while a dog barks; pink noise follows.", i=3),
        _cap("long", "Upbeat video game music with a blue note, then a camera shutter clicks.", i=4),
        _cap("long", "The speaker says the car is red and mentions a video in 4K.", i=5),  # what the speech says
    ]
    kept, why = _verdicts({"captions": [*planted, *true]}, said)
    assert why[("c:long:0", "visual_claim")] == "text claims what no audio can show: '4K resolution'"
    assert "'blue'" in why[("c:long:1", "visual_claim")] and "'seen'" in why[("c:long:2", "visual_claim")]
    assert not kept & {c.item_id for c in planted}
    assert {c.item_id for c in true} <= kept


def test_a_relationship_or_name_the_transcript_does_not_say_is_rejected():
    said = "My brother, Marta, is coming home tonight."
    planted = [
        _qa("Marta's husband.", i=0),  # the item: the transcript says brother
        _qa("The speaker greets Tomas as he arrives.", i=1),
    ]
    true = [
        _qa("The speaker's brother, Marta.", i=2),
        _qa("Someone speaks about Marta, who is coming home tonight.", i=3),
    ]
    hyp = _hyp("neutral", "The speaker talks to his boss.")
    kept, why = _verdicts({"qa": [*planted, *true], "entailment": [hyp]}, said)
    assert why[("c:qa:0", "unsaid_person")] == "answer names a relationship the transcript does not say: 'husband'"
    assert why[("c:qa:1", "unsaid_person")] == "answer names 'Tomas', which the transcript does not say"
    assert "'boss'" in why[(hyp.item_id, "unsaid_person")]
    assert not kept & {q.item_id for q in planted}
    assert {q.item_id for q in true} <= kept


def test_every_item_kind_gets_every_wording_verdict():
    items = {
        "captions": [_cap("short", "A man talks.")],
        "qa": [_qa("A man.")],
        "entailment": [_hyp("neutral", "Someone waits for a bus.")],
        "instructions": [_ins('{"main_sound": "speech", "recording": "clean"}')],
    }
    rows = run_checks(items, [], S, ITEM_TYPES)  # no context: no transcript, so nothing is said
    for check in WORDING_CHECKS:
        assert {r.item_table for r in rows if r.check == check} == set(items), check
    assert all(r.keep for r in rows if r.check in WORDING_CHECKS)


@pytest.mark.parametrize("name", sorted(CLIPS))
def test_rule_written_items_pass_the_wording_checks(name):
    """The phrase files' words, filled from the facts, are English and claim nothing visual or personal."""
    ev = CLIPS[name]
    caps = []
    for kind in CAPTION_KINDS:
        if captions.is_absent(ev, kind, RULE_SYNTH):
            caps += captions.absent_rows(ev, kind, RULE_SYNTH)
        elif kind in captions.RULE_KINDS:
            caps += rule_captions(ev, kind, RULE_SYNTH)
        else:
            caps += combined_captions(ev, kind, RULE_SYNTH)
    f = ev.get("speech.transcript")
    said = f.value if f is not None and f.value else ""
    long = next((c for c in caps if c.kind == "long"), None)
    items = {
        "captions": caps,
        "qa": rule_qa(ev, RULE_SYNTH).rows,
        "instructions": rule_instructions(ev, RULE_SYNTH).rows,
        "entailment": rule_entailment(ev, long, RULE_SYNTH)[0] if long is not None else [],
    }
    assert items["captions"] and items["qa"] and items["instructions"]  # a silent clip has no entailment set
    for table, rows in items.items():
        for item in rows:
            for check, fn in WORDING_CHECKS.items():
                ok, reason, _ = fn(ITEM_TYPES[table].texts, item, said)
                assert ok, (check, reason, item)


def test_the_word_list_is_the_installed_one():
    words = english_words()
    assert len(words) > 150_000 and {"like", "sounding", "tonal", "reverberant", "narrowband"} <= words
    assert not {"lik", "melod", "honki"} & words
