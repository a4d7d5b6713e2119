"""What each `earmark` command does (the parser is earmark.cli.main)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

from earmark.core.config import Config, load_config


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
        "analyze.only": [e.strip() for e in args.experts.split(",") if e.strip()]
        if getattr(args, "experts", None)
        else None,
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
    _print_table(cat, "Clips per domain:", "SELECT domain, count(*) AS clips FROM domain GROUP BY 1 ORDER BY 1")
    _print_table(
        cat,
        "Captions per clip (at most 6 kinds x 3 references; a kind without confident facts has none, see rejections):",
        "SELECT n, count(*) AS clips FROM (SELECT clip_id, count(*) AS n FROM captions GROUP BY 1) GROUP BY 1 ORDER BY 1",
    )
    _print_table(
        cat,
        "QA pairs per clip:",
        "SELECT n, count(*) AS clips FROM (SELECT clip_id, count(*) AS n FROM qa GROUP BY 1) GROUP BY 1 ORDER BY 1",
    )
    _print_table(
        cat,
        "Quarantine (file | what is wrong | what to do):",
        "SELECT source_path, reason, fix FROM quarantine ORDER BY 1",
    )
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


def _bars(args: argparse.Namespace) -> Any:
    """Progress bars on stderr for the command's stages (earmark.core.progress), unless --no-progress or stderr is
    not a terminal."""
    from earmark.core.progress import bars

    return bars(enabled=not getattr(args, "no_progress", False))


def _preflight(cfg: Config) -> None:
    """Construct the profile's experts now: a paper backend whose weights or package are missing fails
    here, naming the model and where to put it, before ingest spends any time."""
    from earmark.experts import build_experts

    build_experts(cfg.analyze)


def _prefect(cfg: Config, *flows: str) -> Any:
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


def _writing(cfg: Config, command: str, create: bool = True) -> Any:
    """The dataset's write lease for a writing command (a context manager), taken in this process before Prefect
    starts: a dataset another writer holds is refused at once with one line naming the holder and what to do
    (DatasetBusyError, exit 4), not after the server's start-up behind the flow's logged traceback. The flows
    the command runs re-enter it (storage.lease.write_lease); it is released however the command ends."""
    from earmark.storage import open_catalog
    from earmark.storage.lease import write_lease

    cat = open_catalog(cfg, create=create)
    return write_lease(cfg, cat, cat.new_run_id(), command)


def cmd_build(args: argparse.Namespace) -> int:
    from earmark.stages.graph import plan_build
    from earmark.stages.ingest import discover, nothing_to_read
    from earmark.storage.catalog import check_dataset_name

    cfg = _config(args, "default", inputs=[str(p) for p in args.inputs])
    check_dataset_name(cfg.dataset)
    plan_build(cfg, args.until)
    found = discover(cfg.inputs, cfg.ingest.allowed_roots)
    if not found.files:  # fail before any flow starts, naming the inputs
        raise FileNotFoundError(nothing_to_read(cfg.inputs, found))
    _preflight(cfg)
    with _writing(cfg, "build"), _prefect(cfg, "earmark.flows.build"), _bars(args):
        from earmark.flows.build import run_build

        result = run_build(cfg, args.until)
    summarize(cfg, result, found)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from earmark.corpus import generate_corpus, load_manifest
    from earmark.storage.catalog import check_dataset_name

    cfg = _config(args, "demo")
    check_dataset_name(cfg.dataset)
    _preflight(cfg)
    corpus_dir = cfg.data_root / f"{cfg.dataset}-input"
    t0 = time.perf_counter()
    stamp = corpus_dir / ".earmark-demo.json"
    params = {"per_domain": args.per_domain, "seed": args.seed}
    with _writing(cfg, "demo"):  # before the corpus: a second demo of the dataset must not rewrite it meanwhile
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
        with _prefect(cfg, "earmark.flows.build"), _bars(args):
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
    cfg = _config(args, "default", **overrides)
    items = [i.strip() for i in args.items.split(",") if i.strip()] if args.items else None
    check_rerun(open_catalog(cfg, create=False), args.stage, items, args.version, cfg.synthesize.items)
    with _writing(cfg, "rerun", create=False), _prefect(cfg, "earmark.flows.rerun"), _bars(args):
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

    cfg = _config(args, "default")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    version = resolve_version(open_catalog(cfg, create=False), args.version)  # the dataset and version exist
    parse_metrics(args.metric)
    if args.predictions is not None and not args.predictions.exists():
        raise FileNotFoundError(f"predictions {args.predictions} not found")
    with _prefect(cfg, "earmark.flows.evaluate"), _bars(args):
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


def cmd_review(args: argparse.Namespace) -> int:
    """Human verification through a sheet: export the items to review, or import the decisions."""
    from earmark.storage import open_catalog

    cfg = _config(args, "default")
    if args.review_command == "import":
        from earmark.queries.versions import resolve_version

        resolve_version(open_catalog(cfg, create=False), args.version)  # the dataset and version exist
        if not args.sheet.is_file():
            raise FileNotFoundError(f"review sheet {args.sheet} not found")
        with _writing(cfg, "review import", create=False), _prefect(cfg, "earmark.flows.review"):
            from earmark.flows.review import review_import_flow

            out = review_import_flow(cfg, args.sheet, reviewer=args.reviewer, version=args.version)
        print(
            f"{out['decisions']} decisions stored; version {out['version']} "
            f"({'new' if out['created'] else 'unchanged'}), exports in {out['exports']}"
        )
        return 0
    from earmark.stages.review import export_sheet
    from earmark.storage.paths import version_name

    cat = open_catalog(cfg, create=False)
    version = args.version or cat.latest_version()
    if version is None:
        raise ValueError(f"dataset {cfg.dataset!r} has no published version to review; run build first")
    version_name(version)
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


def cmd_export(args: argparse.Namespace) -> int:
    """A published version's kept items as files for other tools (earmark.queries.export); `--push` uploads them."""
    from earmark.queries.export import HUB_FORMATS, check_out_dir, export, hub_token, push
    from earmark.queries.versions import resolve_version
    from earmark.storage import open_catalog

    cfg = _config(args, "default")
    if args.push and args.format not in HUB_FORMATS:
        raise ValueError(f"--push uploads a Hugging Face dataset folder: use --format {' or '.join(HUB_FORMATS)}")
    cat = open_catalog(cfg, create=False)
    version = resolve_version(cat, args.version)
    check_out_dir(args.out)
    token = hub_token() if args.push else None  # before any work: no token, nothing written
    counts = export(cat, version, args.format, args.out, license=args.license)
    print(
        f"{cfg.dataset} {version} exported as {args.format} to {args.out}: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
    )
    if counts.get("skipped_clips"):
        print(
            f"  {counts['skipped_clips']} clip(s) left out: the Audio Entailment CSV needs an entailment, a neutral and "
            "a contradiction hypothesis per clip that every QC check kept"
        )
    if fallbacks := {k.removeprefix("text_"): n for k, n in counts.items() if k.startswith("text_")}:
        print(
            "  "
            + ", ".join(f"{n} of {counts['cuts']} cuts have a {kind} caption" for kind, n in fallbacks.items())
            + " as their supervision text (no long caption was kept; custom['text_kind'] says which)"
        )
    if token:
        url = push(args.out, args.push, token, f"earmark export {cfg.dataset} {version} ({args.format})")
        print(f"uploaded to https://huggingface.co/datasets/{args.push} ({url})")
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    """`earmark sql`: read-only queries (earmark.storage.sql); nothing is written, repaired or created."""
    from earmark.storage.catalog import existing_location
    from earmark.storage.sql import run_read_only

    cfg = _config(args, "default")
    location = existing_location(cfg)
    if args.print_init:
        print(location.init_sql(), end="")
        return 0
    if not args.query:
        raise ValueError(
            "earmark sql: give a query, e.g. earmark sql -d demo 'FROM captions LIMIT 5' (or --print-init)"
        )
    try:
        cols, rows = run_read_only(location, args.query, cfg.dataset)
    except duckdb.Error as exc:
        raise ValueError(sql_error(exc, cfg.dataset)) from None
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join(map(cell, row)))
    return 0


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


def sql_error(exc: Exception, dataset: str) -> str:
    """A DuckDB error as one line: its kind and message, where in the query, and what the lake has."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    message = lines[0] if lines else type(exc).__name__
    where = next((line for line in lines[1:] if line.startswith("LINE ")), "")
    message += "".join(f" {line}" for line in lines[1:] if line.startswith(("Did you mean", "Candidate")))
    hint = ""
    if isinstance(exc, (duckdb.CatalogException, duckdb.BinderException)):
        hint = (
            f" (tables: earmark sql -d {dataset} 'SHOW TABLES'; columns: "
            f"earmark sql -d {dataset} 'DESCRIBE captions'; versions: FROM versions)"
        )
    return f"SQL: {message}{' at ' + where if where else ''}{hint}"


def cmd_maintain(args: argparse.Namespace) -> int:
    """`earmark maintain expire|compact`: plan, show, confirm, then do it under the dataset's write lease."""
    from datetime import timedelta

    from earmark.storage import maintain, open_catalog

    cfg = _config(args, "default")
    cat = open_catalog(cfg, create=False)
    if args.older_than < 0:
        raise ValueError(f"--older-than {args.older_than}: give a number of days ≥ 0")

    def plan() -> maintain.MaintenancePlan:
        if args.operation == "expire":
            return maintain.plan_expire(cat, timedelta(days=args.older_than))
        return maintain.plan_compact(cat)

    if not (args.dry_run or args.yes or sys.stdin.isatty()):
        raise ValueError(
            f"earmark maintain {args.operation}: add --yes to do it without a terminal to ask on "
            "(--dry-run shows the plan)"
        )
    if args.dry_run:  # reads only: no lease either
        print(f"{cfg.dataset}: {plan().describe()}\ndry run: nothing changed")
        return 0
    with cat.lease(cat.new_run_id(), "maintain"):
        todo = plan()  # under the lease: what no writer can change any more
        print(f"{cfg.dataset}: {todo.describe()}")
        if not (todo.snapshots or todo.files or todo.tables):
            print("nothing to do")
            return 0
        if not args.yes and input("proceed? [y/N] ").strip().lower() not in {"y", "yes"}:
            print("nothing changed")
            return 0
        done = maintain.expire(cat, todo) if args.operation == "expire" else maintain.compact(cat, todo)
        print(f"done: {done.describe()}")
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


def _prefect_env(home: Path) -> dict[str, str]:
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    env.pop("PREFECT_API_URL", None)  # the server itself needs none; an inherited one would point elsewhere
    return env


def wait_healthy(url: str, proc: subprocess.Popen | None = None, timeout_s: float | None = 120.0) -> None:
    """Until `url`/health answers 200; raises when the server process exits or time runs out (`timeout_s` None,
    with a `proc`: as long as the process lives — a start on a busy machine takes what it takes)."""
    import httpx

    deadline = time.monotonic() + timeout_s if timeout_s is not None else float("inf")
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the Prefect server exited with status {proc.returncode} before answering")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the Prefect server at {url} did not answer /health within {timeout_s:.0f} s")


def _stop_group(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGINT then SIGKILL to the process group `proc` leads (it was started in a new session)."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def cmd_server(args: argparse.Namespace) -> int:
    """A Prefect server + UI on loopback (SQLite under PREFECT_HOME), set up for earmark, in the foreground until
    Ctrl-C (exit 0) or SIGTERM (the same clean stop, exit 143)."""
    from earmark.core.interrupts import sigterm_as_ctrl_c
    from earmark.flows.deploy import setup_server

    cfg = _config(args, "default")
    home = Path(args.prefect_home or os.environ.get("PREFECT_HOME") or Path(cfg.data_root) / ".prefect").resolve()
    home.mkdir(parents=True, exist_ok=True)
    url = f"http://{args.host}:{args.port}/api"
    cmd = [sys.executable, "-m", "prefect", "server", "start", "--host", args.host, "--port", str(args.port)]
    log = (home / "server.log").open("ab")
    # The UI asks the server for the API's address (/ui-settings), which Prefect derives from its API host and port
    # settings, not from `--port`: without these a UI on --port 4299 called 4200.
    env = {**_prefect_env(home), "PREFECT_SERVER_API_HOST": args.host, "PREFECT_SERVER_API_PORT": str(args.port)}
    env.setdefault("PREFECT_UI_API_URL", url)
    with sigterm_as_ctrl_c() as stop:  # `kill` stops it as cleanly as Ctrl-C
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_healthy(url, proc, timeout_s=None)
            setup = setup_server(cfg, url)
            print(f"Prefect server and UI at http://{args.host}:{args.port} (database and log under {home})")
            pools = ", ".join(setup["pools_created"]) or "already there"
            print(f"work pools: {pools}; gpu limit: {setup['gpu_slots']} slot(s)")
            print(f"\n    export PREFECT_API_URL={url}\n")
            print(
                "then: earmark deploy INPUT... -d NAME, and earmark worker --pool cpu (Ctrl-C stops the server)",
                flush=True,
            )
            proc.wait()
        except KeyboardInterrupt:
            print("stopping the Prefect server…", flush=True)
        finally:
            _stop_group(proc)
            log.close()
    return stop.exit_code


def cmd_deploy(args: argparse.Namespace) -> int:
    """Register the deployments of a dataset (build, stage flows, evaluate) on the Prefect server."""
    from earmark.core.config import config_file
    from earmark.flows.deploy import configured_api_url, deploy, plan_deployments

    cfg = _config(args, "default", inputs=[str(p) for p in args.inputs] if args.inputs else None)
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()] if s is not None else None  # noqa: E731
    plans = plan_deployments(
        cfg,
        config_file=config_file(args.config),
        flows=split(args.flows),
        until=args.until,
        cron=args.cron,
        timezone=args.timezone,
        gpu_flows=split(args.gpu_flows),
        pinned={"profile": args.profile, "llm_endpoint": args.llm_endpoint, "llm_model": args.llm_model},
    )
    print("deployments" + (" (dry run: nothing registered)" if args.dry_run else "") + ":")
    for plan in plans:
        print("  " + plan.describe())
    if args.dry_run:
        return 0
    api_url = args.api_url or configured_api_url()
    if not api_url:
        raise ValueError("no Prefect server: start `earmark server` and export the PREFECT_API_URL it prints")
    out = deploy(cfg, plans, api_url)
    print(f"registered {len(out['deployments'])} deployment(s) on {api_url}; gpu limit {out['gpu_slots']} slot(s)")
    pools = sorted({p.pool for p in plans})
    print("start a worker per pool: " + "; ".join(f"earmark worker --pool {p.removeprefix('earmark-')}" for p in pools))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """`prefect worker start --pool earmark-<pool> --type process`, in the foreground (replaces this process)."""
    cmd = [sys.executable, "-m", "prefect", "worker", "start", "--pool", f"earmark-{args.pool}", "--type", "process"]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    os.execv(sys.executable, cmd)
    return 0  # not reached


# --------------------------------------------------------------------------------------- versions
def cmd_versions(args: argparse.Namespace) -> int:
    """`earmark versions list|show|diff`: a dataset's versions, one version's contents, what changed."""
    from earmark.queries import versions
    from earmark.storage import open_catalog

    cfg = _config(args, "default")
    cat = open_catalog(cfg, create=False)
    cat.refresh_views()  # views of a version whose publisher died before making them
    if args.versions_command == "list":
        print(_versions_list(cfg.dataset, versions.list_versions(cat)))
    elif args.versions_command == "show":
        print(_version_show(cfg.dataset, versions.show_version(cat, versions.resolve_version(cat, args.version))))
    else:
        if args.old and args.new:
            old, new = versions.resolve_version(cat, args.old), versions.resolve_version(cat, args.new)
        elif args.old:  # one version: against the latest
            old, new = versions.resolve_version(cat, args.old), versions.resolve_version(cat, None)
        else:
            old, new = versions.default_pair(cat)
        if old == new:
            raise ValueError(f"versions diff: {old} against itself; name two different versions")
        print(_versions_diff(cfg.dataset, versions.diff_versions(cat, old, new)))
    return 0


def _aligned(header: list[str], rows: list[list[Any]], indent: str = "  ") -> str:
    """Plain text columns (numbers right-aligned), so the output reads the same in a pipe or a file."""
    cells = [header, *[["–" if v is None else str(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    numeric = [bool(rows) and all(isinstance(r[i], int) or r[i] is None for r in rows) for i in range(len(header))]
    lines = [
        indent + "  ".join(c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in cells
    ]
    return "\n".join(line.rstrip() for line in lines)


def _when(ts: Any) -> str:
    return f"{ts:%Y-%m-%d %H:%M:%S} UTC" if ts is not None else "?"


def _versions_list(dataset: str, infos: list) -> str:
    if not infos:
        return f"dataset {dataset!r} has no published version yet (earmark build … -d {dataset})"
    tables = [t for t in dict.fromkeys(t for v in infos for t in v.kept)]
    rows = [[v.version, _when(v.created_at), v.label, *(v.kept.get(t) for t in tables)] for v in infos]
    head = f"dataset {dataset}: {len(infos)} version(s); item columns = items every QC check kept (– = no QC)"
    return head + "\n" + _aligned(["version", "created", "made by", *tables], rows)


def _version_show(dataset: str, d: Any) -> str:
    i = d.info
    out = [
        f"dataset {dataset} {i.version}: {i.label}; created {_when(i.created_at)}"
        + (f"; parent {i.parent}" if i.parent else "")
        + (f"; run {i.run_id}" if i.run_id else ""),
        "",
        "Rows per table (kept: items every QC check kept):",
        _aligned(["table", "rows", "kept"], [[t, n, k] for t, (n, k) in d.counts.items()]),
        "",
        "Prompts and models that wrote the items:",
        _aligned(
            ["table", "prompt", "prompt sha", "model", "items", "kept"],
            [[g.table, g.prompt_name, g.prompt_sha, g.model, g.items, g.kept] for g in d.generators],
        )
        if d.generators
        else "  (no items)",
        "",
        "QC: rejections per check:",
        _aligned(["table", "check", "checked", "rejected"], [[c.table, c.check, c.checked, c.rejected] for c in d.qc])
        if d.qc
        else "  (no QC in this version)",
        "",
        f"Dataset card ({d.card_path or 'rendered from the catalog: the version has no exports'}):",
        "",
        d.card.rstrip(),
    ]
    return "\n".join(out)


def _versions_diff(dataset: str, diff: Any) -> str:
    rows = [[t.table, t.added, t.changed, t.removed, t.unchanged] for t in diff.tables if t.touched or t.unchanged]
    untouched = [t.table for t in diff.tables if not t.touched and t.unchanged]
    touched = [t for t in diff.tables if t.touched]
    out = [
        f"dataset {dataset}: {diff.old} → {diff.new} (rows; items are identified by item_id, clips by clip_id)",
        _aligned(["table", "added", "changed", "removed", "unchanged"], rows)
        if rows
        else "  (both versions are empty)",
        "",
        f"Changed tables: {', '.join(t.table for t in touched) or 'none'}; "
        f"unchanged: {', '.join(untouched) or 'none'}.",
    ]
    if diff.kept:
        out += [
            "",
            "Items every QC check kept (left: kept before, not now; joined: kept now, not before):",
            _aligned(
                ["table", diff.old, diff.new, "left", "joined"],
                [[k.table, k.old, k.new, k.left, k.joined] for k in diff.kept],
            ),
        ]
    return "\n".join(out)


def cmd_view(args: argparse.Namespace) -> int:
    """`earmark view`: serve a version's browser view on loopback until Ctrl-C (earmark.cli.view.server)."""
    from earmark.cli.view.server import ViewApp, make_server
    from earmark.core.interrupts import sigterm_as_ctrl_c
    from earmark.queries.versions import resolve_version
    from earmark.storage import open_catalog

    cfg = _config(args, "default")
    cat = open_catalog(cfg, create=False)
    version = resolve_version(cat, args.version) if args.version else None
    if version is None and cat.latest_version() is None:
        raise ValueError(f"dataset {cfg.dataset!r} has no published version yet; run build first")
    server = make_server(ViewApp(cfg, cat, version), args.host, args.port)
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in str(host) else host
    with sigterm_as_ctrl_c() as stop:  # a scheduler's stop (SIGTERM) is a Ctrl-C, then exit 143
        try:
            with _prefect(cfg, "earmark.flows.review"):  # a review's writes run flows
                print(
                    f"earmark view of {cfg.dataset} ({version or 'latest version'}): http://{shown}:{port}/  "
                    "(Ctrl-C stops it)",
                    flush=True,
                )
                server.serve_forever()
        except KeyboardInterrupt:
            print("earmark view: stopped")
        finally:
            server.server_close()
    return stop.exit_code
