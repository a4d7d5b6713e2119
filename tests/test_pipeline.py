"""`[run] pipeline`: in a build, analyze's flow runs beside ingest's and starts on a clip shard as soon as
ingest has registered it. Checked on a real build (`--until analyze`, the `levels` expert, one file per shard):
the experts of the first clip shard run while ingest's slowest shard is still computing (with the pipeline
off: only after every ingest shard), each analyze task waits for its own ingest task (the run graph's edge),
both ways register the same shards, and a crashed ingest shard fails the build after the shards ingest did
write are analysed."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import soundfile as sf

from earmark.core.config import load_config

# With the pipeline on, the last ingest shard's stage function waits until an analysis has started (on another clip
# shard) — an event, not a sleep racing the scheduler on a busy machine; this long only if none ever starts.
NO_ANALYSIS_S = 600.0
N_FILES = 3


@pytest.fixture
def inputs(tmp_path):
    folder = tmp_path / "inputs"
    folder.mkdir()
    t = np.arange(16_000 * 2) / 16_000
    for i in range(N_FILES):
        sf.write(folder / f"tone-{i}.wav", (0.2 * np.sin(2 * np.pi * (220 + 110 * i) * t)).astype(np.float32), 16_000)
    return folder


def _build(tmp_path, inputs, monkeypatch, pipeline: bool, fail_last: bool = False):
    import earmark.stages.analyze as analyze
    import earmark.stages.ingest as ingest
    from earmark.flows.build import run_build

    events: list[tuple[str, str, float, float]] = []  # (stage, first file or expert, start, end)
    lock = threading.Lock()
    ingest_run, analyze_run = ingest.run, analyze.run
    analysing = threading.Event()

    def slow_last_ingest(files, *a, **k):
        start = time.monotonic()
        if files[0].path.name == f"tone-{N_FILES - 1}.wav":
            if fail_last:
                raise RuntimeError("planted crash in the last ingest shard")
            if pipeline:  # still computing when the others' analysis starts — or never done, if it never does
                assert analysing.wait(NO_ANALYSIS_S), "no analysis started while ingest's last shard ran"
        out = ingest_run(files, *a, **k)
        with lock:
            events.append(("ingest", files[0].path.name, start, time.monotonic()))
        return out

    def timed_analyze(expert, inputs_):
        start = time.monotonic()
        analysing.set()
        out = analyze_run(expert, inputs_)
        with lock:
            events.append(("analyze", expert.name, start, time.monotonic()))
        return out

    monkeypatch.setattr(ingest, "run", slow_last_ingest)
    monkeypatch.setattr(analyze, "run", timed_analyze)
    name = f"pipe-{pipeline}-{fail_last}"
    cfg = load_config(
        None,
        {
            "data_root": str(tmp_path / name),
            "dataset": name,
            "inputs": [str(inputs)],
            "analyze.only": ["levels"],
            "ingest.files_per_shard": 1,
            "run.max_workers": 2,
            "run.pipeline": pipeline,
        },
    )
    if fail_last:
        with pytest.raises(Exception, match="planted crash"):
            run_build(cfg, until="analyze")
        return cfg, events, None
    return cfg, events, run_build(cfg, until="analyze")


def _registered(cfg) -> set[tuple[str, str, int]]:
    from earmark.storage import open_catalog

    return {tuple(r) for r in open_catalog(cfg).query("SELECT table_name, key, rows FROM shards")}


@pytest.mark.slow
def test_analysis_starts_on_a_clip_shard_while_ingest_still_runs(tmp_path, inputs, monkeypatch, prefect_harness):
    # off first: the server's first tag-concurrency request of a session takes ~2 s, which would delay the
    # first analyze task of the "on" build past the slow shard on its own
    cfg_off, off, result_off = _build(tmp_path, inputs, monkeypatch, pipeline=False)
    last_ingest_end = max(end for stage, _, _, end in off if stage == "ingest")
    assert all(start >= last_ingest_end for stage, _, start, _ in off if stage == "analyze"), off

    cfg_on, on, result_on = _build(tmp_path, inputs, monkeypatch, pipeline=True)
    last_ingest_end = max(end for stage, _, _, end in on if stage == "ingest")
    analyses = [(start, end) for stage, _, start, end in on if stage == "analyze"]
    assert len(analyses) == N_FILES and result_on["shards"]["analyze:levels"]["computed"] == N_FILES
    assert min(start for start, _ in analyses) < last_ingest_end, on  # inside the last ingest shard
    # the same shards either way (keys hash inputs and settings, not how the run was scheduled)
    assert _registered(cfg_on) == _registered(cfg_off)
    assert result_on["version"] and result_off["version"]

    # each analyze task waits for its own clip shard's ingest task: the run graph's edge
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:  # the REST filter: the sync client's sends a null sort
        runs = client.request(
            "POST",
            "/task_runs/filter",
            json={"task_runs": {"name": {"like_": "shard-0001"}}, "limit": 200, "offset": 0, "sort": "ID_DESC"},
        ).json()
    ingest_ids = {r["id"] for r in runs if r["name"] == "ingest/shard-0001"}
    waits = [
        {i["id"] for i in r["task_inputs"].get("wait_for", [])}
        for r in runs
        if r["name"] == "analyze/levels/shard-0001"
    ]
    assert ingest_ids and waits and any(w & ingest_ids for w in waits), (ingest_ids, waits)


@pytest.mark.slow
def test_a_crashed_ingest_shard_fails_the_build_after_the_written_ones_are_analysed(
    tmp_path, inputs, monkeypatch, prefect_harness
):
    cfg, events, _ = _build(tmp_path, inputs, monkeypatch, pipeline=True, fail_last=True)
    registered = _registered(cfg)
    clips = {key for table, key, _ in registered if table == "clips"}
    levels = {key for table, key, _ in registered if table == "levels"}
    assert len(clips) == N_FILES - 1 and len(levels) == N_FILES - 1, registered
    assert sum(stage == "analyze" for stage, *_ in events) == N_FILES - 1
