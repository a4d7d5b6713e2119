"""CPU seconds by kind of process while a command runs (the test suite: where its 2 cores go).

    .venv/bin/python benchmarks/pipeline/suite_cpu.py [--interval 1.0] -- .venv/bin/python -m pytest -q -n 2 ...

Every `--interval` seconds each live process's user + system CPU time is read (psutil); a process's last reading
is its total. Processes are grouped by what their command line runs (the Prefect servers, llama.cpp servers,
`earmark build` commands, training scripts, the pytest workers, ...). A process that lives shorter than the
interval can be missed, and the last interval of each process is lost: the sums are a lower bound. Processes
that were running before the command (the VM's own agents) are left out.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import time

import psutil

# first match wins: the kinds of process a test run starts
KINDS = (
    ("earmark.flows.local_server", "earmark's local Prefect server"),
    ("prefect.server.api.server:create_app", "Prefect test harness server (uvicorn)"),
    ("prefect server start", "Prefect server (own)"),
    ("earmark.cli.main server", "earmark server"),
    ("llama_cpp", "llama.cpp server"),
    ("fake_server", "fake LLM server"),
    ("earmark.cli.main build", "earmark build (CLI)"),
    ("earmark.cli.main evaluate", "earmark evaluate (CLI)"),
    ("earmark.cli.main", "earmark, other commands"),
    ("training/", "training scripts"),
    ("multiprocessing.spawn", "spawned workers (Dask, multiprocessing)"),
    ("prefect.engine", "Prefect flow-run process"),
    ("exec(eval(", "pytest-xdist workers"),
    ("pytest", "pytest"),
    ("postgres", "PostgreSQL"),
    ("chrom", "chromium"),
)


def kind(cmdline: list[str]) -> str:
    line = " ".join(cmdline)
    return next((name for key, name in KINDS if key in line), (cmdline[0].rsplit("/", 1)[-1] if cmdline else "?"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("give the command to run after --")
    before = {p.pid for p in psutil.process_iter()}
    me = psutil.Process().pid
    last: dict[tuple[int, float], tuple[str, float]] = {}
    t0 = time.perf_counter()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        for p in psutil.process_iter(["pid", "cmdline", "cpu_times", "create_time"]):
            info = p.info
            if info["pid"] in before or info["pid"] == me or not info["cmdline"] or info["cpu_times"] is None:
                continue
            t = info["cpu_times"]
            last[(info["pid"], info["create_time"])] = (kind(info["cmdline"]), t.user + t.system)
        time.sleep(a.interval)
    wall = time.perf_counter() - t0
    total: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for name, seconds in last.values():
        total[name] += seconds
        count[name] += 1
    cpu = sum(total.values())
    print(f"\nexit {proc.returncode}; wall {wall:.0f} s; CPU {cpu:.0f} s ({cpu / wall:.2f} cores)\n")
    print("| process | processes | CPU s | share |\n|---|---|---|---|")
    for name, seconds in total.most_common():
        if seconds >= 1:
            print(f"| {name} | {count[name]} | {seconds:.0f} | {seconds / cpu:.1%} |")


if __name__ == "__main__":
    main()
