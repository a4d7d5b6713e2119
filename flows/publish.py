"""publish flow: a new immutable dataset version from a build's shards, with MECAT exports and a card.

Every stored review decision is applied on the way: the overlay shard (`human_review` QC rows and
rewritten item rows, earmark/review.py) is recomputed from all `reviews` shards and the item shards of
the version, and joins the version with them. No decision → no overlay, and the version is what the
build produced.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from earmark.config import Config
from earmark.stages.publish import base_shards, dataset_card, export_items, export_mecat, review_keys
from earmark.stages.review import ITEM_TABLES, REVIEW_VERSION, review_overlay
from earmark.flows.common import computed_or_cached, open_catalog
from earmark.schemas import QCResult, ReviewDecision, TABLES, from_table, to_table
from earmark.storage import Catalog, ShardMeta, shard_key


def apply_reviews(cat: Catalog, shards: dict[str, list[str]], run_id: str | None) -> dict[str, list[str]]:
    """`shards` plus the review overlay shard and the `reviews` shards, when any decision is stored."""
    shards = base_shards(cat, shards)
    reviews = review_keys(cat)
    if not reviews:
        return shards
    item_keys = sorted({k for t in ITEM_TABLES for k in shards.get(t, [])})
    inputs = reviews + item_keys
    key = shard_key("review-apply", REVIEW_VERSION, inputs)
    meta = ShardMeta(stage="review-apply", stage_version=REVIEW_VERSION, inputs=inputs)

    def compute():
        items = {t: from_table(TABLES[t], cat.read(t, shards.get(t, []))) for t in ITEM_TABLES}
        overlay = review_overlay(from_table(ReviewDecision, cat.read("reviews", reviews)), items)
        get_run_logger().info("review decisions applied: %s", overlay.counts)
        return {"qc": to_table(QCResult, overlay.qc), **{t: to_table(TABLES[t], overlay.items[t]) for t in ITEM_TABLES}}

    computed_or_cached(cat, key, ("qc", *ITEM_TABLES), meta, run_id, compute, "review-apply")
    out = {t: list(keys) for t, keys in shards.items()}
    for t in ("qc", *ITEM_TABLES):
        out[t] = out.get(t, []) + [key]
    out["reviews"] = reviews
    return out


@flow(name="publish", log_prints=True)
def publish_flow(cfg: Config, shards: dict[str, list[str]], run_id: str | None = None, note: str = "build") -> dict:
    cat = open_catalog(cfg)
    shards = apply_reviews(cat, shards, run_id)
    version, created = cat.publish(shards, run_id, note=note)
    out_dir: Path = cat.root / "exports" / version
    if created or not (out_dir / "README.md").exists():
        counts = {**export_mecat(cat, version, out_dir), **export_items(cat, version, out_dir)}
        card = dataset_card(cat, version, counts)
        (out_dir / "README.md").write_text(card)
        create_markdown_artifact(key="dataset-card", markdown=card, description=f"{cat.dataset} {version}")
    get_run_logger().info("version %s (%s), exports in %s", version, "new" if created else "unchanged", out_dir)
    return {"version": version, "created": created, "exports": str(out_dir)}
