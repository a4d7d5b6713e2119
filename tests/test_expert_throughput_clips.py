"""benchmarks/experts/expert_throughput.py's carried clips (`--save-clips` / `--clips`) and `--route truth`: the clips
a GPU machine without espeak-ng or DuckDB runs on are the ones generated here, and routing by the corpus'
true domains sends each clip where its domain says."""

from __future__ import annotations

import numpy as np

from earmark.corpus import DOMAIN_CODES
from support.throughput import TruthDomainExpert, corpus_clips, load_clips, save_clips, warmup_clips


def test_saved_clips_load_back_with_their_domains_and_route_by_them(tmp_path):
    clips, truth = corpus_clips(1, 3, tmp_path / "corpus")
    assert sorted(set(truth.values())) == sorted(DOMAIN_CODES) and set(truth) == {c.clip_id for c in clips}
    save_clips(clips, truth, tmp_path / "saved")
    loaded, loaded_truth = load_clips(tmp_path / "saved")
    assert [c.clip_id for c in loaded] == [c.clip_id for c in clips] and loaded_truth == truth
    for a, b in zip(clips, loaded):  # FLAC at 16 bits: what ingest stores, so nothing is lost
        assert a.sample_rate == b.sample_rate and np.abs(a.samples - b.samples).max() <= 2**-15
    decisions = TruthDomainExpert(truth).analyze(loaded, {})
    assert [d.domain for d in decisions] == [truth[c.clip_id] for c in loaded]
    assert all(d.music_prob == float(d.domain[1] == "M") and d.silent == (d.domain == "000") for d in decisions)
    warm = warmup_clips(loaded, truth)
    assert len(warm) == len(DOMAIN_CODES) and {truth[c.clip_id] for c in warm} == set(DOMAIN_CODES)


def test_model_clock_times_outermost_forwards_only():
    """`--host-share`'s clock: time inside outermost torch forwards counts once (nested modules are inside it),
    TorchScript modules (Silero VAD: CPU work in every profile) and Python between forwards do not count."""
    import time

    import torch

    from support.throughput import ModelClock

    class Slow(torch.nn.Module):
        def forward(self, x):
            time.sleep(0.05)
            return x

    model = torch.nn.Sequential(Slow(), torch.nn.Sequential(Slow(), torch.nn.Identity()))
    scripted = torch.jit.script(torch.nn.Sequential(torch.nn.Identity()))
    with ModelClock() as clock:
        t0 = time.perf_counter()
        model(torch.zeros(1))
        t1 = time.perf_counter()  # the outer forward lies inside [t0, t1]: counted once, nested ones inside it
        time.sleep(0.2)  # host work between forwards
        scripted(torch.zeros(1))
    # bounds from the run's own timestamps, not from what the sleeps should take (a busy machine stretches them)
    assert 0.1 <= clock.seconds <= t1 - t0
    before = clock.seconds
    model(torch.zeros(1))  # the hooks are gone after the block
    assert clock.seconds == before


def test_no_embedded_expert_holds_the_gpu_slot():
    """`--host-share` marks the experts that would hold the `gpu` slot on a CUDA worker: none of the embedded
    profile's (the paper profile's DNSMOS and music rules are tested with those experts)."""
    from earmark.core.config import AnalyzeSection
    from support.throughput import gpu_slots

    assert gpu_slots(AnalyzeSection()) == set()
