"""AudioSet tagging on 2 s windows (CED or AST from the models dir) and the MECAT domain derived from it.

The `tags` expert cuts every clip of the call into non-overlapping windows (the last one zero-padded to
the window length, dropped when shorter than `min_window_s` unless it is the clip's only window), runs all
windows of all clips through the tagger in batches, and keeps per window every label above
`keep_prob` (so the domain rule, whose threshold is higher, sees everything it needs). The `domain`
expert turns those windows into speech / music / sound presence with experts.paper.audioset's routing:
a content kind is present when some window gives one of its labels at least `threshold`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from earmark.experts.audio import samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert
from earmark.experts.models import require_weights
from earmark.experts.paper.audioset import SILENCE_LABEL, category
from earmark.experts.paper.hf import Precision, classify, default_activation, load_classifier, precision_config
from earmark.schemas.records import DomainDecision, LabelProb, NamedValue, SoundEvents, WindowTags, domain_code


def _windows(audio: np.ndarray, window: int, min_len: int) -> list[np.ndarray]:
    starts = range(0, max(audio.size, 1), window)
    out = []
    for s in starts:
        piece = audio[s : s + window]
        if piece.size < min_len and out:
            break
        out.append(np.pad(piece, (0, window - piece.size)))
    return out


class AudioSetTagsExpert(Expert):
    name, version, record = "tags", "1", SoundEvents

    def __init__(
        self,
        model_id: str,
        models_dir: Any = None,
        *,
        device: str = "cpu",
        window_s: float = 2.0,
        min_window_s: float = 0.5,
        batch_size: int = 16,
        keep_prob: float = 0.05,
        max_labels: int = 25,
        clip_top_k: int = 10,
        precision: Precision = "fp32",
    ) -> None:
        self.model_id, self.precision = model_id, precision
        self.path = require_weights("tags", model_id, models_dir)
        self.backend = f"audioset-tagger:{model_id}"
        self.device, self.window_s, self.min_window_s = device, window_s, min_window_s
        self.batch_size, self.keep_prob = batch_size, keep_prob
        self.max_labels, self.clip_top_k = max_labels, clip_top_k

    def key_config(self) -> dict[str, Any]:
        return {
            "window_s": self.window_s,
            "min_window_s": self.min_window_s,
            "keep_prob": self.keep_prob,
            "max_labels": self.max_labels,
            "clip_top_k": self.clip_top_k,
            **precision_config(self.precision),
        }

    def window_probs(self, clips: Sequence[ClipAudio]) -> tuple[tuple[str, ...], list[np.ndarray]]:
        """(labels, per clip an array windows × labels), all windows of all clips batched together."""
        clf = load_classifier(self.path, self.device)
        window = int(round(self.window_s * SAMPLE_RATE))
        per_clip = [_windows(samples_16k(c), window, int(self.min_window_s * SAMPLE_RATE)) for c in clips]
        flat = [w for ws in per_clip for w in ws]
        probs = classify(clf, flat, self.batch_size, default_activation(clf, multi_label=True), self.precision)
        bounds = np.cumsum([0] + [len(ws) for ws in per_clip])
        return clf.labels, [probs[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[SoundEvents]:
        labels, per_clip = self.window_probs(clips)
        return [self._record(clip, labels, p) for clip, p in zip(clips, per_clip)]

    def _top(self, labels: tuple[str, ...], probs: np.ndarray, k: int, min_prob: float) -> list[LabelProb]:
        order = np.argsort(-probs, kind="stable")[:k]
        return [LabelProb(label=labels[i], prob=round(float(probs[i]), 4)) for i in order if probs[i] >= min_prob]

    def _record(self, clip: ClipAudio, labels: tuple[str, ...], probs: np.ndarray) -> SoundEvents:
        windows = [
            WindowTags(
                start_s=round(i * self.window_s, 3),
                end_s=round(min((i + 1) * self.window_s, max(clip.duration_s, self.window_s)), 3),
                tags=self._top(labels, row, self.max_labels, self.keep_prob),
            )
            for i, row in enumerate(probs)
        ]
        return SoundEvents(
            **self.lineage(clip.clip_id),
            label_set=f"audioset-{len(labels)}",
            window_s=self.window_s,
            windows=windows,
            clip_tags=self._top(labels, probs.max(axis=0), self.clip_top_k, self.keep_prob),
        )


def content_probs(window: WindowTags) -> dict[str, float]:
    """Per content kind (speech, music, sound) the highest label probability in one window."""
    out = {"speech": 0.0, "music": 0.0, "sound": 0.0}
    for tag in window.tags:
        kind = category(tag.label)
        if kind != "none":
            out[kind] = max(out[kind], tag.prob)
    return out


class TaggerDomainExpert(Expert):
    """MECAT domain from the AudioSet tags of the clip's windows (see experts.paper.audioset)."""

    name, version, record, needs = "domain", "1", DomainDecision, ("tags",)

    def __init__(self, tagger_model: str, threshold: float = 0.3) -> None:
        self.threshold = threshold
        self.backend = f"audioset-tagger:{tagger_model}+routing-v1"

    def key_config(self) -> dict[str, Any]:
        return {"threshold": self.threshold}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[DomainDecision]:
        (tags,) = self.needed(context, clips, "tags")
        return [self.decide(c.clip_id, tags[c.clip_id]) for c in clips]  # type: ignore[arg-type]

    def decide(self, clip_id: str, events: SoundEvents) -> DomainDecision:
        per_window = [content_probs(w) for w in events.windows] or [{"speech": 0.0, "music": 0.0, "sound": 0.0}]
        best = {k: max(p[k] for p in per_window) for k in ("speech", "music", "sound")}
        present = {k: v >= self.threshold for k, v in best.items()}
        silence = max((t.prob for w in events.windows for t in w.tags if t.label.lower() == SILENCE_LABEL), default=0.0)
        features = [
            NamedValue(
                name=f"{k}_window_share", value=round(float(np.mean([p[k] >= self.threshold for p in per_window])), 4)
            )
            for k in ("speech", "music", "sound")
        ]
        features += [
            NamedValue(name="windows", value=float(len(events.windows))),
            NamedValue(name="silence_prob_max", value=round(silence, 4)),
        ]
        return DomainDecision(
            **self.lineage(clip_id),
            domain=domain_code(present["speech"], present["music"], present["sound"]),  # type: ignore[arg-type]
            speech_prob=round(best["speech"], 4),
            music_prob=round(best["music"], 4),
            sound_prob=round(best["sound"], 4),
            silent=not any(present.values()) and silence >= self.threshold,
            features=features,
        )
