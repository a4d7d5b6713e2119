"""One source file cannot flood a benchmark (stages/ingest/sources.py): a 20-minute file of digital silence became 120
clips and 1,800 of 1,848 published captions were the same 15 sentences; a file that repeats itself, or a long
one, is bounded the same way; and a text is kept on clips of at most a few source files."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from earmark.core.config import FilterSection, IngestSection, load_config
from earmark.schemas import Caption, EntailmentHypothesis, QCResult
from earmark.stages.base import Inputs
from earmark.stages.filter import run_duplicates
from earmark.stages.filter.sources import same_source_rejections, spread_rejections
from earmark.stages.ingest import ingest_file
from earmark.stages.ingest.sources import audio_features, audio_similarity
from earmark.stages.synthesize import ITEM_TYPES

SR = 16_000


def _melody(rng: np.random.Generator, seconds: float) -> np.ndarray:
    """Random notes (a new pitch every 0.25 s) over a little noise: content that differs from any other draw."""
    notes = []
    for f in rng.uniform(150, 2000, int(seconds * 4)):
        t = np.arange(SR // 4) / SR
        notes.append(np.sin(2 * np.pi * f * t) * np.hanning(t.size))
    return (0.3 * np.concatenate(notes) + 0.01 * rng.standard_normal(len(notes) * SR // 4)).astype(np.float32)


def test_twenty_minutes_of_digital_silence_become_one_clip_and_one_quarantine_row(tmp_path):
    path = tmp_path / "silence.wav"
    sf.write(path, np.zeros(20 * 60 * SR, dtype=np.int16), SR)
    clips, quarantine = ingest_file(path, IngestSection(), "silence.wav")
    assert [c.clip_index for c in clips] == [0]
    [row] = quarantine
    assert row.source_path == "silence.wav#1-119"
    assert "119 of the file's 120 clips are silent" in row.reason and "#0" in row.reason


def test_a_recording_that_repeats_itself_keeps_one_copy_of_the_loop(tmp_path):
    loop = _melody(np.random.default_rng(1), 3.7)  # 3.7 s: every 10 s clip holds the loop at another phase
    path = tmp_path / "loop.flac"
    sf.write(path, np.tile(loop, 50), SR)  # 185 s: 18 full clips and a tail
    clips, quarantine = ingest_file(path, IngestSection(), "loop.flac")
    assert [c.clip_index for c in clips] == [0]
    [row] = [q for q in quarantine if "#" in q.source_path]
    assert row.source_path == "loop.flac#1-17" and "17 of the file's 18 clips repeat the audio" in row.reason


def test_a_long_varied_recording_is_capped_evenly_over_the_file(tmp_path):
    rng = np.random.default_rng(2)
    path = tmp_path / "lecture.wav"
    sf.write(path, np.concatenate([_melody(rng, 10.0) for _ in range(12)]), SR)
    clips, quarantine = ingest_file(path, IngestSection(), "lecture.wav")
    assert [c.clip_index for c in clips] == [0, 2, 3, 5, 6, 8, 9, 11]  # 8, first and last included
    [row] = quarantine
    assert row.source_path == "lecture.wav#1,4,7,10" and "max_clips_per_source = 8" in row.reason
    uncapped, none = ingest_file(path, IngestSection(max_clips_per_source=0), "lecture.wav")
    assert len(uncapped) == 12 and none == []


def test_the_audio_similarity_matches_a_loop_at_any_phase_and_nothing_else():
    rng = np.random.default_rng(3)
    loop = np.tile(_melody(rng, 3.7), 6)
    a, b = audio_features(loop[: 10 * SR]), audio_features(loop[10 * SR : 20 * SR])
    other = audio_features(_melody(rng, 10.0))
    noise = [audio_features(0.1 * rng.standard_normal(10 * SR).astype(np.float32)) for _ in range(2)]
    assert audio_similarity(a, b) > 0.95
    assert audio_similarity(a, other) < 0.5 and audio_similarity(*noise) < 0.5  # noise: evidence decides, below


def _caption(clip: str, text: str, kind: str = "long", n: int = 0, prompt: str = "p", model: str = "m") -> Caption:
    return Caption(
        clip_id=clip,
        domain="000",
        prompt_name=prompt,
        prompt_sha="0" * 16,
        model=model,
        confidence=0.9,
        item_id=f"{clip}:{kind}:{n}",
        kind=kind,
        ref_index=n,
        text=text,
    )


def test_a_clip_whose_evidence_repeats_an_earlier_clip_of_its_file_loses_its_items():
    items = {"captions": [_caption(c, f"text {c}") for c in ("a0", "a1", "a2", "b0")]}
    sources = {"a0": ("a.wav", 0), "a1": ("a.wav", 1), "a2": ("a.wav", 2), "b0": ("b.wav", 0)}
    same = frozenset({"A steady noise.", "A quiet recording.", "No speech.", "No music."})
    signatures = {"a0": same, "a1": same | {"Noisy."}, "a2": frozenset({"A woman speaks."}), "b0": same}
    rows = {r.clip_id: r for r in same_source_rejections(items, sources, signatures, 0.75)}
    assert [c for c, r in sorted(rows.items()) if not r.keep] == ["a1"]  # 4 of 5 lines alike; b0 is another file
    assert "clip a0 of the same source file a.wav (#0" in rows["a1"].reason


def test_a_text_is_kept_on_clips_of_at_most_three_sources_absence_counted_apart():
    clips = [f"c{i}" for i in range(5)]
    sources = {c: f"file{c}.wav" for c in clips}
    caps = [_caption(c, "A steady hum in a quiet room.") for c in clips]
    caps += [
        _caption(c, "No music is present in this audio.", "music", prompt="absent_rule", model="rule") for c in clips
    ]
    rejected = {("captions", "c0:long:0")}  # rejected by another check: it does not count
    rows = spread_rejections({"captions": caps}, sources, rejected, 3, 0, ITEM_TYPES)
    verdict = {r.item_id: r for r in rows}
    assert "c0:long:0" not in verdict
    assert [i for i, r in verdict.items() if r.item_id.endswith(":long:0") and r.keep] == [
        "c1:long:0",
        "c2:long:0",
        "c3:long:0",
    ]
    assert "kept on clips of 4 source files; at most filter.max_sources_per_text = 3" in verdict["c4:long:0"].reason
    assert all(r.keep for i, r in verdict.items() if ":music:" in i)  # absence sentences: no limit by default
    capped = spread_rejections({"captions": caps}, sources, set(), 3, 2, ITEM_TYPES)
    assert sum(r.keep for r in capped if ":music:" in r.item_id) == 2


def _hypotheses(clip: str, premise: str, texts: tuple[str, str, str]) -> list[EntailmentHypothesis]:
    return [
        EntailmentHypothesis(
            clip_id=clip,
            domain="000",
            prompt_name="p",
            prompt_sha="0" * 16,
            model="m",
            confidence=0.9,
            item_id=f"{clip}:entailment:{label}",
            premise_kind="long",
            premise=premise,
            label=label,
            hypothesis=text,
        )
        for label, text in zip(("entailment", "neutral", "contradiction"), texts)
    ]


def _qc(item, keep: bool = True, check: str = "claim_audit") -> QCResult:
    return QCResult(
        item_table="captions", item_id=item.item_id, clip_id=item.clip_id, check=check, keep=keep, reason=None, score=0
    )


@pytest.mark.parametrize("spread", [False, True])
def test_hypotheses_ship_only_with_a_kept_premise_and_as_a_whole_set(spread):
    """The premise is chosen at synthesis, before QC; a set whose premise QC rejected goes (check `premise`), and
    a set one of whose hypotheses is spread too far goes whole (check `source_spread`)."""
    good, bad = _caption("g", "A dog barks twice."), _caption("b", "A bird sings.")
    ent = _hypotheses("g", good.text, ("A dog is heard.", "The dog is brown.", "A cat meows."))
    ent += _hypotheses("b", bad.text, ("A bird is heard.", "It is a robin.", "A dog barks."))
    inputs = Inputs.of(
        captions=[good, bad],
        qa=[],
        instructions=[],
        entailment=ent,
        evidence=[],
        clips=[],
        qc=[_qc(good), _qc(bad, keep=False)],
    )
    cfg = load_config(None, {"filter.max_sources_per_text": 1 if spread else 3})
    if spread:  # x's contradiction is g's too: with one source per text, g (first by source) keeps it
        other = _caption("x", "A cat purrs.")
        inputs = Inputs.of(
            captions=[good, bad, other],
            qa=[],
            instructions=[],
            entailment=ent + _hypotheses("x", other.text, ("A cat is heard.", "The cat is old.", "A cat meows.")),
            evidence=[],
            clips=[],
            qc=[_qc(good), _qc(bad, keep=False), _qc(other)],
        )
    rows = run_duplicates(cfg, ITEM_TYPES, inputs)["qc"]
    gone = {r.item_id: r for r in rows if not r.keep and r.item_table == "entailment"}
    if not spread:
        assert set(gone) == {h.item_id for h in ent if h.clip_id == "b"}
        assert all(r.check == "premise" and "not one QC kept" in r.reason for r in gone.values())
    else:
        assert {i for i in gone if i.startswith("x:")} == {
            f"x:entailment:{x}" for x in ("entailment", "neutral", "contradiction")
        }
        assert "at most filter.max_sources_per_text = 1" in gone["x:entailment:contradiction"].reason
        assert "a set ships whole" in gone["x:entailment:neutral"].reason
    assert not [i for i in gone if i.startswith("g:")]


def test_filter_settings_have_their_documented_defaults():
    f, i = FilterSection(), IngestSection()
    assert (f.max_sources_per_text, f.max_sources_per_absence_text, i.max_clips_per_source) == (3, 0, 8)


def test_the_build_prints_what_it_dropped_from_a_long_silent_file(tmp_path, prefect_harness, capsys):
    from earmark.cli.main import main

    inputs = tmp_path / "in"
    inputs.mkdir()
    sf.write(inputs / "silence.wav", np.zeros(20 * 60 * SR, dtype=np.int16), SR)
    args = ["build", str(inputs), "-d", "silent", "--data-root", str(tmp_path / "data"), "--until", "ingest"]
    assert main([*args, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "silence.wav#1-119 | 119 of the file's 120 clips are silent" in out


def test_an_absence_sentence_counts_apart_in_any_table():
    """A QA answer that is an absence sentence ("No music is present in this audio.") is counted with them."""
    from earmark.schemas import QAPair

    clips = [f"c{i}" for i in range(5)]
    sentence = "No music is present in this audio."
    caps = [_caption(c, sentence, "music", prompt="absent_rule", model="rule") for c in clips]
    qa = [
        QAPair(
            clip_id=c,
            domain="000",
            prompt_name="qa_rule",
            prompt_sha="0" * 16,
            model="rule",
            confidence=0.9,
            item_id=f"{c}:qa:0",
            qa_index=0,
            category="direct_perception",
            difficulty="basic",
            question="Is there music?",
            answer=sentence,
        )
        for c in clips
    ]
    rows = spread_rejections({"captions": caps, "qa": qa}, {c: f"{c}.wav" for c in clips}, set(), 3, 0, ITEM_TYPES)
    assert all(r.keep for r in rows)
