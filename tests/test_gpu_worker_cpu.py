"""The CPU-cost benchmark's clocks (benchmarks/experts/gpu_worker_cpu.py) and the GPU memory a multi-worker pass needs
(benchmarks/experts/expert_throughput.py): the parts that decide the figures, on small inputs."""

from __future__ import annotations

import time

import pytest
import torch


def _busy(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_forward_clock_counts_outermost_forwards_cpu_and_ops_only():
    """CPU time and aten ops inside an outermost forward count once (nested modules are inside it); CPU work
    between forwards and TorchScript modules (Silero VAD stays on the CPU) count as host work."""
    from support.worker_cpu import ForwardClock

    class Busy(torch.nn.Module):
        def forward(self, x):
            _busy(0.05)
            return x * 2 + 1  # two aten ops

    model = torch.nn.Sequential(Busy(), torch.nn.Sequential(Busy()))
    scripted = torch.jit.script(torch.nn.Sequential(torch.nn.Identity()))
    with ForwardClock() as clock:
        t0 = time.process_time()
        model(torch.zeros(3))
        t1 = time.process_time()
        _busy(0.2)  # host work
        scripted(torch.zeros(1))
    assert 0.1 <= clock.cpu_s <= t1 - t0
    assert clock.ops == 4
    before = (clock.cpu_s, clock.ops)
    model(torch.zeros(3))  # the hooks are gone after the block
    assert (clock.cpu_s, clock.ops) == before


def test_host_cost_is_measured_per_op():
    from support.worker_cpu import host_us_per_op

    assert 0 < host_us_per_op(repeats=2) < 10_000


@pytest.mark.parametrize(("workers", "expected"), [(1, 7.5), (8, 60.0), (11, 82.5)])
def test_a_pass_needs_each_workers_context_and_allocator_peak(workers, expected):
    """8 workers of a worker that reserves 6.5 GiB at its peak, with 1 GiB of CUDA context: 60 GiB; the
    reserved peak is the largest over the experts (the allocator keeps what it reserved)."""
    from support.throughput import memory_needed

    one = {
        "gpu_memory": {"total_gib": 79.2, "resident_gib": 4.0, "context_gib": 1.0},
        "experts": {"tags": {"gpu_peak_reserved_gib": 5.0}, "asr": {"gpu_peak_reserved_gib": 6.5}, "vad": {}},
    }
    assert memory_needed(one, workers) == expected
    assert memory_needed({"experts": {}, "gpu_memory": None}, workers) is None  # no CUDA: nothing to check


def test_scaling_repeats_clips_with_their_records(monkeypatch):
    """`--repeat`: each clip and each of its records again under a new id, so N workers get more clips without
    the slot experts (GPU work) running again; the truth follows the copies."""
    from earmark.schemas.records import Clip, SpeechActivity
    from support import worker_cpu

    seen = {}
    monkeypatch.setattr(worker_cpu, "cpu_workers", lambda *args: seen.setdefault("args", args) and {})
    clip = Clip(
        clip_id="c",
        source_path="a.wav",
        source_sha256="0" * 64,
        source_format="wav",
        clip_index=0,
        offset_s=0.0,
        duration_s=1.0,
        sample_rate=16000,
        audio_flac=b"",
    )
    level = SpeechActivity(
        clip_id="c",
        expert="vad",
        backend="b",
        expert_version="1",
        segments=[],
        speech_s=0.0,
        speech_ratio=0.0,
        max_prob=0.0,
    )
    worker_cpu.scaling_passes((None, {"c": "S00"}, [clip], {"vad": {"c": level}}, ["vad"]), [2], repeat=3)
    _, truth, clips, context, names, workers = seen["args"]
    assert [c.clip_id for c in clips] == ["c~0", "c~1", "c~2"] and workers == 2 and names == ["vad"]
    assert {k: r.clip_id for k, r in context["vad"].items()} == {"c~0": "c~0", "c~1": "c~1", "c~2": "c~2"}
    assert truth == {"c~0": "S00", "c~1": "S00", "c~2": "S00"}
