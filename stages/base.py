"""What a stage is: a pure function over one shard, described once.

A `StageSpec` says what a stage is — name, version, the tables it reads and writes, and everything else its
output depends on: the sha of the prompt/phrase files and reply schemas it renders from, the model, the
config subset. A `ShardJob` binds a spec to one shard's inputs (the keys of the shards it reads, or source
identities for ingest) and to the stage function (records in → records out). From these two, and only
here, come the shard key and the shard's catalog metadata (`plan`), and `run_job` does key → catalog
lookup → run → write → register. The Prefect task in earmark.flows.shards is a thin wrapper around it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from earmark import prompts
from earmark.llm import shard_usage
from earmark.schemas import TABLES, Record, arrow_schema, from_table, to_table
from earmark.storage import Catalog, ShardMeta, ShardRef, shard_key

log = logging.getLogger("earmark.stages")


@dataclass(frozen=True)
class StageSpec:
    """A stage, described once: what it reads and writes and what its output depends on."""

    name: str  # "ingest", "analyze:asr", "evidence", "synthesize:captions", "filter", …
    version: str  # bump when the stage's logic changes what it writes
    writes: tuple[str, ...]
    reads: tuple[str, ...] = ()
    prompt_files: tuple[str, ...] = ()  # every prompt/phrase file it renders from (reading another one fails)
    prompt_sha: str | None = None  # earmark.prompts.request_sha of those files and the reply schemas
    model: str | None = None  # model / backend identity
    config: Mapping[str, Any] = field(default_factory=dict)  # the settings that change its output
    prompt_dir: Path | None = None  # where its prompt files are read (None: earmark.prompts'); keyed by prompt_sha

    def plan(self, inputs: Sequence[str]) -> tuple[str, ShardMeta]:
        """The shard key and catalog metadata for one shard with these input identities."""
        inputs = sorted(set(inputs))
        config = dict(self.config)
        key = shard_key(self.name, self.version, inputs, prompt_sha=self.prompt_sha, model=self.model, config=config)
        meta = ShardMeta(
            stage=self.name,
            stage_version=self.version,
            inputs=inputs,
            prompt_sha=self.prompt_sha,
            model=self.model,
            config=config,
        )
        return key, meta


@dataclass(frozen=True)
class ItemType:
    """One kind of benchmark item, described once: its table and record, how the synthesize stage writes it
    and what that costs, and how the filter stage and review judge it. Registered in
    earmark.stages.synthesize.ITEM_TYPES (one module each under `stages/synthesize/item_types/`); the stages
    take them from there through the flows, so `filter` need not import `synthesize`.

    Callables take plain arguments: `write(ev, s, premises)` writes one clip's items (an `Outcome`; `s` is the
    shard's `Synth`, whose settings say LLM or rule); `max_requests(cfg)` bounds a clip's first-attempt LLM
    requests before its evidence is read (`cfg`: the resolved `SynthesizeSection`), `planned_requests(ev, s,
    premises)` counts them exactly; each check of `checks` is `check(item, FilterSection) -> (keep, reason,
    score)`; `audit(item, ev, min_confidence)` is the claim audit's `(keep, reason, supported share, claim
    rows)`; `budget_group(item)` is `(rank inside the kind, group name)` for the fact budget."""

    table: str
    record: type[Record]
    prompts: tuple[str, ...]  # prompt / phrase files its requests render from (the shared ones aside)
    reply_schemas: Callable[[], list[dict[str, Any]]]  # the JSON schemas of its replies (part of the stage key)
    write: Callable[..., Any]
    max_requests: Callable[[Any], int]
    planned_requests: Callable[..., int]
    checks: Mapping[str, Callable[[Any, Any], tuple[bool, str | None, float | None]]]
    audit: Callable[..., tuple[bool, str | None, float, list[Any]]]
    texts: tuple[str, ...]  # its text fields: transcript reuse and unfilled template slots are looked for there
    main_text: str  # the field compared across clips (`duplicate_across_clips`) and rewritten in review
    budget_rank: int  # the fact budget serves kinds in this order (captions 0, entailment 1, qa 2, …)
    budget_group: Callable[[Any], tuple[int, str]]
    context: tuple[str, ...] = ()  # fields a reviewer sees beside the text
    label: str | None = None  # the field the browser view shows as the item's label (a caption's kind, …)
    reads: tuple[str, ...] = ("evidence",)  # the tables its stage reads (entailment: the captions, its premises)
    # `validate(data, kind, ev, s, seen)`: one model-written reply checked as every strategy checks it (the
    # focused writer and the joint strategy), the reply or a ValueError naming what to fix
    validate: Callable[..., Any] | None = None


class Inputs:
    """The records a shard job reads, by table, loaded from the catalog on first use."""

    def __init__(
        self,
        cat: Catalog | None,
        keys: Mapping[str, Sequence[str]],
        records: Mapping[str, Sequence[Record]] | None = None,
    ) -> None:
        self.cat, self.keys = cat, {t: list(k) for t, k in keys.items()}
        self._records: dict[str, list[Record]] = {t: list(r) for t, r in (records or {}).items()}

    @classmethod
    def of(cls, **records: Sequence[Record]) -> Inputs:
        """In-memory inputs (tests, benchmarks): table name → records."""
        return cls(None, {t: [] for t in records}, records)

    def __call__(self, table: str) -> list[Any]:
        if table not in self._records:
            keys = self.keys.get(table, [])
            if self.cat is None or not keys:
                self._records[table] = []
            else:
                self._records[table] = from_table(TABLES[table], self.cat.read(table, keys))
        return self._records[table]

    def values(self, table: str, *columns: str) -> list[tuple]:
        """Only these columns of a table's rows (e.g. the clips' source paths without their audio)."""
        if table in self._records or self.cat is None or not self.keys.get(table):
            return [tuple(getattr(r, c) for c in columns) for r in self(table)]
        data = self.cat.read(table, self.keys[table], columns).to_pydict()
        return list(zip(*(data[c] for c in columns)))

    def tables(self) -> list[str]:
        return sorted(set(self.keys) | set(self._records))

    def arrow(self, table: str) -> pa.Table:
        """One table's input shards as Arrow (its empty table where it has none)."""
        if self.cat is None or not self.keys.get(table):
            return arrow_schema(TABLES[table]).empty_table()
        return self.cat.read(table, self.keys[table])

    def sql(self, schema: str, tables: Sequence[str]) -> InputTables:
        """These input tables as SQL views `<schema>.<table>` (InputTables)."""
        return InputTables(self, schema, tables)


class InputTables:
    """A job's input shards as SQL: each table a view `<schema>.<table>` over exactly its input shards, in an
    in-memory DuckDB, so a stage that reads with SQL (publish's exports and card) reads what it declares, in the
    statements the version views would answer (`<schema>` = the version)."""

    def __init__(self, inputs: Inputs, schema: str, tables: Sequence[str]) -> None:
        import duckdb

        self.con = duckdb.connect()
        self.con.execute(f'CREATE SCHEMA "{schema}"')
        for table in tables:
            self.con.register(f"_input_{table}", inputs.arrow(table))
            self.con.execute(f'CREATE VIEW "{schema}".{table} AS SELECT * FROM _input_{table}')

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        return self.con.execute(sql, params or []).fetchall()

    def cursor_query(self, sql: str, params: Sequence[Any] | None = None) -> tuple[list[str], list[tuple]]:
        cur = self.con.execute(sql, params or [])
        return [d[0] for d in cur.description or []], cur.fetchall()


StageFn = Callable[[Inputs], Mapping[str, Sequence[Record]]]


@dataclass
class ShardJob:
    """One shard of one stage: its spec, what it reads, and the function that computes it."""

    spec: StageSpec
    fn: StageFn
    inputs: Mapping[str, Sequence[str]] = field(default_factory=dict)  # table → shard keys read
    sources: Sequence[str] = ()  # identities that are not shards (ingest: "path:sha256")
    label: str = ""  # shown in task names, e.g. "shard-0003"
    gpu: bool = False  # runs a model on a GPU: holds a slot of the `gpu` limit while it computes (not in the key)
    gpu_sections: bool = False  # with gpu: holds it only inside the expert's gpu_section()s (not in the key)
    # The flow found no catalog row for this key when it planned the stage (one lookup for all its shards), so
    # the task skips its own lookup. One build holds the dataset's lease, so nobody registers the key meanwhile;
    # had someone, the shard would be computed again and its rows replaced (Catalog.write_shard). Not in the key.
    unregistered: bool = False

    def plan(self) -> tuple[str, ShardMeta]:
        return self.spec.plan([k for keys in self.inputs.values() for k in keys] + list(self.sources))

    @property
    def task_name(self) -> str:
        return "/".join(p for p in (*self.spec.name.split(":"), self.label) if p)


def run_job(
    cat: Catalog,
    job: ShardJob,
    run_id: str | None,
    logger: logging.Logger | logging.LoggerAdapter = log,
    slot: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> ShardRef:
    """The registered shard for the job's key, or compute, write and register it (every stage goes here).
    `slot()` is entered around the stage function alone (reading its inputs and computing), not around the
    lookup, the write or the registration: the caller's limit on concurrent computation (a compute or GPU
    slot) is free again while the shard is written."""
    key, meta = job.plan()
    writes = job.spec.writes
    if not job.unregistered and cat.has_shard(key, writes):
        logger.info("%s: shard %s already in the catalog, skipped", job.task_name, key)
        return ShardRef(key=key, tables=writes, rows=cat.shard_rows(key, writes), skipped=True, task=job.task_name)
    with slot():  # the seconds inside the stage function leave out the wait for the slot
        started_at, t0 = time.time(), time.perf_counter()
        with prompts.only(job.spec.prompt_files, job.spec.prompt_dir), shard_usage() as usage:
            out = job.fn(Inputs(cat, job.inputs))
        seconds = time.perf_counter() - t0
    unknown = set(out) - set(writes)
    if unknown:
        raise RuntimeError(f"stage {job.spec.name} returned tables {sorted(unknown)} it does not declare")
    tables = {t: to_table(TABLES[t], list(out.get(t, ()))) for t in writes}
    ref = cat.write_shard(key, tables, meta, run_id)
    logger.info("%s: shard %s computed, %d rows in %.1f s", job.task_name, key, ref.rows, time.perf_counter() - t0)
    llm = usage.totals()
    return dataclasses.replace(
        ref, seconds=seconds, started_at=started_at, task=job.task_name, llm_usage=llm if any(llm.values()) else None
    )


def stored(cat: Catalog, ref: ShardRef, table: str) -> list[Any]:
    """The records one registered shard holds in `table`."""
    return from_table(TABLES[table], cat.read(table, [ref.key]))
