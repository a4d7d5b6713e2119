"""kill -9 during a build and during an evaluation, then resume: identical tables, no orphaned or duplicate
shards, every version complete (the smoke version of benchmarks/kill_points.py, which kills at 20 points)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from kill_points import run_points  # noqa: E402


def test_kill_9_in_a_build_and_in_an_evaluation_then_resume(tmp_path):
    # one kill half-way through the build (analyze or synthesis), one half-way through the evaluation
    points, meta = run_points(tmp_path, 0, seed=0, per_domain=1, fractions=[0.4, 0.9])
    assert meta["volatile"] == []  # two uninterrupted builds agree on every column
    assert [p.command for p in points] == ["build", "evaluate"]
    for p in points:
        assert p.tables_equal, (p.where, p.differing)
        assert p.problems == [], (p.where, p.problems)
