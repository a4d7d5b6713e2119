"""What each `earmark` command does (the parser is earmark.cli.main), one module per role: runs.py (build, demo, rerun,
evaluate, mecat-score), datasets.py (versions, sql, export, review, view, maintain, migrate), services.py (server,
deploy, worker, llm-serve, corpus) and common.py (what they share)."""

from __future__ import annotations

from earmark.cli.commands.datasets import (
    cmd_export,
    cmd_maintain,
    cmd_migrate,
    cmd_review,
    cmd_sql,
    cmd_versions,
    cmd_view,
    sql_error,
)
from earmark.cli.commands.runs import cmd_build, cmd_demo, cmd_evaluate, cmd_mecat_score, cmd_rerun
from earmark.cli.commands.services import cmd_corpus, cmd_deploy, cmd_llm_serve, cmd_server, cmd_worker, wait_healthy

__all__ = [
    "cmd_build",
    "cmd_corpus",
    "cmd_demo",
    "cmd_deploy",
    "cmd_evaluate",
    "cmd_export",
    "cmd_llm_serve",
    "cmd_maintain",
    "cmd_mecat_score",
    "cmd_migrate",
    "cmd_rerun",
    "cmd_review",
    "cmd_server",
    "cmd_sql",
    "cmd_versions",
    "cmd_view",
    "cmd_worker",
    "sql_error",
    "wait_healthy",
]
