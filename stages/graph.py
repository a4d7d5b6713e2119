"""The stage graph: the stages of a build in order, what each reads and writes, where a re-run may start, and how
a version's tables are assembled from the stages' shards.

`earmark build` runs the stages from ingest up to `--until` (`plan_build`), `earmark rerun` from the re-run stage
to publish over a published version's shards (`plan_rerun`, `VersionGraph`); both assemble the version's table
map with `version_tables` and publish it. Adding a stage is a row of GRAPH, a stage module under stages/ and a
sub-flow under flows/ that the build and rerun flows call where the plan says it runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from earmark.schemas import ITEM_TABLES

if TYPE_CHECKING:  # the CLI reads UNTIL and RERUN for its choices: no DuckDB at its start
    from earmark.core.config import Config
    from earmark.storage import Catalog, ShardRef

EXPERTS, ITEMS = "<experts>", "<items>"  # the expert tables (one per expert) and the item tables (one per type)


@dataclass(frozen=True)
class Stage:
    """One stage: what it reads and writes (tables, or the EXPERTS / ITEMS groups), whether a re-run may start
    at it (its inputs are all in a published version), and whether it asks the LLM (a preflight comes first)."""

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    rerun: bool = False
    llm: bool = False
    until: bool = True  # a build may stop after it (`--until`)


GRAPH: tuple[Stage, ...] = (
    Stage("ingest", reads=(), writes=("clips", "quarantine")),
    Stage("analyze", reads=("clips",), writes=(EXPERTS,), rerun=True),
    Stage("synthesize", reads=("clips", EXPERTS), writes=("evidence", ITEMS, "rejections"), rerun=True, llm=True),
    Stage(
        "filter",
        reads=(ITEMS, "rejections", "evidence", "clips", "asr", "asr_check", "yamnet"),
        writes=("qc", "claims"),
        rerun=True,
    ),
    Stage("review", reads=(ITEMS, "qc"), writes=("reviews",), until=False),  # only with [review] mode != "off"
    Stage(
        "publish", reads=("clips", "quarantine", EXPERTS, "evidence", ITEMS, "rejections", "qc", "claims"), writes=()
    ),
)
STAGES = {s.name: s for s in GRAPH}
UNTIL = tuple(s.name for s in GRAPH if s.until)  # `earmark build --until` choices
RERUN = tuple(s.name for s in GRAPH if s.rerun)  # `earmark rerun --stage` choices
FILTER_EXPERTS = tuple(t for t in STAGES["filter"].reads if t not in (ITEMS, "rejections", "evidence", "clips"))
# tables of a version written by no expert: the stages' own outputs, and what review and publish add
NOT_EXPERTS = frozenset(
    {t for s in GRAPH for t in s.writes if t not in (EXPERTS, ITEMS)} | {"reviews", "exports", "scores"}
)


@dataclass(frozen=True)
class Plan:
    """The stages one run runs, in graph order."""

    stages: tuple[str, ...]

    def runs(self, name: str) -> bool:
        if name not in STAGES:
            raise KeyError(f"no stage {name!r} in the stage graph")
        return name in self.stages

    @property
    def llm(self) -> bool:
        """Whether a stage of the plan asks the LLM (the build checks the endpoint first)."""
        return any(STAGES[s].llm for s in self.stages)


def _between(start: str, until: str, review: bool) -> Plan:
    """The stages from `start` to `until`, review after filter where `review`, and publish last."""
    names = [s.name for s in GRAPH if s.name != "review"]
    chosen = names[names.index(start) : names.index(until) + 1]
    if review and "filter" in chosen:  # review needs the QC verdicts, and comes before publish
        chosen.insert(chosen.index("filter") + 1, "review")
    if "publish" not in chosen:
        chosen.append("publish")
    return Plan(tuple(chosen))


def plan_build(cfg: Config, until: str = "publish") -> Plan:
    """The stages `earmark build --until UNTIL` runs (publish last, always: a version of the tables made so far),
    or a ValueError for a build that cannot run as configured."""
    if until not in UNTIL:
        raise ValueError(f"--until must be one of {', '.join(UNTIL)}, got {until!r}")
    plan = _between("ingest", until, cfg.review.mode != "off")
    if cfg.analyze.only and plan.runs("synthesize"):
        raise ValueError(
            f"[analyze] only = {cfg.analyze.only}: synthesis needs every expert's evidence; "
            "use --until analyze with a subset of experts, or drop --experts"
        )
    if cfg.filter.margin_backend == "yamnet" and not cfg.analyze.yamnet and plan.runs("filter"):
        raise ValueError(
            'filter.margin_backend = "yamnet" compares captions with YAMNet\'s scores, and analyze.yamnet = false '
            'leaves them out: set analyze.yamnet = true, or filter.margin_backend = "evidence"'
        )
    return plan


def plan_rerun(stage: str) -> Plan:
    """The stages a re-run from `stage` runs: it and every stage after it but review (decisions stored in the
    catalog are applied by publish), or a ValueError naming the stages a re-run may start at."""
    if stage not in RERUN:
        raise ValueError(
            f"unknown stage {stage!r}; re-run one of {', '.join(RERUN)} (ingest needs the audio: use `earmark build`)"
        )
    return _between(stage, "publish", review=False)


def check_rerun(
    cat: Catalog, stage: str, items: Sequence[str] | None, version: str | None, configured: Sequence[str]
) -> tuple[str, list[str]]:
    """The base version and item types of a re-run, or a ValueError saying what is wrong with the request
    (no Prefect needed: the CLI checks before it starts any)."""
    plan_rerun(stage)
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
    """The graph a build of `version` had, from the catalog's shard lineage: per clip shard, the expert shards
    computed from it, the evidence shard over them, and the item shards over that evidence."""
    from earmark.storage import ShardRef

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
    """Per clip shard, what its qc shard reads (the filter stage's `reads`): item shards (and their rejections),
    evidence, clips, and the experts filter reads."""
    out = []
    for i, clip in enumerate(clip_refs):
        item_keys = {t: [refs[i].key] for t, refs in items.items()}
        ev = evidence[i] if isinstance(evidence[i], str) else evidence[i].key
        inputs: dict[str, list[str]] = {
            **item_keys,
            "rejections": sorted({k[0] for k in item_keys.values()}),
            "evidence": [ev] if ev else [],
            "clips": [clip.key],
        }
        for table in FILTER_EXPERTS:
            if table in experts:
                inputs[table] = [experts[table][i].key]
        out.append(inputs)
    return out


def _keys(refs: Sequence[ShardRef], table: str) -> list[str]:
    return [r.key for r in refs if table in r.tables]


def version_tables(
    base: Mapping[str, Sequence[str]],
    *,
    clips: Sequence[ShardRef] | None = None,
    experts: Mapping[str, Sequence[ShardRef]] | None = None,
    evidence: Sequence[str] | None = None,
    items: Mapping[str, Sequence[ShardRef]] | None = None,
    qc: Sequence[ShardRef] | None = None,
) -> dict[str, list[str]]:
    """The shard set of a new version: `base`'s (a published version's shards, or {} for a build), with the
    tables of the stages that ran replaced (None: not run, the base's stand). One shard may hold several tables
    (an ingest shard its clips and quarantine, an item shard its type's rejections, a qc shard the claims)."""
    tables = {t: list(keys) for t, keys in base.items()}
    if clips is not None:
        tables.update(clips=_keys(clips, "clips"), quarantine=_keys(clips, "quarantine"))
    tables.update({name: _keys(refs, name) for name, refs in (experts or {}).items()})
    if evidence is not None:
        tables["evidence"] = list(evidence)
    if items is not None:
        tables.update({item: _keys(refs, item) for item, refs in items.items()})
        tables["rejections"] = sorted({k for refs in items.values() for k in _keys(refs, "rejections")})
    if qc is not None:
        tables.update(qc=_keys(qc, "qc"), claims=_keys(qc, "claims"))
    return tables
