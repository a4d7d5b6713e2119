"""Scheduled runs: `earmark deploy` on a real Prefect server run by a real process worker; the plan of what
is registered; and the `gpu` global concurrency limit that GPU-using shards hold."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from earmark.core.config import load_config


# ------------------------------------------------------------------------------------------ the plan
def test_deploy_plan_sends_gpu_flows_to_the_gpu_pool_and_schedules_the_build(tmp_path):
    from earmark.flows.deploy import plan_deployments

    cfg = load_config(
        None, {"dataset": "plan", "data_root": str(tmp_path), "inputs": [str(tmp_path)], "analyze.profile": "paper"}
    )
    cpu = plan_deployments(cfg, config_file=None, cron="0 3 * * *", timezone="Europe/Berlin")
    assert [p.flow for p in cpu] == ["build", "ingest", "analyze", "synthesize", "filter", "evaluate"]
    assert {p.pool for p in cpu} == {"earmark-cpu"}  # paper profile on the CPU: no GPU needed
    assert [(p.flow, p.cron, p.timezone) for p in cpu if p.cron] == [("build", "0 3 * * *", "Europe/Berlin")]
    assert cpu[0].parameters["data_root"] == str(tmp_path.resolve()) and cpu[2].parameters["stage"] == "analyze"

    cuda = cfg.model_copy(update={"analyze": cfg.analyze.model_copy(update={"device": "cuda"})})
    gpu = {p.flow: p.pool for p in plan_deployments(cuda, config_file=None)}
    assert gpu["build"] == gpu["analyze"] == "earmark-gpu" and gpu["synthesize"] == "earmark-cpu"
    chosen = plan_deployments(cuda, config_file=None, flows=["evaluate", "filter"], gpu_flows=["filter"])
    assert [(p.flow, p.pool) for p in chosen] == [("filter", "earmark-gpu"), ("evaluate", "earmark-cpu")]
    with pytest.raises(ValueError, match="unknown flow"):
        plan_deployments(cfg, config_file=None, flows=["publish-everything"])


def test_deploy_dry_run_prints_the_deployments_and_needs_no_server(tmp_path):
    env = {**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api"}  # nothing there
    out = subprocess.run(
        [sys.executable, "-m", "earmark.cli.main", "deploy", str(tmp_path), "-d", "dry", "--data-root", str(tmp_path)]
        + ["--cron", "0 3 * * *", "--llm-endpoint", "http://gpu-box:8000/v1", "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "dry run: nothing registered" in out.stdout
    lines = [line for line in out.stdout.splitlines() if "flows/deployed.py" in line]
    assert len(lines) == 6 and "cron '0 3 * * *'" in lines[0] and "gpu-box" in lines[0]


# ------------------------------------------------------------------- a real server and a process worker
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL, to the process group the subprocess leads."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
            proc.wait(wait)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass


def test_earmark_server_on_another_port_serves_a_ui_that_calls_that_port(tmp_path):
    """`earmark server --port 4299` served a UI whose settings named port 4200 ("Can't connect to Server API")."""
    import httpx

    for attempt in range(3):  # a port found free can be taken by another process before the server binds it
        port = _free_port()
        cmd = [sys.executable, "-m", "earmark.cli.main", "server", "--port", str(port), "--data-root", str(tmp_path)]
        env = {**os.environ}
        env.pop("PREFECT_API_URL", None)
        proc = subprocess.Popen(
            [*cmd, "--prefect-home", str(tmp_path / f"home{attempt}")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            first = proc.stdout.readline()  # printed once the server answers and is set up
            if first.startswith("Prefect server and UI at"):
                settings = httpx.get(f"http://127.0.0.1:{port}/ui-settings", timeout=60).json()
                assert settings["api_url"] == f"http://127.0.0.1:{port}/api"
                return
            log = (tmp_path / f"home{attempt}" / "server.log").read_text(errors="replace")
            assert "already in use" in log or "address already in use" in log.lower(), first + log[-3000:]
        finally:
            _stop(proc)
    raise AssertionError("no free port stayed free three times")


def _tiny_corpus(root: Path) -> list[Path]:
    from earmark.corpus import generate_corpus

    inputs = root / "inputs"
    inputs.mkdir(parents=True)
    for item in generate_corpus(root / "corpus", per_domain=1, seed=3):
        if item.domain in {"000", "S00"}:
            shutil.copy(item.path, inputs / item.path.name)
    return sorted(inputs.iterdir())


@pytest.mark.slow
def test_a_deployed_build_runs_on_a_process_worker(tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.settings import PREFECT_API_URL, temporary_settings

    files = _tiny_corpus(tmp_path)
    data = tmp_path / "data"
    base = {
        **os.environ,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "EARMARK_LLM__N_THREADS": "1",
        "PREFECT_LOGGING_LEVEL": "INFO",
    }
    server_env = {**base, "PREFECT_HOME": str(tmp_path / "prefect-server")}
    server_env.pop("PREFECT_API_URL", None)
    logs = tmp_path / "logs"
    logs.mkdir()
    procs: list[subprocess.Popen] = []
    try:
        from earmark.cli.commands import wait_healthy

        for _ in range(3):  # a port found free may be taken by another process before the server binds it
            port = _free_port()
            url = f"http://127.0.0.1:{port}/api"
            server = subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                env=server_env,
                stdout=(logs / "server.log").open("ab"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                wait_healthy(url, server, timeout_s=None)  # as long as it takes, while the server lives
                procs.append(server)
                break
            except RuntimeError:  # it exited: its port was taken meanwhile
                continue
        else:
            raise AssertionError((logs / "server.log").read_text(errors="replace")[-3000:])
        client_env = {**base, "PREFECT_HOME": str(tmp_path / "prefect-client"), "PREFECT_API_URL": url}
        deploy = subprocess.run(
            [sys.executable, "-m", "earmark.cli.main", "deploy", str(tmp_path / "inputs"), "-d", "sched"]
            + ["--data-root", str(data), "--until", "analyze", "--cron", "0 3 * * *", "--timezone", "UTC"],
            env=client_env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert deploy.returncode == 0, deploy.stdout + deploy.stderr
        assert "registered 6 deployment(s)" in deploy.stdout
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "prefect", "worker", "start", "--pool", "earmark-cpu", "--type", "process"],
                env=client_env,
                cwd=tmp_path,
                stdout=(logs / "worker.log").open("wb"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        with temporary_settings({PREFECT_API_URL: url}), get_client(sync_client=True) as client:
            deps = client.request("POST", "/deployments/filter", json={"limit": 50, "offset": 0}).json()
            assert {d["name"] for d in deps} == {"sched", "sched-analyze", "sched-synthesize", "sched-filter"}
            assert {d["work_pool_name"] for d in deps} == {"earmark-cpu"}
            dep = client.read_deployment_by_name("earmark-build/sched")
            assert [s.schedule.cron for s in dep.schedules] == ["0 3 * * *"]
            assert dep.parameters["until"] == "analyze" and dep.parameters["data_root"] == str(data)
            limit = client.read_global_concurrency_limit_by_name("gpu")
            assert limit.limit == 1

            run = client.create_flow_run_from_deployment(dep.id)
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                run = client.read_flow_run(run.id)
                if run.state is not None and run.state.is_final():
                    break
                time.sleep(2)
            worker_log = (logs / "worker.log").read_text(errors="replace")[-4000:]
            assert run.state is not None and run.state.is_completed(), (run.state, worker_log)
            assert run.name == "deployed build · sched"
            subruns = client.read_flow_runs(
                flow_run_filter=FlowRunFilter(
                    name=FlowRunFilterName(any_=["build · sched · v0001", "analyze · sched", "publish · sched · v0001"])
                ),
                sort=FlowRunSort.START_TIME_DESC,
                limit=20,
            )
            assert {r.name for r in subruns} == {"build · sched · v0001", "analyze · sched", "publish · sched · v0001"}
            assert all(r.state.is_completed() for r in subruns)
            artifacts = client.request(
                "POST", "/artifacts/filter", json={"artifacts": {"key": {"like_": "sched-"}}, "limit": 50, "offset": 0}
            ).json()
            assert "sched-dataset-card" in {a["key"] for a in artifacts}
    finally:
        for proc in reversed(procs):
            _stop(proc)

    def sql(query: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-m", "earmark.cli.main", "sql", "-d", "sched", "--data-root", str(data), query],
            env=client_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()[1:]

    assert sql("SELECT count(*) FROM clips") == [str(len(files))]
    assert sql("SELECT count(*) FROM domain") == [str(len(files))]
    assert sql("SELECT version, note FROM versions") == ["v0001 | build --until analyze"]
    assert sql("SELECT count(*) FROM captions") == ["0"]


# --------------------------------------------------------------------------------- the gpu limit
def _timed(log: Path, inputs) -> dict[str, list]:
    """A stand-in GPU stage: records when it ran and how many `gpu` slots were taken meanwhile."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    start = time.time()
    with get_client(sync_client=True) as client:
        try:
            active = client.read_global_concurrency_limit_by_name("gpu").active_slots
        except ObjectNotFound:
            active = None
    time.sleep(0.5)
    with log.open("a") as f:
        f.write(json.dumps({"start": start, "end": time.time(), "active": active}) + "\n")
    return {"quarantine": []}


def _gpu_jobs(log: Path, n: int, tag: str):
    from earmark.stages.base import ShardJob, StageSpec

    spec = StageSpec("test-gpu", "1", writes=("quarantine",))
    return [ShardJob(spec, partial(_timed, log), sources=[f"{tag}-{i}"], label=f"job-{i}", gpu=True) for i in range(n)]


def _run_jobs(cfg, jobs) -> None:
    from prefect import flow
    from prefect.task_runners import ThreadPoolTaskRunner

    from earmark.flows.shards import submit

    @flow(task_runner=ThreadPoolTaskRunner(max_workers=len(jobs)))
    def gpu_jobs():
        return [f.result() for f in [submit(cfg, job, None) for job in jobs]]

    gpu_jobs()


@pytest.mark.slow
def test_gpu_shards_hold_the_gpu_limit_one_at_a_time(tmp_path, prefect_harness):
    from prefect.client.orchestration import get_client

    from earmark.flows.deploy import ensure_gpu_limit

    cfg = load_config(None, {"dataset": "gpu", "data_root": str(tmp_path)})
    log = tmp_path / "runs.jsonl"
    ensure_gpu_limit(1)
    ensure_gpu_limit(1)  # idempotent
    try:
        _run_jobs(cfg, _gpu_jobs(log, 3, "one-slot"))
        runs = sorted((json.loads(line) for line in log.read_text().splitlines()), key=lambda r: r["start"])
        assert len(runs) == 3 and all(r["active"] == 1 for r in runs)  # each held the one slot
        assert all(a["end"] <= b["start"] for a, b in zip(runs, runs[1:])), runs  # and never two at once
        with get_client(sync_client=True) as client:
            assert client.read_global_concurrency_limit_by_name("gpu").active_slots == 0  # all released
    finally:
        with get_client(sync_client=True) as client:
            client.delete_global_concurrency_limit_by_name("gpu")

    # Without the limit (a build with no `earmark server` set-up) a GPU shard neither waits nor fails.
    log.unlink()
    _run_jobs(cfg, _gpu_jobs(log, 2, "no-limit"))
    assert len(log.read_text().splitlines()) == 2
