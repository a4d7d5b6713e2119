"""Counts a newcomer feels in the package's code: large modules, long functions, repeated pieces, and the places
that spell out the stage order (what adding a stage touches).

    .venv/bin/python benchmarks/pipeline/code_counts.py [--rev COMMIT ...] [--json out.json]

Each `--rev` is read from git (`git archive`), so the counts before and after a change come from one run; without
one, the working tree. Package modules only: tests/, benchmarks/, training/, docker/, build/ and virtualenvs are
left out.

- **modules over 500 lines**, and **functions over 60 lines** (a function's lines from `def` to its last line);
- **repeated pairs**: two functions of different modules with the same body (the AST; the function's own name
  and docstring left out), or with one name and bodies at least 80 % alike (difflib over the unparsed source):
  the same piece written twice (`file_sha256`, `_now`, `domain_code` ...). `main` and dunders aside;
- **places that spell out the stage order**: modules with a literal list of three or more stage names, or a
  numeric stage gate (`stop >= 2`). Adding a stage touches each of them, plus its stage module and sub-flow.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import json
import re
import subprocess
import tarfile
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = {"tests", "benchmarks", "training", "docker", "build", ".venv", ".venv-paper", "data", "docs"}
STAGE_NAMES = {"ingest", "analyze", "synthesize", "filter", "review", "publish"}
GATE = re.compile(r"\bstop\s*[<>]=?\s*\d")


def modules(root: Path) -> list[Path]:
    return sorted(
        p for p in root.rglob("*.py") if not (set(p.relative_to(root).parts[:-1]) & LEFT_OUT) and ".git" not in p.parts
    )


class _Body(ast.NodeTransformer):
    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
            body = body[1:] or [ast.Pass()]
        node.body, node.name = body, "_"
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]


def counts(root: Path) -> dict:
    big, long_fns, spelled = [], [], []
    bodies: dict[str, list[str]] = defaultdict(list)
    names: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for path in modules(root):
        rel = str(path.relative_to(root))
        text = path.read_text()
        if (n := text.count("\n")) > 500:
            big.append((rel, n))
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 60:
                    long_fns.append((f"{rel}:{node.name}", length))
        for node in tree.body:  # module-level helpers (methods of one protocol look alike by design)
            if isinstance(node, ast.FunctionDef) and node.name != "main" and not node.name.startswith("__"):
                bare = _Body().visit(ast.parse(ast.unparse(node)))
                bodies[ast.dump(bare)].append(f"{rel}:{node.name}")
                names[node.name.lstrip("_")].append((f"{rel}:{node.name}", ast.unparse(bare)))
        lists = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Tuple | ast.List)
            and len({e.value for e in node.elts if isinstance(e, ast.Constant)} & STAGE_NAMES) >= 3
        ]
        if lists or GATE.search(text):
            spelled.append(rel)
    alike = {tuple(sorted(v[:2])) for v in bodies.values() if len({x.split(":")[0] for x in v}) > 1}
    for defs in names.values():
        for i, (a, src_a) in enumerate(defs):
            for b, src_b in defs[i + 1 :]:
                if a.split(":")[0] != b.split(":")[0] and difflib.SequenceMatcher(None, src_a, src_b).ratio() >= 0.8:
                    alike.add(tuple(sorted((a, b))))
    return {
        "modules_over_500": sorted(big, key=lambda x: -x[1]),
        "functions_over_60": sorted(long_fns, key=lambda x: -x[1]),
        "repeated_pairs": sorted(alike),
        "stage_order_spelled_in": spelled,
    }


def at_rev(rev: str) -> dict:
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        tarfile.open(fileobj=io.BytesIO(blob)).extractall(tmp, filter="data")
        return counts(Path(tmp))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", action="append", default=[], help="a git revision to count (repeatable)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--list", action="store_true", help="list every module, function and pair counted")
    a = ap.parse_args()
    got = {rev: at_rev(rev) for rev in a.rev} or {"working tree": counts(ROOT)}
    keys = list(next(iter(got.values())))
    print("| count | " + " | ".join(got) + " |")
    print("|---|" + "---|" * len(got))
    for k in keys:
        print(f"| {k.replace('_', ' ')} | " + " | ".join(str(len(c[k])) for c in got.values()) + " |")
    if a.list:
        for rev, c in got.items():
            print(f"\n## {rev}")
            for k in keys:
                print(f"\n{k}:")
                for row in c[k]:
                    print(f"  {row}")
    if a.json:
        a.json.write_text(json.dumps(got, indent=1))


if __name__ == "__main__":
    main()
