"""What an expert is: a bundle that declares what it needs, loads once, and maps clips to records.

After torchaudio's `pipelines`: loading (`earmark.core.once.load_once`) is separate from computing (`analyze`). The flow
layer asks an expert for its `key_config()` to build the shard key, so an expert whose backend, version or
thresholds change recomputes its shards and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from earmark.core.once import load_once
from earmark.schemas.records import ExpertRecord

SAMPLE_RATE = 16_000


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


class MissingContext(KeyError, ValueError):
    """An expert was given clips without the records of a table it needs (a wiring error, not bad data)."""

    def __str__(self) -> str:
        return str(self.args[0])


_GPU_SECTION: ContextVar[Callable[[], AbstractContextManager[Any]] | None] = ContextVar("gpu_section", default=None)


@contextmanager
def gpu_sections(slot: Callable[[], AbstractContextManager[Any]]) -> Iterator[None]:
    """While inside, `gpu_section()` enters `slot()`: the flow layer passes a slot of the run's `gpu` limit, for
    a shard of an expert whose GPU work is all inside sections (`Expert.gpu_in_sections`)."""
    token = _GPU_SECTION.set(slot)
    try:
        yield
    finally:
        _GPU_SECTION.reset(token)


def gpu_section() -> AbstractContextManager[Any]:
    """Around an expert's GPU work: a slot of the `gpu` limit while a flow runs the shard (`gpu_sections`), else
    nothing. Its CPU work outside (decoding, DSP, librosa) then does not keep other shards off the GPU."""
    slot = _GPU_SECTION.get()
    return slot() if slot is not None else nullcontext()


class Expert:
    """Base class: subclasses set the class attributes and implement `analyze`."""

    name: ClassVar[str]  # also the table it writes
    version: ClassVar[str]
    backend: ClassVar[str]
    record: ClassVar[type[ExpertRecord]]
    needs: ClassVar[tuple[str, ...]] = ()
    device: str = "cpu"  # where its model runs; a paper expert sets the configured device ("cuda", "cuda:1")
    # True: analyze() enters gpu_section() around every use of the GPU, so a shard holds the `gpu` slot only
    # there; False: a shard of a GPU-using expert holds it for its whole stage function
    gpu_in_sections: ClassVar[bool] = False

    @property
    def uses_gpu(self) -> bool:
        """Whether its shards need a GPU (they then hold a slot of the `gpu` concurrency limit)."""
        return str(self.device).startswith("cuda")

    def key_config(self) -> dict[str, Any]:
        """The settings that change this expert's output; they enter the shard key."""
        return {}

    def lineage(self, clip_id: str) -> dict[str, str]:
        return {"clip_id": clip_id, "expert": self.name, "backend": self.backend, "expert_version": self.version}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[ExpertRecord]:
        raise NotImplementedError

    def needed(self, context: Context, clips: Sequence[ClipAudio], *tables: str) -> list[Mapping[str, Any]]:
        """The records of `tables` (default: every table in `needs`) for `clips`, by clip id; raises
        MissingContext naming the expert, the table and the fix when a clip has none."""
        out = []
        for table in tables or self.needs:
            rows = context.get(table, {})
            missing = [c.clip_id for c in clips if c.clip_id not in rows]
            if missing:
                raise MissingContext(
                    f"{self.name} needs the {table} record of every clip; missing for {len(missing)} "
                    f"clip(s), e.g. {missing[0]}: run the {table} expert on them first"
                )
            out.append(rows)
        return out


def torch_cuda() -> bool:
    """Whether torch sees a CUDA device (imported only when asked: the CPU default never loads torch for it)."""
    import torch

    return torch.cuda.is_available()


__all__ = ["SAMPLE_RATE", "ClipAudio", "Context", "Expert", "load_once", "torch_cuda"]
