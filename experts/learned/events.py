"""The learned sound-event tagger: AudioSet-named event classes per 2 s window (label set "earmark-events-v1"), numpy
only, and its expert (table `events` of the embedded profile, beside the coarse DSP labels of `tags`).

    from earmark.experts.learned.events import tag_events, load_classes
    out = tag_events(samples_16k)   # {"windows": [{"start_s", "end_s", "probs": {class: p}}], "clip": {class: p}}
    load_classes()                  # the class file: per class its AudioSet name, in_evidence flag, threshold, P / R

A small network over the domain tagger's frozen window features (experts/learned/model.py: Whisper tiny.en encoder
pooled, Silero VAD, DSP, musicnn mid-end; `clip_features` caches them per process by the clip's content hash, so
after the domain expert this costs one small MLP forward pass), trained on labelled mixes of openly licensed Debian
game / education / desktop sounds (training/train_events.py, training/EVENTS.md). Per window and class it gives a
probability calibrated on the TRAIN packages' out-of-fold windows (isotonic): P(an event of that class is salient
in the window); `clip_tags` is the maximum over windows. A class states an event only at or above its `threshold`,
and only when `in_evidence` (its measured precision reached the bar); both are in the class file, whose
`weights_sha256` ties it to the weights. The expert runs after the domain expert so that it reads the same cached
Whisper / musicnn pass; a clip the domain expert calls silent (or shorter than 0.1 s) gets probability 0 for every
class. `analyze.events = false` leaves it out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from earmark.core.once import load_once
from earmark.experts.audio import samples_16k
from earmark.experts.base import ClipAudio, Context, Expert
from earmark.experts.learned.windows import SR, window_bounds
from earmark.schemas.records import DomainDecision, LabelProb, SoundEvents, WindowTags
from earmark.storage.shards import file_sha256

HERE = Path(__file__).resolve().parent
EVENT_WEIGHTS = HERE / "events_weights.npz"
EVENT_CLASSES = HERE / "events_classes.json"
LABEL_SET = "earmark-events-v1"


class EventModelMismatch(RuntimeError):
    """The class file does not belong to the weights next to it (a stale or hand-edited file)."""


@cache
def events_id() -> str:
    """A short sha over the shipped event weights and class file: a new model changes the `tags` shard keys."""
    h = hashlib.sha256()
    for path in (EVENT_WEIGHTS, EVENT_CLASSES):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def load_classes(path: Path = EVENT_CLASSES) -> dict:
    """The class file (see training/train_events.py): label_set, feature_version, weights_sha256 and `classes`,
    a list of {name, in_evidence, threshold, calibration {x, y}, oof / dev precision and recall, ...}."""
    return json.loads(Path(path).read_text())


class EventTagger:
    """Standardise -> ReLU layers -> one sigmoid per class -> per-class isotonic calibration."""

    def __init__(self, weights: Path = EVENT_WEIGHTS, classes: Path = EVENT_CLASSES):
        self.meta = load_classes(classes)
        sha = file_sha256(weights)
        if self.meta.get("weights_sha256") != sha:
            raise EventModelMismatch(
                f"{Path(classes).name} was written for weights with sha256 {self.meta.get('weights_sha256')}, but "
                f"{Path(weights).name} has {sha}: re-run training/train_events.py (it writes both)"
            )
        z = np.load(weights, allow_pickle=False)
        self.mu, self.sd = z["mu"].astype(np.float32), z["sd"].astype(np.float32)
        prefixes = [""] if "W0" in z else [f"m{m}_" for m in range(len([k for k in z if k.endswith("_W0")]))]
        self.members = [self._layers(z, prefix) for prefix in prefixes]  # one network, or the fold ensemble
        self.names = [c["name"] for c in self.meta["classes"]]
        if self.members[0][-1][0].shape[1] != len(self.names):
            raise EventModelMismatch(
                f"{Path(weights).name} has {self.members[0][-1][0].shape[1]} outputs, the class "
                f"file {len(self.names)} classes"
            )
        self.curves = [
            (np.asarray(c["calibration"]["x"]), np.asarray(c["calibration"]["y"])) for c in self.meta["classes"]
        ]
        self.feature_version = str(self.meta["feature_version"])

    @staticmethod
    def _layers(z, prefix: str) -> list[tuple[np.ndarray, np.ndarray]]:
        layers, i = [], 0
        while f"{prefix}W{i}" in z:
            layers.append((z[f"{prefix}W{i}"].astype(np.float32), z[f"{prefix}b{i}"].astype(np.float32)))
            i += 1
        return layers

    def raw(self, X: np.ndarray) -> np.ndarray:
        """(n_windows, n_classes) sigmoid outputs for (n_windows, D) window features: the mean over the members
        (the K fold models of training/train_events.py; one network in older weights)."""
        x = (np.asarray(X, np.float32) - self.mu) / self.sd
        return np.mean(list(member_outputs(self.members, x)), axis=0)

    def calibrated(self, X: np.ndarray) -> np.ndarray:
        p = self.raw(X)
        return np.stack([np.interp(p[:, k], x, y) for k, (x, y) in enumerate(self.curves)], axis=1)


def member_outputs(members: Sequence[Sequence[tuple[np.ndarray, np.ndarray]]], x: np.ndarray) -> Iterator[np.ndarray]:
    """Each member network's sigmoid outputs for the rows of `x`: dense layers, ReLU between them. An ensemble's
    forward pass (this tagger's, and the YAMNet event head's, experts/yamnet/events.py); the caller averages."""
    for layers in members:
        h = x
        for j, (w, b) in enumerate(layers):
            h = h @ w + b
            if j < len(layers) - 1:
                h = np.maximum(h, 0)
        yield 1 / (1 + np.exp(-np.clip(h, -30, 30)))


def tagger(weights: Path = EVENT_WEIGHTS, classes: Path = EVENT_CLASSES) -> EventTagger:
    """The tagger of these files, loaded once per process."""
    return load_once(f"event-tagger:{weights}:{classes}", lambda: EventTagger(weights, classes))


def tag_events(samples_16k: np.ndarray, weights: Path = EVENT_WEIGHTS, classes: Path = EVENT_CLASSES) -> dict:
    """Per 2 s window and per clip (max over windows) the calibrated probability of every class."""
    from earmark.experts.learned.model import clip_features

    tg = tagger(weights, classes)
    x = np.asarray(samples_16k, dtype=np.float32).reshape(-1)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("tag_events needs finite 16 kHz mono samples (got an empty or non-finite signal)")
    fv = tg.feature_version
    X, bounds = clip_features(x, musicnn=fv.split("+", 1)[1] if "+" in fv else None)
    P = tg.calibrated(X)
    return {
        "windows": [
            {"start_s": a / SR, "end_s": b / SR, "probs": {c: float(P[i, k]) for k, c in enumerate(tg.names)}}
            for i, (a, b) in enumerate(bounds)
        ],
        "clip": {c: float(P[:, k].max()) for k, c in enumerate(tg.names)},
    }


# ------------------------------------------------------------------------------------------- the expert
WINDOW_S = 2.0
MIN_SAMPLES = 1600  # under 0.1 s: nothing to tag


class LearnedEventsExpert(Expert):
    name, version, record, needs = "events", "1", SoundEvents, ("domain",)

    def __init__(self) -> None:
        self.backend = f"events:{events_id()}"

    def key_config(self) -> dict[str, Any]:
        return {"weights": events_id(), "label_set": LABEL_SET, "window_s": WINDOW_S, "min_samples": MIN_SAMPLES}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[SoundEvents]:
        (domain,) = self.needed(context, clips, "domain")
        tg = tagger()
        return [self._tag(tg, c, domain[c.clip_id]) for c in clips]  # type: ignore[arg-type]

    def _tag(self, tg: Any, clip: ClipAudio, dom: DomainDecision) -> SoundEvents:
        x = samples_16k(clip)
        if dom.silent or x.size < MIN_SAMPLES:
            out = {
                "windows": [
                    {"start_s": a / SR, "end_s": b / SR, "probs": dict.fromkeys(tg.names, 0.0)}
                    for a, b in window_bounds(max(x.size, 1))
                ],
                "clip": dict.fromkeys(tg.names, 0.0),
            }
        else:
            out = tag_events(x)
        windows = [
            WindowTags(start_s=round(w["start_s"], 3), end_s=round(w["end_s"], 3), tags=_sorted(w["probs"]))
            for w in out["windows"]
        ]
        return SoundEvents(
            **self.lineage(clip.clip_id),
            label_set=LABEL_SET,
            window_s=WINDOW_S,
            windows=windows,
            clip_tags=_sorted(out["clip"]),
        )


def _sorted(probs: dict[str, float]) -> list[LabelProb]:
    return [
        LabelProb(label=k, prob=round(float(np.clip(v, 0.0, 1.0)), 4))
        for k, v in sorted(probs.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


__all__ = [
    "LABEL_SET",
    "EventModelMismatch",
    "EventTagger",
    "LearnedEventsExpert",
    "events_id",
    "load_classes",
    "tag_events",
    "tagger",
]
