"""A fault-injecting OpenAI-compatible server: what tests and benchmarks point the LLM client at.

`FakeLLMServer(mode="ok")` serves `POST /v1/chat/completions` and `GET /v1/models` on a free loopback port
from a thread. In mode `ok` a reply is a minimal instance of the request's `response_format` JSON schema
(strings padded to minLength, arrays at minItems, numbers within bounds): valid, not meaningful. The other
modes are the ways an endpoint fails:

- `invalid_json`: 200 with text that is not JSON; `schema_violation`: valid JSON the schema does not allow;
  `truncation`: a JSON reply cut in half with finish_reason "length" (all three are rows' problems);
- `429` (with `Retry-After: retry_after_s`), `500`: transient HTTP errors;
- `hang`: reads the request and never answers; `slow_stream`: a 200 whose body arrives one byte every
  `drip_s` seconds (each read is quick, the whole reply is not);
- `refused`: nothing listens there (`refused_url()`: a loopback URL with a closed port).

Which mode answers: a rule whose pattern occurs in the request (`route`), else the schedule (`schedule`:
"ok*3,500" = three ok replies, then 500 for good), else the server's mode. Requests are counted
(`requests`, per mode in `served`). As a tool: `.venv/bin/python tests/support/fake_server.py --port 8099 --mode ok`.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = ("ok", "invalid_json", "schema_violation", "truncation", "429", "500", "hang", "slow_stream")
_FILLER = "A sound is heard in the recording. "


def refused_url() -> str:
    """A loopback base URL where nothing listens (a port that was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def parse_schedule(text: str) -> list[tuple[str, int | None]]:
    """ "ok*3,500" → [("ok", 3), ("500", None)]: each mode for its count of requests, the last one for good."""
    steps: list[tuple[str, int | None]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        mode, _, count = part.partition("*")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} in schedule {text!r}; use {', '.join(MODES)}")
        steps.append((mode, int(count) if count else None))
    return steps


def minimal_instance(schema: dict[str, Any] | None, defs: dict[str, Any] | None = None) -> Any:
    """A small value the JSON schema accepts (the subset pydantic writes: objects, arrays, strings with length,
    enum, const or pattern, bounded numbers, anyOf/oneOf/allOf, $ref into $defs)."""
    schema = schema or {}
    defs = {**(defs or {}), **schema.get("$defs", {}), **schema.get("definitions", {})}
    if "$ref" in schema:
        return minimal_instance(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return minimal_instance(options[0], defs)
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(part)
        return minimal_instance(merged, defs)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: minimal_instance(sub, defs) for name, sub in props.items()}
    if kind == "array":
        return [minimal_instance(schema.get("items"), defs) for _ in range(schema.get("minItems", 1))]
    if kind == "string":
        return _string(schema)
    if kind in ("number", "integer"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return True
    return None


def _string(schema: dict[str, Any]) -> str:
    lo, hi = schema.get("minLength", 0), schema.get("maxLength", max(schema.get("minLength", 0), 40))
    text = (_FILLER * (lo // len(_FILLER) + 2))[: max(lo, min(hi, len(_FILLER.strip())))].strip()
    while len(text) < lo:
        text += "x"
    pattern = schema.get("pattern")
    if pattern and not re.search(pattern, text):
        for candidate in ("a", "A", "0", "a0", "aa", "x-1", "2020-01-01", "00:00"):
            if re.search(pattern, candidate) and lo <= len(candidate) <= hi:
                return candidate
    return text


def _number(schema: dict[str, Any], integer: bool) -> float | int:
    lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
    hi = schema.get("maximum", schema.get("exclusiveMaximum", lo + 1))
    if "exclusiveMinimum" in schema or "exclusiveMaximum" in schema:
        value = (lo + hi) / 2
    else:
        value = max(lo, min(hi, (lo + hi) / 2))
    return int(round(value)) if integer else value


def _violation(schema: dict[str, Any] | None) -> Any:
    """Valid JSON of the wrong shape: every string too long, every number out of range, a required key gone."""
    value = minimal_instance(schema)
    if isinstance(value, dict) and value:
        first = next(iter(value))
        return {
            k: ("word " * 200 if isinstance(v, str) else 99 if isinstance(v, (int, float)) else v)
            for k, v in value.items()
            if k != first
        } | {"unexpected": True}
    return {"unexpected": True}


def request_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format") or {}
    return fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema")


class FakeLLMServer:
    """`with FakeLLMServer(mode="500") as srv: LLMClient(srv.base_url, "fake", ...)`."""

    def __init__(
        self,
        mode: str = "ok",
        *,
        schedule: str | None = None,
        port: int = 0,
        retry_after_s: float = 1.0,
        drip_s: float = 0.2,
        model: str = "fake-llm",
        list_models: bool = True,
    ) -> None:
        self.set_mode(mode)
        self.list_models = list_models  # False: GET /models is 404, as on some OpenAI-compatible servers
        self.retry_after_s, self.drip_s, self.model = retry_after_s, drip_s, model
        self.requests = 0  # chat completions received
        self.model_requests = 0  # GET /models received
        self.served: Counter[str] = Counter()
        self._rules: list[tuple[str, str]] = []
        self._schedule: list[tuple[str, int | None]] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        if schedule:
            self.set_schedule(schedule)
        self._httpd = _QuietServer(("127.0.0.1", port), _handler(self))
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread: threading.Thread | None = None

    # -- control ------------------------------------------------------------------------------

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; use {', '.join(MODES)}")
        self.mode = mode

    def set_schedule(self, schedule: str) -> None:
        with self._lock:
            self._schedule = parse_schedule(schedule)

    def route(self, pattern: str, mode: str) -> None:
        """Requests whose JSON body contains `pattern` get `mode` (first matching rule wins)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; use {', '.join(MODES)}")
        with self._lock:
            self._rules.append((pattern, mode))

    def start(self) -> FakeLLMServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()  # hanging and dripping handlers give up
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ----------------------------------------------------------------------------

    def _pick(self, raw: str) -> str:
        with self._lock:
            self.requests += 1
            mode = next((m for p, m in self._rules if p in raw), None)
            if mode is None and self._schedule:
                mode, left = self._schedule[0]
                if left is not None:
                    self._schedule[0] = (mode, left - 1)
                    if left - 1 <= 0 and len(self._schedule) > 1:
                        self._schedule.pop(0)
            mode = mode or self.mode
            self.served[mode] += 1
            return mode

    def reply(self, mode: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, payload) of a chat completion in `mode` (not hang/slow_stream's timing)."""
        schema = request_schema(body)
        finish, status, headers = "stop", 200, {"Content-Type": "application/json"}
        if mode == "429":
            headers["Retry-After"] = f"{self.retry_after_s:g}"
            return 429, headers, b'{"error": {"message": "rate limited (fake)"}}'
        if mode == "500":
            return 500, headers, b'{"error": {"message": "internal error (fake)"}}'
        if mode == "invalid_json":
            content = "Sure! The caption is: a sound, probably."
        elif mode == "schema_violation":
            content = json.dumps(_violation(schema))
        elif mode == "truncation":
            full = json.dumps(minimal_instance(schema))
            content, finish = full[: max(1, len(full) // 2)], "length"
        else:  # ok, hang, slow_stream
            content = json.dumps(minimal_instance(schema))
        completion = {
            "id": f"fake-{self.requests}",
            "object": "chat.completion",
            "model": body.get("model", self.model),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            # about 4 characters a token, as a real server would count them
            "usage": {
                "prompt_tokens": max(1, len(json.dumps(body.get("messages", []))) // 4),
                "completion_tokens": max(1, len(content) // 4),
            },
        }
        return status, headers, json.dumps(completion).encode()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that gave up on a hanging or dripping reply resets the connection: expected here
        pass


def _handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models") and server.list_models:
                with server._lock:
                    server.model_requests += 1
                if server.mode == "hang":  # the server's own mode (not a schedule's) decides how it lists
                    server._closing.wait()
                elif server.mode in ("429", "500"):
                    status, headers, payload = server.reply(server.mode, {})
                    self._send(status, headers, payload)
                else:
                    self._send(200, {"Content-Type": "application/json"}, _models(server.model))
            else:
                self._send(404, {"Content-Type": "application/json"}, b'{"error": "not found"}')

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", errors="replace")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"Content-Type": "application/json"}, b'{"error": "not found"}')
                return
            mode = server._pick(raw)
            if mode == "hang":
                server._closing.wait()
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, {"Content-Type": "application/json"}, b'{"error": "body is not JSON"}')
                return
            status, headers, payload = server.reply(mode, body)
            if mode == "slow_stream":
                self._drip(status, headers, payload)
            else:
                self._send(status, headers, payload)

        def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _drip(self, status: int, headers: dict[str, str], payload: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            try:
                for i in range(len(payload)):
                    if server._closing.wait(server.drip_s):
                        return
                    self.wfile.write(payload[i : i + 1])
                    self.wfile.flush()
            except OSError:  # the client gave up
                return

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def _models(model: str) -> bytes:
    return json.dumps({"object": "list", "data": [{"id": model, "object": "model", "owned_by": "fake"}]}).encode()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tests/support/fake_server.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=8099)
    p.add_argument("--mode", choices=MODES, default="ok")
    p.add_argument("--schedule", help='e.g. "ok*100,500": 100 good replies, then HTTP 500 for good')
    p.add_argument("--retry-after", type=float, default=1.0, help="Retry-After seconds of mode 429")
    p.add_argument("--drip", type=float, default=0.2, help="seconds between bytes in mode slow_stream")
    p.add_argument("--model", default="fake-llm", help="the model id GET /v1/models lists")
    args = p.parse_args(argv)
    srv = FakeLLMServer(
        args.mode,
        schedule=args.schedule,
        port=args.port,
        retry_after_s=args.retry_after,
        drip_s=args.drip,
        model=args.model,
    )
    srv.start()
    print(f"fake LLM server on {srv.base_url} (mode {args.mode}); Ctrl-C stops it", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
        print(f"served {srv.requests} chat requests: {dict(srv.served)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
