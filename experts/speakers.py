"""Per-speaker attributes from pitch and energy: a heuristic (no attribute model ships in a PyPI wheel).

For each diarized speaker, the fundamental frequency (librosa pYIN, 65–600 Hz) and the 20 ms frame energy
over that speaker's turns give:
- gender: P(female) rises with the median F0 across 165 Hz, the usual boundary between adult male
  (~85–155 Hz) and female (~165–255 Hz) voices. It is a pitch judgement, not an identity one.
- age band: only "child" vs "adult" (median F0 far above adult ranges, > ~280 Hz); finer bands cannot be
  read from pitch.
- emotion: arousal only ("calm" / "neutral" / "animated") from pitch spread (inter-quartile range in
  semitones) and loudness spread; valence (happy vs angry) is not observable this way.
- accent: always empty: it cannot be estimated offline, and is never guessed.
Every profile says so in `method`. The paper profile has model-based classifiers for the same slots.

Each voice (the VAD segments grouped by pitch) also gets a second opinion on its gender from a model that
listens rather than measures: EfficientAT mn04's AudioSet classes "Male speech, man speaking" and "Female speech,
woman speaking" over that voice's segments (`voice_gender_check`; YAMNet has no gender classes). The evidence
states a gender only where pitch and that opinion agree (earmark.stages.synthesize.evidence.calibrated_gender).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from earmark.experts.audio import samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert
from earmark.experts.efficientat.model import WEIGHTS_SHA256
from earmark.schemas.records import (
    Diarization,
    LabelProb,
    SpeakerAttributes,
    SpeakerProfile,
    SpeechActivity,
    VoicePitch,
)

HOP = 320  # 20 ms
FMIN, FMAX = 65.0, 600.0
METHOD = "heuristic:pitch-energy (median F0 → gender, child/adult; pitch and level spread → arousal)"
NO_SPEAKERS_REASON = "no speakers (diarization found no speech)"
# Logistic midpoints and scales, see the module docstring.
FEMALE_HZ, FEMALE_SCALE = 165.0, 12.0
CHILD_HZ, CHILD_SCALE = 280.0, 20.0
AROUSAL_PITCH_ST, AROUSAL_PITCH_SCALE = 4.0, 1.5  # pitch IQR (semitones) of neutral read speech
AROUSAL_LEVEL_DB, AROUSAL_LEVEL_SCALE = 8.0, 3.0  # voiced-frame level IQR (dB)
# Voices by pitch: the VAD segments' median F0s, split at the widest gap when it is this wide (a man's and a
# woman's voice lie 8-12 semitones apart, one voice's segments within a few), each side with this much voiced
# speech. pYIN's floor (FMIN) is a failed track, not a pitch.
VOICE_GAP_ST, MIN_VOICE_S, MIN_SEGMENT_FRAMES = 5.0, 0.5, 8
# A segment whose median pitch is above what voices speak at is no voice (an alarm's 422 Hz beep, called speech by
# the VAD, made a second "voice" on the check set).
MAX_VOICE_HZ = 350.0
# The gender second opinion needs this much of a voice's audio (mn04 sees 10 ms frames; a word is enough).
MIN_CHECK_S = 0.5
MALE_SPEECH, FEMALE_SPEECH = "Male speech, man speaking", "Female speech, woman speaking"


@functools.cache
def _mn04() -> tuple[Any, int, int]:
    """EfficientAT mn04 (loaded once per process, weights checked by sha256) and its two gender classes."""
    from earmark.experts.efficientat.model import Mn04, labels

    names = labels()
    return Mn04(), names.index(MALE_SPEECH), names.index(FEMALE_SPEECH)


def voice_gender_check(x_16k: np.ndarray) -> list[LabelProb]:
    """mn04's P(male speech) and P(female speech) for one voice's audio (16 kHz, upsampled to the 32 kHz the
    model takes; the band above 8 kHz stays empty, as in telephone speech); [] under MIN_CHECK_S."""
    if len(x_16k) < MIN_CHECK_S * SAMPLE_RATE:
        return []
    from scipy.signal import resample_poly

    model, male, female = _mn04()
    z = model.logits(resample_poly(np.asarray(x_16k, np.float32), 2, 1).astype(np.float32))
    p = 1.0 / (1.0 + np.exp(-z[[male, female]].astype(np.float64)))
    return [LabelProb(label="male", prob=round(float(p[0]), 4)), LabelProb(label="female", prob=round(float(p[1]), 4))]


def _sigmoid(z: float) -> float:
    return float(1.0 / (1.0 + np.exp(-z)))


def _ranked(probs: dict[str, float]) -> list[LabelProb]:
    return [LabelProb(label=k, prob=round(v, 4)) for k, v in sorted(probs.items(), key=lambda kv: -kv[1])]


def pitch_track(x: np.ndarray) -> np.ndarray:
    """F0 per 20 ms frame (Hz), NaN where pYIN finds no voicing."""
    import librosa

    if x.size < 1024:
        return np.full(max(1, x.size // HOP), np.nan)
    f0, _, _ = librosa.pyin(x, fmin=FMIN, fmax=FMAX, sr=SAMPLE_RATE, frame_length=1024, hop_length=HOP, center=True)
    return f0


def frame_level_db(x: np.ndarray, n_frames: int) -> np.ndarray:
    """RMS dBFS per 20 ms frame, aligned with `pitch_track` (centred frames)."""
    pad = np.pad(x, (HOP // 2, HOP * n_frames))
    frames = pad[: n_frames * HOP].reshape(n_frames, HOP)
    return 20 * np.log10(np.maximum(np.sqrt(np.mean(frames**2, axis=1)), 1e-6))


def voice_labels(f0: np.ndarray, level_db: np.ndarray) -> dict[str, Any]:
    """The attribute estimates for one voice from its voiced-frame F0 (Hz) and frame levels (dB)."""
    voiced = np.isfinite(f0)
    if voiced.sum() < 5:
        return {
            "gender": [],
            "age_band": [],
            "emotion": [],
            "pitch_median_hz": None,
            "pitch_iqr_hz": None,
            "energy_dbfs": round(float(np.median(level_db)), 2) if level_db.size else None,
        }
    hz = f0[voiced]
    med = float(np.median(hz))
    q25, q75 = np.percentile(hz, [25, 75])
    spread_st = 12 * np.log2(q75 / q25)
    lv = level_db[voiced]
    level_spread = float(np.subtract(*np.percentile(lv, [75, 25])))
    female = _sigmoid((med - FEMALE_HZ) / FEMALE_SCALE)
    child = _sigmoid((med - CHILD_HZ) / CHILD_SCALE)
    arousal = (spread_st - AROUSAL_PITCH_ST) / AROUSAL_PITCH_SCALE + (
        level_spread - AROUSAL_LEVEL_DB
    ) / AROUSAL_LEVEL_SCALE
    animated, calm = _sigmoid(2 * (arousal / 2 - 0.5)), _sigmoid(2 * (-arousal / 2 - 0.5))
    neutral = max(0.0, 1.0 - animated - calm)
    total = animated + calm + neutral
    return {
        "gender": _ranked({"female": female, "male": 1 - female}),
        "age_band": _ranked({"child": child, "adult": 1 - child}),
        "emotion": _ranked({"animated": animated / total, "calm": calm / total, "neutral": neutral / total}),
        "pitch_median_hz": round(med, 1),
        "pitch_iqr_hz": round(float(q75 - q25), 1),
        "energy_dbfs": round(float(np.median(lv)), 2),
    }


def voice_groups(
    f0: np.ndarray, times: np.ndarray, segments: Sequence[Any], x: np.ndarray | None = None
) -> list[VoicePitch]:
    """The clip's speech segments grouped by median pitch: one group, or two when their pitches lie
    `VOICE_GAP_ST` apart — two voices the diarization may have merged (or one it split, when one group). With
    the clip's samples `x` (16 kHz), each voice gets mn04's gender opinion over its segments."""
    segs = []
    for seg in segments:
        hz = f0[(times >= seg.start_s) & (times < seg.end_s)]
        hz = hz[np.isfinite(hz) & (hz > FMIN * 1.05)]
        if len(hz) >= MIN_SEGMENT_FRAMES and np.median(hz) <= MAX_VOICE_HZ:
            segs.append((float(np.log2(np.median(hz))), hz, (seg.start_s, seg.end_s)))
    if not segs:
        return []
    segs.sort(key=lambda s: s[0])
    gaps = [12 * (b[0] - a[0]) for a, b in zip(segs, segs[1:])]
    cut = int(np.argmax(gaps)) + 1 if gaps and max(gaps) >= VOICE_GAP_ST else len(segs)
    groups = [segs[:cut], segs[cut:]] if cut < len(segs) else [segs]
    voiced = [sum(len(hz) for _, hz, _ in g) * HOP / SAMPLE_RATE for g in groups]
    if len(groups) == 2 and min(voiced) < MIN_VOICE_S:  # a side too thin to be a voice: one group after all
        groups, voiced = [segs], [sum(voiced)]
    out = []
    for g, s in zip(groups, voiced):
        med = float(np.median(np.concatenate([hz for _, hz, _ in g])))
        female = _sigmoid((med - FEMALE_HZ) / FEMALE_SCALE)
        check: list[LabelProb] = []
        if x is not None:
            spans = sorted(span for _, _, span in g)
            audio = [x[int(a * SAMPLE_RATE) : int(b * SAMPLE_RATE)] for a, b in spans]
            check = voice_gender_check(np.concatenate(audio)) if audio else []
        out.append(
            VoicePitch(
                pitch_median_hz=round(med, 1),
                speech_s=round(s, 2),
                segments=len(g),
                gender=_ranked({"female": female, "male": 1 - female}),
                gender_check=check,
            )
        )
    return out


class PitchSpeakerAttributesExpert(Expert):
    name, version, record, needs = "speakers", "4", SpeakerAttributes, ("diarization", "vad")
    backend = "heuristic:pitch-energy-v1"

    def key_config(self) -> dict[str, Any]:
        return {
            "hop": HOP,
            "fmin": FMIN,
            "fmax": FMAX,
            "female_hz": FEMALE_HZ,
            "child_hz": CHILD_HZ,
            "arousal": [AROUSAL_PITCH_ST, AROUSAL_LEVEL_DB],
            "voices": [VOICE_GAP_ST, MIN_VOICE_S, MAX_VOICE_HZ],
            "gender_check": [WEIGHTS_SHA256[:16], MIN_CHECK_S],
        }

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[SpeakerAttributes]:
        diar, vad = self.needed(context, clips, "diarization", "vad")
        return [self._profile(c, diar[c.clip_id], vad[c.clip_id]) for c in clips]  # type: ignore[arg-type]

    def _profile(self, clip: ClipAudio, diar: Diarization, vad: SpeechActivity) -> SpeakerAttributes:
        if not diar.turns:
            return SpeakerAttributes(
                **self.lineage(clip.clip_id), speakers=[], skipped_reason=diar.skipped_reason or NO_SPEAKERS_REASON
            )
        x = samples_16k(clip).astype(np.float64)
        # One pYIN pass over the span that has speech, not per turn: pYIN's cost is per frame.
        lo = int(min(t.start_s for t in diar.turns) * SAMPLE_RATE)
        hi = int(max(t.end_s for t in diar.turns) * SAMPLE_RATE)
        f0 = pitch_track(x[lo:hi])
        level = frame_level_db(x[lo:hi], len(f0))
        times = lo / SAMPLE_RATE + np.arange(len(f0)) * HOP / SAMPLE_RATE
        profiles = []
        for spk in sorted({t.speaker for t in diar.turns}):
            turns = [t for t in diar.turns if t.speaker == spk]
            mask = np.zeros(len(f0), bool)
            for t in turns:
                mask |= (times >= t.start_s) & (times < t.end_s)
            labels = voice_labels(f0[mask], level[mask])
            profiles.append(
                SpeakerProfile(
                    speaker=spk,
                    speech_s=round(sum(t.end_s - t.start_s for t in turns), 2),
                    accent=[],
                    method=METHOD,
                    **labels,
                )
            )
        voices = voice_groups(f0, times, vad.segments, x.astype(np.float32))
        return SpeakerAttributes(**self.lineage(clip.clip_id), speakers=profiles, skipped_reason=None, voices=voices)
