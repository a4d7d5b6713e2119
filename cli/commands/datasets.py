"""The commands that read or keep a dataset: versions, sql, export, review, view, maintain, migrate."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import duckdb

from earmark.cli.commands.common import cell, command_config, prefect_for, writing


def cmd_review(args: argparse.Namespace) -> int:
    """Human verification through a sheet: export the items to review, or import the decisions."""
    from earmark.storage import open_catalog

    cfg = command_config(args, "default")
    if args.review_command == "import":
        from earmark.queries.versions import resolve_version

        resolve_version(open_catalog(cfg, create=False), args.version)  # the dataset and version exist
        if not args.sheet.is_file():
            raise FileNotFoundError(f"review sheet {args.sheet} not found")
        with writing(cfg, "review import", create=False), prefect_for(cfg, "earmark.flows.review"):
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

    cfg = command_config(args, "default")
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

    cfg = command_config(args, "default")
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

    cfg = command_config(args, "default")
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

    cfg = command_config(args, "default")
    report = migrate_legacy(cfg)
    print(report)
    return 0


# --------------------------------------------------------------------------------------- versions
def cmd_versions(args: argparse.Namespace) -> int:
    """`earmark versions list|show|diff`: a dataset's versions, one version's contents, what changed."""
    from earmark.queries import versions
    from earmark.storage import open_catalog

    cfg = command_config(args, "default")
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

    cfg = command_config(args, "default")
    cat = open_catalog(cfg, create=False)
    version = resolve_version(cat, args.version) if args.version else None
    if version is None and cat.latest_version() is None:
        raise ValueError(f"dataset {cfg.dataset!r} has no published version yet; run build first")
    server = make_server(ViewApp(cfg, cat, version), args.host, args.port)
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in str(host) else host
    with sigterm_as_ctrl_c() as stop:  # a scheduler's stop (SIGTERM) is a Ctrl-C, then exit 143
        try:
            with prefect_for(cfg, "earmark.flows.review"):  # a review's writes run flows
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
