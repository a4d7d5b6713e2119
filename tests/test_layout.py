"""The folders install as one `earmark.*` namespace: the bare folder names are not importable packages."""

from __future__ import annotations

import subprocess
import sys


def _python(code: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_only_the_earmark_namespace_is_installed(tmp_path):
    for bare in ("flows", "schemas", "storage", "metrics", "experts", "prompts", "stages", "llm"):
        got = _python(f"import {bare}", tmp_path)
        assert got.returncode != 0 and "No module named" in got.stderr, bare
    got = _python(
        "import earmark.flows, earmark.stages.base, earmark.experts, earmark.prompts, earmark.llm; "
        "print(earmark.prompts.PROMPT_DIR.is_dir())",
        tmp_path,
    )
    assert got.returncode == 0 and got.stdout.strip() == "True", got.stderr


def test_prefect_is_imported_only_by_the_flows():
    got = _python(
        "import sys, earmark.stages.synthesis, earmark.stages.filter, earmark.stages.evaluation, "
        "earmark.commands; print(sorted(m for m in sys.modules if m.split('.')[0] == 'prefect')[:3])",
        None,
    )
    assert got.returncode == 0 and got.stdout.strip() == "[]", got.stdout + got.stderr
