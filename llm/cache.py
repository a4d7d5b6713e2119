"""On-disk cache of LLM responses, keyed by everything that determines the answer.

The key is the sha256 of the canonical JSON of (endpoint, model, messages, params, schema), so an
unchanged rendered prompt makes zero endpoint calls on a re-run while any change to the prompt text, the
sampling parameters or the schema misses — and so does the same model name served by another endpoint
(the endpoint is its normalised base URL, or `embedded:<model>` for the embedded server, whose port changes). One small JSON file per entry, fanned out over 256
sub-directories, written temp -> fsync -> rename so a crash never leaves a half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values always give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def write_atomic(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write via `write(fh)` to a temp file beside `path`, fsync, rename: readers see all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:24]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cache_key(model: str, messages: list[dict], params: dict, schema: dict | None, *, endpoint: str) -> str:
    payload = {"endpoint": endpoint, "model": model, "messages": messages, "params": params, "schema": schema}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


class ResponseCache:
    """A directory of `<k[:2]>/<k>.json` entries; safe to share between threads and processes."""

    def __init__(self, cache_dir: str | os.PathLike[str]) -> None:
        self.cache_dir = Path(cache_dir).expanduser()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        # Writers use unique temp names and an atomic rename, so the lock only keeps the
        # hit/miss counters honest; readers never see a partial file.
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def path_for(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        path = self.path_for(key)
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            value = None
        except (OSError, ValueError):
            # A corrupt entry (e.g. disk trouble) is a miss; the next put overwrites it.
            value = None
        with self._lock:
            if value is None:
                self.misses += 1
            else:
                self.hits += 1
        return value

    def put(self, key: str, value: dict) -> Path:
        path = self.path_for(key)
        data = canonical_json(value).encode("utf-8")
        write_atomic(path, lambda fh: fh.write(data))
        return path

    def __contains__(self, key: str) -> bool:
        return self.path_for(key).is_file()

    def __len__(self) -> int:
        return sum(1 for _ in self.cache_dir.glob("??/*.json"))
