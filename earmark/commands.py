"""What each `earmark` command does (the parser is earmark.cli)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from earmark.config import Config, load_config


def _config(args: argparse.Namespace, dataset_default: str, **extra: Any) -> Config:
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
        **extra,
    }
    cfg = load_config(args.config, overrides)
    if args.dataset is None and "dataset" not in cfg.model_fields_set:
        cfg = cfg.model_copy(update={"dataset": dataset_default})
    return cfg


def _print_table(cat, title: str, sql: str) -> None:
    rows = cat.query(sql)
    print(f"\n{title}\n  $ {sql}")
    for row in rows:
        print("   ", " | ".join("" if v is None else str(v) for v in row))
    if not rows:
        print("    (no rows)")


def summarize(cfg: Config, result: dict[str, Any]) -> None:
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
    _print_table(cat, "Clips per domain:", "SELECT domain, count(*) AS clips FROM domain GROUP BY 1 ORDER BY 1")
    _print_table(
        cat,
        "Captions per clip (6 kinds x 3 references):",
        "SELECT n, count(*) AS clips FROM (SELECT clip_id, count(*) AS n FROM captions GROUP BY 1) GROUP BY 1 ORDER BY 1",
    )
    _print_table(
        cat,
        "QA pairs per clip:",
        "SELECT n, count(*) AS clips FROM (SELECT clip_id, count(*) AS n FROM qa GROUP BY 1) GROUP BY 1 ORDER BY 1",
    )
    _print_table(cat, "Quarantine:", "SELECT source_path, reason FROM quarantine ORDER BY 1")
    _print_table(
        cat,
        "QC rejections by check:",
        'SELECT item_table, "check", count(*) FROM qc WHERE NOT keep GROUP BY 1, 2 ORDER BY 1, 2',
    )
    _print_table(
        cat,
        "Example captions:",
        "SELECT c.domain, c.kind, c.text FROM captions c JOIN (SELECT clip_id FROM domain WHERE domain IN "
        "('SMA', 'S00') ORDER BY clip_id LIMIT 1) d USING (clip_id) WHERE ref_index = 0 ORDER BY kind",
    )
    _print_table(
        cat, "Example QA:", "SELECT domain, category, question, answer FROM qa ORDER BY clip_id, qa_index LIMIT 3"
    )


def _preflight(cfg: Config) -> None:
    """Construct the profile's experts now: a paper backend whose weights or package are missing fails
    here, naming the model and where to put it, before ingest spends any time."""
    from earmark.experts import build_experts

    build_experts(cfg.analyze)


def cmd_build(args: argparse.Namespace) -> int:
    from earmark.flows.build import run_build
    from earmark.stages.ingest import discover

    cfg = _config(args, "default", inputs=[str(p) for p in args.inputs])
    if not discover(cfg.inputs):  # fail before any flow starts, naming the inputs
        raise FileNotFoundError(f"no audio files found under {', '.join(map(str, cfg.inputs))}")
    _preflight(cfg)
    result = run_build(cfg, args.until)
    summarize(cfg, result)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from earmark.corpus import generate_corpus, load_manifest
    from earmark.flows.build import run_build

    cfg = _config(args, "demo")
    _preflight(cfg)
    corpus_dir = cfg.data_root / f"{cfg.dataset}-input"
    t0 = time.perf_counter()
    stamp = corpus_dir / ".earmark-demo.json"
    params = {"per_domain": args.per_domain, "seed": args.seed}
    # Reuse an existing corpus: OGG encoding is not byte-reproducible, and new bytes would (rightly)
    # make ingest recompute its shard on every demo run.
    if stamp.exists() and json.loads(stamp.read_text()) == params:
        items = load_manifest(corpus_dir)
        print(f"sample corpus: {len(items)} files in {corpus_dir} (reused)")
    else:
        items = generate_corpus(corpus_dir, per_domain=args.per_domain, seed=args.seed)
        stamp.write_text(json.dumps(params))
        print(f"sample corpus: {len(items)} files in {corpus_dir} ({time.perf_counter() - t0:.1f} s)")
    cfg = cfg.model_copy(update={"inputs": [corpus_dir]})
    result = run_build(cfg)
    summarize(cfg, result)
    print(f"\ntotal demo wall time {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_rerun(args: argparse.Namespace) -> int:
    from earmark.flows.rerun import run_rerun

    overrides: dict[str, Any] = {}
    if args.prompt_dir:
        overrides["synthesize.prompt_dir"] = str(args.prompt_dir)
    cfg = _config(args, "default", **overrides)
    items = [i.strip() for i in args.items.split(",") if i.strip()] if args.items else None
    out = run_rerun(cfg, args.stage, items, args.version)
    llm = out.get("llm") or {}
    print(out["diff_markdown"])
    print(
        f"version {out['version']} ({'new' if out['created'] else 'unchanged'}) from {out['base']}; "
        f"LLM calls {llm.get('calls', 0)}, cache hits {llm.get('cache_hits', 0)}; diff stored in {out['diff_report']}"
    )
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from earmark.flows.evaluate import evaluate_flow

    cfg = _config(args, "default")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    out = evaluate_flow(
        cfg,
        args.predictions,
        args.subtask,
        args.model_name,
        args.version,
        args.metric,
        args.device,
        endpoint=args.endpoint,
        model_id=args.model_id,
        tasks=tasks,
        judge=args.judge,
        sbert=args.sbert,
        error_checker=args.error_checker,
    )
    print(out["markdown"])
    print(f"report: {out['report']}; per-sample scores: table `scores`, eval_id {out['eval_id']}")
    return 0


def cmd_mecat_score(args: argparse.Namespace) -> int:
    """Score prediction files against a MECAT reference directory, without a dataset or Prefect."""
    from earmark.metrics.error_checker import load_error_checker
    from earmark.metrics.mecat_eval import evaluate_mecat, wheel_reference_root, write_details
    from earmark.metrics.refcache import ReferenceCache
    from earmark.metrics.similarity import load_sbert, resolve_sbert
    from earmark.stages.evaluate import MECAT_SUBTASKS, load_predictions, parse_metrics, prediction_files

    metrics = parse_metrics(args.metric)
    if metrics == ["similarity"]:
        raise ValueError("mecat-score needs MECAT metrics: --metric date, fense, bleu (comma-separated)")
    root = wheel_reference_root() if args.references == "mecat-test" else Path(args.references)
    files = prediction_files(args.predictions, args.subtask, MECAT_SUBTASKS)
    preds = {sub: load_predictions(p) for sub, p in files.items()}
    sbert, notes = None, []
    if {"date", "fense"} & set(metrics):
        path, name = resolve_sbert(args.sbert)
        sbert = load_sbert(path)
        checker, note = load_error_checker(args.error_checker, args.device or "cpu")
        notes = [f"Sentence embeddings: {name} ({path}).", note + "."]
    cache = ReferenceCache(args.reference_cache) if args.reference_cache else None
    report, groups = evaluate_mecat(
        preds,
        root,
        metrics,
        sbert=sbert,
        device=args.device,
        error_checker=checker if sbert is not None else None,
        reference_cache=cache,
    )
    print(report.markdown(f"{args.model_name}: MECAT {', '.join(metrics)}"))
    print("\n".join(notes))
    if args.details:
        print(f"per-sample details: {write_details(groups, args.details)}")
    return 0


def cmd_review(args: argparse.Namespace) -> int:
    """Human verification through a sheet: export the items to review, or import the decisions."""
    from earmark.storage import open_catalog

    cfg = _config(args, "default")
    if args.review_command == "import":
        from earmark.flows.review import review_import_flow

        out = review_import_flow(cfg, args.sheet, reviewer=args.reviewer, version=args.version)
        print(
            f"{out['decisions']} decisions stored; version {out['version']} "
            f"({'new' if out['created'] else 'unchanged'}), exports in {out['exports']}"
        )
        return 0
    from earmark.stages.review import export_sheet

    cat = open_catalog(cfg)
    version = args.version or cat.latest_version()
    if version is None:
        raise ValueError(f"dataset {cfg.dataset!r} has no published version to review; run build first")
    tables = [t.strip() for t in args.tables.split(",")] if args.tables else cfg.review.tables
    todo, sheet = export_sheet(
        cat,
        version,
        args.out,
        tables=tables,
        scope="all" if args.all else cfg.review.scope,
        max_items=args.max_items or cfg.review.max_items,
        include_decided=args.include_decided,
    )
    print(
        f"{len(todo)} items of {version} to review in {sheet}: fill in decision (accept / reject / rewrite) and "
        f"new_text, then run: earmark review import -d {cfg.dataset} {sheet}"
    )
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from earmark.storage import open_catalog

    cfg = _config(args, "default")
    cat = open_catalog(cfg)
    if args.print_init:
        print(cat.init_sql(), end="")
        return 0
    if not args.query:
        raise ValueError(
            "earmark sql: give a query, e.g. earmark sql -d demo 'FROM captions LIMIT 5' (or --print-init)"
        )
    cat.refresh_views()  # views of a version whose publisher died before making them
    cols, rows = cat.cursor_query(args.query)
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join("" if v is None else str(v) for v in row))
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from earmark.storage.migrate import migrate_legacy

    cfg = _config(args, "default")
    report = migrate_legacy(cfg)
    print(report)
    return 0


def cmd_corpus(args: argparse.Namespace) -> int:
    from earmark.corpus import generate_corpus

    items = generate_corpus(args.out_dir, per_domain=args.per_domain, seed=args.seed)
    print(f"{len(items)} files written to {args.out_dir}")
    return 0


def cmd_llm_serve(args: argparse.Namespace) -> int:
    from earmark.llm import LocalLLMServer

    with LocalLLMServer(args.model, port=args.port) as srv:
        print(f"serving {srv.model_id} at {srv.base_url} (Ctrl-C to stop)", flush=True)
        try:
            while srv.is_running():
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0
