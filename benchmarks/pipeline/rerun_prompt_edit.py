"""Edit only the entailment prompt, re-run only entailment, and count what was regenerated.

Builds a small dataset from the generated corpus (one clip for each of the domains given), copies the prompt
templates, changes one sentence of `entailment.toml`, runs `rerun --stage synthesize --items entailment`
with the copy, and prints: shards computed/skipped per stage, LLM calls, and the per-table version diff.
Then repeats the rerun to show it makes no LLM call and publishes no new version.

    python benchmarks/pipeline/rerun_prompt_edit.py [--llm-model smollm2-135m-instruct] [--domains S00,0M0,00A,SMA]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")

import earmark.prompts as prompts_pkg  # noqa: E402
from earmark.core.config import load_config  # noqa: E402
from earmark.corpus import generate_corpus  # noqa: E402
from earmark.flows.build import run_build  # noqa: E402
from earmark.flows.rerun import run_rerun  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm-model", default="smollm2-135m-instruct")
    ap.add_argument("--domains", default="S00,0M0,00A,SMA")
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rerun_bench_"))
    items = generate_corpus(root / "corpus", per_domain=1, seed=args.seed)
    inputs = root / "inputs"
    inputs.mkdir()
    for item in items:
        if item.domain in args.domains.split(","):
            shutil.copy(item.path, inputs / item.path.name)
    cfg = load_config(
        None,
        {"data_root": str(root / "data"), "dataset": "rerun", "inputs": [str(inputs)], "llm.model": args.llm_model},
    )
    t0 = time.perf_counter()
    built = run_build(cfg)
    print(f"build: version {built['version']}, {time.perf_counter() - t0:.0f} s, LLM calls {built['llm']['calls']}")

    edited = root / "prompts"
    shutil.copytree(Path(prompts_pkg.__file__).parent, edited, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    path = edited / "entailment.toml"
    path.write_text(path.read_text().replace("Make the neutral one hard:", "Make the neutral one genuinely hard:"))
    cfg = cfg.model_copy(update={"synthesize": cfg.synthesize.model_copy(update={"prompt_dir": edited})})
    for attempt in ("after the edit", "again, nothing changed"):
        t0 = time.perf_counter()
        out = run_rerun(cfg, "synthesize", ["entailment"])
        print(
            f"\nrerun {attempt}: {out['base']} → {out['version']} ({'new' if out['created'] else 'unchanged'}), "
            f"{time.perf_counter() - t0:.0f} s, LLM calls {out['llm']['calls']}, cache hits {out['llm']['cache_hits']}"
        )
        print("shards:", json.dumps(out["shards"]))
        print(out["diff_markdown"])


if __name__ == "__main__":
    main()
