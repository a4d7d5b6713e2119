"""Per-speaker gender / age / emotion / accent from Hugging Face audio classifiers (bring your weights).

Each diarized speaker's turns are cut from the clip and joined (at most `max_speaker_s` seconds); every
configured classifier (any AutoModelForAudioClassification: wav2vec2 / HuBERT heads) then runs on all
speakers of all clips of the call in batches, and its softmax probabilities become the speaker's label
list. An attribute whose model id is None stays an empty list — never invented.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from earmark.experts.audio import amplitude_db, samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert
from earmark.experts.models import require_weights
from earmark.experts.paper.hf import Precision, classify, load_classifier, precision_config
from earmark.schemas.records import Diarization, LabelProb, SpeakerAttributes, SpeakerProfile

ATTRIBUTES = ("gender", "age_band", "emotion", "accent")


def speaker_audio(audio: np.ndarray, turns: Sequence[Any], speaker: str, max_s: float) -> np.ndarray:
    """The speaker's turns of `audio`, joined in time order and cut at `max_s` seconds."""
    parts = [
        audio[int(t.start_s * SAMPLE_RATE) : int(t.end_s * SAMPLE_RATE)]
        for t in sorted(turns, key=lambda t: t.start_s)
        if t.speaker == speaker
    ]
    joined = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return joined[: int(max_s * SAMPLE_RATE)]


class HFSpeakerAttributesExpert(Expert):
    name, version, record, needs = "speakers", "1", SpeakerAttributes, ("diarization",)

    def __init__(
        self,
        models: Mapping[str, str | None],
        models_dir: Any = None,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        max_speaker_s: float = 10.0,
        min_speaker_s: float = 0.5,
        top_k: int = 5,
        precision: Precision = "fp32",
    ) -> None:
        unknown = set(models) - set(ATTRIBUTES)
        if unknown:
            raise ValueError(f"speaker attributes: unknown attribute(s) {sorted(unknown)}; use {ATTRIBUTES}")
        self.models = {a: m for a, m in models.items() if m}
        self.paths = {a: require_weights(f"speakers ({a})", m, models_dir) for a, m in self.models.items()}
        self.backend = "hf-audio-classification:" + ",".join(f"{a}={m}" for a, m in sorted(self.models.items()))
        self.device, self.batch_size, self.precision = device, batch_size, precision
        self.max_speaker_s, self.min_speaker_s, self.top_k = max_speaker_s, min_speaker_s, top_k

    def key_config(self) -> dict[str, Any]:
        return {
            "max_speaker_s": self.max_speaker_s,
            "min_speaker_s": self.min_speaker_s,
            "top_k": self.top_k,
            **precision_config(self.precision),
        }

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[SpeakerAttributes]:
        (diar,) = self.needed(context, clips, "diarization")
        # One item per (clip, speaker) with enough speech; all items of the call go through each model together.
        items: list[tuple[int, str, float, np.ndarray]] = []
        for ci, clip in enumerate(clips):
            d: Diarization = diar[clip.clip_id]  # type: ignore[assignment]
            audio = samples_16k(clip)
            for spk in sorted({t.speaker for t in d.turns}):
                speech_s = sum(t.end_s - t.start_s for t in d.turns if t.speaker == spk)
                if speech_s >= self.min_speaker_s:
                    items.append((ci, spk, speech_s, speaker_audio(audio, d.turns, spk, self.max_speaker_s)))
        labels = {a: self._labels(a, [it[3] for it in items]) for a in self.models}
        profiles: list[list[SpeakerProfile]] = [[] for _ in clips]
        for k, (ci, spk, speech_s, audio) in enumerate(items):
            rms = float(np.sqrt(np.mean(audio.astype(np.float64) ** 2))) if audio.size else 0.0
            profiles[ci].append(
                SpeakerProfile(
                    speaker=spk,
                    speech_s=round(speech_s, 3),
                    **{a: labels[a][k] if a in labels else [] for a in ATTRIBUTES},
                    pitch_median_hz=None,
                    pitch_iqr_hz=None,
                    energy_dbfs=round(float(amplitude_db(rms)), 2),
                    method=self.backend,
                )
            )
        return [self._record(clip, diar[clip.clip_id], p) for clip, p in zip(clips, profiles)]  # type: ignore[arg-type]

    def _labels(self, attribute: str, audios: list[np.ndarray]) -> list[list[LabelProb]]:
        if not audios:
            return []
        clf = load_classifier(self.paths[attribute], self.device)
        probs = classify(clf, audios, self.batch_size, "softmax", self.precision)
        out = []
        for row in probs:
            order = np.argsort(-row, kind="stable")[: self.top_k]
            out.append([LabelProb(label=clf.labels[i], prob=round(float(row[i]), 4)) for i in order])
        return out

    def _record(self, clip: ClipAudio, diar: Diarization, profiles: list[SpeakerProfile]) -> SpeakerAttributes:
        reason = None
        if not profiles:
            reason = diar.skipped_reason or f"no speaker with at least {self.min_speaker_s} s of speech"
        return SpeakerAttributes(**self.lineage(clip.clip_id), speakers=profiles, skipped_reason=reason)
