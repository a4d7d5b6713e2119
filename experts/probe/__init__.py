"""The learned domain tagger's inference (features, networks, decision) and its weights, as package data.

Trained by the scripts in `training/` (which import this module, so training and inference share one
feature extractor); `tag_clip(samples_16k)` returns per-window and clip probabilities of speech, music and
other sound events and the MECAT domain code.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from earmark.experts.probe.model import tag_clip

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
