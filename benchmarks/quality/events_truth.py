"""YAMNet's named events on mixed clips against what was mixed into them: the event policy now shipped beside
YAMNet's scores-only policy, without a build.

    .venv/bin/python benchmarks/quality/events_truth.py data/fresh6-input [data/devq-input ...]

Each folder holds the mixes (`*.wav`) and their truth (`truth.jsonl`, benchmarks/quality/devset.py). Every clip is
cut as a build cuts it (at most 10 s per clip; a longer file's first 10 s) and scored by YAMNet and the event
head; the events each policy states (`earmark.experts.yamnet.events.stated_events`) are compared with the truth
the way devset_truth.py does: right when an event of the class (or of a class under it, for an ontology group) was
mixed within 1 s of the stated span. Silence gating and the evidence's list cap are left out; the build's own
figures come from devset_truth.py. Prints, per folder and policy, the statements and how many are right, per class.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import soundfile as sf

from earmark.experts.yamnet import yamnet
from earmark.experts.yamnet.events import (
    POLICY,
    Rule,
    class_names,
    head_windows,
    load_policy,
    ontology,
    rules,
    stated_events,
)

TOLERANCE_S = 1.0
CLIP_S = 10.0


def scores_only() -> tuple[Rule, ...]:
    meta = load_policy(POLICY)
    return tuple(
        Rule(c["name"], float(c["threshold"]), float(c["dev"]["precision"]))
        for c in meta["classes"]
        if c["in_evidence"]
    )


def right(name: str, a: float, b: float, events: list[dict]) -> bool:
    under = ontology().subtree(name) | {name}
    return any(
        e["class"] in under and e["end_s"] >= a - TOLERANCE_S and e["start_s"] <= b + TOLERANCE_S for e in events
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--policy", type=Path, action="append", default=[], help="another policy file to compare")
    a = ap.parse_args()
    names = class_names()
    policies = {
        "scores only (events_policy.json)": scores_only(),
        "event_head.json, every class itself (before 2026-11-28)": rules(back_off=False),
        "shipped (event_head.json, thin classes as their trusted ancestor)": rules(),
    }
    policies |= {str(p): rules(p) for p in a.policy}
    for folder in a.folders:
        truth = {json.loads(line)["id"]: json.loads(line) for line in open(folder / "truth.jsonl")}
        tally = {p: Counter() for p in policies}
        wrong = {p: [] for p in policies}
        with_events = sum(1 for t in truth.values() if t["events"])
        named = {p: set() for p in policies}
        for cid, t in sorted(truth.items()):
            x, sr = sf.read(folder / f"{cid}.wav", dtype="float32", always_2d=True)
            x = x.mean(axis=1)
            assert sr == 16000, (cid, sr)
            x = x[: int(CLIP_S * sr)]
            got = yamnet().score(x, embedding=True)
            head = head_windows(got.scores, got.embeddings, x.size)
            for p, pol in policies.items():
                for ev in stated_events(got.scores, x.size, names, pol, head=head):
                    ok = right(ev.name, ev.start_s, ev.end_s, t["events"])
                    tally[p][(ev.name, ok)] += 1
                    if ok:
                        named[p].add(cid)
                    else:
                        truth_classes = sorted({e["class"] for e in t["events"]}) or ["no events"]
                        wrong[p].append(
                            f"{cid} {ev.name} {ev.start_s:g}-{ev.end_s:g} s (mixed: {', '.join(truth_classes)})"
                        )
        print(f"## {folder} ({len(truth)} clips, {with_events} with labelled events)\n")
        for p in policies:
            n = sum(tally[p].values())
            r = sum(v for (_, ok), v in tally[p].items() if ok)
            per = Counter()
            for (name, _ok), v in tally[p].items():
                per[name] += v
            right_per = {name: sum(v for (nm, ok), v in tally[p].items() if nm == name and ok) for name in per}
            print(f"- {p}: {n} statements, {r} right; clips with a right named event {len(named[p])}")
            print("  " + "; ".join(f"{k} {right_per[k]}/{v}" for k, v in sorted(per.items())))
            for w in wrong[p]:
                print(f"  wrong: {w}")
        print()


if __name__ == "__main__":
    main()
