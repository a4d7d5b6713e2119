"""Prefect for the CLI (flows/local_server.py): one local server per user, started on first use under a
lock, reused, gone once idle after its last command exits — `kill -9` included; and the checks that need no
Prefect come before it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
import psutil
import soundfile as sf

from earmark.flows.local_server import attach, stop

GONE_WITHIN_S = 300  # a liveness bound only: each server below idles out after 1.5 s and exits in seconds


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "EARMARK_PREFECT__HOME": str(home), **extra}
    env.pop("PREFECT_API_URL", None)
    return env


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + GONE_WITHIN_S
    while any(_alive(p) for p in pids):
        assert time.monotonic() < deadline, f"still running: {[p for p in pids if _alive(p)]}"
        time.sleep(0.2)


CLIENT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from earmark.flows.local_server import attach
    a = attach(Path(sys.argv[1]), float(sys.argv[2])).wait_ready()
    print(a.url, a.pid, a.started, flush=True)
    time.sleep(3600)
""")


def test_commands_share_one_server_that_outlives_them_only_by_its_idle_time(tmp_path):
    home = tmp_path / "prefect"
    idle_min = "0.025"  # 1.5 s
    clients = [
        subprocess.Popen(
            [sys.executable, "-c", CLIENT, str(home), idle_min], env=_env(home), stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    try:
        seen = [c.stdout.readline().split() for c in clients]
        assert len({url for url, _, _ in seen}) == 1 and len({pid for _, pid, _ in seen}) == 1, seen
        assert sorted(started for _, _, started in seen) == ["False", "False", "True"]  # the lock: one started it
        url, pid = seen[0][0], int(seen[0][1])
        assert httpx.get(f"{url}/health", timeout=60).status_code == 200
        server = psutil.Process(pid)
        assert server.ppid() not in {c.pid for c in clients}  # nobody's child: a client's watchdog cannot kill it
        for c in clients[:2]:
            c.kill()  # kill -9: nothing is released by the client itself
            c.wait()
        time.sleep(3 * 1.5)  # three idle periods with one client left: it must still be there
        assert _alive(pid)
        clients[2].kill()
        clients[2].wait()
        _wait_gone([pid])
        assert not (home / "server.json").exists()
        again = attach(home, 0.025).wait_ready()  # the next command starts a new one
        try:
            assert again.started and again.pid != pid
        finally:
            again.detach()
            _wait_gone([again.pid])
    finally:
        for c in clients:
            c.kill()
        stop(home)


def test_a_server_that_cannot_start_is_an_error_naming_its_log(tmp_path):
    home = tmp_path / "prefect"
    home.mkdir()
    (home / "prefect.db").mkdir()  # SQLite cannot open a directory: the server exits while starting
    try:
        attach(home, 1).wait_ready()
    except RuntimeError as exc:
        assert "did not start" in str(exc) and str(home / "server.log") in str(exc)
    else:
        raise AssertionError("a server that cannot open its database started")


def _clips(folder: Path, n: int = 2) -> Path:
    folder.mkdir()
    t = np.arange(32000) / 16000
    for i in range(n):
        sf.write(folder / f"clip{i}.wav", (0.3 * np.sin(2 * np.pi * (220 + 110 * i) * t)).astype(np.float32), 16000)
    return folder


def _tagged(tag: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("EARMARK_TEST_TAG") == tag and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return found


def test_no_prefect_server_outlives_a_killed_build_by_more_than_its_idle_time(tmp_path):
    """Before: the build's own ephemeral uvicorn server lived on with PPID 1 after kill -9 of the build."""
    tag = uuid.uuid4().hex
    cmd = [sys.executable, "-m", "earmark.cli.main", "build", str(_clips(tmp_path / "in")), "-d", "killed"]
    cmd += ["--data-root", str(tmp_path / "data"), "--until", "analyze", "--experts", "levels"]
    env = _env(tmp_path / "prefect", EARMARK_TEST_TAG=tag, EARMARK_PREFECT__IDLE_MINUTES="0.025")
    build = subprocess.Popen(
        cmd, env={**env, "PREFECT_LOGGING_LEVEL": "INFO"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        for line in build.stdout:
            if "Beginning subflow run 'ingest" in line:
                break
        servers = [p for p in _tagged(tag) if p.pid != build.pid]
        assert servers, "no Prefect server process found for the build"
        build.send_signal(signal.SIGKILL)
        build.wait()
        _wait_gone([p.pid for p in servers])
        assert not [p for p in _tagged(tag) if p.pid != build.pid]
    finally:
        build.kill()
        stop(tmp_path / "prefect")


def _prefect_imported(args: list[str], tmp_path: Path) -> tuple[int, bool, str]:
    code = (
        "import sys; from earmark.cli.main import main; rc = main(sys.argv[1:]); "
        "print(rc, 'prefect' in sys.modules, file=sys.stderr)"
    )
    env = _env(tmp_path / "prefect")
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)
    *lines, last = out.stderr.strip().splitlines()
    rc, imported = last.split()
    return int(rc), imported == "True", "\n".join(lines)


def test_checks_that_need_no_prefect_fail_before_it_starts(tmp_path):
    inputs = _clips(tmp_path / "in", n=1)
    data = ["--data-root", str(tmp_path / "data")]
    for args, expected in [
        (["build", str(inputs), "-d", "..", *data], "dataset name '..'"),
        (["build", str(tmp_path / "nothing-here"), "-d", "ok", *data], "does not exist"),
        (["build", str(inputs), "-d", "ok", "--experts", "levels", *data], "synthesis needs every expert"),
        (["rerun", "-d", "typo", "--stage", "filter", *data], "dataset 'typo' not found"),
        (["evaluate", "-d", "typo", "-p", str(inputs), *data], "dataset 'typo' not found"),
        (["review", "import", "-d", "typo", str(inputs / "clip0.wav"), *data], "dataset 'typo' not found"),
        (["demo", "-d", "a/b", *data], "dataset name 'a/b'"),
    ]:
        rc, imported, err = _prefect_imported(args, tmp_path)
        assert rc == 2 and not imported, (args, rc, err)
        assert err.startswith("earmark: error: ") and expected in err and "Traceback" not in err, (args, err)
    assert not (tmp_path / "prefect" / "server.json").exists()
