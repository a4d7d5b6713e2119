"""YAMNet, Google's AudioSet tagger (521 classes), vendored as package data with its licence and provenance.

The TF-Lite "classification" release (PROVENANCE.md: source, sha256, licence) runs with `ai-edge-litert`;
`experts/audioset_tags.py` is the expert that writes its scores (table `yamnet`). Nothing is downloaded.
"""

from __future__ import annotations

from earmark.experts.yamnet.model import (
    CLASS_MAP,
    LABEL_SET,
    MODEL,
    MODEL_SHA256,
    AudioSetClass,
    FrameScores,
    WeightsMismatch,
    Yamnet,
    frames,
    yamnet,
)

__all__ = [
    "CLASS_MAP",
    "LABEL_SET",
    "MODEL",
    "MODEL_SHA256",
    "AudioSetClass",
    "FrameScores",
    "WeightsMismatch",
    "Yamnet",
    "frames",
    "yamnet",
]
