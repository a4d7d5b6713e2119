"""Speech activity with Silero VAD, the model bundled in the `silero-vad` wheel (no download).

The clips of one call are run as one batch: Silero's streaming model is causal, so zero-padding the
shorter clips at the end leaves their own frame probabilities unchanged. The per-frame probabilities go
through silero's own `get_speech_timestamps_from_probs` (the state machine behind `get_speech_timestamps`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version as _pkg_version
from typing import Any

import numpy as np

from earmark.experts.audio import samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert, load_once
from earmark.schemas.records import SpeechActivity, TimeSpan

FRAME = 512  # Silero's window at 16 kHz (32 ms)


@dataclass(frozen=True)
class _Silero:
    model: Any
    lock: threading.Lock  # the model keeps recurrent state between calls: one batch at a time


def _load_silero() -> _Silero:
    import torch

    # Importing silero_vad calls torch.set_num_threads(1) for the whole process; keep the caller's setting.
    threads = torch.get_num_threads()
    from silero_vad import load_silero_vad

    torch.set_num_threads(threads)
    return _Silero(model=load_silero_vad(), lock=threading.Lock())


class SileroVADExpert(Expert):
    name, version, record = "vad", "1", SpeechActivity
    backend = f"silero-vad:{_pkg_version('silero-vad')}"

    def __init__(
        self,
        threshold: float = 0.5,
        min_speech_ms: int = 250,
        min_silence_ms: int = 100,
        speech_pad_ms: int = 30,
        batch_size: int = 64,
    ) -> None:
        self.threshold = threshold
        self.min_speech_ms = min_speech_ms
        self.min_silence_ms = min_silence_ms
        self.speech_pad_ms = speech_pad_ms
        self.batch_size = batch_size

    def key_config(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "min_speech_ms": self.min_speech_ms,
            "min_silence_ms": self.min_silence_ms,
            "speech_pad_ms": self.speech_pad_ms,
        }

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[SpeechActivity]:
        audios = [samples_16k(clip) for clip in clips]
        probs: list[np.ndarray] = []
        for start in range(0, len(audios), self.batch_size):
            probs.extend(frame_probs(audios[start : start + self.batch_size]))
        return [self._activity(clip.clip_id, audio, p) for clip, audio, p in zip(clips, audios, probs)]

    def _activity(self, clip_id: str, audio: np.ndarray, probs: np.ndarray) -> SpeechActivity:
        from silero_vad import get_speech_timestamps_from_probs

        spans = get_speech_timestamps_from_probs(
            probs.tolist(),
            sampling_rate=SAMPLE_RATE,
            threshold=self.threshold,
            min_speech_duration_ms=self.min_speech_ms,
            min_silence_duration_ms=self.min_silence_ms,
            speech_pad_ms=self.speech_pad_ms,
            audio_length_samples=audio.size,
        )
        segments = [TimeSpan(start_s=s["start"] / SAMPLE_RATE, end_s=s["end"] / SAMPLE_RATE) for s in spans]
        speech_s = sum(s.end_s - s.start_s for s in segments)
        duration_s = audio.size / SAMPLE_RATE
        return SpeechActivity(
            **self.lineage(clip_id),
            segments=segments,
            speech_s=round(speech_s, 4),
            speech_ratio=round(speech_s / duration_s, 4) if duration_s else 0.0,
            max_prob=round(float(probs.max()), 4) if probs.size else 0.0,
        )


def frame_probs(audios: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Silero speech probability per 32 ms frame for each 16 kHz clip, computed as one batch."""
    import torch

    if not audios:
        return []
    n_frames = [-(-a.size // FRAME) for a in audios]
    batch = np.zeros((len(audios), max(max(n_frames), 1) * FRAME), dtype=np.float32)
    for row, audio in zip(batch, audios):
        row[: audio.size] = audio
    silero = load_once("silero-vad:jit", _load_silero)
    # One intra-op thread: the model is tiny, and with the default pool it slows down ~400x when another
    # process (the LLM server, a second expert) keeps the cores busy. Restored afterwards.
    threads = torch.get_num_threads()
    with silero.lock, torch.inference_mode():
        torch.set_num_threads(1)
        try:
            out = silero.model.audio_forward(torch.from_numpy(batch), SAMPLE_RATE).numpy()
        finally:
            torch.set_num_threads(threads)
    return [out[i, :n] for i, n in enumerate(n_frames)]
