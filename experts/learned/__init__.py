"""The models earmark trains itself (`training/`), with their weights as package data: small heads over frozen
features, one module each, inference and expert together.

- `model.py` + `domain.py`: the domain tagger (speech / music / other sounds per 2 s window and per clip, the MECAT
  domain code) over the Whisper tiny.en encoder, Silero VAD statistics, DSP and musicnn (`musicnn.py`, a numpy
  port of the `musicnn` wheel's checkpoints); `tag_clip(samples_16k)`, `weights_id()` here;
- `events.py`: the sound-event tagger over the same window features (`tag_events`, `LearnedEventsExpert`);
- `musictags/`: the instrument / genre / mood heads over musicnn's features (used by the music expert).

The training scripts import these modules, so training and inference share one feature extractor.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from earmark.experts.learned.model import tag_clip

HERE = Path(__file__).parent


@cache
def weights_id() -> str:
    """A short sha over the shipped weight and decision files: a new model changes every domain shard key."""
    h = hashlib.sha256()
    for path in sorted(HERE.glob("*.npz")) + sorted(HERE.glob("*.json")):
        if path.name.startswith("events"):  # the event tagger's files (events_id()) do not change the domain
            continue
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


__all__ = ["tag_clip", "weights_id"]
