"""LLM outages fail fast and bounded: the client against every fault of the fault-injecting server
(tests/support/fake_server.py), then real builds against a refused endpoint and against one that fails midway."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from earmark.core.config import LLMSection, SynthesizeSection, load_config
from earmark.llm import CircuitOpenError, LLMClient, LLMEndpointError, ResponseCache, shard_budget
from earmark.llm.session import open_llm, preflight
from earmark.stages.synthesize import _schemas
from earmark.stages.synthesize.common import Synth
from earmark.stages.synthesize.evidence import evidence_of
from earmark.stages.synthesize.item_types.qa.write import qa_clip
from support.fake_server import FakeLLMServer, minimal_instance, refused_url

MESSAGES = [{"role": "user", "content": "Describe the clip."}]
SCHEMA = _schemas("qa")[0]
ATTEMPTS, BUDGET_S, SLACK_S = 3, 1.5, 0.6  # the client's limits in these tests, and what a check may overrun


def client(url: str, **kw) -> LLMClient:
    opts = dict(timeout_s=0.5, max_retries=ATTEMPTS - 1, backoff_s=0.05, max_backoff_s=0.3, request_budget_s=BUDGET_S)
    return LLMClient(url, "fake-llm", **{**opts, **kw})


@pytest.fixture
def fake():
    servers: list[FakeLLMServer] = []

    def make(mode: str = "ok", **kw) -> FakeLLMServer:
        servers.append(FakeLLMServer(mode, **kw).start())
        return servers[-1]

    yield make
    for srv in servers:
        srv.stop()


# ----------------------------------------------------------------------------------------- the client
@pytest.mark.parametrize("mode", ["429", "500", "hang", "slow_stream", "refused"])
def test_every_outage_stays_within_the_attempt_and_time_budget(fake, mode):
    srv = fake("ok" if mode == "refused" else mode, retry_after_s=0.1, drip_s=0.05)
    # a hang or drip is bounded by the request's budget even when one read may take longer (timeout_s = 5)
    slow = mode in ("hang", "slow_stream")
    c = client(refused_url() if mode == "refused" else srv.base_url, timeout_s=5.0 if slow else 0.5)
    t = time.perf_counter()
    with pytest.raises(LLMEndpointError, match="is the LLM server running") as info:
        c.complete_json(MESSAGES, SCHEMA, max_tokens=50)
    took = time.perf_counter() - t
    assert took <= BUDGET_S + SLACK_S, (mode, took)
    assert 1 <= info.value.attempts <= ATTEMPTS and c.stats()["calls"] == info.value.attempts
    assert info.value.transient and "fake-llm" in str(info.value)
    if slow:  # the time budget, not the attempts, ended them
        assert took >= BUDGET_S - 0.1 and "request_budget_s" in str(info.value)
    if mode in ("429", "500"):
        assert srv.requests == ATTEMPTS and "max_attempts" in str(info.value)


def test_ok_replies_are_minimal_instances_of_the_requested_schema(fake):
    srv = fake("ok")
    for schema in _schemas("captions") + _schemas("instructions") + _schemas("entailment"):
        res = client(srv.base_url).complete_json(MESSAGES, schema, max_tokens=50)
        assert res.error is None and res.data == minimal_instance(schema)
        for name, sub in schema["properties"].items():
            if sub.get("type") == "string":
                assert sub["minLength"] <= len(res.data[name]) <= sub["maxLength"], name
            if sub.get("type") == "array":
                assert len(res.data[name]) == sub["minItems"]


@pytest.mark.parametrize("mode", ["invalid_json", "schema_violation", "truncation"])
def test_bad_replies_become_rejection_rows_not_errors(fake, mode):
    srv = fake(mode)
    ev = evidence_of("0123456789abcdef0123", "0M0", {"levels.lufs": -20.0}, duration_s=8.0, probs=[0.05, 0.95, 0.05])
    out = qa_clip(ev, Synth(client(srv.base_url), SynthesizeSection(repair_with_audit=False)), n=2)
    assert out.rows == [] and len(out.rejections) == 2
    assert srv.requests == 4  # each pair asked once and repaired once, no HTTP retry
    reason = out.rejections[0].reason
    assert {"invalid_json": "no JSON", "schema_violation": "String should have at most", "truncation": "truncated"}[
        mode
    ] in reason, reason


def test_429_waits_for_retry_after_then_succeeds(fake):
    srv = fake(schedule="429*1,ok", retry_after_s=0.4)
    t = time.perf_counter()
    res = client(srv.base_url, backoff_s=0.001, max_backoff_s=1).complete_json(MESSAGES, SCHEMA, max_tokens=50)
    assert res.error is None and srv.requests == 2 and time.perf_counter() - t >= 0.4


def test_a_retry_after_beyond_the_budget_ends_the_request_at_once(fake):
    # a budget of 60 s: waiting in it at all, rather than giving up at once, would take tens of seconds — a
    # difference no busy machine blurs (with a 1.5 s budget the test had to time itself to 0.5 s)
    srv = fake("429", retry_after_s=600)
    c = client(srv.base_url, max_backoff_s=1200, request_budget_s=60)
    t = time.perf_counter()
    with pytest.raises(LLMEndpointError, match="asked to retry after 600 s"):
        c.complete_json(MESSAGES, SCHEMA, max_tokens=50)
    assert srv.requests == 1 and time.perf_counter() - t < 30


def test_breaker_opens_after_n_failed_requests_and_later_calls_fail_instantly(fake):
    srv = fake("500")
    c = client(srv.base_url, breaker_failures=2)
    for _ in range(2):
        with pytest.raises(LLMEndpointError) as info:
            c.complete_json(MESSAGES, SCHEMA, max_tokens=50)
        assert not isinstance(info.value, CircuitOpenError)
    sent = srv.requests
    with pytest.raises(CircuitOpenError, match="failed 2 requests in a row") as info:
        c.complete_json(MESSAGES, SCHEMA, max_tokens=50)
    assert info.value.attempts == 0 and srv.requests == sent == 2 * ATTEMPTS  # refused before any attempt or wait
    assert "resumes" in str(info.value) and "HTTP 500" in str(info.value)


def test_a_reply_between_failures_keeps_the_breaker_closed(fake):
    srv = fake(schedule="500*3,ok*1,500*3,ok")
    c = client(srv.base_url, breaker_failures=2)
    for expect_error in (True, False, True, False):
        if expect_error:
            with pytest.raises(LLMEndpointError):
                c.complete_json(MESSAGES, SCHEMA, max_tokens=50, seed=srv.requests)
        else:
            assert c.complete_json(MESSAGES, SCHEMA, max_tokens=50, seed=srv.requests).error is None


def test_shard_budget_bounds_every_request_of_the_shard_in_every_thread(fake):
    srv = fake("hang")
    c = client(srv.base_url, request_budget_s=30, timeout_s=30, max_concurrency=4, breaker_failures=0)
    errors: list[Exception] = []

    def ask() -> None:
        try:
            c.complete_json(MESSAGES, SCHEMA, max_tokens=50)
        except LLMEndpointError as exc:
            errors.append(exc)

    t = time.perf_counter()
    with shard_budget(1.0):
        import contextvars

        threads = [threading.Thread(target=contextvars.copy_context().run, args=(ask,)) for _ in range(3)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    # each request alone may hang 30 s (its own budget and read timeout): well under that, the shard's 1 s ended them
    assert time.perf_counter() - t < 15
    assert len(errors) == 3 and all("shard_budget_s = 1" in str(e) for e in errors)


def test_cache_key_names_the_endpoint_not_only_the_model(fake, tmp_path):
    a, b = fake("ok"), fake("ok")
    cache = ResponseCache(tmp_path)
    assert not client(a.base_url, cache=cache).complete_json(MESSAGES, SCHEMA, max_tokens=50).cached
    # the same server spelled differently shares the answer; another server with the same model name does not
    same = f"HTTP://127.0.0.1:{a.port}/v1/"
    assert client(same, cache=cache).complete_json(MESSAGES, SCHEMA, max_tokens=50).cached
    assert not client(b.base_url, cache=cache).complete_json(MESSAGES, SCHEMA, max_tokens=50).cached
    assert (a.requests, b.requests) == (1, 1)
    # the embedded server's identity is its model, not its (changing) loopback port; nothing is started for it
    embedded = open_llm(LLMSection(model="m"), tmp_path / "c")
    assert embedded.identity == "embedded:m" and not embedded.server_started


def test_preflight_names_endpoint_and_model_and_is_quick(fake):
    url = refused_url()
    with pytest.raises(LLMEndpointError, match=f"{url}.*'fake-llm'.*running and reachable"):
        preflight(LLMSection(endpoint=url, model="fake-llm"))
    hang = fake("hang")
    t = time.perf_counter()
    with pytest.raises(LLMEndpointError, match="did not answer within 0.5 s"):
        preflight(LLMSection(endpoint=hang.base_url, model="fake-llm", preflight_timeout_s=0.5))
    assert time.perf_counter() - t < 30  # the hanging endpoint never answers: bounded by the preflight's time-out
    with pytest.raises(LLMEndpointError, match="HTTP 500"):
        preflight(LLMSection(endpoint=fake("500").base_url, model="fake-llm"))
    ok = fake("ok")
    assert "answered" in preflight(LLMSection(endpoint=ok.base_url, model="fake-llm"))
    assert (ok.model_requests, ok.requests) == (1, 0)  # GET /models listed the model: no completion
    unlisted = fake("ok", list_models=False)  # /models is 404: a 1-token completion instead
    assert "answered" in preflight(LLMSection(endpoint=unlisted.base_url, model="fake-llm"))
    assert unlisted.requests == 1
    assert preflight(LLMSection()) is None  # the embedded server is not started for a preflight


# ----------------------------------------------------------------------------------------- builds
@pytest.fixture(scope="module")
def clip_inputs(tmp_path_factory) -> Path:
    from earmark.corpus import generate_corpus

    root = tmp_path_factory.mktemp("llm-faults")
    items = generate_corpus(root / "corpus", per_domain=1, seed=3)
    inputs = root / "inputs"
    inputs.mkdir()
    for item in items:  # two short clips without speech, one shard each
        if item.domain in ("0M0", "00A"):
            shutil.copy(item.path, inputs / item.path.name)
    return inputs


def _cfg(inputs: Path, data_root: Path, endpoint: str, **llm):
    overrides = {
        "data_root": str(data_root),
        "dataset": "faults",
        "inputs": [str(inputs)],
        "llm.endpoint": endpoint,
        "llm.model": "fake-llm",
        "filter.margin_backend": "off",
        "ingest.files_per_shard": 1,
        "run.task_runner": "sequential",  # shard tasks in submission order: which request fails is fixed
        "synthesize.qa_pairs": "llm",  # QA pairs by the model (the default writes them by rule, without a request)
        **{f"llm.{k}": v for k, v in llm.items()},
    }
    return load_config(None, overrides)


@pytest.mark.slow
def test_a_build_against_a_refused_endpoint_fails_before_ingest(clip_inputs, tmp_path, prefect_harness):
    from earmark.flows.build import run_build

    url = refused_url()
    t = time.perf_counter()
    with pytest.raises(LLMEndpointError, match=f"{url} \\(model 'fake-llm'\\).*running and reachable"):
        run_build(_cfg(clip_inputs, tmp_path / "data", url))
    assert time.perf_counter() - t < 30
    assert not (tmp_path / "data" / "faults").exists()  # nothing was ingested, let alone analysed


@pytest.mark.slow
def test_a_build_stops_at_the_breaker_keeps_finished_shards_and_resumes(clip_inputs, tmp_path, prefect_harness):
    """The endpoint fails every QA request: the first QA shard fails once its request has spent its attempts
    (Prefect does not run it again), the breaker opens, the next shard's first request fails without being sent;
    the caption shard finished before stays registered, and the same build against the healed endpoint
    resumes from it and completes, every clip with items or rejection rows."""
    from earmark.flows.build import run_build
    from earmark.storage import Catalog

    with FakeLLMServer("ok") as srv:
        srv.route("You write question-answer pairs", "500")
        cfg = _cfg(clip_inputs, tmp_path / "data", srv.base_url, max_attempts=2, breaker_failures=1)
        t = time.perf_counter()
        with pytest.raises(LLMEndpointError) as info:
            run_build(cfg)
        failed_s = time.perf_counter() - t
        assert "HTTP 500" in str(info.value) and "fake-llm" in str(info.value)
        assert srv.served["500"] == 2, srv.served  # one request × 2 attempts, not × Prefect's task retries
        cat = Catalog(tmp_path / "data", "faults")
        done = dict(cat.query("SELECT stage, count(DISTINCT key) FROM shards GROUP BY 1"))
        assert done["synthesize:captions"] == 1 and "synthesize:qa" not in done and done["evidence"] == 2
        assert cat.query("SELECT status FROM runs") == [("failed",)]

        srv._rules.clear()  # the endpoint is healthy again
        before = srv.requests
        again = run_build(cfg)
        assert again["shards"]["synthesize:captions"] == {"computed": 1, "skipped": 1}
        assert again["shards"]["synthesize:qa"] == {"computed": 2, "skipped": 0}
        assert all(v["computed"] == 0 for k, v in again["shards"].items() if k.startswith("analyze:"))
        assert srv.requests - before == again["llm"]["calls"] > 0
    print(f"failed build {failed_s:.1f} s, resumed build {sum(again['timings_s'].values()):.1f} s")

    clips = [c for (c,) in cat.query("SELECT clip_id FROM clips")]
    assert len(clips) >= 2  # a long input yields two clips
    for table in ("captions", "qa", "entailment", "instructions"):
        have = {c for (c,) in cat.query(f"SELECT DISTINCT clip_id FROM {table}")}
        rejected = {c for (c,) in cat.query(f"SELECT DISTINCT clip_id FROM rejections WHERE \"table\" = '{table}'")}
        assert set(clips) <= have | rejected, table
