"""QA pairs and instruction triples written by rule from a clip's confident facts (the default): every item
passes the claim audit and its own format rule, answers its question from the facts, and no model is asked."""

from __future__ import annotations

import hashlib

import pytest

from earmark.core.config import SynthesizeSection, load_config
from earmark.metrics.ifeval import check_rule
from earmark.schemas.records import QA_CATEGORIES
from earmark.stages import synthesize
from earmark.stages.filter.audit import audit_items
from earmark.stages.filter.claims import audit, claim_verdict
from earmark.stages.synthesize import ITEM_TYPES
from earmark.stages.synthesize.common import Synth
from earmark.stages.synthesize.evidence import evidence_of
from earmark.stages.synthesize.item_types.instructions.rules import rule_instructions
from earmark.stages.synthesize.item_types.qa.rules import rule_qa
from earmark.stages.synthesize.item_types.qa.write import INFERENCE, qa_plan
from test_synthesis_units import _ev


class _NoModel:
    """An LLM that must not be called."""

    model = "none"

    def complete_json(self, *args, **kwargs):
        raise AssertionError("a rule-written item asked the model")


S = Synth(_NoModel(), SynthesizeSection())
MUSIC = evidence_of(
    "0badc0de0000000000m1",
    "0M0",
    {
        "music.tempo_bpm": (100.0, 0.8),
        "music.harmonic_ratio": 0.9,
        "music.beat_strength": 0.7,
        "levels.lufs": -18.0,
        "acoustics.snr_db": 30.0,
        "acoustics.bandwidth_hz": 3000.0,
    },
    duration_s=8.0,
    probs=[0.02, 0.97, 0.02],
)
SILENT = evidence_of("5113ce00000000000000", "000", {"levels.lufs": -70.0}, duration_s=5.0, probs=[0.01, 0.01, 0.01])
CLIPS = {
    "speech": _ev("S00"),
    "speech_events": _ev("S0A", clip_id="fedcba98765432100002"),
    "speech_music": _ev("SM0", transcript="", clip_id="77777777765432100003"),
    "music": MUSIC,
    "silent": SILENT,
}


def _kept(text: str, ev, inference: bool = False) -> bool:
    return claim_verdict(audit(text, ev), inference=inference, need_support=True)[0]


@pytest.mark.parametrize("name", sorted(CLIPS))
def test_rule_qa_pairs_are_true_planned_and_distinct(name):
    ev = CLIPS[name]
    out = rule_qa(ev, S)
    plan = {p["category"] for p in qa_plan(ev.clip_id)}
    assert out.rows, out.rejections
    assert {r.category for r in out.rows} | {r.reason.split()[0] for r in out.rejections} == plan
    assert all(r.model == "rule" and r.prompt_name == "qa_rules" and r.confidence == 1.0 for r in out.rows)
    assert len({r.question.lower() for r in out.rows}) == len(out.rows)
    for r in out.rows:
        assert r.category in QA_CATEGORIES and r.question.endswith("?")
        assert _kept(r.answer, ev, r.category in INFERENCE), (r.question, r.answer)
        assert r.item_id == f"{ev.clip_id}:qa:{r.qa_index}"
    qc, _ = audit_items({"qa": out.rows}, {ev.clip_id: ev}, S.min_confidence, ITEM_TYPES)
    assert all(v.keep for v in qc), [(v.item_id, v.reason) for v in qc if not v.keep]


def test_rule_qa_answers_say_the_facts():
    by_cat = {r.category: r for r in rule_qa(_ev("S00"), S).rows}
    text = " ".join(r.answer for r in by_cat.values()).lower()
    assert "female" not in text and "woman" not in text  # the voice is confidently male
    assert any(w in text for w in ("male", "man")), text
    silent = " ".join(r.answer for r in rule_qa(SILENT, S).rows).lower()
    assert "silen" in silent and "music with" not in silent and "speaks" not in silent
    music = " ".join(r.answer for r in rule_qa(MUSIC, S).rows).lower()
    assert "speaks" not in music and ("music" in music or "telephone" in music)


@pytest.mark.parametrize("name", sorted(CLIPS))
def test_rule_instructions_pass_their_rule_and_the_audit(name):
    ev = CLIPS[name]
    out = rule_instructions(ev, S)
    assert len(out.rows) + len(out.rejections) == 3
    for r in out.rows:
        assert r.model == "rule" and "?" in r.instruction
        assert check_rule(r.answer, r.rule, r.rule_content), (r.dimension, r.answer)
    qc, claims = audit_items({"instructions": out.rows}, {ev.clip_id: ev}, S.min_confidence, ITEM_TYPES)
    assert all(v.keep for v in qc), [(v.item_id, v.reason) for v in qc if not v.keep]  # QC's own audit keeps them
    assert {c.item_id for c in claims} == {r.item_id for r in out.rows}
    for rej in out.rejections:  # a rule no caption of the clip can meet is said, not faked
        assert "by rule" in rej.reason


def test_every_dimension_gets_a_rule_written_answer_somewhere():
    """Over many clip ids each IFEval-Audio dimension (and nearly every rule option) is written for a speech clip."""
    seen = set()
    for i in range(40):
        ev = _ev("S0A", clip_id=f"{i * 2654435761 % 16**8:08x}000000000000")
        seen |= {(r.dimension, r.rule, r.rule_content) for r in rule_instructions(ev, S).rows}
    dims = {d for d, _, _ in seen}
    assert dims == {"Content", "Capitalization", "Symbol", "List Structure", "Length", "Format"}, seen
    assert len(seen) >= 10, seen


@pytest.mark.parametrize("item", ["qa", "instructions"])
def test_rule_written_items_send_no_request(item):
    from earmark.llm import LLMClient
    from earmark.stages.base import Inputs
    from support.fake_server import FakeLLMServer

    cfg = load_config(None, {})  # the embedded small model: "auto" writers are the rules
    assert cfg.synthesize.qa_pairs == "auto" and cfg.synthesize.instruction_triples == "auto"
    resolved = synthesize.resolve_writers(cfg.synthesize, cfg.llm.model)
    assert resolved.qa_pairs == "rule" and resolved.instruction_triples == "rule"
    assert synthesize.max_requests(item, resolved) == 0

    class _Provider:
        def __init__(self, c):
            self.c = c

        def client(self):
            return self.c

    evidence = list(CLIPS.values())
    with FakeLLMServer("ok") as srv, LLMClient(srv.base_url, "fake-llm") as client:
        out = synthesize.run(
            item, cfg.synthesize, cfg.llm, cfg.evidence, _Provider(client), [item], Inputs.of(evidence=evidence)
        )
        assert srv.requests == 0
    assert out[item] and all(r.model == "rule" and r.writer == "rule" for r in out[item])


@pytest.mark.parametrize("item", ["captions", "qa", "instructions", "entailment"])
def test_a_capable_endpoint_writes_every_item_kind_and_the_rules_catch(item):
    """With a model that is not one of the embedded small ones, "auto" lets the model write every item kind;
    what it cannot write truthfully (here: a server whose replies are valid JSON but empty of meaning, which the
    checks reject) is written by rule instead, and each row says who wrote it."""
    from earmark.llm import LLMClient
    from earmark.stages.base import Inputs
    from earmark.stages.synthesize.item_types.captions.rules import rule_captions
    from support.fake_server import FakeLLMServer

    cfg = load_config(None, {"llm.model": "Qwen/Qwen2.5-72B-Instruct", "llm.endpoint": "http://gpu-box:8000/v1"})
    resolved = synthesize.resolve_writers(cfg.synthesize, cfg.llm.model)
    assert {k: getattr(resolved, k) for k in synthesize.WRITER_SETTINGS} == dict.fromkeys(
        synthesize.WRITER_SETTINGS, "llm"
    )
    assert synthesize.max_requests(item, resolved) > 0
    pinned = load_config(None, {"llm.model": "big", "synthesize.qa_pairs": "rule"})
    assert (
        synthesize.resolve_writers(pinned.synthesize, pinned.llm.model).qa_pairs == "rule"
    )  # an explicit choice holds

    class _Provider:
        def __init__(self, c):
            self.c = c

        def client(self):
            return self.c

    evidence = list(CLIPS.values())
    inputs = {"evidence": evidence}
    if item == "entailment":
        inputs["captions"] = [
            c for ev in evidence for c in rule_captions(ev, "speech", S) + rule_captions(ev, "sound", S)
        ]
        inputs["captions"] = [c.model_copy(update={"kind": "long"}) for c in inputs["captions"]]
    with FakeLLMServer("ok") as srv, LLMClient(srv.base_url, "big-model") as client:
        out = synthesize.run(
            item, cfg.synthesize, cfg.llm, cfg.evidence, _Provider(client), [item], Inputs.of(**inputs)
        )
        assert srv.requests > 0  # the model was asked
    rows = out[item]
    assert out["rejections"] and all(r.model == "big-model" for r in out["rejections"] if r.prompt_name != "absent")
    assert rows and {r.writer for r in rows} <= {"rule", "rule_fallback"}
    assert any(r.writer == "rule_fallback" for r in rows)  # a rejected reply's item came from the rules
    assert all(r.model == "rule" for r in rows)


EVENTS_CLIP = evidence_of(
    "e0e0e0e0000000000001",
    "00A",
    {"2-4@sound.event": {"Dog": 0.93}, "6-8@sound.event": {"Walk, footsteps": 0.91}, "levels.lufs": -24.0},
    duration_s=10.0,
)


def test_named_events_become_questions_answers_and_hypotheses():
    """A dog at 2-4 s and footsteps at 6-8 s: the rule-written items name them, say when, and each passes the
    audit; the hypotheses state their order, the contradiction the other way round."""
    from earmark.schemas.records import Caption
    from earmark.stages.synthesize.item_types.entailment.rules import rule_entailment

    pairs = rule_qa(EVENTS_CLIP, S).rows
    answers = " ".join(p.answer for p in pairs)
    assert "dog" in answers.lower() and "footsteps" in answers.lower(), answers
    premise = Caption(
        clip_id=EVENTS_CLIP.clip_id,
        domain="00A",
        prompt_name="p",
        prompt_sha="s",
        model="m",
        confidence=0.9,
        item_id="x:long:0",
        kind="long",
        ref_index=0,
        text="A dog barks, then footsteps are heard.",
    )
    rows, why = rule_entailment(EVENTS_CLIP, premise, S)
    assert why is None
    hyp = {r.label: r.hypothesis for r in rows}
    assert hyp["entailment"] in (
        "A dog barks, then footsteps are heard.",
        "First a dog barks, then footsteps are heard.",
    )
    assert hyp["contradiction"] in (
        "Footsteps are heard, then a dog barks.",
        "First footsteps are heard, then a dog barks.",
    )
    qc, _ = audit_items({"entailment": rows, "qa": pairs}, {EVENTS_CLIP.clip_id: EVENTS_CLIP}, 0.6, ITEM_TYPES)
    assert all(r.keep for r in qc), [(r.item_id, r.reason) for r in qc if not r.keep]


def _tagged_music(tags: dict[str, tuple[str, float]], domain: str = "0M0"):
    """A music clip whose tagger named instruments / genre / mood: {label: (group, probability)}."""
    from earmark.schemas.evidence import Fact

    ev = evidence_of("a1a1a1a1000000000000", domain, {"levels.lufs": -24.0}, duration_s=10.0)
    facts = ev.facts + [
        Fact(type="music.tag", value=label, number=p, subject=group, source="music", confidence=p)
        for label, (group, p) in tags.items()
    ]
    return ev.model_copy(update={"facts": facts})


def test_music_captions_name_instruments_genre_and_mood_and_pass_the_audit():
    from earmark.prompts import load_phrases
    from earmark.stages.facts.render import render
    from earmark.stages.synthesize.item_types.captions.rules import rule_captions

    ev = _tagged_music(
        {
            "piano": ("instrument", 0.97),
            "strings": ("instrument", 0.93),
            "classical": ("genre", 0.95),
            "calm": ("mood", 0.94),
            "slow": ("mood", 0.92),
        }
    )
    texts = [c.text for c in rule_captions(ev, "music", S)]
    assert texts == [
        "Classical music with piano and strings at a slow tempo.",
        "Calm piano and strings music in a classical style.",
        "Music: piano and strings, calm.",
    ]
    for t in texts:
        assert _kept(t, ev), t
    assert "- instruments heard: piano, strings" in render(ev, "music", load_phrases("evidence"))
    assert not _kept("Energetic rock music with drums.", ev)  # nothing heard says so


def test_music_tags_become_questions_and_answers():
    ev = _tagged_music({"piano": ("instrument", 0.97), "jazz": ("genre", 0.95)})
    pairs = rule_qa(ev, S).rows
    assert any("piano" in p.answer.lower() or "jazz" in p.answer.lower() for p in pairs), [p.answer for p in pairs]
    qc, _ = audit_items({"qa": pairs}, {ev.clip_id: ev}, 0.6, ITEM_TYPES)
    assert all(r.keep for r in qc), [(r.item_id, r.reason) for r in qc if not r.keep]


def test_what_the_sound_events_are_like_is_asked_only_where_one_is_named():
    """fresh15's blind check: "Which other sounds are heard?" answered "One or more distinct sound events" beside a
    bird no class named. A question about which sounds are heard, or what they are like, is asked only where an
    event is named; without one, the rule writer asks whether sound events are heard."""
    like = ("one of the sound events", "one sound event", "which other sounds", "what sound source")
    unnamed, named = [], []
    for i in range(40):
        cid = f"{i:020d}"
        unnamed += rule_qa(_ev("S0A", clip_id=cid), S).rows
        ev = evidence_of(cid, "00A", {"2-4@sound.event": {"Dog": 0.93}, "levels.lufs": -24.0}, duration_s=10.0)
        named += rule_qa(ev, S).rows
    assert not [r.question for r in unnamed if any(w in r.question.lower() for w in like)]
    asked = [r for r in named if any(w in r.question.lower() for w in like)]
    assert asked and all("dog" in r.answer.lower() for r in asked), [(r.question, r.answer) for r in asked]


def test_who_is_speaking_is_asked_only_where_the_voice_is_known():
    """fresh16's blind check: "Who is speaking in this clip?" answered 'One or more voices saying "…"', which names
    no one. The question is asked only where the speaker's gender is known; otherwise the pair asks whether anyone
    speaks (or another question)."""
    unknown = {"S1@speaker.gender": {"male": 0.5, "female": 0.5}, "speech.seconds": 5.0, "speakers.count": 1}
    ids = [hashlib.sha1(str(i).encode()).hexdigest()[:20] for i in range(40)]  # plans vary with the clip id
    asked = [r for cid in ids for r in rule_qa(evidence_of(cid, "S00", unknown, duration_s=8.0), S).rows]
    assert [r for r in asked if r.category == "direct_perception"]
    assert not [r for r in asked if r.question.lower().startswith("who")], [r.question for r in asked]
    known = [r for cid in ids for r in rule_qa(_ev("S00", clip_id=cid), S).rows]
    assert any(r.question.startswith("Who") and r.answer.startswith("A man is speaking") for r in known)


def test_who_is_speaking_is_answered_with_who_and_only_where_the_voices_are_sure():
    """fresh19's blind check: "Who is speaking in this clip?" answered "Words spoken by a male speaker" where the
    count was unsure (a woman spoke first), and 'Speech: "I'm sorry".', which names no one. A male voice among an
    unknown number gets "Is a male voice heard …?"; one man surely counted, "Who …?" answered "A man"."""
    unsure = {"V1@speaker.gender": {"male": 0.95}, "speech.seconds": 5.0, "speakers.count": (2.0, 0.4)}
    one = {"V1@speaker.gender": {"male": 0.95}, "speech.seconds": 5.0, "speakers.count": (1.0, 0.9)}
    ids = [hashlib.sha1(str(i).encode()).hexdigest()[:20] for i in range(40)]  # plans vary with the clip id
    asked = [r for cid in ids for r in rule_qa(evidence_of(cid, "S00", unsure, duration_s=8.0), S).rows]
    assert not [r for r in asked if r.question.lower().startswith("who")], [r.question for r in asked]
    voice = [r for r in asked if r.question.startswith("Is a male voice") or r.question.startswith("Can a male")]
    assert voice and all(r.answer == "Yes, a male voice can be heard." for r in voice), voice
    sure = [r for cid in ids for r in rule_qa(evidence_of(cid, "S00", one, duration_s=8.0), S).rows]
    who = [r for r in sure if r.question.startswith("Who")]
    assert who and all(r.answer == "A man is speaking in this clip." for r in who), [
        (r.question, r.answer) for r in who
    ]


def test_the_short_caption_names_what_else_is_heard_beside_the_main_content():
    """fresh18 shared "A male voice speaks." among speech clips with and without music or sound effects: the
    rule-written short caption adds what else is surely heard, in words the audit supports."""
    from earmark.stages.synthesize.item_types.captions.rules import combined_captions

    shorts = {name: [c.text for c in combined_captions(ev, "short", S)] for name, ev in CLIPS.items()}
    assert shorts["speech_music"] and all(t.endswith(", with music.") for t in shorts["speech_music"]), shorts
    assert shorts["speech_events"] and all(t.endswith(", with sound effects.") for t in shorts["speech_events"])
    assert not any(", with" in t for t in shorts["speech"] + shorts["music"]), shorts
    dog = evidence_of(
        "e0e0e0e0000000000002", "SMA", {"2-4@sound.event": {"Dog": 0.93}, "levels.lufs": -24.0}, duration_s=10.0
    )
    texts = [c.text for c in combined_captions(dog, "short", S)]
    assert texts and all(t.endswith(", with music and a dog.") for t in texts), texts
    for name, ev in [*CLIPS.items(), ("dog", dog)]:
        for text in shorts.get(name, texts):  # what is added keeps what the main content's caption keeps
            main = text.split(", with ")[0] + "."
            assert _kept(text, ev) == _kept(main, ev), (name, text)
    assert _kept("Someone speaks, with music and a dog.", dog)
