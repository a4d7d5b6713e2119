"""The embedded profile's expert slots on tiny real audio: espeak-ng voices, clicks, chords, reverb, noise."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr
from scipy import signal

from earmark.core.config import AnalyzeSection
from earmark.experts import build_experts
from earmark.experts.acoustics import RoomAcousticsExpert, bandwidth_hz, reverb_estimates
from earmark.experts.asr import WhisperASRExpert
from earmark.experts.asr_check import HallucinationCheckExpert, flags_for
from earmark.experts.base import SAMPLE_RATE as SR
from earmark.experts.base import ClipAudio
from earmark.experts.diarize import ResemblyzerDiarizationExpert
from earmark.experts.music import HPSSSeparationExpert, LibrosaMusicExpert, estimate_key
from earmark.experts.speakers import PitchSpeakerAttributesExpert, voice_labels
from earmark.experts.tags import CoarseTagsExpert
from earmark.experts.vad import SileroVADExpert
from earmark.schemas import TABLES
from earmark.schemas.records import DomainDecision, SpeechActivity, TimeSpan, Transcript, Word

MALE, FEMALE = ("en-us+m3", 30), ("en-us+f2", 60)
GAP = np.zeros(SR // 2, np.float32)


def _say(tmp: Path, text: str, voice: tuple[str, int]) -> np.ndarray:
    wav = tmp / "say.wav"
    subprocess.run(
        ["espeak-ng", "-v", voice[0], "-p", str(voice[1]), "-w", str(wav), text], check=True, capture_output=True
    )
    audio, sr = sf.read(wav, dtype="float32")
    return soxr.resample(audio, sr, SR).astype(np.float32)


def _chord(midi: list[int], seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    x = sum(np.sin(2 * np.pi * 440 * 2 ** ((m - 69) / 12) * h * t) / h for m in midi for h in range(1, 5))
    return (x / len(midi)).astype(np.float32)


def _clicks(bpm: float, seconds: float, seed: int = 1) -> np.ndarray:
    x, n = np.zeros(int(seconds * SR)), int(0.02 * SR)
    burst = np.random.default_rng(seed).standard_normal(n) * np.exp(-np.arange(n) / 80)
    for t in np.arange(0.25, seconds - 0.05, 60.0 / bpm):
        x[int(t * SR) : int(t * SR) + n] += burst
    return x.astype(np.float32)


def _domain(clip_id: str, code: str) -> DomainDecision:
    return DomainDecision(
        clip_id=clip_id,
        expert="domain",
        backend="test",
        expert_version="1",
        domain=code,
        speech_prob=float(code[0] == "S"),
        music_prob=float(code[1] == "M"),
        sound_prob=float(code[2] == "A"),
        silent=code == "000",
        features=[],
    )


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ClipAudio]:
    tmp = tmp_path_factory.mktemp("voices")
    m1 = _say(tmp, "The train to the city leaves from platform four.", MALE)
    f1 = _say(tmp, "I think the meeting was moved to Thursday.", FEMALE)
    m2 = _say(tmp, "Please water the plants while I am away.", MALE)
    two = np.concatenate([m1, GAP, f1, GAP, m2])[: 10 * SR]
    one = np.concatenate([m1, GAP, m2])
    pad = np.zeros(SR, np.float32)
    fox = np.concatenate([pad, _say(tmp, "the quick brown fox jumps over the lazy dog", MALE), pad])
    audio = {
        "two": two,
        "one": one,
        "fox": fox,
        "tone": _chord([57, 60, 64], 3.0) * 0.3,
        "zeros": np.zeros(2 * SR, np.float32),
    }
    return {k: ClipAudio(k, v) for k, v in audio.items()}


@pytest.fixture(scope="module")
def vad(speech: dict[str, ClipAudio]) -> dict[str, SpeechActivity]:
    return {r.clip_id: r for r in SileroVADExpert().analyze(list(speech.values()), {})}  # type: ignore[misc]


@pytest.fixture(scope="module")
def diarized(speech, vad) -> dict:
    return {r.clip_id: r for r in ResemblyzerDiarizationExpert().analyze(list(speech.values()), {"vad": vad})}


# ------------------------------------------------------------------------------------------ speakers
def test_diarization_finds_two_voices_and_when_they_speak(diarized, speech) -> None:
    two = diarized["two"]
    assert two.n_speakers == 2 and two.skipped_reason is None
    # The female sentence sits in the middle: S2 must hold most of 3.3–5.3 s and nothing at the ends.
    s2 = [t for t in two.turns if t.speaker == "S2"]
    covered = sum(max(0.0, min(t.end_s, 5.3) - max(t.start_s, 3.3)) for t in s2)
    assert covered > 1.2 and all(t.start_s > 2.0 and t.end_s < 7.0 for t in s2), two.turns
    assert all(0 <= t.start_s < t.end_s <= speech["two"].duration_s for t in two.turns)
    assert diarized["one"].n_speakers == 1 and diarized["fox"].n_speakers == 1
    assert diarized["tone"].n_speakers == 0 and diarized["tone"].turns == [] and diarized["tone"].skipped_reason


def test_speaker_attributes_read_pitch_and_never_guess_accent(diarized, speech, vad) -> None:
    rows = {
        r.clip_id: r
        for r in PitchSpeakerAttributesExpert().analyze(list(speech.values()), {"diarization": diarized, "vad": vad})
    }
    by_spk = {p.speaker: p for p in rows["two"].speakers}
    male, female = by_spk["S1"], by_spk["S2"]
    assert male.gender[0].label == "male" and male.gender[0].prob > 0.9 and male.pitch_median_hz < 140
    assert female.gender[0].label == "female" and female.gender[0].prob > 0.9 and female.pitch_median_hz > 180
    for p in (male, female):
        assert p.accent == [] and p.method.startswith("heuristic:")
        assert p.age_band[0].label == "adult"
        assert {lp.label for lp in p.emotion} == {"calm", "neutral", "animated"}
        assert sum(lp.prob for lp in p.emotion) == pytest.approx(1.0, abs=1e-3)
    assert rows["tone"].speakers == [] and rows["tone"].skipped_reason
    # the speech segments grouped by pitch: the man and the woman of "two", the one voice of "one"
    assert [v.gender[0].label for v in rows["two"].voices] == ["male", "female"]
    # and each voice has the listener's opinion (EfficientAT mn04): espeak's man is heard as a man
    assert all([lp.label for lp in v.gender_check] == ["male", "female"] for v in rows["two"].voices)
    male_check = {lp.label: lp.prob for lp in rows["two"].voices[0].gender_check}
    assert male_check["male"] > male_check["female"]
    assert len(rows["one"].voices) == 1 and rows["one"].voices[0].segments >= 1


def test_voice_groups_split_only_at_a_wide_pitch_gap() -> None:
    from types import SimpleNamespace

    from earmark.experts.speakers import voice_groups

    times = np.arange(500) * 0.02
    segs = [SimpleNamespace(start_s=a, end_s=a + 1.5) for a in (0.0, 2.0, 4.0, 6.0)]
    rng = np.random.default_rng(1)

    def track(per_segment):
        f0 = np.full(500, np.nan)
        for seg, hz in zip(segs, per_segment):
            on = (times >= seg.start_s) & (times < seg.end_s)
            f0[on] = hz * 2 ** (rng.normal(0, 0.05, on.sum()))
        return f0

    two = voice_groups(track([118, 215, 122, 225]), times, segs)
    assert [round(v.pitch_median_hz, -1) for v in two] == [120, 220] and [v.segments for v in two] == [2, 2]
    one = voice_groups(track([110, 125, 140, 118]), times, segs)  # one voice moving within 4 semitones
    assert len(one) == 1 and one[0].segments == 4
    thin = voice_groups(track([118, 122, 120, np.nan]), times, segs[:3] + [SimpleNamespace(start_s=7.9, end_s=8.0)])
    assert len(thin) == 1
    beep = voice_groups(track([118, 422, 122, 120]), times, segs)  # an alarm's 422 Hz tone is no voice
    assert len(beep) == 1 and beep[0].segments == 3
    floor = np.full(500, 65.0)  # pYIN's floor: a failed track, no voice
    assert voice_groups(floor, times, segs) == []


def test_arousal_follows_pitch_and_level_spread() -> None:
    rng = np.random.default_rng(0)
    flat = voice_labels(120 + rng.normal(0, 1, 200), -25 + rng.normal(0, 0.5, 200))
    lively = voice_labels(np.exp(rng.uniform(np.log(100), np.log(300), 200)), rng.uniform(-40, -10, 200))
    assert flat["emotion"][0].label == "calm" and lively["emotion"][0].label == "animated"
    child = voice_labels(330 + rng.normal(0, 10, 200), np.full(200, -20.0))
    assert child["age_band"][0].label == "child"


# ------------------------------------------------------------------------------------------ asr_check
def _transcript(text: str, words: list[tuple[str, float, float, float]], avg_logprob: float = -0.3) -> Transcript:
    return Transcript(
        clip_id="c",
        expert="asr",
        backend="t",
        expert_version="1",
        text=text,
        language="en",
        language_prob=1.0,
        words=[Word(word=w, start_s=s, end_s=e, prob=p) for w, s, e, p in words],
        avg_logprob=avg_logprob,
        no_speech_prob=0.1,
        vad_speech_s=2.0,
        skipped_reason=None,
    )


def test_hallucination_flags() -> None:
    speech = SpeechActivity(
        clip_id="c",
        expert="vad",
        backend="t",
        expert_version="1",
        segments=[TimeSpan(start_s=1.0, end_s=3.0)],
        speech_s=2.0,
        speech_ratio=0.4,
        max_prob=0.9,
    )
    silence = speech.model_copy(update={"segments": [], "speech_s": 0.0})
    outro = _transcript(
        "Thank you for watching!",
        [("Thank", 5.0, 5.2, 0.6), ("you", 5.2, 5.3, 0.7), ("for", 5.3, 5.4, 0.7), ("watching!", 5.4, 5.8, 0.6)],
    )
    flags, score = flags_for(outro, silence)
    assert {"known_phrase", "no_vad_support"} <= set(flags) and score > 0.9
    loop = _transcript(
        "I'm going to go. I'm going to go. I'm going to go.",
        [(w, 1.0 + 0.1 * i, 1.1 + 0.1 * i, 0.9) for i, w in enumerate("I'm going to go".split() * 3)],
    )
    assert flags_for(loop, speech)[0] == ["repetition"]
    lone = _transcript("you", [("you", 1.5, 1.7, 0.2)], avg_logprob=-1.4)
    assert set(flags_for(lone, speech)[0]) == {"known_phrase", "low_confidence"}
    good = _transcript(
        "The train leaves at four.",
        [(w, 1.1 + 0.3 * i, 1.3 + 0.3 * i, 0.95) for i, w in enumerate("The train leaves at four.".split())],
    )
    assert flags_for(good, speech) == ([], 0.0)


def test_real_transcript_of_real_speech_is_not_flagged(speech, vad) -> None:
    clips = [speech["fox"], speech["tone"]]
    asr = {r.clip_id: r for r in WhisperASRExpert().analyze(clips, {"vad": vad})}
    fox, tone = HallucinationCheckExpert().analyze(clips, {"vad": vad, "asr": asr})
    assert fox.hallucination_score < 0.4 and fox.vad_support > 0.9, (asr["fox"].text, fox.flags)
    assert tone.flags == [] and tone.hallucination_score == 0.0  # ASR skipped: nothing to doubt


# ------------------------------------------------------------------------------------------- acoustics
def _bursts(seed: int = 0) -> np.ndarray:
    rng, x = np.random.default_rng(seed), np.zeros(int(8.5 * SR))
    for k in range(10):
        s = int(k * 0.85 * SR)
        x[s : s + int(0.05 * SR)] = rng.standard_normal(int(0.05 * SR))
    return x


def _reverberate(x: np.ndarray, rt60: float, drr_db: float, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(1.5 * SR)) / SR
    tail = rng.standard_normal(t.size) * np.exp(-6.9 * t / rt60)  # energy falls 60 dB in rt60
    tail[: int(0.002 * SR)] = 0.0
    h = tail / np.sqrt(np.sum(tail**2))
    h[0] += 10 ** (drr_db / 20)
    y = signal.fftconvolve(x, h)[: x.size]
    return 0.3 * y / np.abs(y).max() + 1e-4 * rng.standard_normal(x.size)


def test_blind_rt60_matches_the_room_and_dry_sound_has_none() -> None:
    for rt60 in (0.4, 0.9):
        est, _, n = reverb_estimates(_reverberate(_bursts(), rt60, 3.0))
        assert n >= 5 and est == pytest.approx(rt60, rel=0.15)
    assert reverb_estimates(0.3 * _bursts() + 1e-4 * np.random.default_rng(2).standard_normal(int(8.5 * SR)))[0] is None
    _, near, _ = reverb_estimates(_reverberate(_bursts(), 0.6, 10.0))
    _, far, _ = reverb_estimates(_reverberate(_bursts(), 0.6, 0.0))
    assert near > far + 4  # the DRR proxy follows the direct-path share


def test_snr_bandwidth_and_plcmos(speech, vad) -> None:
    rng = np.random.default_rng(0)
    fox = speech["fox"].samples
    segs = vad["fox"].segments
    mask = np.zeros(fox.size, bool)
    for s in segs:
        mask[int(s.start_s * SR) : int(s.end_s * SR)] = True
    noise = rng.standard_normal(fox.size) * np.sqrt(np.mean(fox[mask] ** 2) / 10)  # 10 dB SNR
    white = (0.1 * rng.standard_normal(4 * SR)).astype(np.float32)
    phone = soxr.resample(soxr.resample(white, SR, 8000), 8000, SR).astype(np.float32)
    clips = [
        ClipAudio("noisy", (fox + noise).astype(np.float32)),
        ClipAudio("white", white),
        ClipAudio("phone", phone),
        speech["zeros"],
    ]
    ctx = {r.clip_id: r for r in SileroVADExpert().analyze(clips, {})}
    noisy, w, p, z = RoomAcousticsExpert().analyze(clips, {"vad": ctx})
    assert noisy.snr_db == pytest.approx(10.0, abs=2.0)
    assert w.bandwidth_hz > 7500 and p.bandwidth_hz == pytest.approx(3900, rel=0.08)
    assert bandwidth_hz(np.zeros(SR)) == 0.0 and z.bandwidth_hz == 0.0 and z.snr_db is None and z.rt60_s is None
    assert noisy.plcmos is not None and 1.0 <= noisy.plcmos <= 5.0 and w.plcmos is None
    assert all(r.backend.startswith("heuristic:") and "proxy" in r.method for r in (noisy, w, p, z))
    # the GPU path's PLCMOS (the graph's torch port; run here on the CPU) scores as ONNX Runtime does
    from earmark.experts.acoustics import plcmos, plcmos_features, plcmos_torch

    signals = [clips[0].samples, fox]
    assert plcmos_torch([plcmos_features(x) for x in signals], "cpu") == pytest.approx(
        [plcmos(x) for x in signals], abs=1e-4
    )


# ---------------------------------------------------------------------------------------------- music
def test_music_tempo_key_and_hpss() -> None:
    clips = [
        ClipAudio("am100", 0.3 * _clicks(100, 8.0) + 0.15 * _chord([57, 60, 64], 8.0)),
        ClipAudio("c128", 0.3 * _clicks(128, 8.0) + 0.15 * _chord([60, 64, 67], 8.0)),
        ClipAudio("chord", 0.2 * _chord([52, 55, 59], 4.0)),
        ClipAudio("clicks", 0.3 * _clicks(90, 4.0)),
        ClipAudio("talk", np.zeros(SR, np.float32)),
    ]
    dom = {c.clip_id: _domain(c.clip_id, "S00" if c.clip_id == "talk" else "0M0") for c in clips}
    sep = {r.clip_id: r for r in HPSSSeparationExpert().analyze(clips, {"domain": dom})}
    rows = {r.clip_id: r for r in LibrosaMusicExpert().analyze(clips, {"domain": dom, "separation": sep})}
    assert rows["am100"].tempo_bpm == pytest.approx(100, rel=0.03) and rows["am100"].key == "A minor"
    assert rows["c128"].tempo_bpm == pytest.approx(128, rel=0.03) and rows["c128"].key == "C major"
    assert rows["chord"].key == "E minor" and rows["chord"].key_confidence > 0.5
    assert rows["am100"].beat_strength > 0.5 and len(rows["am100"].beat_times_s) >= 10
    harmonic = {s.stem: s.energy_share for s in sep["chord"].stems}["harmonic"]
    assert harmonic > 0.9 and rows["chord"].harmonic_ratio == harmonic
    assert {s.stem: s.energy_share for s in sep["clicks"].stems}["percussive"] > 0.5
    assert len(rows["am100"].loudness_contour_db) == 16 and rows["am100"].tagger.startswith("musictags:")
    assert len(rows["am100"].window_tags) == 4 and rows["am100"].candidate_tags  # tests/test_music_tags.py
    talk = rows["talk"]
    assert not talk.analyzed and "no music" in talk.skipped_reason and talk.tempo_bpm is None
    # the octave check: 100 BPM is stated with confidence; a 162 BPM metronome fits 81 BPM as well, so its
    # tempo is measured but not confident enough to state (no "81 → 162" errors reach a caption)
    assert rows["am100"].tempo_confidence > 0.5
    fast = LibrosaMusicExpert().analyze(
        [ClipAudio("f", 0.3 * _clicks(162, 8.0) + 0.15 * _chord([57, 60, 64], 8.0))],
        {"domain": {"f": _domain("f", "0M0")}, "separation": {"f": sep["am100"]}},
    )[0]
    assert fast.tempo_bpm == pytest.approx(162, rel=0.03) and fast.tempo_confidence < 0.3
    assert sep["talk"].stems == [] and sep["talk"].vocals_speech_s is None


def test_key_profile_on_a_progression() -> None:
    chroma = np.zeros(12)
    for pcs in ([0, 4, 7], [5, 9, 0], [7, 11, 2], [0, 4, 7]):  # C F G C
        chroma[pcs] += 1
    assert estimate_key(chroma)[0] == "C major" and estimate_key(np.zeros(12)) == (None, None)


# ----------------------------------------------------------------------------------------------- tags
def test_coarse_tags_per_window(speech, vad) -> None:
    clips = [speech["fox"], speech["tone"], speech["zeros"]]
    dom = {"fox": _domain("fox", "S00"), "tone": _domain("tone", "0M0"), "zeros": _domain("zeros", "000")}
    fox, tone, zeros = CoarseTagsExpert().analyze(clips, {"vad": vad, "domain": dom})
    assert fox.label_set == "heuristic-coarse" and fox.window_s == 2.0 and fox.backend.startswith("heuristic:")
    assert fox.clip_tags[0].label == "speech" and len(fox.windows) == 3
    assert {t.label for t in tone.clip_tags[:3]} >= {"music", "tonal sound"}
    assert zeros.clip_tags[0].label == "silence" and zeros.clip_tags[0].prob > 0.9
    for row in (fox, tone, zeros):
        assert all(0 <= t.prob <= 1 for w in row.windows for t in w.tags)
        assert [t.prob for t in row.clip_tags] == sorted((t.prob for t in row.clip_tags), reverse=True)


# --------------------------------------------------------------------------------------------- profile
def test_embedded_profile_fills_every_offline_slot_in_order() -> None:
    experts = build_experts(AnalyzeSection())
    assert {"tags", "diarization", "speakers", "asr_check", "separation", "music", "acoustics"} <= set(experts)
    for name, e in experts.items():
        assert TABLES[name] is e.record, name


# -------------------------------------------------------------------------------------------- evidence
def test_evidence_carries_every_table_and_views_speak_plainly(speech, vad, diarized) -> None:
    from earmark.prompts import load_phrases
    from earmark.schemas import ClipEvidence, arrow_schema, to_table
    from earmark.schemas.records import Clip, NISQAScores
    from earmark.stages.facts.render import render as _render
    from earmark.stages.synthesize.evidence import build_evidence

    def render(ev, kind):
        return _render(ev, kind, load_phrases("evidence"))

    clip = speech["two"]
    records = {  # (a table with no row for a clip is absent from the mapping)
        "domain": _domain("two", "S00"),
        "vad": vad["two"],
        "diarization": diarized["two"],
        "speakers": PitchSpeakerAttributesExpert().analyze([clip], {"diarization": diarized, "vad": vad})[0],
        "acoustics": RoomAcousticsExpert(with_plcmos=False).analyze([clip], {"vad": vad})[0],
        "tags": CoarseTagsExpert().analyze([clip], {"vad": vad, "domain": {"two": _domain("two", "S00")}})[0],
        "nisqa": NISQAScores(
            clip_id="two",
            expert="nisqa",
            backend="nisqa:v2",
            expert_version="1",
            mos=3.5,
            noisiness=4.0,
            discontinuity=4.2,
            coloration=3.9,
            loudness=4.1,
        ),
    }
    row = Clip(
        clip_id="two",
        source_path="x.wav",
        source_sha256="0",
        source_format="WAV",
        clip_index=0,
        offset_s=0.0,
        duration_s=clip.duration_s,
        sample_rate=SR,
        audio_flac=b"",
    )
    ev = build_evidence(row, records)
    # two voices, their genders from the speech segments grouped by pitch (subjects V1, V2), at the probability
    # measured for their pitch and the listener's opinion (evidence.calibrated_gender): the man, low and heard as a
    # man, is stated; espeak's "female" voice is not heard as a woman by mn04, so it stays unsure
    assert ev.num("speakers.count") == 2 and ev.labels("speaker.gender", "V1")["male"] == 0.95
    assert ev.labels("speaker.gender", "V2")["female"] == 0.5
    nisqa = {f.type: f.number for f in ev.facts if f.source == "nisqa"}  # unknown table: included generically
    assert nisqa == {
        "nisqa.mos": 3.5,
        "nisqa.noisiness": 4.0,
        "nisqa.discontinuity": 4.2,
        "nisqa.coloration": 3.9,
        "nisqa.loudness": 4.1,
    }
    assert all(f.backend for f in ev.facts) and {f.source for f in ev.facts} >= {"domain", "vad", "speakers", "nisqa"}
    assert ev.num("acoustics.bandwidth_hz") > 0 and "speech" in ev.labels("sound_tags.clip")
    table = to_table(ClipEvidence, [ev])  # a typed column, not a JSON string
    assert table.schema == arrow_schema(ClipEvidence) and table.to_pylist()[0]["facts"][0]["type"] == "content.speech"
    speech_view, env_view = render(ev, "speech"), render(ev, "environment")
    assert "two different speakers" in speech_view and "a male voice" in speech_view and "female" not in speech_view
    assert any(w in env_view for w in ("echo", "noisy", "clean", "quiet", "loud")) and "full-range" in env_view
    for kind in ("short", "long", "speech", "music", "sound", "environment"):
        assert not any(ch.isdigit() for ch in render(ev, kind)), kind
