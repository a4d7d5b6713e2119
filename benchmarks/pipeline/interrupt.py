"""How long Ctrl-C / SIGTERM take to stop a build, and whether the same command then resumes it.

    .venv/bin/python benchmarks/pipeline/interrupt.py [--per-domain 1] [--work-dir DIR]

The small corpus of benchmarks/pipeline/kill_points.py is built with the real `earmark build` (fake LLM endpoint in its
well-behaved mode, one Prefect server on loopback). For each signal (SIGINT, SIGTERM) and each moment (the
first analyze shard computing, synthesis under way), a fresh build is signalled once when its log shows that
moment; measured: seconds from the signal to the process's exit, its exit code, whether any child process
(e.g. a Dask worker or an embedded LLM server) outlived it, and whether re-running the same command finishes
with the same version. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # support: not installed
from support.kill_points import Setup, fake_llm, free_port, prefect_server  # noqa: E402

MOMENTS = {"analyze": "Task run 'analyze/", "synthesize": "Task run 'synthesize/"}


def interrupt_once(setup: Setup, root: Path, sig: signal.Signals, moment: str) -> dict:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    cmd = setup.build(root)
    proc = subprocess.Popen(
        cmd, env=setup.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    seen = False
    assert proc.stdout is not None
    for line in proc.stdout:
        if MOMENTS[moment] in line:
            seen = True
            break
    t0 = time.perf_counter()
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=120)
    stop_s = time.perf_counter() - t0
    survivors = subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True, text=True).stdout.split()
    for pid in survivors:
        os.kill(int(pid), signal.SIGKILL)
    again = subprocess.run(cmd, env=setup.env(), capture_output=True, text=True, timeout=1800)
    return {
        "signal": sig.name,
        "moment": moment if seen else f"{moment} (not reached: the build ended first)",
        "stop_s": round(stop_s, 2),
        "rc": proc.returncode,
        "resume_hint": "to resume, run the same command again" in out,
        "orphans": len(survivors),
        "resumed_rc": again.returncode,
        "resumed_version": "version v0001" in again.stdout,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-domain", type=int, default=1)
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/earmark-interrupt"))
    args = ap.parse_args()
    from earmark.corpus import generate_corpus

    work = args.work_dir
    inputs = work / "input"
    if not (inputs / "manifest.json").exists():
        generate_corpus(inputs, per_domain=args.per_domain, seed=0, duration_s=4.0, hostile=False)
    rows = []
    with prefect_server(work / "prefect-home") as api, fake_llm(free_port()) as llm:
        setup = Setup(inputs, llm, api)
        for sig in (signal.SIGINT, signal.SIGTERM):
            for moment in MOMENTS:
                rows.append(interrupt_once(setup, work / f"{sig.name}-{moment}", sig, moment))
                print(rows[-1], flush=True)
    print("\n| signal | during | stopped after s | exit code | resume hint | orphans | re-run rc | same version |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['signal']} | {r['moment']} | {r['stop_s']} | {r['rc']} | {'yes' if r['resume_hint'] else 'no'} | "
            f"{r['orphans']} | {r['resumed_rc']} | {'yes' if r['resumed_version'] else 'no'} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
