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

from types import FrameType

from prefect.utilities import engine

from earmark.core.interrupts import active_handler

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
