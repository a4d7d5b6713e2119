"""docker/compose.yaml is valid Compose and wired the way the images, `earmark deploy` and the config expect.

There is no Docker engine on the development machines or in CI, so the images are never built or run here.
`docker-compose config` (Debian's docker-compose 1.29, installed by `make test`) validates the file against the
Compose schema and resolves its variables offline, without a daemon; the assertions read the resolved file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

DOCKER = Path(__file__).resolve().parent.parent / "docker"
COMPOSE = DOCKER / "compose.yaml"
# The work pools `earmark deploy` registers deployments on (process workers).
POOLS = {"worker-cpu": "earmark-cpu", "worker-gpu": "earmark-gpu"}
# Services that run earmark code (flows, stage tasks, the CLI): they need the shared data root.
EARMARK_SERVICES = {"deploy", "worker-cpu", "worker-gpu", "dask-worker"}


def docker_compose(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """docker-compose on docker/compose.yaml with only PATH from this environment (no host EARMARK_*, no
    DOCKER_HOST): the defaults in the file are what is tested."""
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.fail(
            "docker-compose not found: `make test` installs it (apt-get install --no-install-recommends docker-compose)"
        )
    return subprocess.run(
        [exe, *args],
        cwd=DOCKER,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def resolved(*args: str, env: dict[str, str] | None = None) -> dict:
    res = docker_compose("-f", COMPOSE.name, *args, "config", env=env)
    assert res.returncode == 0, res.stderr
    return yaml.safe_load(res.stdout)


@pytest.fixture(scope="module")
def cfg() -> dict:
    return resolved("--profile", "dask")


def env_of(service: dict) -> dict[str, str]:
    return {k: str(v) for k, v in (service.get("environment") or {}).items()}


def arg_after(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


@pytest.mark.parametrize(
    "args",
    [(), ("--profile", "dask"), ("--env-file", "env.example"), ("--env-file", "env.example", "--profile", "dask")],
    ids=["default", "dask", "env-example", "env-example+dask"],
)
def test_compose_file_validates(args):
    res = docker_compose("-f", COMPOSE.name, *args, "config", "-q")
    assert res.returncode == 0, res.stderr


def test_nfs_override_validates_and_requires_its_address():
    files = ("-f", COMPOSE.name, "-f", "compose.nfs.yaml")
    missing = docker_compose(*files, "config", "-q")
    assert missing.returncode != 0 and "EARMARK_NFS_ADDR" in missing.stderr
    data = resolved(*files, env={"EARMARK_NFS_ADDR": "10.0.0.5", "EARMARK_NFS_EXPORT": "/export/earmark"})
    opts = data["volumes"]["data"]["driver_opts"]
    assert opts["type"] == "nfs" and "addr=10.0.0.5" in opts["o"] and opts["device"] == ":/export/earmark"


def test_validation_is_real(tmp_path):
    """The check would catch a mistake: a misspelt key fails `config`."""
    bad = tmp_path / "compose.yaml"
    bad.write_text(COMPOSE.read_text().replace("    restart: unless-stopped\n", "    restrat: unless-stopped\n", 1))
    res = docker_compose("-f", str(bad), "config", "-q")
    assert res.returncode != 0 and "restrat" in res.stderr


def test_earmark_services_share_the_data_volume(cfg):
    services = cfg["services"]
    running_earmark = {name for name, s in services.items() if any(k.startswith("EARMARK_") for k in env_of(s))}
    assert EARMARK_SERVICES <= running_earmark
    for name in running_earmark - {"postgres"}:  # postgres only holds the init script's passwords
        assert env_of(services[name])["EARMARK_DATA_ROOT"] == "/data", name
        mounts = [v.split(":")[:2] for v in services[name].get("volumes", [])]
        assert ["data", "/data"] in mounts, f"{name} does not mount the shared volume `data` at /data"
    assert "data" in cfg["volumes"]


def test_workers_serve_the_pools_deploy_creates(cfg):
    services = cfg["services"]
    for name, pool in POOLS.items():
        command = services[name]["command"]
        assert command[:3] == ["prefect", "worker", "start"], name
        assert arg_after(command, "--pool") == pool and arg_after(command, "--type") == "process", name
        assert env_of(services[name])["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert services["worker-cpu"]["build"]["dockerfile"] == "docker/Dockerfile"
    gpu = services["worker-gpu"]
    assert gpu["build"]["dockerfile"] == "docker/Dockerfile.paper"
    assert gpu["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert env_of(gpu)["EARMARK_ANALYZE__DEVICE"] == "cuda"
    assert any(v.endswith(":/models:ro") for v in gpu["volumes"])
    assert services["deploy"]["command"][:2] == ["earmark", "deploy"]
    assert arg_after(services["deploy"]["command"], "--cron") == "0 3 * * *"


def test_prefect_server_runs_on_postgres(cfg):
    server = cfg["services"]["prefect-server"]
    assert server["command"] == ["prefect", "server", "start", "--host", "0.0.0.0"]
    url = env_of(server)["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert re.fullmatch(r"postgresql\+asyncpg://prefect:prefect@postgres:5432/prefect", url), url
    assert [p.split("/")[0] for p in server["ports"]] == ["127.0.0.1:4200:4200"]  # loopback unless asked
    assert server["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_postgres_init_creates_both_databases(cfg, tmp_path):
    pg = cfg["services"]["postgres"]
    script = DOCKER / "postgres" / "init-databases.sh"
    assert any(v.startswith(f"{script}:/docker-entrypoint-initdb.d/") for v in pg["volumes"])
    assert os.access(script, os.X_OK), "the entrypoint runs executable *.sh files (others are sourced)"
    env = env_of(pg)
    assert env["EARMARK_PG_DATABASES"].split() == ["prefect", "earmark"]
    # The passwords the roles get are the ones the clients use.
    assert (
        "password=" + env["EARMARK_DB_PASSWORD"] in env_of(cfg["services"]["worker-cpu"])["EARMARK_CATALOG__POSTGRES"]
    )
    assert (
        f":{env['PREFECT_DB_PASSWORD']}@"
        in env_of(cfg["services"]["prefect-server"])["PREFECT_API_DATABASE_CONNECTION_URL"]
    )

    # Run the script with psql replaced by a recorder (there is no server here): the SQL each database gets.
    (tmp_path / "bin").mkdir()
    recorder = tmp_path / "bin" / "psql"
    recorder.write_text('#!/bin/sh\n{ echo "ARGS $*"; cat; } >> "$PSQL_LOG"\n')
    recorder.chmod(0o755)
    log = tmp_path / "psql.log"
    run_env = {**env, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "PSQL_LOG": str(log)}
    res = subprocess.run(["bash", str(script)], env=run_env, capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    calls = log.read_text().split("ARGS ")[1:]
    assert len(calls) == 2
    for name, call in zip(["prefect", "earmark"], calls):
        assert f"-v name={name} " in call and f"-v password={env[name.upper() + '_DB_PASSWORD']}" in call
        assert "CREATE ROLE :\"name\" LOGIN PASSWORD :'password';" in call
        assert 'CREATE DATABASE :"name" OWNER :"name";' in call
    del run_env["EARMARK_DB_PASSWORD"]
    res = subprocess.run(["bash", str(script)], env=run_env, capture_output=True, text=True, timeout=30)
    assert res.returncode != 0 and "EARMARK_DB_PASSWORD is not set" in res.stderr


def test_catalog_dsn_points_at_the_earmark_database(cfg):
    dsn = dict(kv.split("=", 1) for kv in env_of(cfg["services"]["worker-gpu"])["EARMARK_CATALOG__POSTGRES"].split())
    assert dsn == {"host": "postgres", "port": "5432", "dbname": "earmark", "user": "earmark", "password": "earmark"}


def test_llm_endpoint_is_the_vllm_service(cfg):
    vllm = cfg["services"]["vllm"]
    command = vllm["command"]
    port = arg_after(command, "--port")
    served = arg_after(command, "--served-model-name")
    for name in EARMARK_SERVICES:
        env = env_of(cfg["services"][name])
        assert env["EARMARK_LLM__ENDPOINT"] == f"http://vllm:{port}/v1", name
        assert env["EARMARK_LLM__MODEL"] == served, name
        assert int(env["EARMARK_LLM__MAX_CONCURRENCY"]) >= 1
    assert arg_after(command, "--host") == "0.0.0.0"
    assert vllm["image"].startswith("vllm/vllm-openai:v")
    gpus = {s: cfg["services"][s]["deploy"]["resources"]["reservations"]["devices"][0] for s in ("vllm", "worker-gpu")}
    assert gpus["vllm"]["device_ids"] != gpus["worker-gpu"]["device_ids"], "vLLM and the GPU worker share a GPU"


def test_dask_address_is_the_scheduler(cfg):
    services = cfg["services"]
    port = arg_after(services["dask-scheduler"]["command"], "--port")
    address = f"tcp://dask-scheduler:{port}"
    assert services["dask-worker"]["command"][:3] == ["dask", "worker", address]
    for name in EARMARK_SERVICES:
        assert env_of(services[name])["EARMARK_RUN__DASK_ADDRESS"] == address
    assert set(services["dask-worker"]["profiles"]) == set(services["dask-scheduler"]["profiles"]) == {"dask"}


def test_builds_name_existing_targets_from_the_lock_files(cfg):
    """Every build names a stage its Dockerfile defines; the images install from the lock files and pin their
    base images."""
    for name, service in cfg["services"].items():
        if "build" not in service:
            assert ":" in service["image"] and not service["image"].endswith(":latest"), name
            continue
        dockerfile = Path(service["build"]["context"]) / service["build"]["dockerfile"]
        assert re.search(rf"^FROM \S+ AS {service['build']['target']}$", dockerfile.read_text(), re.M), name
    cpu, gpu = (DOCKER / "Dockerfile").read_text(), (DOCKER / "Dockerfile.paper").read_text()
    assert "-r requirements/core.txt" in cpu and "-r requirements/nodeps.txt" in cpu
    assert "-r /src/requirements/paper.txt" in gpu
    for text in (cpu, gpu):
        for image in re.findall(r"^ARG \w+_IMAGE=(\S+)$", text, re.M):
            assert re.search(r":\d[\w.-]*$", image), f"base image {image} is not pinned to a version tag"


def test_worker_environment_is_a_valid_earmark_config(cfg, monkeypatch):
    """The EARMARK_* variables the containers get are settings earmark knows (config rejects unknown ones)."""
    from earmark.core.config import Config, RunSection

    if "catalog" not in Config.model_fields or "dask_address" not in RunSection.model_fields:
        pytest.skip("needs the catalog (DuckLake on PostgreSQL) and Dask run settings")
    for name in EARMARK_SERVICES:
        for key in [k for k in os.environ if k.startswith("EARMARK_")]:
            monkeypatch.delenv(key)
        for key, value in env_of(cfg["services"][name]).items():
            if key.startswith("EARMARK_"):
                monkeypatch.setenv(key, value)
        c = Config()
        assert str(c.data_root) == "/data" and c.llm.endpoint == "http://vllm:8000/v1", name
