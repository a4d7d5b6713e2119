"""What the commands share: the configuration from flags, Prefect and the write lease around a run, progress bars,
the LLM preflight, and the summary a build prints."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from earmark.core.config import Config, load_config


def command_config(args: argparse.Namespace, dataset_default: str, **extra: Any) -> Config:
    overrides = {
        "data_root": str(args.data_root) if getattr(args, "data_root", None) else None,
        "dataset": args.dataset,
        "llm.endpoint": getattr(args, "llm_endpoint", None),
        "llm.model": getattr(args, "llm_model", None),
        "llm.schema_mode": getattr(args, "llm_schema_mode", None),
        "ingest.files_per_shard": getattr(args, "files_per_shard", None),
        "synthesize.strategy": getattr(args, "strategy", None),
        "analyze.profile": getattr(args, "profile", None),
        "analyze.models_dir": str(args.models_dir) if getattr(args, "models_dir", None) else None,
        "analyze.only": [e.strip() for e in args.experts.split(",") if e.strip()]
        if getattr(args, "experts", None)
        else None,
        **extra,
    }
    cfg = load_config(args.config, overrides)
    if args.dataset is None and "dataset" not in cfg.model_fields_set:
        cfg = cfg.model_copy(update={"dataset": dataset_default})
    return cfg


def print_table(cat, title: str, sql: str) -> None:
    rows = cat.query(sql)
    print(f"\n{title}\n  $ {sql}")
    for row in rows:
        print("   ", " | ".join(map(cell, row)))
    if not rows:
        print("    (no rows)")


def summarize(cfg: Config, result: dict[str, Any], found: Any = None) -> None:
    """What a build made; `found` (earmark.stages.ingest.Discovery): the inputs it was given, to account for."""
    from earmark.storage import open_catalog

    cat = open_catalog(cfg)
    print("\n" + "=" * 100)
    print(f"dataset {cfg.dataset!r} version {result['version']} ({'new' if result['created'] else 'unchanged'})")
    print(f"  catalog : DuckLake {cat.location.metadata}, data {cat.location.data_path}")
    print(
        f"            query: earmark sql -d {cfg.dataset} 'FROM captions LIMIT 5'; DuckDB CLI: "
        f"earmark sql -d {cfg.dataset} --print-init > lake.sql && .venv/bin/duckdb -init lake.sql"
    )
    print(f"  shards  : {cat.root}/<table>/<key>.parquet")
    if found is not None:  # every input path took a clip or has a quarantine row below
        clipped = {p for (p,) in cat.query("SELECT DISTINCT source_path FROM clips")}
        took = sum(s.shown in clipped for s in found.sources)
        print(
            f"  inputs  : {len(found.sources)} paths seen, {took} taken (gave clips), "
            f"{len(found.sources) - took} quarantined (below); {found.skipped} skipped (hidden, or not audio by name)"
        )
    print(f"  exports : {result['exports']}")
    print(f"  stage wall time (s): {json.dumps(result['timings_s'])}")
    computed = sum(v["computed"] for v in result["shards"].values())
    skipped = sum(v["skipped"] for v in result["shards"].values())
    llm = result.get("llm") or {}
    print(f"  shards computed {computed}, skipped (already in catalog) {skipped}")
    print(
        f"  LLM HTTP calls {llm.get('calls', 0)}, cache hits {llm.get('cache_hits', 0)}, "
        f"completion tokens {llm.get('completion_tokens', 0)}, embedded server started: {llm.get('server_started')}"
    )
    print_table(cat, "Clips per domain:", "SELECT domain, count(*) AS clips FROM domain GROUP BY 1 ORDER BY 1")
    print_table(
        cat,
        "Captions per clip (at most 6 kinds x 3 references; a kind without confident facts has none, see rejections):",
        "SELECT n, count(*) AS clips FROM (SELECT clip_id, count(*) AS n FROM captions GROUP BY 1) GROUP BY 1 ORDER BY 1",
    )
    print_table(
        cat,
        "QA pairs per clip:",
        "SELECT n, count(*) AS clips FROM (SELECT clip_id, count(*) AS n FROM qa GROUP BY 1) GROUP BY 1 ORDER BY 1",
    )
    print_table(
        cat,
        "Quarantine (file | what is wrong | what to do):",
        "SELECT source_path, reason, fix FROM quarantine ORDER BY 1",
    )
    print_table(
        cat,
        "QC rejections by check:",
        'SELECT item_table, "check", count(*) FROM qc WHERE NOT keep GROUP BY 1, 2 ORDER BY 1, 2',
    )
    print_table(
        cat,
        "Example captions:",
        "SELECT c.domain, c.kind, c.text FROM captions c JOIN (SELECT clip_id FROM domain WHERE domain IN "
        "('SMA', 'S00') ORDER BY clip_id LIMIT 1) d USING (clip_id) WHERE ref_index = 0 ORDER BY kind",
    )
    print_table(
        cat, "Example QA:", "SELECT domain, category, question, answer FROM qa ORDER BY clip_id, qa_index LIMIT 3"
    )


def progress_bars(args: argparse.Namespace) -> Any:
    """Progress bars on stderr for the command's stages (earmark.core.progress), unless --no-progress or stderr is
    not a terminal."""
    from earmark.core.progress import bars

    return bars(enabled=not getattr(args, "no_progress", False))


def preflight_llm(cfg: Config) -> None:
    """Construct the profile's experts now: a paper backend whose weights or package are missing fails
    here, naming the model and where to put it, before ingest spends any time."""
    from earmark.experts import build_experts

    build_experts(cfg.analyze)


def prefect_for(cfg: Config, *flows: str) -> Any:
    """Prefect for a command that runs flows (a context manager): the configured API, else the local server
    (earmark.flows.local_server), started now if none runs; `flows` are imported meanwhile. Every check that
    needs no Prefect comes before it."""
    from earmark.flows.local_server import prefect_api

    def starting(home: Path) -> None:
        print(
            f"earmark: starting the local Prefect server (later commands reuse it; it stops after "
            f"{cfg.prefect.idle_minutes:g} idle minutes; log {home / 'server.log'})",
            file=sys.stderr,
            flush=True,
        )

    return prefect_api(cfg, preload=flows, on_start=starting)


def writing(cfg: Config, command: str, create: bool = True) -> Any:
    """The dataset's write lease for a writing command (a context manager), taken in this process before Prefect
    starts: a dataset another writer holds is refused at once with one line naming the holder and what to do
    (DatasetBusyError, exit 4), not after the server's start-up behind the flow's logged traceback. The flows
    the command runs re-enter it (storage.lease.write_lease); it is released however the command ends."""
    from earmark.storage import open_catalog
    from earmark.storage.lease import write_lease

    cat = open_catalog(cfg, create=create)
    return write_lease(cfg, cat, cat.new_run_id(), command)


def cell(value: Any) -> str:
    """A query result's value as one line of text; binary values (a clip's `audio_flac`) as their kind and size,
    never their bytes: `<FLAC 123 kB>`."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        kind = {b"fLaC": "FLAC", b"RIFF": "WAV", b"OggS": "Ogg"}.get(data[:4], "binary")
        size = f"{len(data) / 1000:.0f} kB" if len(data) >= 1000 else f"{len(data)} B"
        return f"<{kind} {size}>"
    return str(value)
