"""How long a command takes before it does anything: a refused dataset name, a cold `earmark sql`, and a build's
first stage, with and without a local Prefect server already running (docs/benchmarks.md, "Safe to leave running").

    python benchmarks/pipeline/cli_startup.py [--repeat 3] [--out results.json]

Each measurement runs `python -m earmark.cli.main …` of the installed earmark in a fresh process, with no
PREFECT_API_URL (the command's own Prefect: before issue 34 a per-process ephemeral server, since then the
per-user local server, here in a temporary home), and times it from the start of the process:
- `bad-name`: `earmark build IN -d ..` until it exits (it must fail, naming the dataset name);
- `sql`: `earmark sql -d DS "SELECT count(*) FROM clips"` on a dataset built beforehand, until it exits;
- `first-stage cold`: `earmark build IN -d NEW --until analyze --experts levels` until its log says the ingest
  sub-flow began, with no local server running (the first command of a session, which starts it);
- `first-stage warm`: the same right after, the server left running by the previous command;
- `server start` (since issue 34): the local server alone, with a new database and with an existing one.
The machine's load average is recorded with each run: other work on a shared machine moves these numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

FIRST_STAGE = "Beginning subflow run 'ingest"


def _inputs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    t = np.arange(32000) / 16000
    for i in range(2):
        sf.write(folder / f"tone{i}.wav", (0.3 * np.sin(2 * np.pi * (220 + 110 * i) * t)).astype(np.float32), 16000)
    return folder


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "EARMARK_PREFECT__HOME": str(home), "PREFECT_LOGGING_LEVEL": "INFO"}
    env.pop("PREFECT_API_URL", None)
    return env


def _timed(cmd: list[str], env: dict[str, str], until: str | None = None) -> tuple[float, int | None, str]:
    """Seconds from start until the process exits, or until a line containing `until` appears (then it is
    stopped); its exit code (None when stopped) and its output's last lines."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if until and until in line:
            took = time.perf_counter() - t0
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=300)
            return took, None, "".join(lines[-5:])
    proc.wait()
    return time.perf_counter() - t0, proc.returncode, "".join(lines[-5:])


def _stop_local_server(home: Path) -> None:
    try:
        from earmark.flows.local_server import stop
    except ImportError:  # before issue 34: no local server
        return
    stop(home)


def measure(work: Path, repeat: int) -> list[dict]:
    cli = [sys.executable, "-m", "earmark.cli.main"]
    inputs = _inputs(work / "in")
    data = ["--data-root", str(work / "data")]
    rows = []
    home = work / "prefect"
    setup = _timed([*cli, "build", str(inputs), "-d", "ds", *data, "--until", "ingest"], _env(home))
    assert setup[1] == 0, setup[2]
    _stop_local_server(home)
    for i in range(repeat):
        load = os.getloadavg()[0]
        took, rc, tail = _timed([*cli, "build", str(inputs), "-d", "..", *data], _env(home))
        assert rc == 2 and "dataset name '..'" in tail, tail
        rows.append({"what": "bad-name", "run": i, "s": round(took, 2), "load1": load, "tail": tail.strip()[-300:]})
        load = os.getloadavg()[0]
        took, rc, tail = _timed([*cli, "sql", "-d", "ds", *data, "SELECT count(*) FROM clips"], _env(home))
        assert rc == 0, tail
        rows.append({"what": "sql", "run": i, "s": round(took, 2), "load1": load})
        _stop_local_server(home)
        for state in ("cold", "warm"):
            load = os.getloadavg()[0]
            build = [*cli, "build", str(inputs), "-d", f"new{i}{state}", *data, "--until", "analyze"]
            took, rc, tail = _timed([*build, "--experts", "levels", "--no-progress"], _env(home), until=FIRST_STAGE)
            assert rc is None, tail
            rows.append({"what": f"first-stage {state}", "run": i, "s": round(took, 2), "load1": load})
        _stop_local_server(home)
    rows += _server_starts(work, repeat)
    return rows


def _server_starts(work: Path, repeat: int) -> list[dict]:
    """Since issue 34: the local server's start alone (`attach(...).wait_ready()`), with a new database (a user's
    first command) and with the one a previous server left."""
    try:
        from earmark.flows.local_server import attach
    except ImportError:
        return []
    rows = []
    for i in range(repeat):
        home = work / f"server-{i}"
        for state in ("new database", "existing database"):
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            att = attach(home, 10).wait_ready()
            took = time.perf_counter() - t0
            att.detach()
            _stop_local_server(home)
            rows.append({"what": f"server start, {state}", "run": i, "s": round(took, 2), "load1": load})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="earmark-cli-startup-"))
    try:
        rows = measure(work, args.repeat)
    finally:
        _stop_local_server(work / "prefect")
        shutil.rmtree(work, ignore_errors=True)
    for what in dict.fromkeys(r["what"] for r in rows):
        times = sorted(r["s"] for r in rows if r["what"] == what)
        loads = [r["load1"] for r in rows if r["what"] == what]
        print(
            f"{what:18s} median {np.median(times):6.2f} s  (runs: {times}; 1-min load {min(loads):.1f}–{max(loads):.1f})"
        )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
