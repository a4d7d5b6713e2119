"""Small audio helpers shared by the embedded experts: safe 16 kHz input and dB values that stay finite."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from earmark.experts.base import SAMPLE_RATE, ClipAudio

# Digital silence gets this value instead of -inf, so rows stay valid in Parquet and JSON.
DB_FLOOR = -120.0


def amplitude_db(value: float | np.ndarray) -> float | np.ndarray:
    """20·log10 of an amplitude (RMS or peak, full scale = 1.0), floored at DB_FLOOR."""
    floor = 10.0 ** (DB_FLOOR / 20.0)
    db = 20.0 * np.log10(np.maximum(np.asarray(value, dtype=np.float64), floor))
    return float(db) if np.ndim(db) == 0 else db


def samples_16k(clip: ClipAudio) -> np.ndarray:
    """The clip as contiguous float32 mono at 16 kHz in [-1, 1], with NaN/inf replaced by 0.

    Ingest already standardizes audio; this guards the models (Silero, Whisper, DNSMOS all assume
    16 kHz in range) against a clip built by hand or by another resampler.
    """
    x = np.asarray(clip.samples, dtype=np.float32)
    if x.ndim > 1:  # (samples, channels) from soundfile: downmix
        x = x.mean(axis=1, dtype=np.float32)
    if clip.sample_rate != SAMPLE_RATE and x.size:
        import soxr

        x = soxr.resample(x, clip.sample_rate, SAMPLE_RATE).astype(np.float32, copy=False)
    x = np.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0)
    return np.ascontiguousarray(np.clip(x, -1.0, 1.0), dtype=np.float32)


def speech_only(x: np.ndarray, segments: Sequence[object], pad_s: float = 0.05) -> np.ndarray:
    """The samples inside VAD speech segments (`start_s`/`end_s`, padded a little), joined: what speech
    quality models should score, so music, events and silence never count as "poor speech"."""
    pad = int(pad_s * SAMPLE_RATE)
    parts = [x[max(0, int(s.start_s * SAMPLE_RATE) - pad) : int(s.end_s * SAMPLE_RATE) + pad] for s in segments]
    parts = [p for p in parts if p.size]
    return np.concatenate(parts).astype(np.float32, copy=False) if parts else np.zeros(0, np.float32)


def speech_to_score(
    clips: Sequence[ClipAudio], vad: Mapping[str, Any], min_speech_s: float
) -> tuple[list[np.ndarray], list[float], list[int]]:
    """For the speech-quality experts: each clip's VAD speech (`speech_only`), its seconds (3 decimals), and the
    indices of the clips with at least `min_speech_s` of it (the others get no score)."""
    speech = [speech_only(samples_16k(c), vad[c.clip_id].segments) for c in clips]
    seconds = [round(a.size / SAMPLE_RATE, 3) for a in speech]
    return speech, seconds, [i for i, s in enumerate(seconds) if s >= min_speech_s]


def logistic(value: float, mid: float, scale: float) -> float:
    """A logistic curve through 0.5 at `mid`, `scale` wide: the DSP heuristics' probability of a feature value."""
    return float(1.0 / (1.0 + np.exp(-(value - mid) / scale)))
