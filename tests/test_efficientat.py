"""EfficientAT mn04 (vendored, MIT): the port equals the original code's output, a swapped file is refused, and
the speakers expert gives each voice its gender opinion, which the evidence uses only where it agrees with the
pitch (issue [1/3] must-have 5)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from earmark.experts import speakers
from earmark.experts.efficientat import WEIGHTS, WEIGHTS_SHA256
from earmark.experts.efficientat.model import Mn04, WeightsMismatch, labels
from earmark.schemas.records import LabelProb
from earmark.stages.synthesize.evidence import AGREED_CONFIDENCE, MALE_CONFIDENCE, UNSURE_GENDER, calibrated_gender

REFERENCE = Path(__file__).parent / "support" / "efficientat_mn04_reference.npz"


def _probe_input() -> np.ndarray:
    """The input the reference logits were computed on (benchmarks/experts/efficientat_reference.py)."""
    t = np.arange(48000) / 32000.0
    tone = 0.3 * np.sin(2 * np.pi * 220 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return (tone + 0.05 * np.random.default_rng(7).standard_normal(t.size)).astype(np.float32)


def test_the_port_gives_the_original_codes_logits() -> None:
    """The reference was computed by EfficientAT's own models/mn and preprocess code (with torchvision's and
    torchaudio's own modules); the port's 527 logits equal it within float rounding of other thread counts."""
    ref = np.load(REFERENCE)["logits"]
    got = Mn04().logits(_probe_input())
    assert got.shape == (527,) and np.abs(got - ref).max() < 1e-4


def test_the_class_list_has_the_gender_classes() -> None:
    names = labels()
    assert len(names) == 527 and names[1] == "Male speech, man speaking" and names[2] == "Female speech, woman speaking"


def test_a_swapped_weights_file_is_refused_naming_it_and_the_sha(tmp_path: Path) -> None:
    bad = tmp_path / "mn04_as_mAP_432.pt"
    shutil.copy(WEIGHTS, bad)
    with bad.open("r+b") as fh:
        fh.seek(1000)
        fh.write(b"\x00\x01\x02\x03")
    with pytest.raises(WeightsMismatch, match=rf"{bad}.*expected {WEIGHTS_SHA256}"):
        Mn04(bad)


def test_each_voice_gets_a_gender_opinion() -> None:
    x = _probe_input()[::2]  # 16 kHz, 1.5 s
    check = speakers.voice_gender_check(x)
    assert [lp.label for lp in check] == ["male", "female"] and all(0.0 <= lp.prob <= 1.0 for lp in check)
    assert speakers.voice_gender_check(x[:4000]) == []  # under half a second: no opinion


def _labels(female: float) -> list[LabelProb]:
    return [LabelProb(label="female", prob=female), LabelProb(label="male", prob=1 - female)]


def _said(out: list[LabelProb]) -> str | None:
    top = max(out, key=lambda lp: lp.prob)
    return top.label if top.prob > UNSURE_GENDER else None


def _opinion(male: float, female: float) -> list[LabelProb]:
    return [LabelProb(label="male", prob=male), LabelProb(label="female", prob=female)]


@pytest.mark.parametrize(
    ("pitch", "opinion", "said"),
    [
        (120.0, _opinion(0.09, 0.005), "male"),
        (185.0, _opinion(0.05, 0.01), "male"),  # 150-200 Hz: pitch alone was unsure; the listener agrees
        (120.0, _opinion(0.01, 0.2), None),  # low pitch, but it hears a woman: unsure
        (230.0, _opinion(0.01, 0.14), "female"),  # a woman is stated only where both agree
        (230.0, _opinion(0.05, 0.04), None),  # a high voice it does not hear as a woman (a cartoon man)
        (140.0, _opinion(0.01, 0.2), None),
        (210.0, _opinion(0.08, 0.01), None),  # it hears a man, the pitch is a woman's: unsure
    ],
)
def test_a_gender_is_stated_where_pitch_and_the_listener_agree(pitch, opinion, said) -> None:
    out = calibrated_gender(_labels(0.9 if pitch > 165 else 0.1), pitch, opinion)
    assert _said(out) == said
    if said is not None:
        assert max(lp.prob for lp in out) == AGREED_CONFIDENCE


def test_without_an_opinion_the_pitch_rule_stands() -> None:
    assert _said(calibrated_gender(_labels(0.1), 120.0)) == "male"
    assert max(lp.prob for lp in calibrated_gender(_labels(0.1), 120.0)) == MALE_CONFIDENCE
    assert _said(calibrated_gender(_labels(0.9), 230.0)) is None


def test_a_man_and_a_woman_by_pitch_and_listener_are_two_speakers_beside_sound_events_in_doubt() -> None:
    from types import SimpleNamespace

    from earmark.stages.synthesize.evidence import CHECKED_CONFIDENCE, UNCHECKED_CONFIDENCE, speaker_count

    voices = [SimpleNamespace(pitch_median_hz=120.0), SimpleNamespace(pitch_median_hz=230.0)]
    assert speaker_count(2, [], voices, events=True, genders=["male", "female"]) == (2, CHECKED_CONFIDENCE)
    assert speaker_count(1, [], voices, events=True, genders=["male", "female"]) == (2, CHECKED_CONFIDENCE)
    # an engine and a reader: the second pitch group is no agreed voice, so no count beside sound events
    assert speaker_count(2, [], voices, events=True, genders=["male", None]) == (2, UNCHECKED_CONFIDENCE)
    assert speaker_count(2, [], voices, events=True, genders=["male", "male"]) == (2, UNCHECKED_CONFIDENCE)
    # sound events surely heard: a man under music, an explosion and water made a "woman" at 247 Hz (fresh19)
    sure = speaker_count(2, [], voices, events=True, genders=["male", "female"], sure_events=True)
    assert sure == (2, UNCHECKED_CONFIDENCE)


def test_the_window_scores_of_the_events_experiment_are_mn04s_own() -> None:
    """training/mn04_windows.py (the measurement of mn04 as an event tagger, calibrate_mn04.py) scores the evidence's
    2 s windows in one batch: each row is the sigmoid of mn04's logits of that window alone, upsampled to 32 kHz."""
    import sys

    from scipy.signal import resample_poly

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))
    from mn04_windows import window_probs

    x = (0.1 * np.random.default_rng(3).standard_normal(16000 * 5)).astype(np.float32)
    got = window_probs(x).astype(np.float32)
    assert got.shape == (3, 527)  # 0-2, 2-4 and the last 2 s (the clip's tail is over 0.1 s)
    z = Mn04().logits(resample_poly(x[32000:64000], 2, 1).astype(np.float32))
    assert np.abs(got[1] - 1 / (1 + np.exp(-z))).max() < 1e-3
