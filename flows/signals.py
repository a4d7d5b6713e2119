"""SIGTERM inside a flow run takes the path Ctrl-C takes, when an earmark command runs the flow.

Prefect 3.8.8's flow engine replaces the process's SIGTERM handler while a flow runs (`capture_sigterm` in
prefect.utilities.engine installs `_prefect_sigterm_handler`, a bridge that raises TerminationSignal), so earmark's
handler (earmark.core.interrupts) never saw a SIGTERM sent during a build: the flow engines unwound first, each
joining the shard tasks still running in its thread pool (and retrying those that failed meanwhile), and only the
outermost one sent the signal again, to earmark's handler, whose watchdog then started. A build stopped 38.7 s
after SIGTERM (synthesis with the embedded LLM), 4.2 s after Ctrl-C. Prefect has no setting to leave SIGTERM
alone, so `install` replaces the bridge by one that hands the signal to earmark's handler while an `interruptible`
command runs. Elsewhere, e.g. a deployed flow run under a Prefect worker, whose cancellation arrives as SIGTERM
through the bridge, Prefect's own bridge runs as before.
"""

from __future__ import annotations

import threading
from contextlib import suppress
from types import FrameType
from typing import NoReturn

from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogWorker
from prefect.utilities import engine

from earmark.core.interrupts import active_handler, hard_exit

DRAIN_S = 2.0  # at most this long each to send the logs and events Prefect still holds, after an interrupt

_prefect_bridge = engine._prefect_sigterm_handler


def _sigterm(signum: int, frame: FrameType | None) -> None:
    handler = active_handler()
    if handler is None:
        _prefect_bridge(signum, frame)
    else:
        handler(signum, frame)


def install() -> None:
    """From now on, a flow run's SIGTERM handler is earmark's while an `interruptible` command runs (idempotent).
    Call it before the command's first flow starts: `capture_sigterm` recognises its bridge by identity."""
    engine._prefect_sigterm_handler = _sigterm


def workers_alive() -> bool:
    """Whether a thread other than this one that the interpreter's shutdown would wait for is still running: a
    flow run beside the main one, or a shard task in a flow's thread pool."""
    me = threading.current_thread()
    return any(t is not me and not t.daemon and t.is_alive() for t in threading.enumerate())


def exit_interrupted(code: int) -> NoReturn:
    """End an interrupted command now that its main thread has unwound (flows marked crashed, the run row closed,
    the lease released): send the logs and events Prefect holds, then exit without the interpreter's shutdown.

    That shutdown first refuses new thread-pool work and atexit registrations, then joins the threads still
    running. A shard task still running in a flow's thread pool then failed on its next submit ("cannot schedule
    new futures after interpreter shutdown"), and Prefect logged the failure and scheduled a retry, until the
    interrupt watchdog ended the process (CI, 2026-11-28). A finished shard is whole whenever the process ends
    (core.interrupts), so nothing is lost by not waiting for those threads."""
    for worker in (APILogWorker, EventsWorker):
        with suppress(Exception):
            worker.drain_all(timeout=DRAIN_S)
    hard_exit(code)
