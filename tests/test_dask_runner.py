"""`[run] task_runner = "dask"`: the same whole build (ingest to publish) on a 2-process local Dask cluster and
on threads publishes the same tables; what the tasks receive pickles."""

from __future__ import annotations

import hashlib
import pickle
import shutil
from functools import partial
from pathlib import Path

import cloudpickle
import pytest

from conftest import CatalogConnection
from earmark.core.config import load_config
from support.fake_server import FakeLLMServer

# columns that legitimately differ between two builds into two data roots (none in the expert tables)
VARYING = {"run_id", "created_at", "started_at", "finished_at", "decided_at", "path"}


def table_hashes(dataset_dir: Path) -> dict[str, tuple[int, str]]:
    """Per view of the latest version: (rows, sha256 of its sorted rows without the VARYING columns)."""
    con = CatalogConnection(dataset_dir.parent, dataset_dir.name)
    try:
        views = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' AND table_type = 'VIEW'"
            ).fetchall()
        ]
        out = {}
        for view in sorted(views):
            cur = con.execute(f"SELECT * FROM {view}")
            keep = [i for i, d in enumerate(cur.description) if d[0] not in VARYING]
            rows = sorted(repr(tuple(row[i] for i in keep)) for row in cur.fetchall())
            out[view] = (len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest())
        return out
    finally:
        con.close()


def test_config_and_shard_jobs_pickle(tmp_path):
    from earmark.experts import build_experts
    from earmark.flows.synthesize import llm_session
    from earmark.stages import analyze
    from earmark.stages.base import ShardJob

    # the data root in tmp_path: the LLM session opens the dataset's catalog (./data/pk in the working tree before)
    cfg = load_config(
        None, {"data_root": str(tmp_path), "dataset": "pk", "run.task_runner": "dask", "run.dask_workers": 2}
    )
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    for expert in build_experts(cfg.analyze).values():
        job = ShardJob(analyze.spec(expert), partial(analyze.run, expert), inputs={"clips": ["k"]})
        assert cloudpickle.loads(cloudpickle.dumps(job)).plan() == job.plan()
    session = llm_session(cfg)
    copies = [cloudpickle.loads(cloudpickle.dumps(session)) for _ in range(2)]
    assert copies[0] is copies[1]  # one session (one client, one embedded server) per worker process


@pytest.mark.slow
def test_dask_and_threads_builds_publish_the_same_tables(tmp_path, prefect_harness):
    from earmark.corpus import generate_corpus
    from earmark.flows.build import run_build

    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for item in generate_corpus(tmp_path / "corpus", per_domain=1, seed=3):
        if item.domain in {"000", "S00", "0M0"}:
            shutil.copy(item.path, inputs / item.path.name)

    def build(runner: str, endpoint: str) -> dict:
        cfg = load_config(
            None,
            {
                "data_root": str(tmp_path / runner),
                "dataset": "same",
                "inputs": [str(inputs)],
                "ingest.files_per_shard": 1,
                "run.task_runner": runner,
                "run.dask_workers": 2,
                "llm.endpoint": endpoint,
                "llm.model": "fake-llm",
            },
        )
        return run_build(cfg)

    # The whole build, synthesis, filter and publish included. The LLM is the fault-injecting server in its
    # well-behaved mode, and the Dask build reads the thread build's request cache (a copy of its
    # .llm_cache): this test is about orchestration, not sampling, so both see the same replies.
    with FakeLLMServer("ok") as llm:
        on_threads = build("threads", llm.base_url)
        shutil.copytree(tmp_path / "threads" / ".llm_cache", tmp_path / "dask" / ".llm_cache")
        asked = llm.requests
        on_dask = build("dask", llm.base_url)
        assert asked > 0 and llm.requests == asked  # every Dask request was a cache hit
    assert on_dask["version"] == on_threads["version"] == "v0001"
    assert on_dask["shards"] == on_threads["shards"] and on_dask["shards"]["ingest"]["computed"] == 3
    dask_tables, thread_tables = table_hashes(tmp_path / "dask" / "same"), table_hashes(tmp_path / "threads" / "same")
    assert dask_tables["clips"][0] >= 3 and dask_tables["asr"][0] == dask_tables["clips"][0]  # a long file: 2 clips
    assert {"captions", "qa", "entailment", "instructions", "qc", "claims"} <= set(dask_tables)
    different = {t for t in dask_tables if dask_tables[t] != thread_tables.get(t)}
    assert not different, {t: (dask_tables[t], thread_tables.get(t)) for t in different}
