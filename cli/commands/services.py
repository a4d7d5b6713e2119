"""The commands that serve: the Prefect server, deployments and workers, the embedded LLM server, the sample corpus."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from earmark.cli.commands.common import command_config


def cmd_corpus(args: argparse.Namespace) -> int:
    from earmark.corpus import generate_corpus

    items = generate_corpus(args.out_dir, per_domain=args.per_domain, seed=args.seed)
    print(f"{len(items)} files written to {args.out_dir}")
    return 0


def cmd_llm_serve(args: argparse.Namespace) -> int:
    from earmark.llm import LocalLLMServer

    with LocalLLMServer(args.model, port=args.port) as srv:
        print(f"serving {srv.model_id} at {srv.base_url} (Ctrl-C to stop)", flush=True)
        try:
            while srv.is_running():
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


def _prefect_env(home: Path) -> dict[str, str]:
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    env.pop("PREFECT_API_URL", None)  # the server itself needs none; an inherited one would point elsewhere
    return env


def wait_healthy(url: str, proc: subprocess.Popen | None = None, timeout_s: float | None = 120.0) -> None:
    """Until `url`/health answers 200; raises when the server process exits or time runs out (`timeout_s` None,
    with a `proc`: as long as the process lives — a start on a busy machine takes what it takes)."""
    import httpx

    deadline = time.monotonic() + timeout_s if timeout_s is not None else float("inf")
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the Prefect server exited with status {proc.returncode} before answering")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the Prefect server at {url} did not answer /health within {timeout_s:.0f} s")


def _stop_group(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGINT then SIGKILL to the process group `proc` leads (it was started in a new session)."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def cmd_server(args: argparse.Namespace) -> int:
    """A Prefect server + UI on loopback (SQLite under PREFECT_HOME), set up for earmark, in the foreground until
    Ctrl-C (exit 0) or SIGTERM (the same clean stop, exit 143)."""
    from earmark.core.interrupts import sigterm_as_ctrl_c
    from earmark.flows.deploy import setup_server

    cfg = command_config(args, "default")
    home = Path(args.prefect_home or os.environ.get("PREFECT_HOME") or Path(cfg.data_root) / ".prefect").resolve()
    home.mkdir(parents=True, exist_ok=True)
    url = f"http://{args.host}:{args.port}/api"
    cmd = [sys.executable, "-m", "prefect", "server", "start", "--host", args.host, "--port", str(args.port)]
    log = (home / "server.log").open("ab")
    # The UI asks the server for the API's address (/ui-settings), which Prefect derives from its API host and port
    # settings, not from `--port`: without these a UI on --port 4299 called 4200.
    env = {**_prefect_env(home), "PREFECT_SERVER_API_HOST": args.host, "PREFECT_SERVER_API_PORT": str(args.port)}
    env.setdefault("PREFECT_UI_API_URL", url)
    with sigterm_as_ctrl_c() as stop:  # `kill` stops it as cleanly as Ctrl-C
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_healthy(url, proc, timeout_s=None)
            setup = setup_server(cfg, url)
            print(f"Prefect server and UI at http://{args.host}:{args.port} (database and log under {home})")
            pools = ", ".join(setup["pools_created"]) or "already there"
            print(f"work pools: {pools}; gpu limit: {setup['gpu_slots']} slot(s)")
            print(f"\n    export PREFECT_API_URL={url}\n")
            print(
                "then: earmark deploy INPUT... -d NAME, and earmark worker --pool cpu (Ctrl-C stops the server)",
                flush=True,
            )
            proc.wait()
        except KeyboardInterrupt:
            print("stopping the Prefect server…", flush=True)
        finally:
            _stop_group(proc)
            log.close()
    return stop.exit_code


def cmd_deploy(args: argparse.Namespace) -> int:
    """Register the deployments of a dataset (build, stage flows, evaluate) on the Prefect server."""
    from earmark.core.config import config_file
    from earmark.flows.deploy import configured_api_url, deploy, plan_deployments

    cfg = command_config(args, "default", inputs=[str(p) for p in args.inputs] if args.inputs else None)
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()] if s is not None else None  # noqa: E731
    plans = plan_deployments(
        cfg,
        config_file=config_file(args.config),
        flows=split(args.flows),
        until=args.until,
        cron=args.cron,
        timezone=args.timezone,
        gpu_flows=split(args.gpu_flows),
        pinned={"profile": args.profile, "llm_endpoint": args.llm_endpoint, "llm_model": args.llm_model},
    )
    print("deployments" + (" (dry run: nothing registered)" if args.dry_run else "") + ":")
    for plan in plans:
        print("  " + plan.describe())
    if args.dry_run:
        return 0
    api_url = args.api_url or configured_api_url()
    if not api_url:
        raise ValueError("no Prefect server: start `earmark server` and export the PREFECT_API_URL it prints")
    out = deploy(cfg, plans, api_url)
    print(f"registered {len(out['deployments'])} deployment(s) on {api_url}; gpu limit {out['gpu_slots']} slot(s)")
    pools = sorted({p.pool for p in plans})
    print("start a worker per pool: " + "; ".join(f"earmark worker --pool {p.removeprefix('earmark-')}" for p in pools))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """`prefect worker start --pool earmark-<pool> --type process`, in the foreground (replaces this process)."""
    cmd = [sys.executable, "-m", "prefect", "worker", "start", "--pool", f"earmark-{args.pool}", "--type", "process"]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    os.execv(sys.executable, cmd)
    return 0  # not reached
