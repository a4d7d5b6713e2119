"""The `earmark` command line.

earmark demo                       generate a sample corpus and build a benchmark from it (offline)
earmark build INPUT... -d NAME     build a benchmark dataset from audio files/directories
earmark evaluate -d NAME -p FILE   score predictions against the latest version (--metric date|fense|bleu)
earmark evaluate -d NAME --endpoint URL --model-id M   ask a model (audio chat API) and score it
earmark rerun -d NAME --stage synthesize --items entailment   re-run one stage after a prompt edit + diff
earmark mecat-score -p PREDS --references DIR   score mecat-evaluate files against MECAT references
earmark versions list|show|diff -d NAME   a dataset's versions, one version's contents, what changed
earmark sql -d NAME "SELECT …"     query a dataset's catalog (read-only)
earmark maintain expire|compact -d NAME   expire old snapshots / compact files (--dry-run, asks first)
earmark export -d NAME --format hf -o DIR   a version's kept items for other tools (hf, mecat, audiobench,
                                   entailment, lhotse); --push REPO uploads an hf/audiobench folder to the Hub
earmark view -d NAME               browse a version on 127.0.0.1: listen, read facts, items, QC; review + publish
earmark review export -d NAME -o SHEET.csv   items to review (human verification) as a sheet
earmark review import -d NAME SHEET.csv      store decisions, publish a version applying them
earmark corpus OUT_DIR             only generate the sample corpus
earmark llm-serve                  run the embedded LLM server in the foreground
earmark server                     Prefect server + UI on 127.0.0.1 (work pools, gpu limit), in the foreground
earmark deploy INPUT... -d NAME    register the dataset's deployments (build, stages, evaluate; --cron)
earmark worker --pool cpu|gpu      a process worker for the earmark-cpu / earmark-gpu pool

build, demo, rerun and evaluate draw progress bars on stderr when it is a terminal (shards, clips/s, LLM
requests, ETA per stage); --no-progress turns them off.

Prefect: with PREFECT_API_URL set, that server is used. Without it, the commands that run flows share one local
Prefect server per user, started by the first of them and stopped once none has used it for [prefect]
idle_minutes (10); checks that need no Prefect (dataset name, inputs, dataset and version) come first.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from earmark.cli.commands import (  # noqa: E402
    cmd_build,
    cmd_corpus,
    cmd_demo,
    cmd_deploy,
    cmd_evaluate,
    cmd_export,
    cmd_llm_serve,
    cmd_maintain,
    cmd_mecat_score,
    cmd_migrate,
    cmd_rerun,
    cmd_review,
    cmd_server,
    cmd_sql,
    cmd_versions,
    cmd_view,
    cmd_worker,
)
from earmark.core.config import ConfigError  # noqa: E402
from earmark.core.interrupts import EXIT_INTERRUPTED, interruptible  # noqa: E402
from earmark.stages.graph import RERUN, UNTIL  # noqa: E402


def _common(p: argparse.ArgumentParser, dataset_default: str | None = "default") -> None:
    p.add_argument("--config", type=Path, help="TOML config file (see README: Configuration)")
    p.add_argument("--data-root", type=Path, help="where datasets live (default: ./data)")
    p.add_argument("-d", "--dataset", default=None, help=f"dataset name (default: {dataset_default})")


def _llm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm-endpoint", help="OpenAI-compatible base URL (…/v1); default: start the embedded server")
    p.add_argument(
        "--llm-model", help="model id (embedded: qwen2.5-coder-0.5b-instruct-q4_k_m or smollm2-135m-instruct)"
    )
    p.add_argument(
        "--llm-schema-mode",
        choices=["llama_cpp", "json_schema"],
        help="how to ask for JSON: llama_cpp (json_object + schema) or json_schema (vLLM/OpenAI)",
    )


def _progress_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars (shards done/total, items/s and ETA per stage, LLM requests of synthesis; "
        "drawn on stderr only when it is a terminal)",
    )


def _expert_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profile",
        choices=["embedded", "paper"],
        help="experts: embedded (offline, CPU; default) or paper (MECAT's models from --models-dir)",
    )
    p.add_argument(
        "--models-dir",
        type=Path,
        help="paper profile weights, one directory per model id (default: $EARMARK_MODELS_DIR or "
        "~/.cache/earmark/models)",
    )
    p.add_argument(
        "--experts",
        help="run only these experts of the profile (comma-separated, plus what they need), e.g. levels,acoustics; "
        "with --until analyze",
    )


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, the function that runs it, its options and `add_parser`'s keyword arguments
    (help, description, …); `interruptible`: Ctrl-C / SIGTERM stop it within seconds, resumable
    (earmark.core.interrupts)."""

    name: str
    run: Callable[[argparse.Namespace], int]
    options: Callable[[argparse.ArgumentParser], None]
    interruptible: bool
    parser_args: dict[str, Any]


COMMANDS: list[Command] = []  # in the order `earmark --help` lists them


def command(name: str, run: Callable[[argparse.Namespace], int], interruptible: bool = False, **parser_args: Any):
    """Register a subcommand: decorates the function that adds its options to its parser."""

    def register(options: Callable[[argparse.ArgumentParser], None]) -> Callable[[argparse.ArgumentParser], None]:
        COMMANDS.append(Command(name, run, options, interruptible, parser_args))
        return options

    return register


@command("build", cmd_build, interruptible=True, help="build a benchmark dataset from audio files or directories")
def _build(b: argparse.ArgumentParser) -> None:
    b.add_argument("inputs", nargs="+", type=Path, help="audio files and/or directories")
    _common(b)
    _llm_args(b)
    _expert_args(b)
    b.add_argument("--files-per-shard", type=int, help="input files per shard (default 64)")
    b.add_argument(
        "--until",
        choices=UNTIL,
        default="publish",
        help="stop after this stage and publish the tables made so far (analyze: expert annotations, no LLM)",
    )
    b.add_argument(
        "--strategy",
        choices=["focused", "joint"],
        help="synthesis: focused (one small prompt per item, default) or joint (one reasoning pass per clip)",
    )
    _progress_arg(b)


@command(
    "demo", cmd_demo, interruptible=True, help="generate a sample corpus (2 clips per domain) and build dataset 'demo'"
)
def _demo(d: argparse.ArgumentParser) -> None:
    _common(d, "demo")
    _llm_args(d)
    _expert_args(d)
    d.add_argument("--files-per-shard", type=int, help="input files per shard (default 64)")
    d.add_argument(
        "--strategy",
        choices=["focused", "joint"],
        help="synthesis: focused (one small prompt per item, default) or joint (one reasoning pass per clip)",
    )
    d.add_argument("--per-domain", type=int, default=2, help="clips per MECAT domain code (default 2)")
    d.add_argument("--seed", type=int, default=0)
    _progress_arg(d)


@command(
    "rerun",
    cmd_rerun,
    interruptible=True,
    help="re-run one stage of a dataset from its latest version (e.g. after a prompt "
    "edit), publish a new version and print what changed",
)
def _rerun(r: argparse.ArgumentParser) -> None:
    _common(r)
    _llm_args(r)
    r.add_argument(
        "--stage",
        required=True,
        choices=RERUN,
        help="the stage to re-run; the stages after it follow, the ones before come from the version",
    )
    r.add_argument(
        "--items",
        help="with --stage synthesize: comma-separated item types to regenerate "
        "(captions, qa, entailment, instructions); the others are kept from the version",
    )
    r.add_argument("--strategy", choices=["focused", "joint"], help="synthesis strategy (default: config)")
    r.add_argument("--prompt-dir", type=Path, help="a directory of edited prompt templates (default: built-in)")
    r.add_argument("--version", help="version to start from (default: latest)")
    _progress_arg(r)


@command(
    "evaluate",
    cmd_evaluate,
    interruptible=True,
    help="score a model on a version: its prediction files, or ask it (--endpoint)",
)
def _evaluate(e: argparse.ArgumentParser) -> None:
    _common(e)
    e.add_argument(
        "-p",
        "--predictions",
        type=Path,
        help="a .jsonl/.json/.csv/.txt file for one subtask, or a directory of <subtask>.<ext> files "
        "(caption kinds, QA categories or qa, entailment, ifeval)",
    )
    e.add_argument(
        "--endpoint",
        help="instead of --predictions: an OpenAI-compatible audio chat endpoint (…/v1) "
        "of the model under test; every kept item of --tasks is asked and answers are stored",
    )
    e.add_argument("--model-id", help="model id sent to --endpoint (default: --model-name)")
    e.add_argument("--tasks", help="with --endpoint: comma-separated captions,qa,entailment,ifeval (default all)")
    e.add_argument(
        "--subtask",
        help="what a single file predicts: a caption kind (short, long, speech, music, sound, "
        "environment), entailment, ifeval; with a MECAT metric also a QA category or 'qa'",
    )
    e.add_argument(
        "--metric",
        default="similarity",
        help="captions/QA: similarity (SBERT cosine, default) or MECAT metrics date, fense, bleu "
        "(comma-separated; Score_Cap/Score_QA in the paper's Table 2/3 layout). Entailment and ifeval "
        "answers are always scored with their own metrics",
    )
    e.add_argument(
        "--judge",
        default="auto",
        choices=["auto", "llm", "off"],
        help="LLM that reads entailment answers and judges IFEval answers: auto = the --llm-endpoint "
        "model if one is given, else string rules only; llm = that endpoint or the embedded model; off",
    )
    _llm_args(e)
    e.add_argument(
        "--strict",
        action="store_true",
        help="fail on any malformed prediction line (default: skip it; the report lists file, line and reason)",
    )
    e.add_argument("--device", help="cpu (default) or cuda, for date/fense")
    e.add_argument(
        "--sbert",
        help="sentence-embedding model for similarity/date/fense: a local directory or a cached "
        "HF repo id (default: paraphrase-TinyBERT-L6-v2 as in MECAT if cached, else all-MiniLM-L6-v2)",
    )
    e.add_argument(
        "--error-checker",
        default="auto",
        help="FENSE error checker for date/fense: auto (on when ~/.fense_data/echecker_clotho_audiocaps_"
        "base.ckpt exists, else off and the report says so), off, or a checkpoint path",
    )
    e.add_argument("--model-name", default="model", help="name the scores are stored and reported under")
    e.add_argument("--version", help="dataset version (default: latest)")
    _progress_arg(e)


@command(
    "mecat-score",
    cmd_mecat_score,
    help="score prediction files against MECAT reference JSONL dirs "
    "(no dataset needed; e.g. the official MECAT test set)",
)
def _mecat_score(m: argparse.ArgumentParser) -> None:
    m.add_argument(
        "-p",
        "--predictions",
        type=Path,
        required=True,
        help="mecat-evaluate predictions: a .jsonl/.json/.csv/.txt file or a directory of <subtask> files",
    )
    m.add_argument(
        "--references",
        default="mecat-test",
        help="a directory with caption/<domain>.jsonl[.gz] and qa/<domain>.jsonl[.gz] (an earmark export "
        "data/<dataset>/exports/<version>/), or mecat-test: the test set in the mecat wheel (default)",
    )
    m.add_argument("--subtask", help="what a single file predicts: a caption field, a QA category, or qa")
    m.add_argument("--metric", default="date", help="date, fense, bleu (comma-separated; default date)")
    m.add_argument("--strict", action="store_true", help="fail on any malformed prediction line (default: skip it)")
    m.add_argument("--sbert", help="sentence-embedding model (see `evaluate --help`)")
    m.add_argument("--error-checker", default="auto", help="auto, off, or a FENSE checkpoint path")
    m.add_argument("--device", help="cpu (default) or cuda")
    m.add_argument("--reference-cache", type=Path, help="directory that keeps reference embeddings across runs")
    m.add_argument("--details", type=Path, help="write per-sample scores to this JSONL file")
    m.add_argument("--model-name", default="model")


@command("review", cmd_review, interruptible=True, help="human verification: export a review sheet, import decisions")
def _review(rv: argparse.ArgumentParser) -> None:
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


@command(
    "export",
    cmd_export,
    help="write a version's kept items (every QC check kept them) as files for other tools, "
    "optionally upload them to the Hugging Face Hub",
)
def _export(x: argparse.ArgumentParser) -> None:
    _common(x)
    x.add_argument("--version", help="v0003 (or 3, or latest; default: the latest published)")
    x.add_argument(
        "--format",
        required=True,
        choices=["hf", "mecat", "audiobench", "entailment", "lhotse"],
        help="hf: a Hugging Face datasets folder (configs captions, qa, entailment, instructions; audio embedded); "
        "mecat: caption/ and qa/ reference JSONL; audiobench: IFEval-Audio in AudioBench's columns (datasets "
        "folder); entailment: the Audio Entailment CSV + audio/<clip>.wav; lhotse: cuts.jsonl + audio/",
    )
    x.add_argument("-o", "--out", type=Path, required=True, help="a new or empty folder to write into")
    x.add_argument(
        "--push",
        metavar="REPO",
        help="with --format hf or audiobench: upload the folder to this Hugging Face dataset repo "
        "(user/name; needs HF_TOKEN or `hf auth login`)",
    )
    x.add_argument("--license", default="other", help="license id for the dataset card (default: other)")


@command("versions", cmd_versions, help="a dataset's published versions: list them, show one, diff two")
def _versions(v: argparse.ArgumentParser) -> None:
    vs = v.add_subparsers(dest="versions_command", required=True)
    vl = vs.add_parser("list", help="every version: number, creation time, what made it, kept items per table")
    vsh = vs.add_parser(
        "show", help="one version: rows (total / kept) per table, prompts and models, QC rejections, dataset card"
    )
    vsh.add_argument("--version", help="v0003 (or 3; default: latest)")
    vd = vs.add_parser("diff", help="what changed between two versions: rows added / changed / removed per table")
    vd.add_argument("old", nargs="?", help="the older version (default: the one before the latest)")
    vd.add_argument("new", nargs="?", help="the newer version (default: the latest)")
    for p in (vl, vsh, vd):
        _common(p)
        p.set_defaults(fn=cmd_versions)


@command(
    "view",
    cmd_view,
    help="a version in the browser, on loopback: clips with audio, expert facts, items and QC verdicts, "
    "filters; accept / reject / rewrite items and publish the reviewed version",
)
def _view(v: argparse.ArgumentParser) -> None:
    _common(v)
    v.add_argument("--version", help="v0003 (or 3; default: always the latest published)")
    v.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765; 0: any free one)")
    v.add_argument("--host", default="127.0.0.1", help="loopback address to bind (127.0.0.1 or ::1)")


@command(
    "sql",
    cmd_sql,
    help="run a SQL query on a dataset's DuckLake catalog: <table> = the latest version, vNNNN.<table> = "
    "that version; or print a DuckDB CLI init file (--print-init)",
)
def _sql(q: argparse.ArgumentParser) -> None:
    _common(q)
    q.add_argument("query", nargs="?", help='e.g. "SELECT kind, count(*) FROM captions GROUP BY 1"')
    q.add_argument(
        "--print-init",
        action="store_true",
        help="print an init file for the DuckDB CLI that loads the extensions and attaches the lake "
        "(earmark sql -d DATASET --print-init > lake.sql && duckdb -init lake.sql)",
    )


@command(
    "maintain",
    cmd_maintain,
    help="lake maintenance under the write lease: expire old snapshots (every published version is kept) and "
    "delete the files only they read, or compact small data files; shows its plan and asks first",
)
def _maintain(m: argparse.ArgumentParser) -> None:
    m.add_argument("operation", choices=["expire", "compact"], help="expire: old snapshots; compact: small files")
    _common(m)
    m.add_argument(
        "--older-than",
        type=float,
        default=7.0,
        metavar="DAYS",
        help="expire: only snapshots older than this many days (default 7; 0: all but the versions' and the latest)",
    )
    m.add_argument("--dry-run", action="store_true", help="print the plan only; change nothing")
    m.add_argument("--yes", action="store_true", help="do it without asking (needed when stdin is not a terminal)")


@command(
    "migrate",
    cmd_migrate,
    interruptible=True,
    help="move a dataset built before the DuckLake catalog (catalog.duckdb) into a DuckLake catalog",
)
def _migrate(mg: argparse.ArgumentParser) -> None:
    _common(mg)


@command("corpus", cmd_corpus, help="generate the synthetic sample corpus only")
def _corpus(c: argparse.ArgumentParser) -> None:
    c.add_argument("out_dir", type=Path)
    c.add_argument("--per-domain", type=int, default=2)
    c.add_argument("--seed", type=int, default=0)


@command("llm-serve", cmd_llm_serve, help="run the embedded LLM server in the foreground")
def _llm_serve(s: argparse.ArgumentParser) -> None:
    s.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m")
    s.add_argument("--port", type=int)


@command(
    "server",
    cmd_server,
    help="run a Prefect server + UI on loopback, set up for earmark (foreground); the UI uses --port",
)
def _server(sv: argparse.ArgumentParser) -> None:
    _common(sv)
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=4200)
    sv.add_argument("--prefect-home", type=Path, help="database and log (default: $PREFECT_HOME or DATA_ROOT/.prefect)")


@command(
    "deploy", cmd_deploy, help="register a dataset's deployments (build, ingest, analyze, synthesize, filter, evaluate)"
)
def _deploy(dp: argparse.ArgumentParser) -> None:
    dp.add_argument("inputs", nargs="*", type=Path, help="audio files and/or directories (for build and ingest)")
    _common(dp)
    _llm_args(dp)
    _expert_args(dp)
    dp.add_argument("--until", choices=UNTIL, default="publish")
    dp.add_argument("--flows", help="comma-separated subset of build,ingest,analyze,synthesize,filter,evaluate")
    dp.add_argument("--cron", help='schedule the build, e.g. "0 3 * * *" (default: run on demand only)')
    dp.add_argument("--timezone", help="the cron's time zone, e.g. Europe/Berlin (default UTC)")
    dp.add_argument(
        "--gpu-flows",
        help="comma-separated flows for the earmark-gpu pool (default: build,analyze when the experts run on cuda)",
    )
    dp.add_argument("--api-url", help="Prefect API (default: $PREFECT_API_URL)")
    dp.add_argument("--dry-run", action="store_true", help="print what would be registered, register nothing")


@command("worker", cmd_worker, help="run a Prefect process worker for an earmark pool (foreground)")
def _worker(w: argparse.ArgumentParser) -> None:
    w.add_argument("--pool", choices=["cpu", "gpu"], default="cpu")
    w.add_argument("--limit", type=int, help="at most this many flow runs at a time")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="earmark", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    for c in COMMANDS:
        cp = sub.add_parser(c.name, **c.parser_args)
        c.options(cp)
        cp.set_defaults(fn=c.run)
    return p


def main(argv: list[str] | None = None) -> int:
    from earmark.flows.local_server import LocalServerError
    from earmark.llm import LLMEndpointError, LLMServerError, ModelNotAvailable
    from earmark.storage import LegacyCatalogError
    from earmark.storage.lake import LakeSetupError
    from earmark.storage.lease import DatasetBusyError

    args = parser().parse_args(argv)
    words = ["earmark", *(sys.argv[1:] if argv is None else argv)]
    try:
        if args.fn in {c.run for c in COMMANDS if c.interruptible}:
            with interruptible(" ".join(shlex.quote(w) for w in words)):
                return args.fn(args)
        return args.fn(args)
    except KeyboardInterrupt:
        print("earmark: interrupted", file=sys.stderr)
        from earmark.flows.signals import exit_interrupted, workers_alive

        if workers_alive():  # the interpreter's shutdown would fail their tasks (flows.signals.exit_interrupted)
            exit_interrupted(EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
    except DatasetBusyError as exc:
        print(f"earmark: error: {exc}", file=sys.stderr)
        return 4
    except (ConfigError, FileNotFoundError, ValueError, ModelNotAvailable, LegacyCatalogError, LakeSetupError) as exc:
        print(f"earmark: error: {exc}", file=sys.stderr)
        return 2
    except LocalServerError as exc:
        print(f"earmark: error: {exc}", file=sys.stderr)
        return 1
    except (LLMEndpointError, LLMServerError) as exc:
        print(
            f"earmark: error: the LLM endpoint failed: {exc}\n(check --llm-endpoint / [llm] in the config; "
            "shards finished before the failure are kept and a re-run resumes from them)",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
