"""The commands that run flows over a dataset: build, demo, rerun, evaluate (and mecat-score, which scores files)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from earmark.cli.commands.common import command_config, prefect_for, preflight_llm, progress_bars, summarize, writing


def cmd_build(args: argparse.Namespace) -> int:
    from earmark.stages.graph import plan_build
    from earmark.stages.ingest import discover, nothing_to_read
    from earmark.storage.catalog import check_dataset_name

    cfg = command_config(args, "default", inputs=[str(p) for p in args.inputs])
    check_dataset_name(cfg.dataset)
    plan_build(cfg, args.until)
    found = discover(cfg.inputs, cfg.ingest.allowed_roots)
    if not found.files:  # fail before any flow starts, naming the inputs
        raise FileNotFoundError(nothing_to_read(cfg.inputs, found))
    preflight_llm(cfg)
    with writing(cfg, "build"), prefect_for(cfg, "earmark.flows.build"), progress_bars(args):
        from earmark.flows.build import run_build

        result = run_build(cfg, args.until)
    summarize(cfg, result, found)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from earmark.corpus import generate_corpus, load_manifest
    from earmark.storage.catalog import check_dataset_name

    cfg = command_config(args, "demo")
    check_dataset_name(cfg.dataset)
    preflight_llm(cfg)
    corpus_dir = cfg.data_root / f"{cfg.dataset}-input"
    t0 = time.perf_counter()
    stamp = corpus_dir / ".earmark-demo.json"
    params = {"per_domain": args.per_domain, "seed": args.seed}
    with writing(cfg, "demo"):  # before the corpus: a second demo of the dataset must not rewrite it meanwhile
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
        with prefect_for(cfg, "earmark.flows.build"), progress_bars(args):
            from earmark.flows.build import run_build

            result = run_build(cfg)
    summarize(cfg, result)
    print(f"\ntotal demo wall time {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_rerun(args: argparse.Namespace) -> int:
    from earmark.stages.graph import check_rerun
    from earmark.storage import open_catalog

    overrides: dict[str, Any] = {}
    if args.prompt_dir:
        overrides["synthesize.prompt_dir"] = str(args.prompt_dir)
    cfg = command_config(args, "default", **overrides)
    items = [i.strip() for i in args.items.split(",") if i.strip()] if args.items else None
    check_rerun(open_catalog(cfg, create=False), args.stage, items, args.version, cfg.synthesize.items)
    with writing(cfg, "rerun", create=False), prefect_for(cfg, "earmark.flows.rerun"), progress_bars(args):
        from earmark.flows.rerun import run_rerun

        out = run_rerun(cfg, args.stage, items, args.version)
    llm = out.get("llm") or {}
    print(out["diff_markdown"])
    print(
        f"version {out['version']} ({'new' if out['created'] else 'unchanged'}) from {out['base']}; "
        f"LLM calls {llm.get('calls', 0)}, cache hits {llm.get('cache_hits', 0)}; diff stored in {out['diff_report']}"
    )
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from earmark.queries.versions import resolve_version
    from earmark.stages.evaluate.predictions import parse_metrics
    from earmark.storage import open_catalog

    cfg = command_config(args, "default")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    version = resolve_version(open_catalog(cfg, create=False), args.version)  # the dataset and version exist
    parse_metrics(args.metric)
    if args.predictions is not None and not args.predictions.exists():
        raise FileNotFoundError(f"predictions {args.predictions} not found")
    with prefect_for(cfg, "earmark.flows.evaluate"), progress_bars(args):
        from earmark.flows.evaluate import evaluate_flow

        out = evaluate_flow.with_options(flow_run_name=f"evaluate · {cfg.dataset}")(
            cfg,
            args.predictions,
            args.subtask,
            args.model_name,
            version,
            args.metric,
            args.device,
            endpoint=args.endpoint,
            model_id=args.model_id,
            tasks=tasks,
            judge=args.judge,
            sbert=args.sbert,
            error_checker=args.error_checker,
            strict=args.strict,
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
    from earmark.stages.evaluate.predictions import (
        MECAT_SUBTASKS,
        load_predictions,
        malformed_message,
        parse_metrics,
        prediction_files,
        prediction_problems,
    )

    metrics = parse_metrics(args.metric)
    if metrics == ["similarity"]:
        raise ValueError("mecat-score needs MECAT metrics: --metric date, fense, bleu (comma-separated)")
    root = wheel_reference_root() if args.references == "mecat-test" else Path(args.references)
    files = prediction_files(args.predictions, args.subtask, MECAT_SUBTASKS)
    problems = prediction_problems(list(files.values()))
    if problems:
        if args.strict:
            raise ValueError(malformed_message(problems))
        print(f"warning: {malformed_message(problems)}\n(skipped; --strict makes them an error)", file=sys.stderr)
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
