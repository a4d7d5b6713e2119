"""A small synchronous client for OpenAI-compatible chat endpoints that must answer in JSON.

Works against llama-cpp-python's server (the embedded default), vLLM and OpenAI. Responses are
cached on disk by hash(model, messages, params, schema); a hit makes no HTTP call. Transient
failures (429, 5xx, timeouts, dropped connections) are retried with exponential backoff and
jitter; any other 4xx is a configuration problem and raises at once. Whether the model's text
parses as JSON is a property of the *row*, so it comes back as `LLMResult.error`, not an exception.
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

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


@dataclass(frozen=True)
class LLMResult:
    data: Any | None  # parsed JSON (usually a dict), None when the text did not parse
    text: str  # the model's raw message content
    cached: bool
    prompt_tokens: int
    completion_tokens: int
    seconds: float  # wall time of this call, retries and backoff included (~0 on a cache hit)
    error: str | None = None


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
        self.cache = cache
        self.schema_mode: SchemaMode = schema_mode
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # Proxy variables must not reroute a local server through a corporate proxy.
        self._http = httpx.Client(timeout=timeout_s, headers=headers, trust_env=not loopback)
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self._stats = dict(calls=0, cache_hits=0, prompt_tokens=0, completion_tokens=0, seconds=0.0, errors=0)

    # -- public -------------------------------------------------------------------------------

    def complete_json(
        self, messages: list[dict], schema: dict | None, *, max_tokens: int, temperature: float = 0.2, seed: int = 0
    ) -> LLMResult:
        params = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed}
        key = cache_key(self.model, messages, params, schema)
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

    def _post(self, path: str, body: dict) -> dict:
        return self._post_to(self.base_url, path, body)

    def _post_to(self, base_url: str, path: str, body: dict) -> dict:
        url = base_url + path
        last = ""
        retry_after: float | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self._backoff(attempt, retry_after))
                retry_after = None
            with self._slots:
                t0 = time.perf_counter()
                try:
                    resp = self._http.post(url, json=body)
                except (httpx.TimeoutException, httpx.TransportError) as exc:
                    self._count(calls=1, seconds=time.perf_counter() - t0)
                    last = f"{type(exc).__name__}: {exc}"
                    continue
                self._count(calls=1, seconds=time.perf_counter() - t0)
            if resp.status_code == 200:
                try:
                    return resp.json()
                except ValueError:
                    raise LLMEndpointError(
                        f"POST {url} returned 200 with a non-JSON body: {resp.text[:300]!r}",
                        status=200,
                        attempts=attempt + 1,
                    ) from None
            if resp.status_code in RETRY_STATUS:
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                retry_after = _retry_after_s(resp)
                continue
            raise LLMEndpointError(
                f"POST {url} (model {self.model!r}) was rejected with HTTP {resp.status_code}: "
                f"{resp.text[:500]} -- check the model name, api_key and schema_mode={self.schema_mode!r}",
                status=resp.status_code,
                attempts=attempt + 1,
            )
        raise LLMEndpointError(
            f"POST {url} failed after {self.max_retries + 1} attempts (last: {last}); "
            f"is the LLM server running and reachable?",
            attempts=self.max_retries + 1,
        )

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
