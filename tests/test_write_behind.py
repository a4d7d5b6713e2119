"""Write-behind (`[run] write_behind`): a shard's Parquet write and catalog registration overlap the next
shard's stage function, while no more stage functions run at once than the process has compute slots, and a
shard's task still ends only once its shard is registered."""

from __future__ import annotations

import threading
import time
from functools import partial

import pytest

from earmark.core.config import load_config
from earmark.storage.catalog import Catalog

COMPUTE_S = 0.3
NEVER_S = 600.0  # how long the first write waits for the next computation before the test fails


def _compute(events: list, started: threading.Event, name: str, inputs) -> dict[str, list]:
    start = time.monotonic()
    if name != "job-0":
        started.set()
    time.sleep(COMPUTE_S)
    events.append(("compute", name, start, time.monotonic()))
    return {"quarantine": []}


def _build(tmp_path, write_behind: bool, monkeypatch) -> tuple[list, list]:
    from prefect import flow

    from earmark.flows.runners import task_runner
    from earmark.flows.shards import submit
    from earmark.stages.base import ShardJob, StageSpec
    from earmark.storage import open_catalog

    cfg = load_config(
        None,
        {
            "dataset": f"wb-{write_behind}",
            "data_root": str(tmp_path / str(write_behind)),
            "run.max_workers": 1,
            "run.write_behind": write_behind,
        },
    )
    events: list = []
    lock = threading.Lock()
    write_shard = Catalog.write_shard
    next_computing = threading.Event()
    first = [True]

    def slow_write(self, key, tables, meta, run_id):  # a slow disk: the write is what write-behind hides
        start = time.monotonic()
        with lock:
            is_first, first[0] = first[0], False
        if is_first and write_behind:  # the first write lasts until the next shard computes: proof of overlap
            assert next_computing.wait(NEVER_S), "no shard computed while the first one was written"
        ref = write_shard(self, key, tables, meta, run_id)
        with lock:
            events.append(("write", key, start, time.monotonic()))
        return ref

    monkeypatch.setattr(Catalog, "write_shard", slow_write)
    spec = StageSpec("test-write-behind", "1", writes=("quarantine",))
    jobs = [
        ShardJob(spec, partial(_compute, events, next_computing, f"job-{i}"), sources=[f"s{i}"], label=f"job-{i}")
        for i in range(3)
    ]

    @flow(task_runner=task_runner(cfg))
    def shards():
        futures = [submit(cfg, job, None) for job in jobs]
        done = []
        for f in futures:
            ref = f.result()
            done.append(open_catalog(cfg).has_shard(ref.key, ("quarantine",)))  # registered when its task ended
        return done

    assert shards() == [True, True, True]
    computes = sorted((e for e in events if e[0] == "compute"), key=lambda e: e[2])
    writes = sorted((e for e in events if e[0] == "write"), key=lambda e: e[2])
    assert len(computes) == 3 and len(writes) == 3
    return computes, writes


def test_a_shard_is_written_while_the_next_one_computes_on_the_one_compute_slot(tmp_path, prefect_harness, monkeypatch):
    computes, writes = _build(tmp_path, True, monkeypatch)
    assert all(a[3] <= b[2] for a, b in zip(computes, computes[1:])), computes  # one stage function at a time
    assert computes[1][2] < writes[0][3], (computes, writes)  # the 2nd computes while the 1st is written
    # without write-behind the worker computes, writes, and only then takes the next shard
    computes, writes = _build(tmp_path, False, monkeypatch)
    assert all(w[3] <= c[2] for w, c in zip(writes, computes[1:])), (computes, writes)


@pytest.mark.parametrize(("runner", "write_behind", "slots"), [("threads", True, 3), ("sequential", True, 1)])
def test_compute_slots_outside_dask_follow_the_config(runner, write_behind, slots):
    from earmark.flows.runners import task_runner
    from earmark.flows.slots import compute_slots

    cfg = load_config(None, {"run.task_runner": runner, "run.max_workers": 3, "run.write_behind": write_behind})
    assert compute_slots(cfg) == slots
    assert task_runner(cfg)._max_workers == (6 if runner == "threads" else 1)


@pytest.mark.parametrize("sections", [False, True])
def test_an_expert_that_takes_the_gpu_in_sections_holds_the_slot_only_there(monkeypatch, sections):
    """A shard of a GPU-using expert holds the `gpu` limit for its whole stage function, unless the expert takes
    it around its GPU work only (`gpu_in_sections`): then CPU work before and between runs outside the slot."""
    from contextlib import contextmanager

    from earmark.experts.base import gpu_section
    from earmark.flows import slots

    held: list[str] = []

    @contextmanager
    def concurrency(name, occupy):
        held.append(f"take {name}")
        yield
        held.append("give")

    monkeypatch.setattr(slots, "concurrency", concurrency)
    cfg = load_config(None, {"run.task_runner": "threads"})
    with slots.compute_slot(cfg, gpu=True, sections=sections):
        held.append("cpu work")
        with gpu_section():
            held.append("gpu work")
        held.append("more cpu work")
    if sections:
        assert held == ["cpu work", "take gpu", "gpu work", "give", "more cpu work"]
    else:
        assert held == ["take gpu", "cpu work", "gpu work", "more cpu work", "give"]
    with gpu_section():  # outside a shard: nothing to take
        held.append("free")
    assert held[-1] == "free" and held.count("take gpu") == 1
