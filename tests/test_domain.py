"""The heuristic domain expert on one generated clip per MECAT domain, with the real VAD and levels experts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from earmark.core.config import IngestSection
from earmark.corpus import generate_corpus
from earmark.experts.base import SAMPLE_RATE, ClipAudio
from earmark.experts.domain import THRESHOLDS, HeuristicDomainExpert
from earmark.experts.levels import LevelsExpert
from earmark.experts.vad import SileroVADExpert
from earmark.schemas.records import DomainDecision, domain_code, domain_flags
from earmark.stages.ingest import decode_clip, ingest_file


def _context(clips: list[ClipAudio]) -> dict:
    return {e.name: {r.clip_id: r for r in e.analyze(clips, {})} for e in (LevelsExpert(), SileroVADExpert())}


@pytest.fixture(scope="module")
def tagged(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, DomainDecision]]:
    """(file name, true domain, decision) for every clip of a one-per-domain corpus (seed 0)."""
    items = generate_corpus(tmp_path_factory.mktemp("corpus"), per_domain=1, seed=0, hostile=False)
    clips, truth = [], []
    for item in items:
        rows, _ = ingest_file(item.path, IngestSection())
        clips += [decode_clip(r) for r in rows]
        truth += [(item.path.name, item.domain)] * len(rows)
    decisions = HeuristicDomainExpert().analyze(clips, _context(clips))
    return [(name, domain, d) for (name, domain), d in zip(truth, decisions)]


def _decisions(tagged, domain: str) -> list[DomainDecision]:
    return [d for _, true, d in tagged if true == domain]


def test_single_content_domains_are_recognised(tagged) -> None:
    (silence,) = _decisions(tagged, "000")
    assert silence.domain == "000" and silence.silent  # digital zeros
    (speech,) = _decisions(tagged, "S00")
    assert speech.domain == "S00" and speech.music_prob < 0.5  # espeak is harmonic, yet not music
    music = _decisions(tagged, "0M0")
    assert len(music) == 2 and all(d.domain == "0M0" for d in music)  # both halves of the 14 s file
    (sound,) = _decisions(tagged, "00A")
    assert sound.domain == "00A"


def test_speech_and_music_presence_is_right_in_every_mixture(tagged) -> None:
    # Sound events under speech are the hard case (see benchmarks/quality/domain_accuracy.py); speech and music
    # presence must hold for every domain.
    for name, true, d in tagged:
        assert domain_flags(d.domain)[:2] == domain_flags(true)[:2], (name, d.domain)
    assert sum(d.domain == true for _, true, d in tagged) >= 8  # of 9 clips


def test_rows_are_consistent_and_features_finite(tagged) -> None:
    for name, _, d in tagged:
        assert d.expert == "domain" and d.backend == "heuristic:dsp-v1"
        probs = (d.speech_prob, d.music_prob, d.sound_prob)
        assert all(0.0 <= p <= 1.0 for p in probs)
        if not d.silent:
            assert d.domain == domain_code(*(p >= 0.5 for p in probs)), name
        values = {f.name: f.value for f in d.features}
        assert all(math.isfinite(v) for v in values.values()), name
        assert {"speech_s", "rms_dbfs", "silence_ratio"} <= set(values)
        if not d.silent:
            assert {"sustained_tonal_db", "tonal_share", "sustained_noise_db", "offgrid_peaks"} <= set(values)


def test_steady_tone_is_music_and_steady_noise_is_a_sound_scene() -> None:
    t = np.arange(6 * SAMPLE_RATE) / SAMPLE_RATE
    rng = np.random.default_rng(0)
    clips = [
        ClipAudio("tone", (0.2 * np.sin(2 * np.pi * 330 * t)).astype(np.float32)),
        ClipAudio("noise", (0.05 * rng.standard_normal(t.size)).astype(np.float32)),
        ClipAudio("hiss", (3e-4 * rng.standard_normal(t.size)).astype(np.float32)),  # -70 dBFS
    ]
    tone, noise, hiss = HeuristicDomainExpert().analyze(clips, _context(clips))
    assert tone.domain == "0M0"
    assert noise.domain == "00A" and noise.music_prob < 0.1
    assert hiss.domain == "000" and hiss.silent


def test_missing_context_and_bad_thresholds_are_reported() -> None:
    clip = ClipAudio("c", np.zeros(SAMPLE_RATE, np.float32))
    with pytest.raises(KeyError, match="run the vad expert"):
        HeuristicDomainExpert().analyze([clip], {"levels": {}})
    with pytest.raises(ValueError, match="unknown domain thresholds"):
        HeuristicDomainExpert({"music_mid": 1.0})
    stricter = HeuristicDomainExpert({"tonal_db_mid": THRESHOLDS["tonal_db_mid"] + 5})
    assert stricter.key_config() != HeuristicDomainExpert().key_config()


# ------------------------------------------------------------------------------------ the learned tagger
def test_learned_tagger_gives_a_valid_decision_with_windows_and_respects_silence(tmp_path):
    """The embedded default (experts/learned/domain.py): probabilities, per-window tags and the code agree; a
    silent clip is 000; clear speech is heard as speech. (Its accuracy is measured on a real-audio dev set
    by training/eval_dev.py, not here.)"""
    from earmark.experts.learned.domain import LearnedDomainExpert

    items = generate_corpus(tmp_path / "c", per_domain=1, seed=1, hostile=False)
    by_domain = {i.domain: i for i in items}
    clips = []
    for domain in ("000", "S00", "0M0"):
        rows, _ = ingest_file(by_domain[domain].path, IngestSection())
        clips.append(decode_clip(rows[0]))
    expert = LearnedDomainExpert()
    silence, speech, music = expert.analyze(clips, _context(clips))
    for d in (silence, speech, music):
        flags = [
            p >= dict((f.name, f.value) for f in d.features)[f"threshold_{h}"]
            for p, h in ((d.speech_prob, "speech"), (d.music_prob, "music"), (d.sound_prob, "sound"))
        ]
        assert d.domain == domain_code(*flags) or d.silent
        assert d.windows and all({t.label for t in w.tags} == {"speech", "music", "sound"} for w in d.windows)
        assert d.backend.startswith("probe:")
    assert silence.domain == "000"
    assert speech.domain[0] == "S" and speech.speech_prob > 0.9
    calibrated = {f.name: f.value for f in speech.features if f.name.startswith("calibrated_")}
    assert set(calibrated) == {"calibrated_speech", "calibrated_music", "calibrated_sound"}
    assert all(0.0 < v < 1.0 for v in calibrated.values())


def test_calibration_belongs_to_the_shipped_weights_and_is_monotone() -> None:
    """training/calibrate.py fits P(present | clip probability) for one set of weights: a retrained model
    with a stale calibration would state presence with the old model's confidence."""
    import hashlib

    from earmark.experts.learned.model import CALIBRATION, HEADS, WEIGHTS, calibrate, load_calibration

    cal = load_calibration(CALIBRATION)
    assert cal is not None, "experts/learned/calibration.json is missing: run training/calibrate.py"
    assert cal["probe_weights_sha256"] == hashlib.sha256(WEIGHTS.read_bytes()).hexdigest(), (
        "calibration.json was fitted for other weights: re-run training/eval_dev.py --split hold and calibrate.py"
    )
    for h in HEADS:
        ys = [calibrate(cal, h, p) for p in np.linspace(0, 1, 101)]
        assert all(b >= a for a, b in zip(ys, ys[1:])) and 0 < ys[0] < ys[-1] < 1
