"""The LLM a synthesis run talks to: a configured endpoint, or the embedded server started on demand.

The embedded server is started only when a request misses the response cache, so a re-run whose prompts
and evidence did not change starts no server and makes no call.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from earmark.config import LLMSection
from earmark.llm import LLMClient, LocalLLMServer, ResponseCache


class _LazyServerClient(LLMClient):
    def __init__(self, cfg: LLMSection, cache: ResponseCache, log_path: Path | None):
        super().__init__(
            "http://127.0.0.1:9/v1",
            cfg.model,
            cache=cache,
            schema_mode="llama_cpp",
            max_concurrency=1,
            timeout_s=cfg.timeout_s,
        )
        self._cfg = cfg
        self._log_path = log_path
        self._server: LocalLLMServer | None = None
        self._start_lock = threading.Lock()

    def _post(self, path: str, body: dict) -> dict:
        with self._start_lock:
            if self._server is None:
                # All cores: while synthesis runs, the server is the only thing computing.
                self._server = LocalLLMServer(
                    self._cfg.model,
                    n_ctx=self._cfg.n_ctx,
                    n_threads=self._cfg.n_threads or os.cpu_count(),
                    log_path=self._log_path,
                ).start()
                self.base_url = self._server.base_url.rstrip("/")
        return super()._post(path, body)

    @property
    def server_started(self) -> bool:
        return self._server is not None

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        super().close()


def open_llm(cfg: LLMSection, cache_dir: Path, log_path: Path | None = None) -> LLMClient:
    """A client for the configured endpoint, or for the embedded server (started on first cache miss)."""
    cache = ResponseCache(cache_dir)
    if cfg.endpoint is None:
        return _LazyServerClient(cfg, cache, log_path)
    return LLMClient(
        cfg.endpoint,
        cfg.model,
        api_key=os.environ.get(cfg.api_key_env),
        cache=cache,
        schema_mode=cfg.schema_mode,
        max_concurrency=cfg.max_concurrency,
        timeout_s=cfg.timeout_s,
    )


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

    def __getstate__(self) -> dict[str, Any]:  # another process opens its own client
        return {"cfg": self.cfg, "cache_dir": self.cache_dir, "log_path": self.log_path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["cfg"], state["cache_dir"], state["log_path"])
