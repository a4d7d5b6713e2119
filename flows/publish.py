"""publish flow: a new immutable dataset version from a build's shards, with its exports and card.

Every stored review decision is applied on the way: the overlay shard (stage `review-apply`) is recomputed
from all `reviews` shards and the version's item shards, and joins the version with them. No decision →
no overlay, and the version is what the build produced. The exports are the version's `publish` shard.
"""

from __future__ import annotations

from functools import partial

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from earmark.core import progress
from earmark.core.config import Config
from earmark.flows.runs import artifact_key, name_flow_run
from earmark.flows.shards import run_now
from earmark.schemas import ITEM_TABLES
from earmark.stages import publish, review
from earmark.stages.base import ShardJob
from earmark.storage import Catalog, open_catalog
from earmark.storage.lease import write_lease


def apply_reviews(cfg: Config, cat: Catalog, shards: dict[str, list[str]], run_id: str | None) -> dict[str, list[str]]:
    """`shards` plus the review overlay shard and the `reviews` shards, when any decision is stored."""
    shards = review.base_shards(cat, shards)
    reviews = review.review_keys(cat)
    if not reviews:
        return shards
    job = ShardJob(
        review.review_apply_spec(),
        review.review_apply,
        inputs={"reviews": reviews, **{t: shards.get(t, []) for t in ITEM_TABLES}},
    )
    key = run_now(cfg, job, run_id, "review-apply").key
    out = {t: list(keys) for t, keys in shards.items()}
    for t in ("qc", *ITEM_TABLES):
        out[t] = out.get(t, []) + [key]
    out["reviews"] = reviews
    return out


@flow(name="publish", log_prints=True)
def publish_flow(cfg: Config, shards: dict[str, list[str]], run_id: str | None = None, note: str = "build") -> dict:
    cat = open_catalog(cfg)
    progress.report("publish", "steps", planned=2)  # the version's lake commit, its exports and card
    with write_lease(cfg, cat, run_id, "publish"):  # re-entered when the build or rerun holds it
        shards = apply_reviews(cfg, cat, shards, run_id)
        version, created = cat.publish(shards, run_id, note=note)
    progress.report("publish", "steps", done=1)
    name_flow_run(f"publish · {cfg.dataset} · {version}")
    job = ShardJob(
        publish.publish_spec(list(shards)),
        partial(publish.publish, cat, version),
        inputs=shards,
        sources=[version],
        label=version,
    )
    ref = run_now(cfg, job, run_id, f"publish/{version}")
    progress.report("publish", "steps", done=1)
    out_dir = cat.dataset_path("exports", version)
    if (card := out_dir / "README.md").exists():
        create_markdown_artifact(
            key=artifact_key(cfg, "dataset-card"), markdown=card.read_text(), description=f"{cat.dataset} {version}"
        )
    get_run_logger().info("version %s (%s), exports in %s", version, "new" if created else "unchanged", out_dir)
    return {"version": version, "created": created, "exports": str(out_dir), "skipped": ref.skipped}
