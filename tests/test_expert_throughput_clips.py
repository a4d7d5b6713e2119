"""benchmarks/expert_throughput.py's carried clips (`--save-clips` / `--clips`) and `--route truth`: the clips
a GPU machine without espeak-ng or DuckDB runs on are the ones generated here, and routing by the corpus'
true domains sends each clip where its domain says."""

from __future__ import annotations

import numpy as np

from benchmarks.expert_throughput import TruthDomainExpert, corpus_clips, load_clips, save_clips, warmup_clips
from earmark.corpus import DOMAIN_CODES


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
