"""Planning a re-run from a published version: its shards, aligned per clip shard, and what filter reads.

The catalog records each shard's inputs (its lineage). From a version's shard set this rebuilds the graph a
build had: per clip shard, the expert shards computed from it, the evidence shard over them, and the item
shards over that evidence — so `earmark rerun` can re-run one stage and take the rest from the version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from earmark.schemas import ITEM_TABLES
from earmark.storage import Catalog, ShardRef

STAGES = ("analyze", "synthesize", "filter")


def check_rerun(
    cat: Catalog, stage: str, items: Sequence[str] | None, version: str | None, configured: Sequence[str]
) -> tuple[str, list[str]]:
    """The base version and item types of a re-run, or a ValueError saying what is wrong with the request
    (no Prefect needed: the CLI checks before it starts any)."""
    if stage not in STAGES:
        raise ValueError(
            f"unknown stage {stage!r}; re-run one of {', '.join(STAGES)} (ingest needs the audio: use `earmark build`)"
        )
    versions = cat.versions()
    base = version or (versions[-1] if versions else None)
    if base is None or base not in versions:
        raise ValueError(
            f"dataset {cat.dataset!r} has no version {base!r} to re-run from (versions: {', '.join(versions) or 'none'});"
            " run `earmark build` first"
        )
    chosen = list(items or configured)
    bad = set(chosen) - set(ITEM_TABLES)
    if bad:
        raise ValueError(f"unknown item type(s) {', '.join(sorted(bad))}; use {', '.join(ITEM_TABLES)}")
    if stage != "synthesize" and chosen != list(configured):
        raise ValueError("--items only applies to --stage synthesize")
    return base, chosen


NOT_EXPERTS = {
    "clips",
    "quarantine",
    "evidence",
    "qc",
    "claims",
    "rejections",
    "reviews",
    "exports",
    "scores",
}  # and the item tables (`ITEM_TABLES`, read when used: an item type may register later)


@dataclass
class VersionGraph:
    """A version's shards, by table (`shards`), and aligned with its clip shards (the other fields)."""

    shards: dict[str, list[str]]
    clip_refs: list[ShardRef]
    experts: dict[str, list[ShardRef]] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)
    items: dict[str, list[ShardRef]] = field(default_factory=dict)


def _aligned(cat: Catalog, table: str, keys: Sequence[str], anchors: Sequence[str]) -> list[str]:
    """Per anchor key (a clip shard, an evidence shard): the shard of `table` computed from it, or ""."""
    found: dict[str, str] = {}
    for key, inputs in cat.shard_inputs(table, keys).items():
        for anchor in set(anchors) & set(inputs):
            found[anchor] = key
    return [found.get(a, "") for a in anchors]


def version_graph(cat: Catalog, version: str) -> VersionGraph:
    shards = cat.version_shards(version)
    clip_keys = shards.get("clips", [])
    g = VersionGraph(shards, [ShardRef(k, ("clips", "quarantine")) for k in clip_keys])
    for table in (t for t in shards if t not in NOT_EXPERTS and t not in ITEM_TABLES):
        keys = _aligned(cat, table, shards[table], clip_keys)
        if all(keys):
            g.experts[table] = [ShardRef(k, (table,)) for k in keys]
    g.evidence = _aligned(cat, "evidence", shards.get("evidence", []), clip_keys)
    for item in ITEM_TABLES:
        keys = _aligned(cat, item, shards.get(item, []), g.evidence)
        if keys and all(keys):
            g.items[item] = [ShardRef(k, (item, "rejections")) for k in keys]
    return g


def filter_inputs(
    clip_refs: Sequence[ShardRef],
    experts: Mapping[str, Sequence[ShardRef]],
    evidence: Sequence[ShardRef | str],
    items: Mapping[str, Sequence[ShardRef]],
) -> list[dict]:
    """Per clip shard, what its qc shard reads: item shards (and their rejections), evidence, clips, asr."""
    out = []
    for i, clip in enumerate(clip_refs):
        item_keys = {t: [refs[i].key] for t, refs in items.items()}
        ev = evidence[i].key if isinstance(evidence[i], ShardRef) else evidence[i]
        inputs: dict[str, list[str]] = {
            **item_keys,
            "rejections": sorted({k[0] for k in item_keys.values()}),
            "evidence": [ev] if ev else [],
            "clips": [clip.key],
        }
        for table in ("asr", "asr_check", "yamnet"):
            if table in experts:
                inputs[table] = [experts[table][i].key]
        out.append(inputs)
    return out


def version_tables(
    g: VersionGraph,
    experts: Mapping[str, Sequence[ShardRef]],
    evidence: Sequence[str],
    items: Mapping[str, Sequence[ShardRef]],
    qc: Sequence[str],
    claims: Sequence[str] = (),
) -> dict[str, list[str]]:
    """The shard set of a re-run's version: the base version's, with the re-run stages' shards replaced."""
    tables = {t: list(keys) for t, keys in g.shards.items()}
    tables.update({name: [r.key for r in refs] for name, refs in experts.items()})
    tables["evidence"] = list(evidence)
    tables.update({item: [r.key for r in refs] for item, refs in items.items()})
    tables["rejections"] = sorted({r.key for refs in items.values() for r in refs})
    tables["qc"] = list(qc)
    tables["claims"] = list(claims)
    return tables
