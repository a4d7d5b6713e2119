"""One local Prefect server per user for the CLI: started on first use, reused by later commands, gone after idling.

Without a Prefect API (`PREFECT_API_URL`, in the environment or the active Prefect profile), Prefect starts an
"ephemeral" server inside every process that runs a flow: each command paid its start-up (~16 s on a busy
2-core machine) before anything else, a start-up slower than Prefect's fixed 20 s time-out
(`PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`) failed the command, and after `kill -9` of the command its
uvicorn child lived on with PPID 1. Instead the CLI `attach`es to one server per user and installation:

- a command that finds it running uses it at once; one that finds none starts it (`python -m
  earmark.flows.local_server`, detached: not a child of the command, so earmark's interrupt watchdog, which kills
  a command's children, leaves it alone) and waits for it as long as the process lives: a slow start on a busy
  machine is waited for, a server that dies while starting is an error with its log's tail;
- the server exits once it has been idle `[prefect] idle_minutes` (default 10): no command attached and no
  request in flight or received meanwhile. A command stays attached until it exits, however it exits.

Every "who is alive" question is answered by `flock` locks, which the kernel drops when their holder dies
(`kill -9` included), so no pid is trusted and nothing is left to clean up. Files under `home`:

    start.lock    exclusive: held by a command while it finds or starts the server, and by a server that has
                  decided to exit, until it has exited — so a command never attaches to a dying server
    server.lock   exclusive: held by the server process for its whole life
    clients.lock  shared: held by every attached command for its whole life; a server that can take it
                  exclusively has no command attached
    server.json   the running server's url and pid, written once it answers requests
    server.log    its output;  prefect.db  its SQLite database

The server is Prefect's own ephemeral API (`prefect.server.api.server.create_app`, no UI, the ephemeral set of
services) under uvicorn, on a loopback port the kernel picks. `earmark server` (the UI, work pools, a port of
your choice) and a cluster's server are used as before through `PREFECT_API_URL`.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

from earmark.core.config import Config

READY_POLL_S = 0.1  # how often a command looks whether the server it waits for answers yet (a file read)
LOG_TAIL = 3000


class LocalServerError(RuntimeError):
    """The local Prefect server could not be started (its log says why)."""


def default_home() -> Path:
    """`~/.cache/earmark/prefect/<prefect version>-<installation>`: per user, and per installation (a venv's
    Prefect may differ from another's, and a server must not outlive the files it imports lazily)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    where = hashlib.sha256(sys.prefix.encode()).hexdigest()[:8]
    return cache / "earmark" / "prefect" / f"{package_version('prefect')}-{where}"


def server_home(cfg: Config) -> Path:
    return Path(cfg.prefect.home).expanduser().resolve() if cfg.prefect.home else default_home()


# ----------------------------------------------------------------------------------------------- locks
def _lock_fd(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _try_lock(fd: int, mode: int) -> bool:
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _held(path: Path) -> bool:
    """Whether some process holds `path` exclusively (the server its server.lock)."""
    fd = _lock_fd(path)
    try:
        return not _try_lock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)  # closing drops the probe's own lock


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    fd = _lock_fd(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks while another command starts the server, or it exits
        yield
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------------------- commands' side
@dataclass
class Attachment:
    """A command's hold on the local server: its API url; `started` when this command started it. Until
    `wait_ready` returns, the command holds start.lock (no other command starts a second server meanwhile);
    after it, clients.lock (the server does not idle out while the command lives or until `detach`)."""

    url: str
    pid: int
    started: bool
    home: Path
    _fd: int  # start.lock until `wait_ready`, then clients.lock
    _log_offset: int = 0
    ready: bool = False

    def wait_ready(self) -> Attachment:
        """Wait until the server answers requests (no time limit: a start on a busy machine takes what it
        takes; a server that cannot start exits, and its log's tail is the error)."""
        if self.ready:
            return self
        start, self._fd = self._fd, -1
        try:
            info = _running(self.home)
            while info is not None and info["pid"] == self.pid and not info.get("ready"):
                time.sleep(READY_POLL_S)
                info = _running(self.home)
            if info is None or info["pid"] != self.pid:
                log = self.home / "server.log"
                with log.open("rb") as f:
                    f.seek(self._log_offset)
                    tail = f.read().decode(errors="replace")[-LOG_TAIL:]
                raise LocalServerError(f"the local Prefect server did not start (log {log}):\n{tail.strip()}")
            clients = _lock_fd(self.home / "clients.lock")
            fcntl.flock(clients, fcntl.LOCK_SH)  # under start.lock: the server cannot be deciding to exit now
        finally:
            os.close(start)
        self._fd, self.ready = clients, True
        return self

    def detach(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def attach(home: Path, idle_minutes: float, on_start: Any = None) -> Attachment:
    """The live local server, launched first when there is none (`on_start(home)` is called before); call
    `wait_ready()` before sending it a request. The server's url is known at once (it binds its port first)."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = _lock_fd(home / "start.lock")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks while another command starts the server, or it exits
        info, started, offset = _running(home), False, 0
        if info is None:
            if on_start is not None:
                on_start(home)
            log = home / "server.log"
            offset = log.stat().st_size if log.exists() else 0
            info, started = _launch(home, idle_minutes), True
    except BaseException:
        os.close(fd)
        raise
    return Attachment(info["url"], info["pid"], started, home, fd, offset)


def _read_info(home: Path) -> dict[str, Any] | None:
    try:
        return json.loads((home / "server.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _running(home: Path) -> dict[str, Any] | None:
    """The live server's info (its url once it has bound its port; `ready` once it answers), None when none lives."""
    while _held(home / "server.lock"):
        if (info := _read_info(home)) is not None:
            return info
        time.sleep(READY_POLL_S)  # forked a moment ago: its port comes next
    (home / "server.json").unlink(missing_ok=True)  # a server that died without removing it
    return None


def _launch(home: Path, idle_minutes: float) -> dict[str, Any]:
    (home / "server.json").unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "earmark.flows.local_server", "--home", str(home), "--idle-minutes", str(idle_minutes)]
    with (home / "server.log").open("ab") as log:
        launcher = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    # the launcher takes server.lock, forks the server (which keeps it) and exits
    if launcher.wait() != 0 or (info := _running(home)) is None:
        tail = (home / "server.log").read_text(errors="replace")[-LOG_TAIL:]
        raise LocalServerError(f"the local Prefect server did not start (log {home / 'server.log'}):\n{tail.strip()}")
    return info


def stop(home: Path) -> bool:
    """Stop the local server under `home` now (SIGTERM; it finishes its requests) and wait until it is gone.
    False when none was running."""
    info = _read_info(home)
    if info is None or not _held(home / "server.lock"):
        return False
    try:
        os.kill(int(info["pid"]), signal.SIGTERM)
    except ProcessLookupError:
        return False
    with _exclusive(home / "server.lock"):  # granted once the server process is gone
        pass
    return True


@contextmanager
def prefect_api(cfg: Config, preload: tuple[str, ...] = (), on_start: Any = None) -> Iterator[str]:
    """Within the block, Prefect talks to the configured API (`PREFECT_API_URL`, environment or profile) or, with
    none, to the local server, attached now. The modules in `preload` (the command's flows) are imported while a
    server that is being started gets ready. Child processes (Dask workers) inherit the URL. A SIGTERM during the
    command's flows stops it as Ctrl-C does (earmark.flows.signals)."""
    from prefect.context import refresh_global_settings_context
    from prefect.settings import PREFECT_API_URL

    from earmark.flows import signals

    signals.install()

    configured = PREFECT_API_URL.value()
    if configured:
        for name in preload:
            importlib.import_module(name)
        yield configured
        return
    att = attach(server_home(cfg), cfg.prefect.idle_minutes, on_start)
    # the local server serves no UI: an empty UI url keeps Prefect from logging "View at <a page that is not there>"
    settings = {"PREFECT_API_URL": att.url, "PREFECT_UI_URL": ""}
    before = {name: os.environ.get(name) for name in settings}
    try:
        os.environ.update(settings)
        for name in preload:
            importlib.import_module(name)
        att.wait_ready()
        refresh_global_settings_context()  # every thread (the view's request threads too) sees the URL
        yield att.url
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        refresh_global_settings_context()
        att.detach()


# ----------------------------------------------------------------------------------------------- the server
class Activity:
    """ASGI wrapper: when the last request arrived and how many are in flight (an open websocket counts)."""

    def __init__(self, app: Any):
        self.app, self.last, self.busy = app, time.monotonic(), 0

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        self.busy += 1
        self.last = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            self.busy -= 1
            self.last = time.monotonic()


def _retire(home: Path) -> bool:
    """Whether the server may exit now: no command is attaching (start.lock) or attached (clients.lock). When
    it may, both stay locked until the process exits, and server.json is gone: a command that comes next waits
    for the exit and starts a new server."""
    start = _lock_fd(home / "start.lock")
    if not _try_lock(start, fcntl.LOCK_EX):
        os.close(start)
        return False
    clients = _lock_fd(home / "clients.lock")
    if not _try_lock(clients, fcntl.LOCK_EX):
        os.close(clients)
        os.close(start)
        return False
    (home / "server.json").unlink(missing_ok=True)
    return True  # the fds stay open: the kernel releases them when this process exits


def _watch(server: Any, activity: Activity, home: Path, port: int, idle_s: float) -> None:
    """Announce the server once it answers, then stop it after `idle_s` without commands or requests. Checked
    every `poll_s`, and counted from the last check that saw activity, so a server outlives its last command
    (killed or not) by at most `idle_s`."""
    while not server.started:
        if server.should_exit:
            return
        time.sleep(0.05)
    _announce(home, port, idle_s, ready=True)
    poll_s = max(0.2, min(15.0, idle_s / 4))
    active_at = time.monotonic()
    while not server.should_exit:
        time.sleep(poll_s)
        now = time.monotonic()
        clients = _held_shared(home / "clients.lock")
        if clients or activity.busy:
            active_at = now
        active_at = max(active_at, activity.last)
        if now - active_at >= idle_s - poll_s and not activity.busy and _retire(home):
            server.should_exit = True


def _announce(home: Path, port: int, idle_s: float, ready: bool) -> None:
    info = {"url": f"http://127.0.0.1:{port}/api", "pid": os.getpid(), "ready": ready, "idle_s": idle_s}
    tmp = home / f"server.json.{os.getpid()}"
    tmp.write_text(json.dumps(info))
    os.replace(tmp, home / "server.json")


def _held_shared(path: Path) -> bool:
    """Whether some command holds clients.lock (shared)."""
    fd = _lock_fd(path)
    try:
        return not _try_lock(fd, fcntl.LOCK_EX)
    finally:
        os.close(fd)


def serve(home: Path, idle_s: float) -> None:
    """Run the server in this process until it has idled `idle_s` (or SIGTERM / SIGINT)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # the kernel's free port: no race with another process choosing the same
    port = sock.getsockname()[1]
    _announce(home, port, idle_s, ready=False)  # the url is known now: a command imports its flows meanwhile
    env = {
        "PREFECT_HOME": str(home),
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}",
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_API_PORT": str(port),
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT__SERVER_EPHEMERAL": "1",  # Prefect's ephemeral set of services, as the per-process server had
        "PREFECT__SERVER_FINAL": "1",
    }
    os.environ.update(env)
    os.environ.pop("PREFECT_API_URL", None)  # settings are read at import: set before importing Prefect
    import uvicorn
    from prefect.server.api.server import create_app

    activity = Activity(create_app())
    server = uvicorn.Server(uvicorn.Config(activity, log_level="error", lifespan="on", timeout_graceful_shutdown=5))
    threading.Thread(target=_watch, args=(server, activity, home, port, idle_s), daemon=True).start()
    server.run(sockets=[sock])


def main(argv: list[str] | None = None) -> int:
    """The launcher: take server.lock, fork the server (which keeps the lock), exit. The command that ran it
    waits for server.json."""
    p = argparse.ArgumentParser(prog="python -m earmark.flows.local_server")
    p.add_argument("--home", type=Path, required=True)
    p.add_argument("--idle-minutes", type=float, required=True)
    args = p.parse_args(argv)
    home = args.home.resolve()
    lock = _lock_fd(home / "server.lock")
    if not _try_lock(lock, fcntl.LOCK_EX):
        print(f"a local Prefect server already runs under {home}", file=sys.stderr)
        return 0
    if os.fork():
        os._exit(0)  # the launcher; the child inherits the locked descriptor
    os.setsid()  # its own session: the command's terminal (Ctrl-C) and process group do not reach it
    os.set_inheritable(lock, False)
    serve(home, args.idle_minutes * 60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
