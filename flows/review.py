"""review flows: human verification of generated items, in the Prefect UI or through a review sheet.

`review` (a sub-flow of build when `review.mode` is not "off"):
- "ui": pauses its flow run with `pause_flow_run(wait_for_input=…)`. The Prefect UI shows a "Resume" form
  built from `ReviewInput` (one decision per item, pre-filled "accept"; the item list is the form's
  description); `prefect.flow_runs.resume_flow_run(flow_run_id, run_input={...})` does the same from code.
  A blocking pause needs no deployment or worker: the flow's process waits, polling every `review.poll_s`,
  and fails after `review.timeout_s`. Decisions go to a `reviews` shard and the build goes on to publish.
- "file": writes a review sheet to `<dataset>/review/<run_id>.csv` and goes on; `earmark review import`
  (`review_import_flow`) stores the filled-in sheet and publishes a new version.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Literal

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.context import get_run_context
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from pydantic import BaseModel

from earmark.core.config import Config
from earmark.flows.publish import publish_flow
from earmark.flows.runs import artifact_key
from earmark.flows.shards import run_now
from earmark.stages import review
from earmark.stages.base import ShardJob
from earmark.stages.review import ReviewItem, read_sheet, review_items, to_decisions, write_sheet
from earmark.storage import Catalog, open_catalog
from earmark.storage.lease import held, released, write_lease
from earmark.storage.paths import version_name


class ItemDecision(BaseModel):
    item_table: str
    item_id: str
    text: str = ""  # the item's text, shown for reference; a rewrite goes in new_text
    decision: Literal["accept", "reject", "rewrite"] = "accept"
    new_text: str | None = None


class ReviewInput(RunInput):
    """What the Prefect UI asks for when a review pauses: who reviews, and one decision per item."""

    reviewer: str = "reviewer"
    decisions: list[ItemDecision] = []


def store_decisions(cfg: Config, decisions: list, run_id: str | None) -> str | None:
    """One `reviews` shard per review round, keyed by its content (storing the same round twice is a no-op)."""
    if not decisions:
        return None
    job = ShardJob(review.REVIEWS, partial(review.store, decisions), sources=[review.decisions_sha(decisions)])
    return run_now(cfg, job, run_id, "review/store").key


def _markdown(items: list[ReviewItem]) -> str:
    def cell(s: str) -> str:
        return s.replace("|", "/").replace("\n", " ")[:300]

    lines = [
        "Decide per item: **accept**, **reject**, or **rewrite** with the new text in `new_text`.",
        "",
        "| table | item | context | text | automatic QC |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {i.item_table} | `{i.item_id}` | {cell(i.context)} | {cell(i.text)} | {cell(i.qc) or 'kept'} |"
        for i in items
    ]
    return "\n".join(lines)


@flow(name="review", log_prints=True)
def review_flow(cfg: Config, shards: dict[str, list[str]], run_id: str | None = None) -> dict:
    """One review round over the build's items (see the module doc); returns what it stored or wrote."""
    logger = get_run_logger()
    cat = open_catalog(cfg)
    items, qc = review.version_items(cat, shards)
    todo = review_items(
        items,
        qc,
        review.stored_decisions(cat),
        tables=cfg.review.tables,
        scope=cfg.review.scope,
        max_items=cfg.review.max_items,
    )
    if not todo:
        logger.info("review: every item in scope already has a decision")
        return {"mode": cfg.review.mode, "items": 0}
    if cfg.review.mode == "file":
        sheet = write_sheet(todo, cat.dataset_path("review", f"{run_id or 'latest'}.csv"))
        create_markdown_artifact(
            key=artifact_key(cfg, "review-sheet"),
            description="Items waiting for review",
            markdown=(
                f"Review sheet with {len(todo)} items: `{sheet}`. Fill in `decision` (accept / reject / rewrite) and "
                f"`new_text` for rewrites, then run `earmark review import -d {cfg.dataset} {sheet}`."
            ),
        )
        logger.info("review: sheet with %d items written to %s", len(todo), sheet)
        return {"mode": "file", "items": len(todo), "sheet": str(sheet)}

    form = ReviewInput.with_initial_data(
        description=_markdown(todo),
        reviewer="reviewer",
        decisions=[ItemDecision(item_table=i.item_table, item_id=i.item_id, text=i.text) for i in todo],
    )
    logger.info("review: %d items; resume this flow run in the Prefect UI with your decisions", len(todo))
    with released(held(cfg.dataset)):  # a review waiting hours for a person does not keep other writers out
        answer = pause_flow_run(
            wait_for_input=form, timeout=cfg.review.timeout_s, poll_interval=cfg.review.poll_s, key="review"
        )
    rows = [{**d.model_dump(), "reviewer": answer.reviewer} for d in answer.decisions]
    decisions, errors = to_decisions(rows, items, reviewer=answer.reviewer or "reviewer", source="ui")
    for e in errors:
        logger.warning("review: ignored %s", e)
    key = store_decisions(cfg, decisions, run_id)
    flow_run = get_run_context().flow_run  # type: ignore[union-attr]
    logger.info("review: %d decisions stored (shard %s) from flow run %s", len(decisions), key, flow_run.id)
    return {"mode": "ui", "items": len(todo), "decisions": len(decisions), "errors": errors, "shard": key}


@flow(name="review-import", log_prints=True)
def review_import_flow(cfg: Config, sheet: Path, reviewer: str = "reviewer", version: str | None = None) -> dict:
    """Store a filled-in review sheet's decisions (about `version`, default the latest) and publish a new
    version with every stored decision applied."""
    cat = open_catalog(cfg, create=False)
    with write_lease(cfg, cat, cat.new_run_id(), "review import"):
        return _import(cfg, cat, sheet, reviewer, version)


def _import(cfg: Config, cat: Catalog, sheet: Path, reviewer: str, version: str | None) -> dict:
    version, shards = _reviewed(cfg, cat, version)
    stored = _store(cfg, cat, shards, read_sheet(sheet), reviewer, "file", f"review sheet {sheet}")
    published = publish_flow(cfg, shards, None, note=f"review of {version}")
    return {**stored, **published}


def _reviewed(cfg: Config, cat: Catalog, version: str | None) -> tuple[str, dict[str, list[str]]]:
    version = version or cat.latest_version()
    if version is None:
        raise ValueError(f"dataset {cfg.dataset!r} has no published version to review; run build first")
    version_name(version)
    return version, cat.version_shards(version)


def _store(cfg: Config, cat: Catalog, shards: dict, rows: list, reviewer: str, source: str, what: str) -> dict:
    items, _ = review.version_items(cat, shards)
    decisions, errors = to_decisions(rows, items, reviewer=reviewer, source=source)
    if errors:
        raise ValueError(f"{what}: nothing stored, fix these rows first:\n  " + "\n  ".join(errors))
    if not decisions:
        raise ValueError(f"{what} has no filled-in decision")
    return {"decisions": len(decisions), "shard": store_decisions(cfg, decisions, None)}


# The browser view (`earmark view`) stores decisions the way `review import` does — same rows, same shard —
# but in two steps: decisions as the reviewer makes them, a version only when the reviewer publishes.
@flow(name="review-store", log_prints=True)
def review_store_flow(cfg: Config, rows: list[dict], reviewer: str = "reviewer", version: str | None = None) -> dict:
    """Store decisions about `version`'s items (rows as a review sheet's: item_table, item_id, decision,
    new_text); nothing is published."""
    cat = open_catalog(cfg, create=False)
    with write_lease(cfg, cat, cat.new_run_id(), "review (view)"):
        version, shards = _reviewed(cfg, cat, version)
        return {"version": version, **_store(cfg, cat, shards, rows, reviewer, "ui", "review decisions")}


@flow(name="review-publish", log_prints=True)
def review_publish_flow(cfg: Config, version: str | None = None) -> dict:
    """Publish a version of `version`'s items with every stored decision applied (what `review import`
    publishes after storing a sheet)."""
    cat = open_catalog(cfg, create=False)
    with write_lease(cfg, cat, cat.new_run_id(), "review publish (view)"):
        version, shards = _reviewed(cfg, cat, version)
        return publish_flow(cfg, shards, None, note=f"review of {version}")
