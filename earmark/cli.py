"""The `earmark` command line.

    earmark demo                       generate a sample corpus and build a benchmark from it (offline)
    earmark build INPUT... -d NAME     build a benchmark dataset from audio files/directories
    earmark evaluate -d NAME -p FILE   score predictions against the latest version (--metric date|fense|bleu)
    earmark evaluate -d NAME --endpoint URL --model-id M   ask a model (audio chat API) and score it
    earmark rerun -d NAME --stage synthesize --items entailment   re-run one stage after a prompt edit + diff
    earmark mecat-score -p PREDS --references DIR   score mecat-evaluate files against MECAT references
    earmark sql -d NAME "SELECT …"     query a dataset's catalog
    earmark review export -d NAME -o SHEET.csv   items to review (human verification) as a sheet
    earmark review import -d NAME SHEET.csv      store decisions, publish a version applying them
    earmark corpus OUT_DIR             only generate the sample corpus
    earmark llm-serve                  run the embedded LLM server in the foreground
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from earmark.config import Config, ConfigError, load_config  # noqa: E402


def _common(p: argparse.ArgumentParser, dataset_default: str | None = "default") -> None:
    p.add_argument("--config", type=Path, help="TOML config file (see README: Configuration)")
    p.add_argument("--data-root", type=Path, help="where datasets live (default: ./data)")
    p.add_argument("-d", "--dataset", default=None, help=f"dataset name (default: {dataset_default})")


def _llm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm-endpoint", help="OpenAI-compatible base URL (…/v1); default: start the embedded server")
    p.add_argument("--llm-model", help="model id (embedded: qwen2.5-coder-0.5b-instruct-q4_k_m or smollm2-135m-instruct)")
    p.add_argument("--llm-schema-mode", choices=["llama_cpp", "json_schema"],
                   help="how to ask for JSON: llama_cpp (json_object + schema) or json_schema (vLLM/OpenAI)")


def _expert_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", choices=["embedded", "paper"],
                   help="experts: embedded (offline, CPU; default) or paper (MECAT's models from --models-dir)")
    p.add_argument("--models-dir", type=Path,
                   help="paper profile weights, one directory per model id (default: $EARMARK_MODELS_DIR or "
                   "~/.cache/earmark/models)")


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
    from earmark.storage import Catalog

    cat = Catalog(cfg.data_root, cfg.dataset)
    print("\n" + "=" * 100)
    print(f"dataset {cfg.dataset!r} version {result['version']} ({'new' if result['created'] else 'unchanged'})")
    print(f"  catalog : {cat.path}    (open with: .venv/bin/duckdb {cat.path})")
    print(f"  shards  : {cat.root}/<table>/<key>.parquet")
    print(f"  exports : {result['exports']}")
    print(f"  stage wall time (s): {json.dumps(result['timings_s'])}")
    computed = sum(v["computed"] for v in result["shards"].values())
    skipped = sum(v["skipped"] for v in result["shards"].values())
    llm = result.get("llm") or {}
    print(f"  shards computed {computed}, skipped (already in catalog) {skipped}")
    print(f"  LLM HTTP calls {llm.get('calls', 0)}, cache hits {llm.get('cache_hits', 0)}, "
          f"completion tokens {llm.get('completion_tokens', 0)}, embedded server started: {llm.get('server_started')}")
    _print_table(cat, "Clips per domain:", "SELECT domain, count(*) AS clips FROM domain GROUP BY 1 ORDER BY 1")
    _print_table(cat, "Captions per clip (6 kinds x 3 references):",
                 "SELECT n, count(*) AS clips FROM (SELECT clip_id, count(*) AS n FROM captions GROUP BY 1) GROUP BY 1 ORDER BY 1")
    _print_table(cat, "QA pairs per clip:",
                 "SELECT n, count(*) AS clips FROM (SELECT clip_id, count(*) AS n FROM qa GROUP BY 1) GROUP BY 1 ORDER BY 1")
    _print_table(cat, "Quarantine:", "SELECT source_path, reason FROM quarantine ORDER BY 1")
    _print_table(cat, "QC rejections by check:",
                 "SELECT item_table, \"check\", count(*) FROM qc WHERE NOT keep GROUP BY 1, 2 ORDER BY 1, 2")
    _print_table(cat, "Example captions:",
                 "SELECT c.domain, c.kind, c.text FROM captions c JOIN (SELECT clip_id FROM domain WHERE domain IN "
                 "('SMA', 'S00') ORDER BY clip_id LIMIT 1) d USING (clip_id) WHERE ref_index = 0 ORDER BY kind")
    _print_table(cat, "Example QA:", "SELECT domain, category, question, answer FROM qa ORDER BY clip_id, qa_index LIMIT 3")


def _preflight(cfg: Config) -> None:
    """Construct the profile's experts now: a paper backend whose weights or package are missing fails
    here, naming the model and where to put it, before ingest spends any time."""
    from earmark.experts import build_experts

    build_experts(cfg.analyze)


def cmd_build(args: argparse.Namespace) -> int:
    from earmark.stages.ingest import discover
    from earmark.flows.build import run_build

    cfg = _config(args, "default", inputs=[str(p) for p in args.inputs])
    if not discover(cfg.inputs):  # fail before any flow starts, naming the inputs
        raise FileNotFoundError(f"no audio files found under {', '.join(map(str, cfg.inputs))}")
    _preflight(cfg)
    result = run_build(cfg)
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
    print(f"version {out['version']} ({'new' if out['created'] else 'unchanged'}) from {out['base']}; "
          f"LLM calls {llm.get('calls', 0)}, cache hits {llm.get('cache_hits', 0)}; diff stored in {out['diff_report']}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from earmark.flows.evaluate import evaluate_flow

    cfg = _config(args, "default")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    out = evaluate_flow(cfg, args.predictions, args.subtask, args.model_name, args.version, args.metric, args.device,
                        endpoint=args.endpoint, model_id=args.model_id, tasks=tasks, judge=args.judge,
                        sbert=args.sbert, error_checker=args.error_checker)
    print(out["markdown"])
    print(f"report: {out['report']}; per-sample scores: table `scores`, eval_id {out['eval_id']}")
    return 0


def cmd_mecat_score(args: argparse.Namespace) -> int:
    """Score prediction files against a MECAT reference directory, without a dataset or Prefect."""
    from earmark.stages.evaluate import MECAT_SUBTASKS, load_predictions, parse_metrics, prediction_files
    from earmark.metrics.error_checker import load_error_checker
    from earmark.metrics.mecat_eval import evaluate_mecat, wheel_reference_root, write_details
    from earmark.metrics.refcache import ReferenceCache
    from earmark.metrics.similarity import load_sbert, resolve_sbert

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
    report, groups = evaluate_mecat(preds, root, metrics, sbert=sbert, device=args.device,
                                    error_checker=checker if sbert is not None else None, reference_cache=cache)
    print(report.markdown(f"{args.model_name}: MECAT {', '.join(metrics)}"))
    print("\n".join(notes))
    if args.details:
        print(f"per-sample details: {write_details(groups, args.details)}")
    return 0


def cmd_review(args: argparse.Namespace) -> int:
    """Human verification through a sheet: export the items to review, or import the decisions."""
    from earmark.storage import Catalog

    cfg = _config(args, "default")
    if args.review_command == "import":
        from earmark.flows.review import review_import_flow

        out = review_import_flow(cfg, args.sheet, reviewer=args.reviewer, version=args.version)
        print(f"{out['decisions']} decisions stored; version {out['version']} "
              f"({'new' if out['created'] else 'unchanged'}), exports in {out['exports']}")
        return 0
    from earmark.stages.publish import base_shards
    from earmark.stages.review import ITEM_TABLES, review_items, write_sheet
    from earmark.flows.review import stored_decisions
    from earmark.schemas import TABLES, QCResult, from_table

    cat = Catalog(cfg.data_root, cfg.dataset)
    version = args.version or cat.latest_version()
    if version is None:
        raise ValueError(f"dataset {cfg.dataset!r} has no published version to review; run build first")
    shards = base_shards(cat, cat.version_shards(version))
    items = {t: from_table(TABLES[t], cat.read(t, shards.get(t, []))) for t in ITEM_TABLES}
    tables = [t.strip() for t in args.tables.split(",")] if args.tables else cfg.review.tables
    todo = review_items(items, from_table(QCResult, cat.read("qc", shards.get("qc", []))), stored_decisions(cat),
                        tables=tables, scope="all" if args.all else cfg.review.scope,
                        max_items=args.max_items or cfg.review.max_items, include_decided=args.include_decided)
    sheet = write_sheet(todo, args.out)
    print(f"{len(todo)} items of {version} to review in {sheet}: fill in decision (accept / reject / rewrite) and "
          f"new_text, then run: earmark review import -d {cfg.dataset} {sheet}")
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from earmark.storage import Catalog

    cfg = _config(args, "default")
    cat = Catalog(cfg.data_root, cfg.dataset)
    with cat.connect() as con:
        cur = con.execute(args.query)
        cols = [d[0] for d in cur.description or []]
        print(" | ".join(cols))
        for row in cur.fetchall():
            print(" | ".join("" if v is None else str(v) for v in row))
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="earmark", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="build a benchmark dataset from audio files or directories")
    b.add_argument("inputs", nargs="+", type=Path, help="audio files and/or directories")
    _common(b)
    _llm_args(b)
    _expert_args(b)
    b.add_argument("--files-per-shard", type=int, help="input files per shard (default 64)")
    b.add_argument("--strategy", choices=["focused", "joint"],
                   help="synthesis: focused (one small prompt per item, default) or joint (one reasoning pass per clip)")
    b.set_defaults(fn=cmd_build)

    d = sub.add_parser("demo", help="generate a sample corpus (2 clips per domain) and build dataset 'demo'")
    _common(d, "demo")
    _llm_args(d)
    _expert_args(d)
    d.add_argument("--files-per-shard", type=int, help="input files per shard (default 64)")
    d.add_argument("--strategy", choices=["focused", "joint"],
                   help="synthesis: focused (one small prompt per item, default) or joint (one reasoning pass per clip)")
    d.add_argument("--per-domain", type=int, default=2, help="clips per MECAT domain code (default 2)")
    d.add_argument("--seed", type=int, default=0)
    d.set_defaults(fn=cmd_demo)

    r = sub.add_parser("rerun", help="re-run one stage of a dataset from its latest version (e.g. after a prompt "
                       "edit), publish a new version and print what changed")
    _common(r)
    _llm_args(r)
    r.add_argument("--stage", required=True, choices=["analyze", "synthesize", "filter"],
                   help="the stage to re-run; the stages after it follow, the ones before come from the version")
    r.add_argument("--items", help="with --stage synthesize: comma-separated item types to regenerate "
                   "(captions, qa, entailment, instructions); the others are kept from the version")
    r.add_argument("--strategy", choices=["focused", "joint"], help="synthesis strategy (default: config)")
    r.add_argument("--prompt-dir", type=Path, help="a directory of edited prompt templates (default: built-in)")
    r.add_argument("--version", help="version to start from (default: latest)")
    r.set_defaults(fn=cmd_rerun)

    e = sub.add_parser("evaluate", help="score a model on a version: its prediction files, or ask it (--endpoint)")
    _common(e)
    e.add_argument("-p", "--predictions", type=Path,
                   help="a .jsonl/.json/.csv/.txt file for one subtask, or a directory of <subtask>.<ext> files "
                   "(caption kinds, QA categories or qa, entailment, ifeval)")
    e.add_argument("--endpoint", help="instead of --predictions: an OpenAI-compatible audio chat endpoint (…/v1) "
                   "of the model under test; every kept item of --tasks is asked and answers are stored")
    e.add_argument("--model-id", help="model id sent to --endpoint (default: --model-name)")
    e.add_argument("--tasks", help="with --endpoint: comma-separated captions,qa,entailment,ifeval (default all)")
    e.add_argument("--subtask", help="what a single file predicts: a caption kind (short, long, speech, music, sound, "
                   "environment), entailment, ifeval; with a MECAT metric also a QA category or 'qa'")
    e.add_argument("--metric", default="similarity",
                   help="captions/QA: similarity (SBERT cosine, default) or MECAT metrics date, fense, bleu "
                   "(comma-separated; Score_Cap/Score_QA in the paper's Table 2/3 layout). Entailment and ifeval "
                   "answers are always scored with their own metrics")
    e.add_argument("--judge", default="auto", choices=["auto", "llm", "off"],
                   help="LLM that reads entailment answers and judges IFEval answers: auto = the --llm-endpoint "
                   "model if one is given, else string rules only; llm = that endpoint or the embedded model; off")
    _llm_args(e)
    e.add_argument("--device", help="cpu (default) or cuda, for date/fense")
    e.add_argument("--sbert", help="sentence-embedding model for similarity/date/fense: a local directory or a cached "
                   "HF repo id (default: paraphrase-TinyBERT-L6-v2 as in MECAT if cached, else all-MiniLM-L6-v2)")
    e.add_argument("--error-checker", default="auto",
                   help="FENSE error checker for date/fense: auto (on when ~/.fense_data/echecker_clotho_audiocaps_"
                   "base.ckpt exists, else off and the report says so), off, or a checkpoint path")
    e.add_argument("--model-name", default="model", help="name the scores are stored and reported under")
    e.add_argument("--version", help="dataset version (default: latest)")
    e.set_defaults(fn=cmd_evaluate)

    m = sub.add_parser("mecat-score", help="score prediction files against MECAT reference JSONL dirs "
                       "(no dataset needed; e.g. the official MECAT test set)")
    m.add_argument("-p", "--predictions", type=Path, required=True,
                   help="mecat-evaluate predictions: a .jsonl/.json/.csv/.txt file or a directory of <subtask> files")
    m.add_argument("--references", default="mecat-test",
                   help="a directory with caption/<domain>.jsonl[.gz] and qa/<domain>.jsonl[.gz] (an earmark export "
                   "data/<dataset>/exports/<version>/), or mecat-test: the test set in the mecat wheel (default)")
    m.add_argument("--subtask", help="what a single file predicts: a caption field, a QA category, or qa")
    m.add_argument("--metric", default="date", help="date, fense, bleu (comma-separated; default date)")
    m.add_argument("--sbert", help="sentence-embedding model (see `evaluate --help`)")
    m.add_argument("--error-checker", default="auto", help="auto, off, or a FENSE checkpoint path")
    m.add_argument("--device", help="cpu (default) or cuda")
    m.add_argument("--reference-cache", type=Path, help="directory that keeps reference embeddings across runs")
    m.add_argument("--details", type=Path, help="write per-sample scores to this JSONL file")
    m.add_argument("--model-name", default="model")
    m.set_defaults(fn=cmd_mecat_score)

    rv = sub.add_parser("review", help="human verification: export a review sheet, import decisions")
    rvs = rv.add_subparsers(dest="review_command", required=True)
    rx = rvs.add_parser("export", help="write the items to review (latest version) to a CSV or JSONL sheet")
    _common(rx)
    rx.add_argument("-o", "--out", type=Path, required=True, help="sheet to write: .csv or .jsonl")
    rx.add_argument("--tables", help="comma-separated item tables (default: review.tables = entailment,instructions)")
    rx.add_argument("--all", action="store_true", help="also items that automatic QC rejected")
    rx.add_argument("--include-decided", action="store_true", help="also items that already have a decision")
    rx.add_argument("--max-items", type=int, help="at most this many, lowest LLM confidence first")
    rx.add_argument("--version", help="dataset version (default: latest)")
    rx.set_defaults(fn=cmd_review)
    ri = rvs.add_parser("import", help="store a filled-in sheet's decisions and publish a version applying them")
    _common(ri)
    ri.add_argument("sheet", type=Path)
    ri.add_argument("--reviewer", default="reviewer", help="name stored with rows whose reviewer column is empty")
    ri.add_argument("--version", help="the version the sheet was exported from (default: latest)")
    ri.set_defaults(fn=cmd_review)

    q = sub.add_parser("sql", help="run a SQL query on a dataset's catalog (views per table)")
    _common(q)
    q.add_argument("query")
    q.set_defaults(fn=cmd_sql)

    c = sub.add_parser("corpus", help="generate the synthetic sample corpus only")
    c.add_argument("out_dir", type=Path)
    c.add_argument("--per-domain", type=int, default=2)
    c.add_argument("--seed", type=int, default=0)
    c.set_defaults(fn=cmd_corpus)

    s = sub.add_parser("llm-serve", help="run the embedded LLM server in the foreground")
    s.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m")
    s.add_argument("--port", type=int)
    s.set_defaults(fn=cmd_llm_serve)
    return p


def main(argv: list[str] | None = None) -> int:
    from earmark.llm import LLMEndpointError, LLMServerError, ModelNotAvailable

    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except (ConfigError, FileNotFoundError, ValueError, ModelNotAvailable) as exc:
        print(f"earmark: error: {exc}", file=sys.stderr)
        return 2
    except (LLMEndpointError, LLMServerError) as exc:
        print(f"earmark: error: the LLM endpoint failed: {exc}\n(check --llm-endpoint / [llm] in the config; "
              "shards finished before the failure are kept and a re-run resumes from them)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
