"""The model-under-test runner against a real local HTTP server that decodes the audio it receives."""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import soundfile as sf

from earmark.llm.audio import run_model, write_predictions
from earmark.prompts import load_prompt
from earmark.stages.evaluate.predictions import load_predictions

SR = 16_000
REJECTED_DURATION = 0.5  # the server answers 400 for clips of this length


def flac_clip(seconds: float, freq: float = 440.0) -> bytes:
    t = np.arange(int(SR * seconds)) / SR
    buf = io.BytesIO()
    sf.write(buf, (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32), SR, format="FLAC")
    return buf.getvalue()


# The client's read timeout in the retry test, and the stalled request's delay: a wide margin both ways (with 0.3 s
# a busy machine could delay an ordinary answer past the timeout and add a request the test did not plan).
TIMEOUT_S, STALL_S = 2.0, 20.0


class AudioChatServer(ThreadingHTTPServer):
    """A tiny /v1/chat/completions that answers with what it decoded from the input_audio part."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.requests = 0
            self.fail_next = 0  # answer 503 to this many requests first
            self.stall_next = 0  # sleep past the client's timeout on this many requests first
            self.headers_seen: list[str] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: AudioChatServer

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _reply(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on a stalled request

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        srv = self.server
        with srv.lock:
            srv.requests += 1
            srv.headers_seen.append(self.headers.get("Authorization", ""))
            fail, stall = srv.fail_next > 0, srv.fail_next <= 0 and srv.stall_next > 0
            srv.fail_next -= fail
            srv.stall_next -= stall
        if self.path != "/v1/chat/completions":
            return self._reply(404, {"error": f"no route {self.path}"})
        if fail:
            return self._reply(503, {"error": "overloaded"})
        if stall:  # far past the client's timeout; the answers it does get come at once, far inside it
            time.sleep(STALL_S)
            return self._reply(200, {"choices": [{"message": {"content": "too late"}}]})
        parts = body["messages"][0]["content"]
        text = next(p["text"] for p in parts if p["type"] == "text")
        audio = next(p["input_audio"] for p in parts if p["type"] == "input_audio")
        info = sf.info(io.BytesIO(base64.b64decode(audio["data"])))
        if abs(info.duration - REJECTED_DURATION) < 1e-3:
            return self._reply(400, {"error": "audio too short for this model"})
        content = (
            f"{text} | model={body['model']} format={audio['format']} container={info.format} "
            f"subtype={info.subtype} sr={info.samplerate} ch={info.channels} dur={info.duration:.2f}"
        )
        self._reply(200, {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]})


@pytest.fixture(scope="module")
def server():
    srv = AudioChatServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture()
def fresh(server):
    server.reset()
    return server


CLIPS = [("clip_a", 1.0), ("clip_b", REJECTED_DURATION), ("clip_c", 1.5), ("clip_d", 2.0)]
MECAT_CAPTION_PROMPTS = load_prompt("mecat_eval").data["captions"]
PROMPTS = {"short": MECAT_CAPTION_PROMPTS["short"], "music": MECAT_CAPTION_PROMPTS["music"]}


def clips():
    return ((cid, flac_clip(sec)) for cid, sec in CLIPS)


def test_audio_goes_over_the_wire_and_a_400_loses_only_its_clip(fresh, tmp_path):
    preds = run_model(
        clips(),
        PROMPTS,
        fresh.base_url,
        "omni-test",
        api_key="sk-test",
        cache_dir=tmp_path / "cache",
        max_concurrency=3,
        backoff_s=0.01,
    )
    assert set(preds) == {"short", "music"}
    for subtask, prompt in PROMPTS.items():
        assert set(preds[subtask]) == {cid for cid, _ in CLIPS}
        for cid, seconds in CLIPS:
            if seconds == REJECTED_DURATION:
                continue
            # The server decoded a 16-bit WAV of the clip's own length and rate from the base64 payload.
            assert preds[subtask][cid] == (
                f"{prompt} | model=omni-test format=wav container=WAV subtype=PCM_16 sr={SR} ch=1 dur={seconds:.2f}"
            )
        assert preds[subtask]["clip_b"] == ""
        assert set(preds.errors[subtask]) == {"clip_b"}
        assert "HTTP 400" in preds.errors[subtask]["clip_b"] and "too short" in preds.errors[subtask]["clip_b"]
    assert fresh.requests == 8  # 4 clips × 2 prompts, a 400 is not retried
    assert set(fresh.headers_seen) == {"Bearer sk-test"}
    assert preds.cache_hits == 0 and preds.stats["errors"] == 2


def test_rerun_hits_the_cache_and_retries_only_failures(fresh, tmp_path):
    first = run_model(clips(), PROMPTS, fresh.base_url, "omni-test", cache_dir=tmp_path, backoff_s=0.01)
    fresh.reset()
    again = run_model(clips(), PROMPTS, fresh.base_url, "omni-test", cache_dir=tmp_path, backoff_s=0.01)
    assert dict(again) == dict(first)
    assert again.cache_hits == 6 and fresh.requests == 2  # only clip_b × 2 prompts went out again
    assert again.n_errors() == 2
    fresh.reset()
    other = run_model(
        clips(), {"short": "Describe it briefly."}, fresh.base_url, "omni-test", cache_dir=tmp_path, backoff_s=0.01
    )
    assert other.cache_hits == 0 and fresh.requests == 4  # a new prompt misses the cache
    assert other["short"]["clip_a"].startswith("Describe it briefly. |")


def test_503_and_timeouts_are_retried_until_200(fresh):
    fresh.fail_next, fresh.stall_next = 3, 1
    preds = run_model(
        [("clip_a", flac_clip(1.0)), ("clip_c", flac_clip(1.5))],
        {"long": "Describe."},
        fresh.base_url,
        "m",
        max_concurrency=1,
        timeout_s=TIMEOUT_S,
        backoff_s=0.01,
    )
    assert preds.n_errors() == 0
    assert preds["long"]["clip_a"].endswith("dur=1.00") and preds["long"]["clip_c"].endswith("dur=1.50")
    assert fresh.requests == 2 + 3 + 1  # two answers, three 503s, one stalled request
    assert preds.stats["calls"] == 6


def test_an_unreadable_clip_is_an_error_value_and_the_others_go_on(fresh, tmp_path):
    preds = run_model(
        [("broken", b"not audio at all"), ("clip_a", flac_clip(1.0))],
        {"long": "Describe."},
        fresh.base_url,
        "m",
        backoff_s=0.01,
    )
    assert preds["long"]["broken"] == "" and "could not be decoded" in preds.errors["long"]["broken"]
    assert preds["long"]["clip_a"].endswith("dur=1.00") and fresh.requests == 1


def test_write_predictions_round_trips_through_mecat_format(fresh, tmp_path):
    preds = run_model(clips(), PROMPTS, fresh.base_url, "omni-test", backoff_s=0.01)
    paths = write_predictions(preds, tmp_path / "preds")
    assert {p.name for p in paths.values()} == {"short.jsonl", "music.jsonl"}
    lines = paths["short"].read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and all(len(json.loads(line)) == 1 for line in lines)
    assert load_predictions(paths["short"]) == preds["short"]
    assert load_predictions(paths["music"])["clip_b"] == ""


def test_each_model_request_is_reported_to_the_progress_display(fresh, tmp_path):
    from earmark.core import progress
    from test_progress import Recorder

    rec = Recorder()
    with progress.reporting(rec):  # the caller knows the total; requests count as they return, failed ones too
        run_model(clips(), PROMPTS, fresh.base_url, "omni-test", backoff_s=0.01, max_concurrency=2, planned=8)
    key = ("evaluate", "model requests")
    assert rec.planned[key] == 8 and rec.done[key] == 8 == fresh.requests
    rec = Recorder()
    with progress.reporting(rec):  # no total given: it counts up as clips are read
        run_model(clips(), PROMPTS, fresh.base_url, "omni-test", backoff_s=0.01)
    assert rec.planned[key] == rec.done[key] == 8
