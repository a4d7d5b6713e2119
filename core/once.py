"""Load a model at most once per worker process (experts, sentence embedders, CLAP), keyed by its weights."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_loaded: dict[str, Any] = {}
_load_lock = threading.Lock()


def load_once(key: str, factory: Callable[[], T]) -> T:
    """`factory()` the first time `key` is asked for in this process (thread-safe), the same object after."""
    with _load_lock:
        if key not in _loaded:
            _loaded[key] = factory()
        return _loaded[key]
