"""A small synchronous client for OpenAI-compatible chat endpoints that must answer in JSON.

Works against llama-cpp-python's server (the embedded default), vLLM and OpenAI. Responses are
cached on disk by hash(endpoint, model, messages, params, schema); a hit makes no HTTP call. Transient
failures (429, 5xx, timeouts, dropped connections) are retried with exponential backoff and
jitter; any other 4xx is a configuration problem and raises at once. Whether the model's text
parses as JSON is a property of the *row*, so it comes back as `LLMResult.error`, not an exception.

This is the one retry layer for LLM requests (Prefect does not retry a shard that failed on the endpoint).
It is bounded three ways: a request makes at most `max_retries + 1` attempts within `request_budget_s` of
wall time (backoff, waiting for a slot and a slowly dripping reply included); the requests made inside
`shard_budget(...)` share one deadline; and after `breaker_failures` consecutive requests that ended without
a reply the client's circuit breaker opens, so every later request fails at once instead of waiting out its
own budget against a server that is down.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from earmark.llm.cache import ResponseCache, cache_key

SchemaMode = Literal["llama_cpp", "json_schema"]
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
LOOPBACK_ENV = "EARMARK_LLM_LOOPBACK_ONLY"


class LLMEndpointError(RuntimeError):
    """The endpoint refused the request or stayed unavailable after all retries."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1, transient: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts
        self.transient = transient  # no reply (down, hanging, 5xx, 429, budget spent), as opposed to a refusal


class CircuitOpenError(LLMEndpointError):
    """The client's circuit breaker is open: the endpoint failed too often in a row, nothing more is sent."""


@dataclass(frozen=True)
class _Deadline:
    at: float  # time.monotonic()
    seconds: float


_SHARD_DEADLINE: ContextVar[_Deadline | None] = ContextVar("earmark_llm_shard_deadline", default=None)


@contextmanager
def shard_budget(seconds: float | None) -> Iterator[None]:
    """Every LLM request made inside (and in contexts copied from here, e.g. a stage's worker threads) ends by
    `seconds` from now: a request that would run past it fails as an LLMEndpointError. None: no limit."""
    if seconds is None:
        yield
        return
    token = _SHARD_DEADLINE.set(_Deadline(time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _SHARD_DEADLINE.reset(token)


class ShardUsage:
    """What the LLM requests made inside `shard_usage()` cost: HTTP requests sent (retries included), answers
    served from the response cache, prompt and completion tokens. Thread-safe: a stage's worker threads add
    to the one object their copied context holds."""

    FIELDS = ("calls", "cache_hits", "prompt_tokens", "completion_tokens")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(self.FIELDS, 0)

    def add(self, deltas: dict[str, float]) -> None:
        with self._lock:
            for name in self.FIELDS:
                self._counts[name] += int(deltas.get(name, 0))

    def totals(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


_SHARD_USAGE: ContextVar[ShardUsage | None] = ContextVar("earmark_llm_shard_usage", default=None)


@contextmanager
def shard_usage() -> Iterator[ShardUsage]:
    """Count the LLM requests made inside (and in contexts copied from here, like `shard_budget`)."""
    usage = ShardUsage()
    token = _SHARD_USAGE.set(usage)
    try:
        yield usage
    finally:
        _SHARD_USAGE.reset(token)


class _BudgetSpent(Exception):
    pass


@dataclass(frozen=True)
class LLMResult:
    data: Any | None  # parsed JSON (usually a dict), None when the text did not parse
    text: str  # the model's raw message content
    cached: bool
    prompt_tokens: int
    completion_tokens: int
    seconds: float  # wall time of this call, retries and backoff included (~0 on a cache hit)
    error: str | None = None


def shown_url(url: str) -> str:
    """`url` for messages and logs: credentials in it (`https://user:key@host/…`) are replaced by `***`."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()


def is_loopback_url(url: str) -> bool:
    host = (urlsplit(url).hostname or "").strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a DNS name other than localhost: never resolve it just to check


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def _finite(value: str) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"non-finite number {value!r} in model output")
    return number


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (model output)")


def _decoder() -> json.JSONDecoder:
    # Python's json accepts NaN/Infinity and overflows 1e999 to inf; neither is JSON, and neither can be
    # cached or validated, so they count as an invalid reply (→ repair, then rejection).
    return json.JSONDecoder(strict=False, parse_float=_finite, parse_constant=_no_constant)


def extract_json(text: str) -> Any:
    """Parse the first JSON value in `text`, tolerating markdown fences and chatter around it.

    Unconstrained endpoints often answer "Here is the JSON:\\n```json\\n{...}\\n```"; constrained
    ones answer bare JSON. Raises ValueError when no JSON object or array can be found.
    """
    stripped = text.strip()
    # strict=False: small models under a grammar sometimes put raw newlines inside strings.
    decoder = _decoder()
    try:
        value, end = decoder.raw_decode(stripped)
        if not stripped[end:].strip():
            return value
    except ValueError:
        pass
    candidates = [m.group(1) for m in _FENCE.finditer(stripped)] + [stripped]
    for candidate in candidates:
        for match in re.finditer(r"[{\[]", candidate):
            try:
                value, _ = decoder.raw_decode(candidate, match.start())
            except ValueError:
                continue
            if isinstance(value, (dict, list)):
                return value
    raise ValueError(f"no JSON object found in model output: {text[:200]!r}")


def response_format(schema: dict | None, mode: SchemaMode) -> dict:
    if schema is None:
        return {"type": "json_object"}
    if mode == "llama_cpp":
        # llama-cpp-python compiles this schema into a grammar (constrained decoding).
        return {"type": "json_object", "schema": schema}
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "item", "schema": schema, "strict": True}}
    raise ValueError(f"schema_mode must be 'llama_cpp' or 'json_schema', got {mode!r}")


def endpoint_identity(base_url: str) -> str:
    """The endpoint as it enters the cache key: scheme and host lower-cased, default port and trailing '/' dropped,
    so spellings of one server share answers while another server with the same model name does not."""
    parts = urlsplit(base_url.strip())
    scheme = (parts.scheme or "http").lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    netloc = host if port is None or (scheme, port) in (("http", 80), ("https", 443)) else f"{host}:{port}"
    if ":" in host:  # IPv6 literal
        netloc = f"[{host}]" if port is None else f"[{host}]:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


class LLMClient:
    """JSON completions from one model on one OpenAI-compatible endpoint (thread-safe)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        cache: ResponseCache | None = None,
        schema_mode: SchemaMode = "llama_cpp",
        max_concurrency: int = 1,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        *,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        loopback_only: bool | None = None,
        request_budget_s: float = 600.0,
        breaker_failures: int = 3,
        identity: str | None = None,
    ) -> None:
        if schema_mode not in ("llama_cpp", "json_schema"):
            raise ValueError(f"schema_mode must be 'llama_cpp' or 'json_schema', got {schema_mode!r}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if loopback_only is None:
            loopback_only = os.environ.get(LOOPBACK_ENV, "") not in ("", "0", "false")
        loopback = is_loopback_url(base_url)
        if loopback_only and not loopback:
            raise ValueError(
                f"LLM base_url {base_url!r} is not a loopback address and loopback_only is set "
                f"(or {LOOPBACK_ENV}=1); use http://127.0.0.1:PORT/v1 or unset {LOOPBACK_ENV}"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        # what the cache key names as the endpoint: the normalised URL, or e.g. "embedded:<model>"
        self.identity = identity or endpoint_identity(base_url)
        self.cache = cache
        self.schema_mode: SchemaMode = schema_mode
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.timeout_s = timeout_s
        self.request_budget_s = request_budget_s
        self.breaker_failures = breaker_failures  # 0: never open
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # Proxy variables must not reroute a local server through a corporate proxy.
        self._http = httpx.Client(timeout=timeout_s, headers=headers, trust_env=not loopback)
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self._failures = 0  # consecutive requests that ended without a reply
        self._last_failure = ""
        self._stats = dict(calls=0, cache_hits=0, prompt_tokens=0, completion_tokens=0, seconds=0.0, errors=0)

    # -- public -------------------------------------------------------------------------------

    def complete_json(
        self, messages: list[dict], schema: dict | None, *, max_tokens: int, temperature: float = 0.2, seed: int = 0
    ) -> LLMResult:
        params = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed}
        key = cache_key(self.model, messages, params, schema, endpoint=self.identity)
        t0 = time.perf_counter()
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            self._count(cache_hits=1)
            return LLMResult(
                data=hit["data"],
                text=hit["text"],
                cached=True,
                prompt_tokens=hit.get("prompt_tokens", 0),
                completion_tokens=hit.get("completion_tokens", 0),
                seconds=time.perf_counter() - t0,
            )

        body = {
            "model": self.model,
            "messages": messages,
            **params,
            "response_format": response_format(schema, self.schema_mode),
        }
        try:
            reply = self._post("/chat/completions", body)
        except LLMEndpointError:
            self._count(errors=1)
            raise
        choice = (reply.get("choices") or [{}])[0]
        text = (choice.get("message") or {}).get("content") or ""
        usage = reply.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
        self._count(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

        data, error = None, None
        try:
            data = extract_json(text)
        except ValueError as exc:
            error = str(exc)
            if choice.get("finish_reason") == "length":
                error = f"output truncated at max_tokens={max_tokens}; raise max_tokens. {error}"
            self._count(errors=1)
        if error is None and self.cache is not None:
            self.cache.put(
                key,
                {"data": data, "text": text, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
            )
        return LLMResult(
            data=data,
            text=text,
            cached=False,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            seconds=time.perf_counter() - t0,
            error=error,
        )

    def post_json(self, path: str, body: dict) -> dict:
        """POST `body` to base_url + path with this client's retries, backoff and concurrency limit.

        For request shapes `complete_json` does not build (e.g. audio chat in earmark.llm.audio); returns
        the decoded JSON reply or raises LLMEndpointError like `complete_json`.
        """
        try:
            return self._post(path, body)
        except LLMEndpointError:
            self._count(errors=1)
            raise

    def check_endpoint(self, timeout_s: float = 10.0, key_hint: str = "the API key") -> str:
        """One cheap request before a run spends time on anything else: GET /models, and when that is not
        served (404/405) or does not list the model, a 1-token chat completion. Returns what was checked;
        raises LLMEndpointError naming the endpoint, the model and what to check."""
        where = f"the LLM endpoint {shown_url(self.base_url)} (model {self.model!r})"
        t0 = time.perf_counter()
        timeout = httpx.Timeout(timeout_s)
        try:
            resp = self._http.get(self.base_url + "/models", timeout=timeout)
            listed: list[str] = []
            if resp.status_code == 200:
                try:
                    listed = [str(m.get("id")) for m in resp.json().get("data") or [] if isinstance(m, dict)]
                except (ValueError, AttributeError):
                    listed = []
            if resp.status_code in (404, 405) or (resp.status_code == 200 and self.model not in listed):
                ping = {"model": self.model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
                resp = self._http.post(self.base_url + "/chat/completions", json=ping, timeout=timeout)
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            what = f"did not answer within {timeout_s:g} s" if isinstance(exc, httpx.TimeoutException) else "failed"
            raise LLMEndpointError(
                f"{where} {what} ({type(exc).__name__}: {exc}); check that the server is running and reachable "
                "from this machine, and the URL in [llm] endpoint / --llm-endpoint",
                transient=True,
            ) from None
        seconds = time.perf_counter() - t0
        if resp.status_code in (401, 403):
            raise LLMEndpointError(
                f"{where} refused the credentials (HTTP {resp.status_code}: {resp.text[:200]}); check {key_hint}",
                status=resp.status_code,
            )
        if resp.status_code == 429:  # rate-limited, but there and serving
            return f"{where} answered HTTP 429 (rate limited) in {seconds:.2f} s"
        if resp.status_code != 200:
            raise LLMEndpointError(
                f"{where} answered HTTP {resp.status_code} to a preflight request: {resp.text[:300]}; check the "
                "server's log, the URL in [llm] endpoint (…/v1) and the model name in [llm] model",
                status=resp.status_code,
            )
        return f"{where} answered in {seconds:.2f} s"

    def stats(self) -> dict:
        """calls = HTTP attempts (retries included); tokens and seconds cover HTTP work only."""
        with self._lock:
            return dict(self._stats)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------

    def _count(self, **deltas: float) -> None:
        with self._lock:
            for name, delta in deltas.items():
                self._stats[name] += delta
        if (usage := _SHARD_USAGE.get()) is not None:
            usage.add(deltas)

    def _post(self, path: str, body: dict) -> dict:
        return self._post_to(self.base_url, path, body)

    def _post_to(self, base_url: str, path: str, body: dict) -> dict:
        url = base_url + path
        with self._lock:
            failures, last = self._failures, self._last_failure
        if self.breaker_failures and failures >= self.breaker_failures:
            raise CircuitOpenError(
                f"the LLM endpoint {shown_url(self.base_url)} (model {self.model!r}) failed {failures} request{'s' * (failures != 1)} in a row "
                f"(last: {last}); this run sends it no more requests. Check the server, then run the same "
                "command again: the shards finished so far are kept and it resumes from them",
                attempts=0,
                transient=True,
            )
        try:
            reply = self._attempts(url, body)
        except LLMEndpointError as exc:
            if exc.transient:
                with self._lock:
                    self._failures += 1
                    self._last_failure = str(exc)[:300]
            raise
        with self._lock:
            self._failures = 0
        return reply

    def _attempts(self, url: str, body: dict) -> dict:
        t_start = time.monotonic()
        deadline, budget = t_start + self.request_budget_s, f"[llm] request_budget_s = {self.request_budget_s:g}"
        shard = _SHARD_DEADLINE.get()
        if shard is not None and shard.at < deadline:
            deadline, budget = shard.at, f"the shard's [llm] shard_budget_s = {shard.seconds:g}"
        last = ""
        retry_after: float | None = None
        attempts = 0
        for attempt in range(self.max_retries + 1):
            if attempt:
                delay = self._backoff(attempt, retry_after)
                if time.monotonic() + delay >= deadline:
                    if retry_after is not None:
                        last += f" (asked to retry after {retry_after:g} s)"
                    break
                time.sleep(delay)
                retry_after = None
            if time.monotonic() >= deadline:
                break
            with self._slots:
                remaining = deadline - time.monotonic()  # waiting for a slot spends the budget too
                if remaining <= 0:
                    break
                attempts += 1
                t0 = time.perf_counter()
                try:
                    status, content, after = self._send(url, body, deadline, remaining)
                except _BudgetSpent:
                    self._count(calls=1, seconds=time.perf_counter() - t0)
                    last = "the reply was still arriving when the budget ran out"
                    break
                except (httpx.TimeoutException, httpx.TransportError) as exc:
                    self._count(calls=1, seconds=time.perf_counter() - t0)
                    last = f"{type(exc).__name__}: {exc}"
                    continue
                self._count(calls=1, seconds=time.perf_counter() - t0)
            text = content.decode("utf-8", errors="replace")
            if status == 200:
                try:
                    return json.loads(text)
                except ValueError:
                    raise LLMEndpointError(
                        f"POST {shown_url(url)} returned 200 with a non-JSON body: {text[:300]!r}",
                        status=200,
                        attempts=attempts,
                    ) from None
            if status in RETRY_STATUS:
                last = f"HTTP {status}: {text[:300]}"
                retry_after = after
                continue
            raise LLMEndpointError(
                f"POST {shown_url(url)} (model {self.model!r}) was rejected with HTTP {status}: "
                f"{text[:500]} -- check the model name, api_key and schema_mode={self.schema_mode!r}",
                status=status,
                attempts=attempts,
            )
        spent = time.monotonic() - t_start
        limit = (
            f"all {attempts} attempts ([llm] max_attempts = {self.max_retries + 1})"
            if attempts == self.max_retries + 1
            else f"the time budget ({budget})"
        )
        raise LLMEndpointError(
            f"POST {shown_url(url)} (model {self.model!r}) failed after {attempts} attempts in {spent:.1f} s, having spent "
            f"{limit} (last: {last or 'no attempt fitted in the budget'}); is the LLM server running and reachable?",
            attempts=attempts,
            transient=True,
        )

    def _send(self, url: str, body: dict, deadline: float, remaining: float) -> tuple[int, bytes, float | None]:
        """(status, body, Retry-After) of one attempt. httpx's timeout bounds each read, not the whole reply, so the reply is
        streamed and the deadline checked between chunks: a server dripping bytes cannot hold a request longer."""
        timeout = httpx.Timeout(min(self.timeout_s, remaining))
        with self._http.stream("POST", url, json=body, timeout=timeout) as resp:
            chunks = []
            for chunk in resp.iter_bytes():
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise _BudgetSpent
            return resp.status_code, b"".join(chunks), _retry_after_s(resp)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        # Full jitter keeps many workers from retrying in lock-step against one server.
        delay = random.uniform(0, min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)))
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_backoff_s))
        return delay


def _retry_after_s(resp: httpx.Response) -> float | None:
    try:
        return float(resp.headers["retry-after"])
    except (KeyError, ValueError):
        return None
