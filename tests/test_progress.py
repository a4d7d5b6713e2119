"""Progress bars: what stage code reports reaches a rich display on a terminal (counts, rate, ETA), nothing is
drawn when the output is not a terminal, and synthesis reports every LLM request against an exact total."""

from __future__ import annotations

import re
import threading
from io import StringIO

import pytest
from rich.console import Console

from earmark.core import progress
from earmark.stages import synthesize


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _screen(console: Console) -> str:
    """The last frame the live display drew (each redraw starts after a cursor-up / erase sequence)."""
    raw = console.file.getvalue()
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", raw)
    lines = [line.strip() for line in plain.replace("\r", "\n").split("\n") if line.strip()]
    return "\n".join(lines[-3:])


def test_bars_on_a_terminal_show_counts_rate_and_eta():
    console = Console(force_terminal=True, file=StringIO(), width=140, color_system=None)
    clock = Clock()
    with progress.BarDisplay(console, get_time=clock) as display, progress.reporting(display):
        progress.report("ingest", "shards", planned=4)
        progress.report("synthesize", "LLM requests", planned=100)
        for _ in range(3):  # a shard of 16 files every 2 s
            clock.now += 2.0
            progress.report("ingest", "shards", done=1, items=16, item_unit="files")
        workers = [
            threading.Thread(target=lambda: [progress.report("synthesize", "LLM requests", done=1) for _ in range(10)])
            for _ in range(4)
        ]  # stage worker threads report at once
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        clock.now += 14.0  # 40 requests in 20 s: 2 req/s, 60 to go: 30 s left
        progress.report("synthesize", "LLM requests", planned=-10)  # the exact count replaces an estimate
        display.progress.refresh()
        frame = _screen(console)
        ingest, synth = frame.splitlines()[-2:]
        assert ingest.startswith("ingest") and "3/4" in ingest and "shards" in ingest
        assert "48 files · 2.4 files/s" in ingest  # 48 files in 20 s
        assert re.search(r"ETA 0:00:0\d", ingest)  # one shard to go, at one per few seconds
        assert synth.startswith("synthesize") and "40/90" in synth and "LLM requests" in synth
        assert "2.0 req/s" in synth and "ETA 0:00:25" in synth  # 50 left at 2 req/s
        clock.now += 4.0
        progress.report("ingest", "shards", done=1, items=16, item_unit="files")
        clock.now += 100.0  # a finished stage keeps its figures
        display.progress.refresh()
        ingest = _screen(console).splitlines()[-2]
    assert "4/4" in ingest and "64 files · 2.7 files/s" in ingest and "took 0:00:24" in ingest


def test_no_bar_when_the_output_is_not_a_terminal_or_progress_is_off():
    piped = Console(file=StringIO(), width=140)  # not a terminal: a pipe, a file, CI
    assert not piped.is_terminal
    with progress.bars(console=piped) as display:
        assert display is None and not progress.active()
        progress.report("ingest", "shards", planned=2, done=1)  # goes nowhere
    assert piped.file.getvalue() == ""
    tty = Console(force_terminal=True, file=StringIO(), width=140)
    with progress.bars(enabled=False, console=tty) as display:  # --no-progress
        assert display is None
    assert tty.file.getvalue() == ""
    with progress.bars(console=tty) as display:
        assert display is not None and progress.active()
    assert not progress.active()  # the previous (no) reporter is back


class Recorder:
    def __init__(self) -> None:
        self.planned: dict[tuple[str, str], float] = {}
        self.done: dict[tuple[str, str], float] = {}
        self.lock = threading.Lock()
        self.overshoot = 0.0  # the most done ever exceeded the total (a bar at 137/102)

    def update(self, stage, unit, planned, done, items, item_unit):
        with self.lock:
            self.planned[(stage, unit)] = self.planned.get((stage, unit), 0) + planned
            self.done[(stage, unit)] = self.done.get((stage, unit), 0) + done
            self.overshoot = max(self.overshoot, self.done[(stage, unit)] - self.planned[(stage, unit)])


@pytest.mark.parametrize(
    "item,replies", [("captions", "ok"), ("qa", "ok"), ("instructions", "ok"), ("captions", "bad")]
)
def test_synthesis_reports_each_request_against_an_exact_total(item, replies):
    """The flow announces an upper bound per shard; the stage replaces it with its exact count of first attempts
    and adds each repair to the total as it is sent, so the bar never shows more done than its total (it showed
    137/102: the demo's 35 repairs were added only when the shard ended) and ends at done == total == the
    requests the endpoint got."""
    from earmark.core.config import load_config
    from earmark.llm import LLMClient
    from earmark.stages.base import Inputs
    from support.fake_server import FakeLLMServer
    from test_synthesis_units import _ev

    cfg = load_config(None, {"synthesize": {"qa_pairs": "llm", "instruction_triples": "llm"}})
    evidence = [_ev("S00", clip_id="0123456789abcdef0001"), _ev("SMA", clip_id="fedcba98765432100002")]
    resolved = synthesize.resolve_writers(cfg.synthesize, cfg.llm.model)  # the embedded model: rule content captions
    bound = synthesize.max_requests(item, resolved) * len(evidence)
    rec = Recorder()
    schedule = "invalid_json*4,ok" if replies == "bad" else None  # four replies that need a repair
    with (
        FakeLLMServer("ok", schedule=schedule) as srv,
        LLMClient(srv.base_url, "fake-llm") as client,
        progress.reporting(rec),
    ):
        progress.report(*synthesize.REQUESTS, planned=bound)  # what the flow announced
        synthesize.run(
            item,
            cfg.synthesize,
            cfg.llm,
            cfg.evidence,
            _Provider(client),
            [item],
            Inputs.of(evidence=evidence),
            preplanned=bound,
        )
        sent = srv.requests
    assert sent > 0 and rec.done[synthesize.REQUESTS] == sent
    assert rec.planned[synthesize.REQUESTS] == sent  # the bound, corrected to what was asked
    assert rec.overshoot <= 0, f"done exceeded the total by {rec.overshoot}"
    if replies == "bad":
        assert sent >= synthesize.planned_requests(item, evidence[0], synthesize.Synth(client, resolved)) + 4
    assert bound >= synthesize.planned_requests(item, evidence[0], synthesize.Synth(client, resolved)) * 2


class _Provider:
    def __init__(self, client):
        self._client = client

    def client(self):
        return self._client
