"""Vendored model files checked by sha256 before they are read (YAMNet, EfficientAT, the AudioSet ontology)."""

from __future__ import annotations

import hashlib
from pathlib import Path


class WeightsMismatch(RuntimeError):
    """A vendored model file is not the one earmark was tested with (corrupt, truncated or swapped)."""


def checked_bytes(path: Path, expected: str, release: str) -> bytes:
    """The file's bytes if their sha256 is `expected`; else WeightsMismatch naming the file, both digests and the
    release it should be (`release`: its name and source)."""
    data = Path(path).read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if got != expected:
        raise WeightsMismatch(
            f"{path}: sha256 is {got}, expected {expected}; the file is corrupt or not the vendored {release}: "
            f"reinstall earmark, or restore the file from its source"
        )
    return data
