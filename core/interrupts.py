"""Ctrl-C and SIGTERM stop a long command within seconds, leaving a state the same command resumes.

Every shard is written to a temp file and renamed, then registered in one catalog transaction, and a version
is one transaction: a process that stops at any instant leaves only whole shards and whole versions (the
property the kill -9 benchmark checks). So an interrupt need not wait for running shard tasks — Prefect's
thread pool would otherwise join them, which took ~45 s in the middle of an analyze shard. The first signal
raises KeyboardInterrupt in the main thread (flows are marked crashed, the catalog run row is closed, the
lease released) and arms a watchdog; whatever is still running after `grace_s` is cut short: the embedded
LLM servers and other child processes are killed and the process exits with 130. A second signal exits at once.
Once the main thread has unwound, a command whose flow threads still run exits at once too, after sending
Prefect's pending logs (earmark.flows.signals.exit_interrupted), rather than shut the interpreter down under them.

While a flow runs, Prefect replaces the process's SIGTERM handler with its own (earmark.flows.signals makes that
one hand the signal to `active_handler`). A foreground server (`earmark view`, `earmark server`) takes SIGTERM as
Ctrl-C too (`sigterm_as_ctrl_c`): a scheduler's stop runs the same clean-up as a person's.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import NoReturn

EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM: what a shell reports for a process that SIGTERM ended

Handler = Callable[[int, FrameType | None], None]
_active: Handler | None = None  # the handler of the `interruptible` block running now


def active_handler() -> Handler | None:
    """earmark's SIGINT/SIGTERM handler while an `interruptible` block runs, else None. A flow run replaces the
    process's SIGTERM handler with Prefect's, which hands the signal to this one (earmark.flows.signals)."""
    return _active


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


def hard_exit(code: int = EXIT_INTERRUPTED) -> NoReturn:
    """Kill this process's children (embedded LLM servers, local Dask workers) and exit without cleanup."""
    sys.stdout.flush()
    sys.stderr.flush()
    _kill_children()
    os._exit(code)


@contextmanager
def interruptible(resume_hint: str, grace_s: float = 4.0) -> Iterator[None]:
    """Within the block, SIGINT/SIGTERM stop the command in at most `grace_s` (+ a moment to kill children)."""
    global _active
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
    outer, _active = _active, on_signal
    try:
        yield
    finally:
        _active = outer
        for s, handler in previous.items():
            signal.signal(s, handler)


@dataclass
class Stop:
    """Which signal stopped a foreground server (`sigterm_as_ctrl_c`): None while none came."""

    signum: int | None = None

    @property
    def exit_code(self) -> int:
        """0 after Ctrl-C (how a person stops it at the terminal), 143 after SIGTERM (a scheduler stopped it)."""
        return EXIT_TERMINATED if self.signum == signal.SIGTERM else 0


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[Stop]:
    """Within the block SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so a foreground server stopped by a
    scheduler (systemd, Kubernetes, a Prefect worker) runs the clean-up a person's Ctrl-C runs; a second SIGTERM
    exits at once. Without it, `earmark view` died where it stood (Python's default for SIGTERM)."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if stop.signum is not None:
            hard_exit(EXIT_TERMINATED)
        stop.signum = signum
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)
