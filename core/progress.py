"""Progress of long stages: the code doing the work reports it, a display (the CLI's bars) shows it.

Work is counted per (stage, unit): `report("synthesize", "LLM requests", planned=288)` once the work is known,
`report(..., done=1)` as each piece finishes, and `items=` for what finished pieces stood for (the clips of a
shard), which the display turns into a rate. `planned` may be corrected later by a negative amount (an
estimate replaced by the exact count). Reports go to the one reporter installed for the process (`reporting`);
with none — tests, library use, a Dask worker process — a report costs a global read. So stages and flows
report without knowing who listens, and Prefect stays out of it: flows report their shard tasks as they finish,
stage code its requests.

`bars(...)` is the CLI's reporter: rich progress bars on stderr, one line per (stage, unit) with done/total,
the items and their rate, and the time left; nothing at all when stderr is not a terminal.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Protocol

from rich.console import Console
from rich.file_proxy import FileProxy
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn
from rich.text import Text


class Reporter(Protocol):
    def update(self, stage: str, unit: str, planned: float, done: float, items: float, item_unit: str | None) -> None:
        """Called from any thread (stage worker threads included)."""


_reporter: Reporter | None = None


def report(
    stage: str, unit: str, *, planned: float = 0, done: float = 0, items: float = 0, item_unit: str | None = None
) -> None:
    """Count work of `stage` in `unit`s: `planned` more to do, `done` finished, `items` they stood for."""
    reporter = _reporter
    if reporter is not None and (planned or done or items):
        reporter.update(stage, unit, planned, done, items, item_unit)


def active() -> bool:
    """Whether anyone listens in this process (e.g. worth estimating work that is costly to count)."""
    return _reporter is not None


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Send this process's reports to `reporter` inside the block (None: to no one)."""
    global _reporter
    previous, _reporter = _reporter, reporter
    try:
        yield
    finally:
        _reporter = previous


# ---------------------------------------------------------------------------------------------- the bars
def _elapsed(task: Task) -> float:
    """Seconds the task has run; a finished one stops counting (its rate and time stay as they ended)."""
    return (task.finished_time if task.finished and task.finished_time is not None else task.elapsed) or 0.0


def _speed(task: Task) -> float | None:
    """Units per second: over the recent window while running (rich's samples), else over the whole run."""
    elapsed = _elapsed(task)
    if not task.finished and task.speed:
        return task.speed
    return task.completed / elapsed if elapsed > 0 and task.completed else None


class _Items(ProgressColumn):
    """`120 clips · 4.1 clips/s` (a task with items), or `1.2 req/s` (the rate of its own units)."""

    def render(self, task: Task) -> Text:
        elapsed = _elapsed(task)
        unit = task.fields.get("item_unit")
        if unit:
            n = task.fields.get("items", 0.0)
            rate = f"{n / elapsed:.1f} {unit}/s" if elapsed > 0 and n else f"– {unit}/s"
            return Text(f"{n:,.0f} {unit} · {rate}", style="progress.data.speed")
        speed = _speed(task)
        short = "req" if "request" in task.fields.get("unit", "") else task.fields.get("unit", "")
        return Text(f"{speed:.1f} {short}/s" if speed else f"– {short}/s", style="progress.data.speed")


class _Eta(ProgressColumn):
    """`ETA 0:09:10` while the task runs (from its recent rate), `took 0:14:02` once it is done."""

    def render(self, task: Task) -> Text:
        if task.finished and task.total:
            return Text(f"took {timedelta(seconds=round(_elapsed(task)))}", style="progress.elapsed")
        speed, remaining = _speed(task), task.remaining
        left = remaining / speed if speed and remaining is not None else None
        return Text(
            f"ETA {timedelta(seconds=round(left)) if left is not None else '-:--:--'}", style="progress.remaining"
        )


class BarDisplay:
    """A Reporter drawing one rich progress bar per (stage, unit) on `console`; thread-safe."""

    def __init__(self, console: Console, get_time: Callable[[], float] | None = None) -> None:
        self.progress = Progress(
            TextColumn("{task.description:<11}"),
            BarColumn(bar_width=24),
            TextColumn("{task.completed:>5,.0f}/{task.total:<5,.0f} {task.fields[unit]}"),
            TextColumn("·"),
            _Items(),
            TextColumn("·"),
            _Eta(),
            console=console,
            get_time=get_time,
            speed_estimate_period=600.0,  # shards finish minutes apart: keep their samples for the rate
            refresh_per_second=4,
        )
        self._bars: dict[tuple[str, str], list] = {}  # (stage, unit) → [task id, total, items]
        self._lock = threading.Lock()

    def update(self, stage: str, unit: str, planned: float, done: float, items: float, item_unit: str | None) -> None:
        with self._lock:
            bar = self._bars.get((stage, unit))
            if bar is None:
                total = max(0.0, planned)
                task_id = self.progress.add_task(stage, total=total, unit=unit, items=0.0, item_unit=item_unit)
                bar = self._bars[(stage, unit)] = [task_id, total, 0.0]
                planned = 0.0
            bar[1], bar[2] = max(0.0, bar[1] + planned), bar[2] + items
            fields = {"item_unit": item_unit} if item_unit else {}
            self.progress.update(bar[0], total=bar[1], advance=done, items=bar[2], **fields)
            task = next(t for t in self.progress.tasks if t.id == bar[0])
            if task.finished_time is not None and task.completed < (task.total or 0):  # more work came in
                task.finished_time = task.finished_speed = None

    def __enter__(self) -> BarDisplay:
        terminal = (sys.stdout, sys.stderr, self.progress.console.file)  # before the display redirects them
        self.progress.start()
        self._undo = _log_through(self.progress.console, terminal)
        return self

    def __exit__(self, *exc: object) -> None:
        for undo in reversed(self._undo):
            undo()
        self.progress.stop()


def _log_through(console: Console, terminal: tuple[object, ...]) -> list[Callable[[], None]]:
    """Point the log handlers that write to the terminal (Prefect's rich console handler, plain stream
    handlers) at the bars' console while they are shown, so a log line is printed above the bars instead of
    into them. Returns the steps that undo it."""
    undo: list[Callable[[], None]] = []
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    handlers = {id(h): h for lg in loggers if isinstance(lg, logging.Logger) for h in lg.handlers}
    for handler in handlers.values():
        own = getattr(handler, "console", None)
        if isinstance(own, Console) and own is not console and any(own.file is t for t in terminal):
            handler.console = console  # type: ignore[attr-defined]
            undo.append(lambda h=handler, c=own: setattr(h, "console", c))
        elif isinstance(handler, logging.StreamHandler) and any(handler.stream is t for t in terminal):
            old = handler.setStream(FileProxy(console, handler.stream))
            undo.append(lambda h=handler, s=old: h.setStream(s))
    return undo


@contextmanager
def bars(enabled: bool = True, console: Console | None = None) -> Iterator[BarDisplay | None]:
    """Progress bars for the reports made inside, on stderr; none when disabled or stderr is no terminal (a
    pipe, a file, CI), so logs stay plain text there."""
    console = console or Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield None
        return
    with BarDisplay(console) as display, reporting(display):
        yield display
