"""Compute slots: how many stage functions a process runs at once (`compute_slots`), and the slot a shard holds
while its stage function runs (`compute_slot`), with a slot of the Prefect global concurrency limit `gpu` for
GPU-using stages (slots = `[run] gpus`, created by `earmark server` / `earmark deploy`), so builds sharing a GPU
box queue for it. Where no such limit exists (a plain local build) Prefect does not wait."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from prefect.concurrency.sync import concurrency

from earmark.core.config import Config
from earmark.experts.base import gpu_sections

GPU_LIMIT = "gpu"  # the global concurrency limit GPU-using shards hold a slot of


_SLOTS: dict[int, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


def compute_slots(cfg: Config) -> int:
    """How many stage functions this process runs at once: the thread runner's `max_workers` (1 sequential);
    in a Dask worker half its threads (at least 1), the other half writing finished shards."""
    if cfg.run.task_runner == "sequential":
        return 1
    if cfg.run.task_runner == "dask":
        try:
            from distributed import get_worker

            threads = get_worker().state.nthreads
        except (ImportError, ValueError):  # not inside a Dask worker (a task called from the flow itself)
            return 1
        return max(1, threads // 2) if cfg.run.write_behind else threads
    return cfg.run.max_workers


def _compute_semaphore(slots: int) -> threading.BoundedSemaphore:
    with _SLOTS_LOCK:
        return _SLOTS.setdefault(slots, threading.BoundedSemaphore(slots))


@contextmanager
def compute_slot(cfg: Config, gpu: bool, sections: bool = False) -> Iterator[None]:
    """Held while one shard's stage function runs: one of this process's compute slots, then (GPU-using
    stages) a slot of the global concurrency limit `gpu`. The local slot comes first, so a task never holds
    a GPU while it waits for this process's CPU. `sections`: the expert takes the GPU slot itself, only around
    its GPU work (`gpu_section()`), so its CPU work runs while other shards use the GPU."""
    with _compute_semaphore(compute_slots(cfg)):
        if gpu and sections:
            with gpu_sections(lambda: concurrency(GPU_LIMIT, occupy=1)):
                yield
        elif gpu:
            with concurrency(GPU_LIMIT, occupy=1):
                yield
        else:
            yield
