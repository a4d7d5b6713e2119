"""How many threads one stage function's math libraries use in this process: torch, BLAS / OpenMP, ONNX Runtime.

A node runs several stage functions at once: the threads runner's `max_workers` in one process, or the worker
processes of a Dask cluster. Each library sizes its own pool to every core by default, so N stage functions
computing at once ran N × cores threads. On a 16-core GPU node, 8 analyze workers made the CPU experts 1.7–8.6×
slower per clip than one worker (docs/benchmarks.md, "Issue [3/4]"). `apply(n)` sizes every pool of this process
to n threads; `[run] cpu_threads` chooses n (`earmark.flows.runners.cpu_threads`), by default the cores divided
by the stage functions that compute at once, so that the workers never ask for more threads than there are cores.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")

_applied: int | None = None
_lock = threading.Lock()


def environ(n: int) -> dict[str, str]:
    """The variables that size the pools of a process yet to start (libraries read them when they load)."""
    return dict.fromkeys(ENV, str(n))


def apply(n: int) -> None:
    """Size this process' pools to `n` threads: the variables (for libraries not loaded yet), torch's intra-op
    pool, and the BLAS / OpenMP pools already loaded (threadpoolctl). Once per process and value; cheap after."""
    global _applied
    if n < 1:
        raise ValueError(f"cpu threads must be >= 1, got {n}")
    with _lock:
        if _applied == n:
            return
        os.environ.update(environ(n))
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(n)
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=n)  # applied on creation, for the life of the process
        _applied = n


def cpu_threads() -> int:
    """The threads a pool created now should have: what `apply` set, else torch's setting, else every core."""
    if _applied is not None:
        return _applied
    if "torch" in sys.modules:
        return int(sys.modules["torch"].get_num_threads())
    return os.cpu_count() or 1


def onnx_options() -> Any:
    """ONNX Runtime session options sized to `cpu_threads()` (its default is one thread per physical core)."""
    import onnxruntime

    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = cpu_threads()
    opts.inter_op_num_threads = 1
    return opts
