"""One namespace, one mechanism: the repository root is the `earmark` package directory.

A path relative to the root is the module path, the wheel holds exactly the root's packages (and nothing of
tests/, benchmarks/, training/, docker/), and the bare folder names are not importable packages.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_SHIPPED = ("tests", "benchmarks", "training", "docker", "docs", "data", "requirements")


def _python(code: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def _root_packages() -> set[str]:
    """Every folder under the root reachable through folders with an __init__.py, as a module name."""
    found, todo = set(), [ROOT]
    while todo:
        folder = todo.pop()
        found.add(".".join(("earmark", *folder.relative_to(ROOT).parts)))
        todo += [d for d in folder.iterdir() if d.is_dir() and (d / "__init__.py").is_file()]
    return found


def test_the_packages_listed_are_the_roots_packages():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {"earmark": "."}
    assert set(config["packages"]) == _root_packages()
    assert not any((ROOT / name / "__init__.py").exists() for name in NOT_SHIPPED)


def test_a_regular_install_holds_the_tree_at_the_same_paths(tmp_path):
    """What users install is the tree import-linter and the tests read: every module at its root-relative path.
    Built from the checkout's files (tracked and new, not ignored), so a stale build/ cannot hide a difference."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    source = tmp_path / "source"
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    site = tmp_path / "site"
    got = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-compile",
         "--target", str(site), str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    installed = {p.relative_to(site / "earmark") for p in (site / "earmark").rglob("*.py")}
    in_repo = {
        p.relative_to(ROOT)
        for package in _root_packages()
        for p in (ROOT.joinpath(*package.split(".")[1:])).glob("*.py")
    }
    assert installed == in_repo
    assert (site / "earmark" / "cli" / "view" / "page.html").is_file()
    vendored = ("yamnet_classification_tflite_1.tflite", "yamnet_class_map.csv", "LICENSE", "PROVENANCE.md")
    for name in vendored:  # package data, checked by sha256 when loaded
        installed_file, tree_file = site / "earmark" / "experts" / "yamnet" / name, ROOT / "experts" / "yamnet" / name
        assert installed_file.read_bytes() == tree_file.read_bytes(), name
    assert not any((site / "earmark" / name).exists() for name in NOT_SHIPPED)


def test_only_the_earmark_namespace_is_installed(tmp_path):
    for bare in ("flows", "schemas", "storage", "metrics", "experts", "prompts", "stages", "llm", "core", "cli"):
        got = _python(f"import {bare}", tmp_path)
        assert got.returncode != 0 and "No module named" in got.stderr, bare
    got = _python(
        "import earmark.flows, earmark.stages.base, earmark.experts, earmark.prompts, earmark.llm, earmark.core.config; "
        "print(earmark.prompts.PROMPT_DIR.is_dir())",
        tmp_path,
    )
    assert got.returncode == 0 and got.stdout.strip() == "True", got.stderr


def test_prefect_is_imported_only_by_the_flows():
    got = _python(
        "import sys, earmark.stages.synthesize, earmark.stages.filter, earmark.stages.evaluate, "
        "earmark.cli.commands; print(sorted(m for m in sys.modules if m.split('.')[0] == 'prefect')[:3])",
        None,
    )
    assert got.returncode == 0 and got.stdout.strip() == "[]", got.stdout + got.stderr


def test_every_package_is_in_a_layer_and_in_the_architecture_table():
    """import-linter checks every package, and docs/architecture.md's layer table names each one."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    layers = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    in_layers = {m.strip() for layer in layers for m in layer.split("|")}
    tops = {".".join(p.split(".")[:2]) for p in config["tool"]["setuptools"]["packages"] if p != "earmark"}
    covered = {t for t in tops if any(m == t or m.startswith(t + ".") for m in in_layers)}
    assert covered == tops, sorted(tops - covered)
    table = (ROOT / "docs" / "architecture.md").read_text().split("### One namespace")[0]
    assert all(f"`{m}`" in table or f"`{m.rsplit('.', 1)[0]}`" in table or f".{m.rsplit('.', 1)[1]}`" in table
               for m in in_layers), [m for m in in_layers if f"`{m}`" not in table]  # fmt: skip
