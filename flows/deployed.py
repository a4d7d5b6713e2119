"""The flows `earmark deploy` registers: each takes plain parameters (dataset, inputs, config file, profile,
LLM endpoint…), builds the run's Config the way the CLI does, and runs the stage flows.

A worker (`earmark worker --pool cpu`) runs them from the code directory they were registered from.
`ingest` runs alone from the inputs; `analyze`, `synthesize` and `filter` re-run that stage from the dataset's
latest version (`earmark rerun --stage …`), the stages after it follow and a new version is published.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from earmark.core.config import Config, load_config
from earmark.flows.build import build_flow
from earmark.flows.evaluate import evaluate_flow
from earmark.flows.ingest import ingest_flow
from earmark.flows.rerun import rerun_flow
from earmark.flows.runs import flow_options, run_tags


def deployed_config(
    dataset: str,
    config: str | None = None,
    data_root: str | None = None,
    inputs: list[str] | None = None,
    profile: str | None = None,
    llm_endpoint: str | None = None,
    llm_model: str | None = None,
) -> Config:
    """The Config of a deployed run: defaults → the config file → EARMARK_* of the worker → parameters."""
    overrides = {
        "dataset": dataset,
        "data_root": data_root,
        "inputs": inputs or None,
        "analyze.profile": profile,
        "llm.endpoint": llm_endpoint,
        "llm.model": llm_model,
    }
    return load_config(Path(config) if config else None, overrides)


@flow(name="earmark-build", flow_run_name="deployed build · {dataset}", log_prints=True)
def build_deployed(
    dataset: str,
    inputs: list[str],
    until: str = "publish",
    config: str | None = None,
    data_root: str | None = None,
    profile: str | None = None,
    llm_endpoint: str | None = None,
    llm_model: str | None = None,
) -> dict[str, Any]:
    """`earmark build INPUTS -d DATASET [--until STAGE]`."""
    cfg = deployed_config(dataset, config, data_root, inputs, profile, llm_endpoint, llm_model)
    with run_tags(cfg, "build", "deployment"):
        return build_flow.with_options(**flow_options(cfg, "build"))(cfg, until)


@flow(name="earmark-ingest", flow_run_name="deployed ingest · {dataset}", log_prints=True)
def ingest_deployed(
    dataset: str, inputs: list[str], config: str | None = None, data_root: str | None = None
) -> dict[str, Any]:
    """Ingest alone: the inputs' `clips` and `quarantine` shards (published by the next build)."""
    cfg = deployed_config(dataset, config, data_root, inputs)
    with run_tags(cfg, "ingest", "deployment"):
        res = ingest_flow.with_options(**flow_options(cfg, "ingest"))(cfg)
    return {"computed": res.computed, "skipped": res.skipped, "clips": res.keys("clips")}


@flow(name="earmark-rerun", flow_run_name="deployed {stage} · {dataset}", log_prints=True)
def rerun_deployed(
    dataset: str,
    stage: str,
    items: list[str] | None = None,
    version: str | None = None,
    config: str | None = None,
    data_root: str | None = None,
    profile: str | None = None,
    llm_endpoint: str | None = None,
    llm_model: str | None = None,
) -> dict[str, Any]:
    """`earmark rerun -d DATASET --stage STAGE`: that stage again from a version, then a new version."""
    cfg = deployed_config(dataset, config, data_root, None, profile, llm_endpoint, llm_model)
    with run_tags(cfg, "rerun", "deployment"):
        out = rerun_flow.with_options(**flow_options(cfg, "rerun"))(cfg, stage, items, version)
    return {k: v for k, v in out.items() if k != "diff_markdown"}


@flow(name="earmark-evaluate", flow_run_name="deployed evaluate · {dataset} · {model_name}", log_prints=True)
def evaluate_deployed(
    dataset: str,
    model_name: str = "model",
    predictions: str | None = None,
    endpoint: str | None = None,
    model_id: str | None = None,
    tasks: list[str] | None = None,
    subtask: str | None = None,
    metric: str = "similarity",
    version: str | None = None,
    judge: str = "auto",
    config: str | None = None,
    data_root: str | None = None,
    llm_endpoint: str | None = None,
    llm_model: str | None = None,
) -> dict[str, Any]:
    """`earmark evaluate`: score prediction files, or ask the model at `endpoint`, on a version."""
    cfg = deployed_config(dataset, config, data_root, None, None, llm_endpoint, llm_model)
    with run_tags(cfg, "evaluate", "deployment"):
        return evaluate_flow.with_options(**flow_options(cfg, "evaluate"))(
            cfg,
            Path(predictions) if predictions else None,
            subtask,
            model_name,
            version,
            metric,
            endpoint=endpoint,
            model_id=model_id,
            tasks=tasks,
            judge=judge,
        )
