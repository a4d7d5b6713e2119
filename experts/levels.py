"""Level and loudness profile of a clip: plain DSP (numpy) plus ITU-R BS.1770 loudness (pyloudnorm).

Runs on every domain. Values are floored at DB_FLOOR instead of -inf so silence stays a number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from earmark.experts.audio import DB_FLOOR, amplitude_db, samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert
from earmark.schemas.records import AcousticProfile

CLIP_LEVEL = 0.999  # |x| at or above this counts as a clipped sample (int16 full scale maps to ~0.99997)
SILENCE_DBFS = -50.0
FRAME_S = 0.05
LOUDNESS_BLOCK_S = 0.4  # pyloudnorm's gating block: shorter clips have no integrated loudness


class LevelsExpert(Expert):
    name, version, record = "levels", "1", AcousticProfile
    backend = "dsp:numpy+pyloudnorm"

    def key_config(self) -> dict[str, Any]:
        return {"clip_level": CLIP_LEVEL, "silence_dbfs": SILENCE_DBFS, "frame_s": FRAME_S}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[AcousticProfile]:
        return [self._profile(clip) for clip in clips]

    def _profile(self, clip: ClipAudio) -> AcousticProfile:
        x = samples_16k(clip).astype(np.float64)
        if x.size == 0:
            return AcousticProfile(
                **self.lineage(clip.clip_id),
                rms_dbfs=DB_FLOOR,
                peak_dbfs=DB_FLOOR,
                lufs=None,
                crest_db=0.0,
                clipping_ratio=0.0,
                silence_ratio=1.0,
            )
        rms_dbfs = amplitude_db(np.sqrt(np.mean(x**2)))
        peak_dbfs = amplitude_db(np.max(np.abs(x)))
        return AcousticProfile(
            **self.lineage(clip.clip_id),
            rms_dbfs=round(rms_dbfs, 3),
            peak_dbfs=round(peak_dbfs, 3),
            lufs=_integrated_loudness(x),
            crest_db=round(peak_dbfs - rms_dbfs, 3),
            clipping_ratio=float(np.mean(np.abs(x) >= CLIP_LEVEL)),
            silence_ratio=_silence_ratio(x),
        )


def _silence_ratio(x: np.ndarray) -> float:
    """Share of 50 ms frames whose RMS is below SILENCE_DBFS (a trailing partial frame counts as a frame)."""
    hop = int(FRAME_S * SAMPLE_RATE)
    n_frames = -(-x.size // hop)
    padded = np.zeros(n_frames * hop)
    padded[: x.size] = x
    sums = np.sum(padded.reshape(n_frames, hop) ** 2, axis=1)
    lengths = np.full(n_frames, hop)
    lengths[-1] = x.size - (n_frames - 1) * hop
    frame_db = amplitude_db(np.sqrt(sums / lengths))
    return float(np.mean(frame_db < SILENCE_DBFS))


def _integrated_loudness(x: np.ndarray) -> float | None:
    """Integrated loudness in LUFS, or None when undefined (clip shorter than one block, or all gated out)."""
    if x.size < LOUDNESS_BLOCK_S * SAMPLE_RATE:
        return None
    import pyloudnorm

    lufs = float(pyloudnorm.Meter(SAMPLE_RATE, block_size=LOUDNESS_BLOCK_S).integrated_loudness(x))
    return round(lufs, 3) if np.isfinite(lufs) else None
