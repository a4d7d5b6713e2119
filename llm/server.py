"""Run llama-cpp-python's OpenAI-compatible server on loopback for the length of a `with` block.

The CLI starts it for a build and stops it afterwards, so it must never outlive us: `stop()` runs
on exit of the block and at interpreter exit (atexit), and the child also runs a watchdog thread
that exits as soon as its parent process is gone (a SIGKILLed CLI would otherwise leave a server
holding a port and ~0.5 GB of RAM). prctl(PDEATHSIG) is not used because it fires when the
*thread* that spawned the child exits, which a Prefect thread-pool worker does routinely.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from earmark.llm.models import resolve_model_path

# Runs in the child: watch the parent, then hand over to `python -m llama_cpp.server`.
_BOOTSTRAP = """\
import os, runpy, sys, threading, time
parent = int(sys.argv.pop(1))
def _watch():
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)
threading.Thread(target=_watch, daemon=True).start()
if os.environ.get("EARMARK_LLM_CPUS"):  # one core per single-slot server: no two servers time-share a core
    os.sched_setaffinity(0, {int(c) for c in os.environ["EARMARK_LLM_CPUS"].split(",")})
from earmark.llm.sampling import install  # JSON grammar checked token by token, as llama.cpp's server does
install()
from earmark.llm.prefix import install as aligned_prefix  # a reply independent of the requests before it
aligned_prefix()
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


class LLMServerError(RuntimeError):
    """The local LLM server failed to start or died."""


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def default_threads() -> int:
    """Half the usable CPUs, like llama.cpp's physical-core default.

    llama.cpp's threads spin at a barrier every layer, so when other work (the audio experts, other
    runs) takes cores, asking for all of them is catastrophic: on 2 busy cores SmolLM2 measured
    ~13 tok/s with 2 threads vs ~135 tok/s with 1.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus // 2)


def _tail(path: Path, n_chars: int = 3000) -> str:
    try:
        data = path.read_bytes()[-n_chars:]
    except OSError:
        return "(no server log)"
    return data.decode("utf-8", errors="replace")


class LocalLLMServer:
    """`with LocalLLMServer("smollm2-135m-instruct") as srv: LLMClient(srv.base_url, srv.model_id)`."""

    def __init__(
        self,
        model_id: str,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        port: int | None = None,
        log_path: str | os.PathLike[str] | None = None,
        *,
        startup_timeout_s: float = 180.0,
        cpus: tuple[int, ...] = (),
    ) -> None:
        self.model_id = model_id
        self.cpus = tuple(cpus)  # pin the server to these cores (empty: the OS decides)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.requested_port = port
        self.port: int | None = None
        self.startup_timeout_s = startup_timeout_s
        self._own_log = log_path is None
        self.log_path: Path | None = Path(log_path) if log_path is not None else None
        self.model_path: Path | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise LLMServerError("the LLM server is not started; use it as a context manager or call start()")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> LocalLLMServer:
        if self.is_running():
            return self
        t0 = time.perf_counter()
        self.model_path = resolve_model_path(self.model_id)
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="earmark-llm-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        # A port picked by free_loopback_port() can be taken before the server binds it; retry then.
        for attempt in range(3):
            self.port = self.requested_port or free_loopback_port()
            self._spawn()
            atexit.register(self.stop)
            try:
                self._wait_ready(t0)
                break
            except LLMServerError:
                port_taken = "address already in use" in _tail(self.log_path).lower()
                self.stop(remove_log=False)
                if not port_taken or self.requested_port or attempt == 2:
                    raise
        self.startup_seconds = time.perf_counter() - t0
        return self

    def stop(self, remove_log: bool = True) -> None:
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if remove_log and self._own_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, **kwargs):
        """An LLMClient for this server (kwargs go to LLMClient, e.g. cache=...)."""
        from earmark.llm.client import LLMClient

        return LLMClient(self.base_url, self.model_id, **kwargs)

    # -- internals ----------------------------------------------------------------------------

    def _spawn(self) -> None:
        cmd = [
            sys.executable,
            "-c",
            _BOOTSTRAP,
            str(os.getpid()),
            "--model",
            str(self.model_path),
            "--model_alias",
            self.model_id,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        if self.cpus:
            env["EARMARK_LLM_CPUS"] = ",".join(map(str, self.cpus))
        with open(self.log_path, "ab") as log:  # the child keeps its own copy of the descriptor
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)

    def _wait_ready(self, t0: float) -> None:
        url = f"http://127.0.0.1:{self.port}/v1/models"
        with httpx.Client(timeout=2.0, trust_env=False) as http:
            while True:
                code = self._proc.poll() if self._proc is not None else -1
                if code is not None:
                    raise LLMServerError(
                        f"LLM server for {self.model_id!r} exited with code {code} during startup; "
                        f"log {self.log_path}:\n{_tail(self.log_path)}"
                    )
                try:
                    if http.get(url).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.perf_counter() - t0 > self.startup_timeout_s:
                    raise LLMServerError(
                        f"LLM server for {self.model_id!r} was not ready on {url} "
                        f"after {self.startup_timeout_s:.0f} s; "
                        f"raise startup_timeout_s or check the log {self.log_path}:\n{_tail(self.log_path)}"
                    )
                time.sleep(0.2)
