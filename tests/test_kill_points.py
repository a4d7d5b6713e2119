"""kill -9 during a build and during an evaluation, then resume: identical tables, no orphaned or duplicate
shards, every version complete (the smoke version of benchmarks/pipeline/kill_points.py, which kills at 20 points)."""

from __future__ import annotations

import os
from pathlib import Path

from support.kill_points import run_points


def test_kill_9_in_a_build_and_in_an_evaluation_then_resume(tmp_path):
    # one kill near the end of the evaluation, one within 1 s of the first evidence shard: during LLM synthesis.
    # One reference run: a column that varied by run would differ at both points (the benchmark runs two, and
    # reports such columns apart). Four 4 s clips in two shards (the benchmark: all eight domains)
    points, _ = run_points(
        tmp_path,
        0,
        seed=0,
        per_domain=1,
        fractions=[0.9],
        events=["Task run 'evidence/"],
        event_delay_s=1.0,
        references=1,
        domains={"S00", "SM0", "00A", "SMA"},
        server_home=Path(os.environ["EARMARK_PREFECT__HOME"]),  # the session's server (tests/conftest.py)
    )
    assert points[0].command == "evaluate" and points[1].command.startswith("build, ")
    for p in points:
        assert p.tables_equal, (p.where, p.differing)
        assert p.problems == [], (p.where, p.problems)
