"""Named sound events per 2 s window: the learned event tagger (label set "earmark-events-v1"), table `events` of the
embedded profile, beside the coarse DSP labels of `tags`.

AudioSet-named classes ("Dog", "Explosion", "Walk, footsteps", ...) from a small network over the domain tagger's
frozen window features (experts/probe/events.py; trained on labelled mixes of openly licensed Debian game /
education / desktop sounds, training/train_events.py and training/EVENTS.md). Every window carries every class's
calibrated probability; `clip_tags` is the maximum over windows. Which classes may state an event, and from which
probability, is in the class file (`earmark.experts.probe.events.load_classes()`: `in_evidence`, `threshold`).
It runs after the domain expert so that it reads the same cached Whisper / musicnn pass; a clip the domain expert
calls silent (or shorter than 0.1 s) gets probability 0 for every class. `analyze.events = false` leaves it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from earmark.experts.audio import samples_16k
from earmark.experts.base import ClipAudio, Context, Expert, load_once
from earmark.schemas.records import DomainDecision, LabelProb, SoundEvents, WindowTags

WINDOW_S = 2.0
MIN_SAMPLES = 1600  # under 0.1 s: nothing to tag


def _tagger() -> Any:
    from earmark.experts.probe import events

    return events.tagger()


class LearnedEventsExpert(Expert):
    name, version, record, needs = "events", "1", SoundEvents, ("domain",)

    def __init__(self) -> None:
        from earmark.experts.probe.events import events_id

        self.backend = f"events:{events_id()}"

    def key_config(self) -> dict[str, Any]:
        from earmark.experts.probe.events import LABEL_SET, events_id

        return {"weights": events_id(), "label_set": LABEL_SET, "window_s": WINDOW_S, "min_samples": MIN_SAMPLES}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[SoundEvents]:
        (domain,) = self.needed(context, clips, "domain")
        tg = load_once("event-tagger", _tagger)
        return [self._tag(tg, c, domain[c.clip_id]) for c in clips]  # type: ignore[arg-type]

    def _tag(self, tg: Any, clip: ClipAudio, dom: DomainDecision) -> SoundEvents:
        from earmark.experts.probe.events import LABEL_SET, tag_events
        from earmark.experts.probe.windows import SR, window_bounds

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
