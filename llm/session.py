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
        super().__init__("http://127.0.0.1:9/v1", cfg.model, cache=cache, schema_mode="llama_cpp",
                         max_concurrency=1, timeout_s=cfg.timeout_s)
        self._cfg = cfg
        self._log_path = log_path
        self._server: LocalLLMServer | None = None
        self._start_lock = threading.Lock()

    def _post(self, path: str, body: dict) -> dict:
        with self._start_lock:
            if self._server is None:
                # All cores: while synthesis runs, the server is the only thing computing.
                self._server = LocalLLMServer(self._cfg.model, n_ctx=self._cfg.n_ctx,
                                              n_threads=self._cfg.n_threads or os.cpu_count(),
                                              log_path=self._log_path).start()
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
    return LLMClient(cfg.endpoint, cfg.model, api_key=os.environ.get(cfg.api_key_env), cache=cache,
                     schema_mode=cfg.schema_mode, max_concurrency=cfg.max_concurrency, timeout_s=cfg.timeout_s)


def llm_stats(client: LLMClient) -> dict[str, Any]:
    stats = client.stats()
    stats["server_started"] = getattr(client, "server_started", None)
    return stats
