"""Focused vs joint synthesis on a built dataset's evidence, with the same model: validity, rejections, time.

Reads the evidence of a dataset's latest version (e.g. the demo: `make demo` first), then for every clip
generates all four item types twice, each run with an empty response cache so every request reaches the
model:
- focused: per caption kind 3 one-sentence requests, 5 QA requests, 1 entailment request (premise = the
  focused run's first long caption), 3 instruction requests;
- joint: one chain-of-thought request per clip writing everything.
Reported per strategy and item type: rows kept (vs. planned), rejections (by cause), LLM calls, prompt and
completion tokens, and wall time. Then the focused run is repeated with its cache to show 0 calls.

    python benchmarks/quality/synthesis_strategies.py [-d demo] [--clips N] [--llm-model M]
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

from earmark.core.config import EvidenceSection, LLMSection, SynthesizeSection
from earmark.llm.session import open_llm
from earmark.schemas import ClipEvidence, from_table
from earmark.stages import synthesize
from earmark.stages.base import Inputs
from earmark.stages.synthesize.common import Outcome
from earmark.storage import Catalog

ITEMS = ("captions", "qa", "entailment", "instructions")
PLANNED = {"captions": 18, "qa": 5, "entailment": 3, "instructions": 3}


def cause(reason: str) -> str:
    r = reason.lower()
    for pat, name in (
        ("negation", "negation in contradiction"),
        ("words, expected", "length"),
        ("breaks the rule", "answer breaks its rule"),
        ("repeats|are the same|copies", "repeat/copy"),
        ("must end with", "not a question"),
        ("truncat|mid-sentence", "truncated"),
        ("json|unusable", "invalid JSON"),
        ("non-english", "non-English"),
        ("premise", "no premise"),
    ):
        if re.search(pat, r):
            return name
    return "other"


class _Fixed:
    def __init__(self, client):
        self._client = client

    def client(self):
        return self._client


def _outcome(tables: dict, item: str) -> Outcome:
    return Outcome(list(tables[item]), [r for r in tables["rejections"] if r.table == item])


def run(evidence, strategy: str, llm_cfg: LLMSection, cache: Path) -> dict:
    llm = open_llm(llm_cfg, cache)
    cfg = SynthesizeSection()
    out: dict[str, dict] = {}
    try:
        if strategy == "joint":
            t0, s0 = time.perf_counter(), llm.stats()
            got = synthesize.run(
                "joint", cfg, llm_cfg, EvidenceSection(), _Fixed(llm), ITEMS, Inputs.of(evidence=evidence)
            )
            dt, s1 = time.perf_counter() - t0, llm.stats()
            for item in ITEMS:  # one reply carries every item: cost is reported once, under "all"
                out[item] = {"outcome": _outcome(got, item)}
            out["all"] = {"seconds": dt, **{k: s1[k] - s0[k] for k in ("calls", "prompt_tokens", "completion_tokens")}}
        else:
            captions = []
            for item in ITEMS:
                t0, s0 = time.perf_counter(), llm.stats()
                got = _outcome(
                    synthesize.run(
                        item,
                        cfg,
                        llm_cfg,
                        EvidenceSection(),
                        _Fixed(llm),
                        ITEMS,
                        Inputs.of(evidence=evidence, captions=captions),
                    ),
                    item,
                )
                s1 = llm.stats()
                out[item] = {
                    "outcome": got,
                    "seconds": time.perf_counter() - t0,
                    **{k: s1[k] - s0[k] for k in ("calls", "prompt_tokens", "completion_tokens")},
                }
                if item == "captions":
                    captions = got.rows
    finally:
        llm.close()
    return out


def table(name: str, res: dict, n_clips: int) -> list[str]:
    lines = [
        f"### {name}",
        "",
        "| item type | rows (planned) | rejected generations | top causes | calls | prompt tok | "
        "completion tok | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for item in ITEMS:
        o = res[item]["outcome"]
        llm_rows = [r for r in o.rows if getattr(r, "model", "") != "rule"]
        causes = Counter(cause(r.reason) for r in o.rejections).most_common(3)
        cost = res.get(item) if "calls" in res.get(item, {}) else None
        cells = (
            [f"{cost[k]}" for k in ("calls", "prompt_tokens", "completion_tokens")] + [f"{cost['seconds']:.0f}"]
            if cost
            else ["(in all)"] * 4
        )
        lines.append(
            f"| {item} | {len(o.rows)} ({PLANNED[item] * n_clips}; {len(o.rows) - len(llm_rows)} by rule) | "
            f"{len(o.rejections)} | {', '.join(f'{c} {n}' for c, n in causes) or '—'} | " + " | ".join(cells) + " |"
        )
    if "all" in res:
        a = res["all"]
        lines.append(
            f"| all (one reply per clip) | | | | {a['calls']} | {a['prompt_tokens']} | {a['completion_tokens']} | "
            f"{a['seconds']:.0f} |"
        )
    return lines + [""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-d", "--dataset", default="demo")
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--clips", type=int, default=None)
    ap.add_argument("--per-domain", type=int, default=None, help="at most this many clips per domain code")
    ap.add_argument("--llm-model", default=LLMSection().model)
    ap.add_argument("--strategies", default="focused,joint")
    args = ap.parse_args()
    cat = Catalog(args.data_root, args.dataset)
    v = cat.latest_version()
    if v is not None:
        keys = cat.version_shards(v).get("evidence", [])
    else:  # a build that stopped after the evidence stage: read its evidence shards
        keys = cat.keys_where(table="evidence")
        v = "unpublished evidence"
    evidence = sorted(from_table(ClipEvidence, cat.read("evidence", keys)), key=lambda e: (e.domain, e.clip_id))
    if args.per_domain:
        seen: Counter = Counter()
        evidence = [e for e in evidence if (seen.update([e.domain]) or seen[e.domain] <= args.per_domain)]
    evidence = evidence[: args.clips]
    llm_cfg = LLMSection(model=args.llm_model)
    print(f"{len(evidence)} clips of {args.dataset} {v}, model {args.llm_model}\n")
    for strategy in args.strategies.split(","):
        cache = Path(tempfile.mkdtemp(prefix=f"synth_{strategy}_"))
        res = run(evidence, strategy, llm_cfg, cache)
        print("\n".join(table(strategy, res, len(evidence))), flush=True)
        if strategy == "focused":
            again = run(evidence, strategy, llm_cfg, cache)
            print(f"focused again with its cache: {sum(again[i]['calls'] for i in ITEMS)} LLM calls\n", flush=True)


if __name__ == "__main__":
    main()
