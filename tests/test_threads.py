"""The thread budget: concurrent stage functions share the cores instead of each sizing its pools to all of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from earmark.core.config import load_config


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"run.task_runner": "threads", "run.max_workers": 4}, 4),
        ({"run.task_runner": "dask", "run.dask_workers": 8}, 2),
        ({"run.task_runner": "dask", "run.dask_workers": 32}, 1),
        ({"run.task_runner": "sequential"}, 16),
        ({"run.task_runner": "dask", "run.dask_address": "tcp://elsewhere:8786"}, 16),  # not in a worker: 1 process
        ({"run.task_runner": "threads", "run.max_workers": 4, "run.cpu_threads": 3}, 3),
    ],
)
def test_the_cores_are_shared_among_the_stage_functions_that_compute_at_once(monkeypatch, settings, expected):
    """16 cores: the threads runner's max_workers or a local cluster's workers divide them; the setting wins."""
    from earmark.flows.runners import cpu_threads

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert cpu_threads(load_config(None, {"dataset": "t", **settings})) == expected


def test_the_threads_and_dask_runners_get_the_same_budget(monkeypatch):
    """Both compute the same tables only with the same thread counts (float reduction order)."""
    from earmark.flows.runners import cpu_threads

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(12)), raising=False)
    threads = load_config(None, {"dataset": "t", "run.task_runner": "threads"})
    dask = load_config(None, {"dataset": "t", "run.task_runner": "dask"})
    assert cpu_threads(threads) == cpu_threads(dask) == 6


def test_apply_sizes_every_pool_of_the_process():
    """After `apply(1)` in a fresh process: torch, the BLAS pool numpy loaded, the variables for libraries not
    loaded yet, and ONNX Runtime's session options all say one thread."""
    code = """
import json, numpy, torch
from threadpoolctl import threadpool_info
from earmark.core import threads
threads.apply(1)
opts = threads.onnx_options()
print(json.dumps({
    "torch": torch.get_num_threads(),
    "blas": sorted({p["num_threads"] for p in threadpool_info()}),
    "omp_env": __import__("os").environ["OMP_NUM_THREADS"],
    "onnx": [opts.intra_op_num_threads, opts.inter_op_num_threads],
    "cpu_threads": threads.cpu_threads(),
}))
"""
    env = {k: v for k, v in os.environ.items() if k not in {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=300)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"torch": 1, "blas": [1], "omp_env": "1", "onnx": [1, 1], "cpu_threads": 1}
    with pytest.raises(ValueError, match=">= 1"):
        from earmark.core import threads

        threads.apply(0)
