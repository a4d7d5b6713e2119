"""What an expert is: a bundle that declares what it needs, loads once, and maps clips to records.

After torchaudio's `pipelines`: loading (`load_once`) is separate from computing (`analyze`). The flow
layer asks an expert for its `key_config()` to build the shard key, so an expert whose backend, version or
thresholds change recomputes its shards and nothing else.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np

from earmark.schemas.records import ExpertRecord

SAMPLE_RATE = 16_000
T = TypeVar("T")


@dataclass(frozen=True)
class ClipAudio:
    """One clip's standardized audio: float32 mono at 16 kHz in [-1, 1]."""

    clip_id: str
    samples: np.ndarray = field(repr=False)
    sample_rate: int = SAMPLE_RATE

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.sample_rate


# Records of the expert tables an expert depends on, by table name then clip_id.
Context = Mapping[str, Mapping[str, ExpertRecord]]


class Expert:
    """Base class: subclasses set the class attributes and implement `analyze`."""

    name: ClassVar[str]  # also the table it writes
    version: ClassVar[str]
    backend: ClassVar[str]
    record: ClassVar[type[ExpertRecord]]
    needs: ClassVar[tuple[str, ...]] = ()

    def key_config(self) -> dict[str, Any]:
        """The settings that change this expert's output; they enter the shard key."""
        return {}

    def lineage(self, clip_id: str) -> dict[str, str]:
        return {"clip_id": clip_id, "expert": self.name, "backend": self.backend, "expert_version": self.version}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[ExpertRecord]:
        raise NotImplementedError


_loaded: dict[str, Any] = {}
_load_lock = threading.Lock()


def load_once(key: str, factory: Callable[[], T]) -> T:
    """Load a model at most once per worker process (thread-safe), keyed by what identifies its weights."""
    with _load_lock:
        if key not in _loaded:
            _loaded[key] = factory()
        return _loaded[key]
