"""QC checks on hand-built items: rule filters, the margin filter (offline evidence backend and a randomly
initialised tiny CLAP), and the per-check summary."""

from __future__ import annotations

import numpy as np
import pytest

from earmark.core.config import FilterSection
from earmark.experts.models import MissingWeights
from earmark.prompts import load_phrases
from earmark.schemas.records import Caption, EntailmentHypothesis, InstructionTriple, QAPair
from earmark.stages.filter.margin import (
    ClapBackend,
    EvidenceSbertBackend,
    MarginBackend,
    YamnetSbertBackend,
    margin_checks,
    require_clap,
)
from earmark.stages.filter.qc import (
    ClipContext,
    check_hallucination,
    check_ifeval_answer,
    duplicate_hypotheses,
    kept_ids,
    run_checks,
    summary,
    transcript_overlap,
)
from earmark.stages.synthesize import ITEM_TYPES
from earmark.stages.synthesize.evidence import evidence_of

S = FilterSection()


def _lin(clip="c", domain="S0A", conf=0.9, model="m"):
    return dict(clip_id=clip, domain=domain, prompt_name="p", prompt_sha="s", model=model, confidence=conf)


def _cap(kind, text, clip="c", domain="S0A", i=0, conf=0.9, model="m"):
    return Caption(**_lin(clip, domain, conf, model), item_id=f"{clip}:{kind}:{i}", kind=kind, ref_index=i, text=text)


def _hyp(label, text, clip="c", premise="A dog barks while cars pass on a wet street.", i=0):
    return EntailmentHypothesis(
        **_lin(clip),
        item_id=f"{clip}:ent:{label}:{i}",
        premise_kind="long",
        premise=premise,
        label=label,
        hypothesis=text,
    )


def _ins(answer, rule, content="", conf=0.9):
    return InstructionTriple(
        **_lin(conf=conf),
        item_id=f"c:if:{rule}:{answer[:5]}",
        dimension="Format",
        instruction="Answer.",
        answer=answer,
        rule=rule,
        rule_content=content,
    )


@pytest.fixture(scope="module")
def embed():
    from earmark.metrics.similarity import embed as _embed
    from earmark.metrics.similarity import load_sbert

    model = load_sbert(None)
    return lambda texts: _embed(model, texts)


def test_confidence_applies_to_every_item_table():
    low = dict(conf=0.2)
    items = run_checks(
        {
            "captions": [_cap("short", "A man talks.", **low)],
            "qa": [
                QAPair(
                    **_lin(conf=0.2),
                    item_id="c:qa:0",
                    qa_index=0,
                    category="direct_perception",
                    difficulty="basic",
                    question="What is heard?",
                    answer="A man talking.",
                )
            ],
            "entailment": [_hyp("neutral", "Someone waits for a bus.")],
            "instructions": [_ins("YES", 3, conf=0.2)],
        },
        [],
        S,
        ITEM_TYPES,
    )
    conf = {r.item_table: r for r in items if r.check == "confidence"}
    assert set(conf) == {"captions", "qa", "entailment", "instructions"}
    assert not conf["captions"].keep and "0.20 < 0.5" in conf["captions"].reason
    assert conf["entailment"].keep and conf["entailment"].score == pytest.approx(0.9)


def test_absence_and_presence_claims_in_long_captions_follow_the_evidence():
    from earmark.stages.filter.claims import audit, claim_verdict

    def keep(text, domain):
        return claim_verdict(audit(text, evidence_of("c", domain, {"levels.lufs": -30.0})))[0]

    assert not keep("A quiet recording with no speech, only sound events.", "S0A")  # speech is there
    assert not keep("Sound events; nobody is talking.", "S00")
    assert keep("No music, just speech over sound events.", "S0A")  # other content's absence is fine
    assert keep("Sound events with no speech at all.", "00A")
    assert not keep("Upbeat music plays.", "S00")  # a false presence is caught too, not only false absence


def test_hallucinated_transcript_rejects_only_items_that_use_it():
    ctx = ClipContext("Thank you for watching. Please subscribe.", 0.8, ("known_phrase",))
    quoting = _cap("speech", "A voice says thank you for watching and asks to subscribe.")
    ok, reason, score = check_hallucination(ITEM_TYPES["captions"].texts, quoting, ctx, S)
    assert not ok and "known_phrase" in reason and "thank you for" in reason and score == 0.8
    assert check_hallucination(
        ITEM_TYPES["captions"].texts, _cap("speech", "A man speaks calmly in a small room."), ctx, S
    )[0]
    # the same transcript on a clip whose check did not flag it is trusted
    assert check_hallucination(ITEM_TYPES["captions"].texts, quoting, ClipContext(ctx.transcript, 0.1, ()), S)[0]
    qa = QAPair(
        **_lin(),
        item_id="c:qa:1",
        qa_index=1,
        category="direct_perception",
        difficulty="basic",
        question="What does the speaker say?",
        answer="They say 'you'.",
    )
    assert not check_hallucination(ITEM_TYPES["qa"].texts, qa, ClipContext("you", 0.8, ("known_phrase",)), S)[0]
    assert transcript_overlap("A man says hello.", "you") is None


def test_ifeval_expected_answer_must_pass_its_rule():
    assert check_ifeval_answer(_ins("A DOG BARKS.", 3), S)[0]
    ok, reason, _ = check_ifeval_answer(_ins("A dog barks.", 3), S)
    assert not ok and "fails its own rule 3" in reason
    assert not check_ifeval_answer(_ins('{"sound": "dog"}', 13, '{"sound": "", "place": ""}'), S)[0]
    assert check_ifeval_answer(_ins('{"sound": "dog", "place": "street"}', 13, '{"sound": "", "place": ""}'), S)[0]
    ok, reason, _ = check_ifeval_answer(_ins("x", 11, "9"), S)
    assert not ok and reason.startswith("invalid rule")


def test_duplicate_hypotheses_by_text_and_embedding(embed):
    hyps = [
        _hyp("entailment", "A dog is barking outdoors."),
        _hyp("contradiction", "A dog is barking outdoors!"),  # same after normalisation
        _hyp("neutral", "The owner is calling the dog home for dinner."),
        _hyp("entailment", "A dog barks while cars pass on a wet street.", clip="d"),  # = its premise
        _hyp("neutral", "A dog barks as cars drive past on a wet street.", clip="d", i=1),  # near copy
        _hyp("contradiction", "A cat purrs quietly indoors.", clip="d", i=2),
    ]
    v = duplicate_hypotheses(hyps, [], S, embed)
    assert [x[0] for x in v] == [False, False, True, False, False, True]
    assert "duplicates hypothesis" in v[0][1] and "similarity 1.00" in v[0][1]
    assert "duplicates the caption" in v[3][1]
    assert v[2][2] < S.duplicate_similarity
    # without an embedder only exact (normalised) duplicates are found, and the check name says so
    rows = run_checks({"entailment": hyps}, [], S, ITEM_TYPES)
    assert {r.check for r in rows if r.item_table == "entailment"} >= {"duplicate_hypothesis:text-only"}


class _Vectors(MarginBackend):
    """Fixed embeddings: each clip's anchor is a unit axis, a caption points at the clip it describes."""

    check = "margin:test-vectors"

    def __init__(self, about: dict[str, str], clips: list[str]):
        self.about, self.axis = about, {c: np.eye(len(clips))[i] for i, c in enumerate(clips)}

    def anchors(self, keys):
        return np.stack([self.axis[c] for c, _ in keys])

    def texts(self, texts):
        return np.stack([self.axis[self.about[t]] for t in texts])


def test_margin_rule_against_random_other_captions():
    clips = [f"k{i}" for i in range(8)]
    caps = [_cap("long", f"caption about {c}", clip=c) for c in clips]
    about = {f"caption about {c}": c for c in clips}
    about["caption about k0"] = "k1"  # k0's caption describes k1: mismatched
    rows = margin_checks(caps, _Vectors(about, clips), FilterSection(margin_threshold=6.0))
    by = {r.clip_id: r for r in rows}
    assert not by["k0"].keep and by["k0"].score <= 0 and "over 6 other captions" in by["k0"].reason
    assert all(by[c].keep and by[c].score > 80 for c in clips[2:])
    # deterministic: the same negatives every time
    assert [r.score for r in rows] == [
        r.score for r in margin_checks(caps, _Vectors(about, clips), FilterSection(margin_threshold=6.0))
    ]
    alone = margin_checks(caps[:1], _Vectors(about, clips), FilterSection(margin_threshold=6.0))
    assert alone[0].keep and alone[0].score is None


def _evidence(clip, domain, transcript=None, tags=None):
    speech = domain[0] == "S"
    values: dict = {}
    values |= (
        {
            "speech.seconds": 6.0,
            "speech.ratio": 0.8,
            "speech.segments": 1,
            "speech.transcript": transcript,
            "speech.words_per_s": 2.5,
        }
        if speech
        else {"speech.seconds": 0.0, "speech.ratio": 0.0, "speech.segments": 0}
    )
    values |= {
        "sound_tags.clip": tags or {},
        "levels.lufs": -20.0,
        "levels.rms_dbfs": -22.0,
        "quality.dnsmos_ovrl": 3.2,
        "quality.dnsmos_bak": 3.0,
    }
    probs = [0.97 if domain[i] != "0" else 0.03 for i in range(3)]  # sure (presence_confidence 0.95)
    return evidence_of(clip, domain, values, duration_s=8.0, probs=probs)


def test_evidence_margin_backend_flags_a_swapped_caption(embed):
    ev = {
        "a": _evidence("a", "S00", "the weather will be sunny tomorrow"),
        "b": _evidence("b", "0M0"),
        "c": _evidence("c", "00A", tags={"impulsive sound": 0.9}),
        "d": _evidence("d", "S00", "please close the door when you leave"),
    }
    caps = [
        _cap("long", "A man reads a weather forecast saying it will be sunny tomorrow.", clip="a", domain="S00"),
        _cap("long", "Music with a steady beat at a moderate tempo and sustained chords.", clip="b", domain="0M0"),
        _cap("long", "Short impulsive knocks and hits sound at irregular moments.", clip="c", domain="00A"),
        # planted: d's caption describes music, not d's speech
        _cap("long", "Music with a steady beat and sustained chords plays throughout.", clip="d", domain="S00"),
    ]
    rows = margin_checks(
        caps, EvidenceSbertBackend(ev, embed, load_phrases("evidence")), FilterSection(margin_negatives=6)
    )
    by = {r.clip_id: r for r in rows}
    assert {r.check for r in rows} == {"margin:evidence-sbert"}
    assert not by["d"].keep and by["a"].keep and by["c"].keep, [(r.clip_id, r.score) for r in rows]
    assert by["a"].score > by["d"].score


def test_yamnet_margin_backend_flags_a_swapped_caption_from_the_audio_scores(embed):
    """The anchor is what YAMNet heard (its clip scores), not what the experts said: a caption of music on a clip
    where YAMNet hears a dog is rejected, and a clip without YAMNet scores is an error naming the setting."""
    from earmark.experts.yamnet.events import class_names

    names = class_names()

    def heard(**scores):
        v = np.full(len(names), 0.01, np.float32)
        for name, s in scores.items():
            v[names.index(name.replace("_", " "))] = s
        return v.tolist()

    yam = {
        "a": heard(Dog=0.9, Bark=0.8, Animal=0.9),
        "b": heard(Music=0.95, Piano=0.8),
        "c": heard(Speech=0.95),
        "d": heard(Dog=0.85, Bark=0.7, Animal=0.9),
    }
    caps = [
        _cap("long", "A dog barks loudly several times in a quiet room.", clip="a", domain="00A"),
        _cap("long", "Gentle piano music plays a slow melody throughout.", clip="b", domain="0M0"),
        _cap("long", "A man speaks calmly, reading a short announcement.", clip="c", domain="S00"),
        # planted: d's caption describes piano music, not d's dog
        _cap("long", "Soft piano music with sustained chords plays throughout.", clip="d", domain="00A"),
    ]
    rows = margin_checks(caps, YamnetSbertBackend(yam, embed), FilterSection(margin_backend="yamnet"))
    by = {r.clip_id: r for r in rows}
    assert {r.check for r in rows} == {"margin:yamnet-sbert"}
    assert not by["d"].keep and by["a"].keep and by["b"].keep and by["c"].keep, [(r.clip_id, r.score) for r in rows]
    with pytest.raises(ValueError, match="analyze.yamnet = true"):
        margin_checks(caps, YamnetSbertBackend({"a": yam["a"]}, embed), FilterSection(margin_backend="yamnet"))


def test_clap_backend_on_a_random_tiny_model(tmp_path):
    from earmark.metrics.similarity import default_sbert_path
    from support.random_weights import clap_model

    with pytest.raises(MissingWeights, match=r"laion/clap-htsat-unfused.*config\.json"):
        require_clap("laion/clap-htsat-unfused", tmp_path)
    clap_model(tmp_path / "laion" / "clap-htsat-unfused", default_sbert_path())
    path = require_clap("laion/clap-htsat-unfused", tmp_path)
    sr = 16_000
    t = np.arange(sr) / sr
    audio = {f"k{i}": (0.3 * np.sin(2 * np.pi * (220 * (i + 1)) * t)).astype(np.float32) for i in range(4)}
    backend = ClapBackend(path, audio, sr)
    caps = [_cap("long", f"A steady tone number {i} plays.", clip=f"k{i}") for i in range(4)]
    rows = margin_checks(caps, backend, FilterSection(margin_backend="clap"))
    assert len(rows) == 4 and {r.check for r in rows} == {"margin:clap"}
    assert all(r.score is not None and np.isfinite(r.score) for r in rows)
    assert all(r.keep == (r.score >= 6.0) for r in rows)
    a = backend.anchors([("k0", "long"), ("k1", "long")])
    assert a.shape == (2, 8) and np.allclose(np.linalg.norm(a, axis=1), 1, atol=1e-5)


def test_summary_has_a_row_per_table_and_check():
    rows = run_checks(
        {
            "captions": [
                _cap("short", "A man talks.", conf=0.2),
                _cap("long", "A man talks in a room with rain.", i=1),
            ],
            "instructions": [_ins("lower case only", 4)],
        },
        [],
        S,
        ITEM_TYPES,
    )
    table = summary(rows)
    by = {(r["table"], r["check"]): r for r in table}
    assert by[("captions", "confidence")]["rejected"] == 1 and by[("captions", "confidence")]["kept"] == 1
    assert by[("instructions", "ifeval_answer")]["kept"] == 1
    assert kept_ids(rows) == {"c:long:1", "c:if:4:lower"}


def test_one_fact_supports_a_bounded_number_of_item_groups():
    """A wrong speaker count copied by the templates into every item of a clip: past the budget, the item groups
    resting on it are rejected (the references of one caption kind count once), presence facts are not counted,
    and items another check rejects take no budget."""
    from earmark.schemas.outcomes import ItemClaim, QCResult
    from earmark.schemas.records import QAPair
    from earmark.stages.filter.budget import fact_budget

    caps = [_cap(k, f"Two people talk ({k} {i}).", i=i) for k in ("short", "long", "speech") for i in range(3)]
    qa = [
        QAPair(
            **_lin(),
            item_id=f"c:qa:{i}",
            qa_index=i,
            category="direct_perception",
            difficulty="basic",
            question="Who speaks?",
            answer=f"Two people ({i}).",
        )
        for i in range(4)
    ]

    def claims(item, table):
        rows = [("speakers", "speakers.count"), ("presence", "content.speech=present")]
        return [
            ItemClaim(
                item_table=table,
                item_id=item.item_id,
                clip_id="c",
                field="text",
                claim_type=t,
                value="2",
                span="two people",
                specific=True,
                verdict="supported",
                fact=f,
                reason="",
            )
            for t, f in rows
        ]

    found = [c for x in caps for c in claims(x, "captions")] + [c for x in qa for c in claims(x, "qa")]
    rejected_first_qa = [
        QCResult(item_table="qa", item_id="c:qa:0", clip_id="c", check="x", keep=False, reason="r", score=None)
    ]
    out = fact_budget({"captions": caps, "qa": qa}, found, rejected_first_qa, budget=4, kinds=ITEM_TYPES)
    keep = {r.item_id: r.keep for r in out}
    assert all(keep[c.item_id] for c in caps)  # 3 caption groups: short, long, speech
    assert keep["c:qa:0"]  # already rejected by another check: no verdict against it, and no budget taken
    assert keep["c:qa:1"] and not keep["c:qa:2"] and not keep["c:qa:3"]  # the 4th group, then over
    why = next(r.reason for r in out if r.item_id == "c:qa:2")
    assert "speakers.count" in why and "content.speech" not in why
    assert fact_budget({"captions": caps}, found, [], budget=0, kinds=ITEM_TYPES) == []  # off
