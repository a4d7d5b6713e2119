"""LLM usage per shard: what a stage's requests cost reaches its ShardRef and the stage's shard table artifact.

A real stage job (run_job on a real catalog) whose function asks the fault-injecting fake server from the
synthesis stage's worker threads, with the response cache: computed, then computed again on a new key from the
cache, then skipped."""

from __future__ import annotations

from pathlib import Path

from earmark.flows.shards import shard_table
from earmark.llm import LLMClient, ResponseCache
from earmark.schemas.records import Caption
from earmark.stages.base import Inputs, ShardJob, StageSpec, run_job
from earmark.stages.synthesize import _per_clip, _schemas
from earmark.storage import Catalog
from support.fake_server import FakeLLMServer

SCHEMA = _schemas("captions")[0]
LLM_COLUMNS = ("llm_requests", "llm_cache_hits", "prompt_tokens", "completion_tokens")


def _job(client: LLMClient, clips: list[str], version: str = "1") -> ShardJob:
    def fn(inputs: Inputs) -> dict[str, list[Caption]]:
        def ask(clip: str) -> Caption:
            messages = [{"role": "user", "content": f"Describe clip {clip}."}]
            res = client.complete_json(messages, SCHEMA, max_tokens=50)
            assert res.error is None
            return Caption(
                clip_id=clip,
                domain="S00",
                prompt_name="p",
                prompt_sha="s",
                model="fake-llm",
                confidence=0.9,
                item_id=f"{clip}:short:0",
                kind="short",
                ref_index=0,
                text=f"caption of {clip}",
            )

        return {"captions": _per_clip(clips, ask, concurrency=3)}  # the synthesis stage's worker threads

    spec = StageSpec(name="synthesize:captions", version=version, writes=("captions",))
    return ShardJob(spec=spec, fn=fn, sources=clips, label="shard-0000")


def test_a_shards_llm_requests_and_tokens_reach_its_shard_table_row(tmp_path: Path):
    cat = Catalog(tmp_path, "ds")
    clips = [f"c{i}" for i in range(4)]
    with FakeLLMServer("ok") as srv:
        client = LLMClient(srv.base_url, "fake-llm", cache=ResponseCache(tmp_path / "cache"), max_concurrency=3)
        computed = run_job(cat, _job(client, clips), None)
        cached = run_job(cat, _job(client, clips, version="2"), None)  # a new key, the same requests: cache hits
        skipped = run_job(cat, _job(client, clips), None)
        stats = client.stats()
    assert srv.requests == 4 and stats["calls"] == 4 and stats["cache_hits"] == 4

    assert computed.llm_usage is not None
    assert computed.llm_usage["calls"] == 4 and computed.llm_usage["cache_hits"] == 0
    # the shard's tokens are the run's: every request that sent tokens was this shard's
    assert computed.llm_usage["prompt_tokens"] == stats["prompt_tokens"] > 4 * 5
    assert computed.llm_usage["completion_tokens"] == stats["completion_tokens"] > 0
    assert cached.llm_usage == {"calls": 0, "cache_hits": 4, "prompt_tokens": 0, "completion_tokens": 0}
    assert skipped.skipped and skipped.llm_usage is None

    rows = shard_table(cat, [computed, cached, skipped], [False] * 3, llm=True)
    assert [r["status"] for r in rows] == ["computed", "computed", "skipped (in catalog)"]
    assert [[r[c] for c in LLM_COLUMNS] for r in rows] == [
        [4, 0, stats["prompt_tokens"], stats["completion_tokens"]],
        [0, 4, 0, 0],
        [0, 0, 0, 0],
    ]
    assert not set(LLM_COLUMNS) & set(shard_table(cat, [computed], [False])[0])  # a stage without an LLM
