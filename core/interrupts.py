"""Ctrl-C and SIGTERM stop a long command within seconds, leaving a state the same command resumes.

Every shard is written to a temp file and renamed, then registered in one catalog transaction, and a version
is one transaction: a process that stops at any instant leaves only whole shards and whole versions (the
property the kill -9 benchmark checks). So an interrupt need not wait for running shard tasks — Prefect's
thread pool would otherwise join them, which took ~45 s in the middle of an analyze shard. The first signal
raises KeyboardInterrupt in the main thread (flows are marked crashed, the catalog run row is closed, the
lease released) and arms a watchdog; whatever is still running after `grace_s` is cut short: the embedded
LLM servers and other child processes are killed and the process exits with 130. A second signal exits at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

EXIT_INTERRUPTED = 130


def _kill_children() -> None:
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with distributed / prefect
        return
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for child in children:
        try:
            child.kill()
        except psutil.Error:
            pass


def hard_exit(code: int = EXIT_INTERRUPTED) -> None:
    """Kill this process's children (embedded LLM servers, local Dask workers) and exit without cleanup."""
    sys.stderr.flush()
    _kill_children()
    os._exit(code)


@contextmanager
def interruptible(resume_hint: str, grace_s: float = 4.0) -> Iterator[None]:
    """Within the block, SIGINT/SIGTERM stop the command in at most `grace_s` (+ a moment to kill children)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    hits = {"n": 0}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        hits["n"] += 1
        if hits["n"] > 1:
            hard_exit()
        name = signal.Signals(signum).name
        print(
            f"\nearmark: {name} received; stopping (at most {grace_s:.0f} s). Finished shards and versions are kept.\n"
            f"earmark: to resume, run the same command again: {resume_hint}",
            file=sys.stderr,
            flush=True,
        )
        watchdog = threading.Timer(grace_s, hard_exit)
        watchdog.daemon = True
        watchdog.start()
        raise KeyboardInterrupt(name)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
