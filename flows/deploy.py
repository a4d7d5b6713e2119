"""What `earmark server` and `earmark deploy` register on a Prefect server: the work pools, the `gpu` global
concurrency limit, and one deployment per entry flow of earmark.flows.deployed.

Every call here is idempotent: a pool that exists is kept, the limit's slots are set to `[run] gpus`, and a
deployment registered again under its name is updated. Deployments point at this code directory
(`flow.from_source(<dir>, "flows/deployed.py:…")`, no image, nothing pushed): a process worker started on a
machine with the same checkout/install runs them there.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.exceptions import ObjectNotFound
from prefect.schedules import Cron
from prefect.settings import PREFECT_API_URL, temporary_settings

from earmark.core.config import Config
from earmark.flows.slots import GPU_LIMIT
from earmark.stages.graph import RERUN

POOLS = {"cpu": "earmark-cpu", "gpu": "earmark-gpu"}
# a deployment per flow: build, ingest, each stage a re-run may start at (the stage graph's), and evaluate
FLOWS = ("build", "ingest", *RERUN, "evaluate")
ENTRYPOINTS = {
    "build": "build_deployed",
    "ingest": "ingest_deployed",
    **dict.fromkeys(RERUN, "rerun_deployed"),
    "evaluate": "evaluate_deployed",
}
SOURCE_DIR = Path(__file__).resolve().parent.parent  # the checkout (or site-packages/earmark) holding flows/


@dataclass(frozen=True)
class DeploymentPlan:
    """One deployment to register: which entry flow, its name, pool, default parameters and schedule."""

    flow: str  # "build", "analyze", …
    name: str
    pool: str
    parameters: dict[str, Any]
    cron: str | None = None
    timezone: str | None = None
    tags: list[str] = field(default_factory=list)

    @property
    def entrypoint(self) -> str:
        return f"flows/deployed.py:{ENTRYPOINTS[self.flow]}"

    def describe(self) -> str:
        when = f"cron {self.cron!r} ({self.timezone or 'UTC'})" if self.cron else "on demand"
        return f"{self.flow:<10} {self.name:<28} pool {self.pool:<12} {when:<28} {self.entrypoint}  {self.parameters}"


def uses_gpu(cfg: Config) -> bool:
    """Whether the configured experts run on a GPU (the paper profile on cuda)."""
    return cfg.analyze.profile == "paper" and cfg.analyze.device.startswith("cuda")


def plan_deployments(
    cfg: Config,
    *,
    config_file: Path | None,
    flows: list[str] | None = None,
    until: str = "publish",
    cron: str | None = None,
    timezone: str | None = None,
    gpu_flows: list[str] | None = None,
    pinned: dict[str, Any] | None = None,
) -> list[DeploymentPlan]:
    """The deployments for `cfg.dataset`. Paths are made absolute (a worker runs in the code directory).
    `cron` schedules the build; `gpu_flows` go to the gpu pool (default: build and analyze when the experts
    run on a GPU). `pinned`: profile / llm_endpoint / llm_model given on the command line; other settings
    are read from the config file (and the worker's EARMARK_* environment) when a run starts."""
    unknown = set(flows or ()) - set(FLOWS)
    if unknown:
        raise ValueError(f"unknown flow(s) {', '.join(sorted(unknown))}; deployable: {', '.join(FLOWS)}")
    flows = [f for f in FLOWS if f in (flows or FLOWS)]
    if gpu_flows is None:
        gpu_flows = ["build", "analyze"] if uses_gpu(cfg) else []
    common: dict[str, Any] = {"dataset": cfg.dataset, "data_root": str(Path(cfg.data_root).resolve())}
    if config_file is not None:
        common["config"] = str(Path(config_file).resolve())
    pinned = {k: v for k, v in (pinned or {}).items() if v is not None}
    llm = {k: v for k, v in pinned.items() if k in ("llm_endpoint", "llm_model")}
    profile = {"profile": pinned["profile"]} if "profile" in pinned else {}
    inputs = [str(Path(p).resolve()) for p in cfg.inputs]
    params: dict[str, dict[str, Any]] = {
        "build": {**common, "inputs": inputs, "until": until, **profile, **llm},
        "ingest": {**common, "inputs": inputs},
        **{s: {**common, "stage": s, **profile, **llm} for s in RERUN},
        "evaluate": {**common, **llm},
    }
    if {"build", "ingest"} & set(flows) and not inputs:
        raise ValueError("deploying build/ingest needs the inputs: earmark deploy INPUT... -d NAME")
    plans = []
    for name in flows:
        plans.append(
            DeploymentPlan(
                flow=name,
                name=cfg.dataset if ENTRYPOINTS[name] != "rerun_deployed" else f"{cfg.dataset}-{name}",
                pool=POOLS["gpu" if name in gpu_flows else "cpu"],
                parameters={k: v for k, v in params[name].items() if v is not None},
                cron=cron if name == "build" else None,
                timezone=timezone if name == "build" else None,
                tags=[f"dataset:{cfg.dataset}", f"profile:{cfg.analyze.profile}", name],
            )
        )
    return plans


def ensure_pools(pools: list[str] | None = None) -> list[str]:
    """Create the process work pools that do not exist yet; returns the ones created."""
    from prefect.workers.process import ProcessWorker

    created = []
    with get_client(sync_client=True) as client:
        for name in pools or list(POOLS.values()):
            try:
                client.read_work_pool(name)
            except ObjectNotFound:
                template = ProcessWorker.get_default_base_job_template()
                client.create_work_pool(WorkPoolCreate(name=name, type="process", base_job_template=template))
                created.append(name)
    return created


def ensure_gpu_limit(slots: int) -> None:
    """Create the `gpu` global concurrency limit with `slots` slots, or set an existing one's slots."""
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(GPU_LIMIT, slots)


def configured_api_url() -> str | None:
    """The Prefect API this process talks to (PREFECT_API_URL or the active profile), None when ephemeral."""
    return PREFECT_API_URL.value() or None


def setup_server(cfg: Config, api_url: str | None = None) -> dict[str, Any]:
    """Pools and the gpu limit on the server at `api_url` (default: the configured PREFECT_API_URL)."""
    with temporary_settings({PREFECT_API_URL: api_url}) if api_url else nullcontext():
        created = ensure_pools()
        ensure_gpu_limit(cfg.run.gpus)
    return {"pools_created": created, "gpu_slots": cfg.run.gpus}


def deploy(cfg: Config, plans: list[DeploymentPlan], api_url: str | None = None) -> dict[str, Any]:
    """`earmark deploy`: the pools and the gpu limit, then the planned deployments."""
    with temporary_settings({PREFECT_API_URL: api_url}) if api_url else nullcontext():
        setup = setup_server(cfg)
        return {**setup, "deployments": register(plans)}


def register(plans: list[DeploymentPlan], source_dir: Path = SOURCE_DIR) -> list[str]:
    """Register (create or update) the planned deployments; returns their ids."""
    ids = []
    for plan in plans:
        entry = flow.from_source(source=str(source_dir), entrypoint=plan.entrypoint)
        schedules = [Cron(plan.cron, timezone=plan.timezone)] if plan.cron else None
        # to_deployment + apply, not flow.deploy / prefect.deploy: those first list the pool's online workers,
        # a request this server version rejects (422: the client sends null limit/offset)
        deployment = entry.to_deployment(
            plan.name,
            work_pool_name=plan.pool,
            parameters=plan.parameters,
            schedules=schedules,
            tags=plan.tags,
            description=f"earmark {plan.flow} of dataset {plan.parameters['dataset']}",
        )
        dep_id = deployment.apply(work_pool_name=plan.pool)
        ids.append(str(dep_id))
    return ids
