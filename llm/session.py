"""The LLM a synthesis run talks to: a configured endpoint, or the embedded server started on demand.

The embedded server is started only when a request misses the response cache, so a re-run whose prompts
and evidence did not change starts no server and makes no call.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

from earmark.core.config import LLMSection
from earmark.llm import LLMClient, LocalLLMServer, ResponseCache


def embedded_servers(cfg: LLMSection) -> int:
    """How many single-slot embedded servers to run: `embedded_servers`, else one per core (llama.cpp's
    server answers one request at a time, so parallel requests need parallel processes)."""
    return cfg.embedded_servers or max(1, os.cpu_count() or 1)


def _cores_for(i: int, n_servers: int, threads: int, cores: list[int]) -> tuple[int, ...]:
    """Server i's own cores when the servers' threads fit the cores this process may use, else none (the OS
    decides). Left to itself, the scheduler was seen parking two single-thread servers on one core."""
    if not cores or n_servers * threads > len(cores) or n_servers < 2:
        return ()
    return tuple(cores[i * threads : (i + 1) * threads])


class _LazyServerClient(LLMClient):
    """The embedded llama.cpp servers, started when the first request misses the cache. Requests are routed
    by their prompt (system + first user message), so the references of one caption kind, which share their
    prompt, reach the same server and reuse its KV cache."""

    def __init__(self, cfg: LLMSection, cache: ResponseCache, log_path: Path | None):
        self.n_servers = embedded_servers(cfg)
        super().__init__(
            "http://127.0.0.1:9/v1",
            cfg.model,
            cache=cache,
            schema_mode="llama_cpp",
            max_concurrency=self.n_servers,
            timeout_s=cfg.timeout_s,
            **budgets(cfg),
            identity=f"embedded:{cfg.model}",  # not the loopback port, which changes with every start
        )
        self._cfg = cfg
        self._log_path = log_path
        self._servers: list[LocalLLMServer] = []
        self._busy: list[int] = []
        self._start_lock = threading.Lock()

    @property
    def concurrency(self) -> int:
        return self.n_servers

    def _start(self) -> None:
        threads = self._cfg.n_threads or max(1, (os.cpu_count() or 1) // self.n_servers)
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        for i in range(self.n_servers):
            log = (
                None
                if self._log_path is None
                else self._log_path.with_name(
                    self._log_path.name if i == 0 else f"{self._log_path.stem}-{i}{self._log_path.suffix}"
                )
            )
            self._servers.append(
                LocalLLMServer(
                    self._cfg.model,
                    n_ctx=self._cfg.n_ctx,
                    n_threads=threads,
                    log_path=log,
                    cpus=_cores_for(i, self.n_servers, threads, cores),
                ).start()
            )
            self._busy.append(0)

    def _post(self, path: str, body: dict) -> dict:
        with self._start_lock:
            if not self._servers:
                self._start()
        i = self._acquire(body)
        try:
            return self._post_to(self._servers[i].base_url.rstrip("/"), path, body)
        finally:
            with self._start_lock:
                self._busy[i] -= 1

    def _acquire(self, body: dict) -> int:
        """The server for this request: the one its prompt prefers (KV cache reuse) when that one is idle,
        else the least busy."""
        messages = body.get("messages") or [{}]
        prompt = "".join(str(m.get("content", "")) for m in messages[:2])
        preferred = int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16) % len(self._servers)
        with self._start_lock:
            i = preferred if self._busy[preferred] == 0 else min(range(len(self._servers)), key=self._busy.__getitem__)
            self._busy[i] += 1
        return i

    @property
    def server_started(self) -> bool:
        return bool(self._servers)

    def close(self) -> None:
        for srv in self._servers:
            srv.stop()
        self._servers, self._busy = [], []
        super().close()


def api_key(cfg: LLMSection) -> str | None:
    """The endpoint's API key, from the environment variable `api_key_env` (None when unset). A Prefect Secret
    block (`api_key_secret`) is read by the flow (`earmark.flows.runs.load_api_key`) into that variable of
    the flow's process, which its threads and local Dask workers share."""
    return os.environ.get(cfg.api_key_env)


def open_llm(cfg: LLMSection, cache_dir: Path, log_path: Path | None = None) -> LLMClient:
    """A client for the configured endpoint, or for the embedded server (started on first cache miss)."""
    cache = ResponseCache(cache_dir)
    if cfg.endpoint is None:
        return _LazyServerClient(cfg, cache, log_path)
    return LLMClient(
        cfg.endpoint,
        cfg.model,
        api_key=api_key(cfg),
        cache=cache,
        schema_mode=cfg.schema_mode,
        max_concurrency=cfg.max_concurrency,
        timeout_s=cfg.timeout_s,
        **budgets(cfg),
    )


def budgets(cfg: LLMSection) -> dict[str, Any]:
    """The client's retry bounds from `[llm]`."""
    return {
        "max_retries": cfg.max_attempts - 1,
        "request_budget_s": cfg.request_budget_s,
        "breaker_failures": cfg.breaker_failures,
    }


def preflight(cfg: LLMSection) -> str | None:
    """Before a run that will reach synthesis: one cheap request to the configured endpoint (raises
    LLMEndpointError naming it, the model and what to check). The embedded server is not started for this:
    it starts on the first cache miss, so a fully cached re-run starts none. Returns what was checked."""
    if cfg.endpoint is None:
        return None
    with LLMClient(cfg.endpoint, cfg.model, api_key=api_key(cfg), timeout_s=cfg.timeout_s) as c:
        return c.check_endpoint(cfg.preflight_timeout_s, key_hint=f"the API key in ${cfg.api_key_env}")


def llm_stats(client: LLMClient) -> dict[str, Any]:
    stats = client.stats()
    stats["server_started"] = getattr(client, "server_started", None)
    return stats


class LLMSession:
    """The LLM of one flow run: its client is opened on first use (in each process that uses it) and
    closed with `close()`. Stages get the session, not a client, so a shard whose key is already in the
    catalog never starts a server."""

    def __init__(self, cfg: LLMSection, cache_dir: Path, log_path: Path | None = None) -> None:
        self.cfg, self.cache_dir, self.log_path = cfg, Path(cache_dir), log_path
        self._client: LLMClient | None = None
        self._lock = threading.Lock()

    def client(self) -> LLMClient:
        with self._lock:
            if self._client is None:
                self._client = open_llm(self.cfg, self.cache_dir, self.log_path)
            return self._client

    def close(self) -> dict[str, Any]:
        """Stop the client (and the embedded server it started); returns its usage counters."""
        with self._lock:
            client, self._client = self._client, None
        if client is None:
            return {"calls": 0, "cache_hits": 0, "server_started": False}
        stats = llm_stats(client)
        client.close()
        return stats

    def __reduce__(self) -> tuple[Any, ...]:  # another process opens its own client, once (see process_session)
        return (process_session, (self.cfg, self.cache_dir, self.log_path))


_process_sessions: dict[tuple[str, str, str], LLMSession] = {}
_process_lock = threading.Lock()


def process_session(cfg: LLMSection, cache_dir: Path, log_path: Path | None = None) -> LLMSession:
    """What a session pickled to a worker process (Dask) becomes there: one session per process and setting,
    so every task the process runs shares one client, and at most one embedded server, which stops when the
    process exits. Its calls are not counted in the flow's LLM usage."""
    key = (cfg.model_dump_json(), str(cache_dir), str(log_path))
    with _process_lock:
        if key not in _process_sessions:
            _process_sessions[key] = LLMSession(cfg, cache_dir, log_path)
        return _process_sessions[key]
