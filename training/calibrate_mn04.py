"""Measure whether EfficientAT mn04 names events better than YAMNet, alone or as a second opinion beside it.

    python training/mn04_windows.py --tag tagger-ev2        # mn04's window scores (cached)
    python training/calibrate_mn04.py --tag tagger-ev2      # YAMNet's are calibrate_yamnet.py's cache

The data, truth, nodes and bars are calibrate_yamnet.py's: per 2 s window of the labelled event mixes, `ev_train`
(TRAIN packages) chooses and `ev_dev` (DEV packages) confirms. A node's score from a tagger is the best score of
the tagger's classes in its ontology subtree. Three rules per node, each chosen on TRAIN only (the lowest threshold,
or for "both" the pair of thresholds with the most true windows, at which TRAIN precision >= 0.93 on >= 10 true
windows):

  yamnet   YAMNet's score alone (calibrate_yamnet.py's rule)
  mn04     mn04's score alone
  both     both scores at their thresholds (two taggers agreeing)

`best` is, per node, the rule with the most TRAIN true windows among those that pass TRAIN (nothing read off DEV).
A node is trusted when DEV at the chosen thresholds gives precision >= 0.90 on >= 10 true windows from >= 3 DEV
packages (the issue's bar). Prints the table for docs/benchmarks.md; writes nothing else.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_yamnet import BAR, GRID, GROUPS, MIN_HITS, SHOWN_PACKAGES, TRAIN_BAR, pr, truth  # noqa: E402
from calibrate_yamnet import scores as yamnet_scores  # noqa: E402
from earmark.experts.efficientat.model import labels as mn04_labels  # noqa: E402
from earmark.experts.yamnet.events import class_names, group_indices, ontology  # noqa: E402
from mn04_windows import scores as mn04_scores  # noqa: E402

GRID2 = np.round(np.arange(0.05, 0.96, 0.05), 2)  # the "both" rule's grid per tagger


def node_scores(wins: list[np.ndarray], idx: np.ndarray) -> np.ndarray:
    return np.concatenate([w[:, idx].max(axis=1) if idx.size else np.zeros(len(w)) for w in wins])


def pr2(a: np.ndarray, b: np.ndarray, t: np.ndarray, ta: float, tb: float):
    m = t != -1
    pred = (a >= ta) & (b >= tb) & m
    tp, fp = int((pred & (t == 1)).sum()), int((pred & (t == 0)).sum())
    pos = int((t == 1).sum())
    return (tp / (tp + fp) if tp + fp else None), (tp / pos if pos else 0.0), tp, fp, pos


def choose_one(s, t, bar):
    return next((g for g in GRID if (q := pr(s, t, g))[0] is not None and q[0] >= bar and q[2] >= MIN_HITS), None)


def choose_two(a, b, t, bar):
    best, best_tp = None, -1
    for ta in GRID2:
        for tb in GRID2:
            p, _, tp, _, _ = pr2(a, b, t, ta, tb)
            if p is not None and p >= bar and tp >= MIN_HITS and tp > best_tp:
                best, best_tp = (float(ta), float(tb)), tp
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--tag", default="tagger-ev2")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    tr, try_ = yamnet_scores(a.cache, a.tag, "ev_train", a.jobs)
    dv, dvy = yamnet_scores(a.cache, a.tag, "ev_dev", a.jobs)
    _, trm = mn04_scores(a.cache, a.tag, "ev_train", a.jobs)
    _, dvm = mn04_scores(a.cache, a.tag, "ev_dev", a.jobs)
    for y, m in zip(try_ + dvy, trm + dvm):
        assert len(y) == len(m), (len(y), len(m))
    ynames, mnames = class_names(), mn04_labels()
    labelled = {e["class"] for r in tr + dv for e in r["events"] if e["class"]}
    onto = ontology()
    nodes = sorted(c for c in labelled if c in onto.nodes) + [g for g in GROUPS if g not in labelled]
    print(f"{len(nodes)} nodes; TRAIN {len(tr)} clips, DEV {len(dv)} clips\n")
    print(
        "| class or group | rule | threshold(s) | TRAIN P | TRAIN hits | DEV P | DEV R | DEV hits | DEV packages | trusted |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    f = lambda x: "–" if x is None else f"{x:.2f}"  # noqa: E731
    trusted: dict[str, list[str]] = {"yamnet": [], "mn04": [], "both": [], "best": []}
    for node in nodes:
        iy, im = group_indices(ynames, node), group_indices(mnames, node)
        t_tr, _ = truth(tr, try_, node, labelled)
        t_dv, p_dv = truth(dv, dvy, node, labelled)
        sy_tr, sy_dv = node_scores(try_, iy), node_scores(dvy, iy)
        sm_tr, sm_dv = node_scores(trm, im), node_scores(dvm, im)
        rows = {}
        for rule, (s_tr, s_dv) in (("yamnet", (sy_tr, sy_dv)), ("mn04", (sm_tr, sm_dv))):
            thr = choose_one(s_tr, t_tr, TRAIN_BAR) if (iy if rule == "yamnet" else im).size else None
            if thr is None:
                continue
            q_tr, q_dv = pr(s_tr, t_tr, thr), pr(s_dv, t_dv, thr)
            hit = (s_dv >= thr) & (t_dv == 1)
            rows[rule] = (f"{thr:.2f}", q_tr, q_dv, len({x for x in p_dv[hit] if x}))
        if iy.size and im.size and (two := choose_two(sy_tr, sm_tr, t_tr, TRAIN_BAR)) is not None:
            q_tr, q_dv = pr2(sy_tr, sm_tr, t_tr, *two), pr2(sy_dv, sm_dv, t_dv, *two)
            hit = (sy_dv >= two[0]) & (sm_dv >= two[1]) & (t_dv == 1)
            rows["both"] = (f"{two[0]:.2f} / {two[1]:.2f}", q_tr, q_dv, len({x for x in p_dv[hit] if x}))
        if rows:
            rows["best"] = max(rows.values(), key=lambda r: r[1][2])
        for rule, (thr, q_tr, q_dv, npk) in rows.items():
            ok = q_dv[0] is not None and q_dv[0] >= BAR and q_dv[2] >= MIN_HITS and npk >= SHOWN_PACKAGES
            if ok:
                trusted[rule].append(node)
            name = f"{node}{' (group)' if node not in labelled else ''}"
            print(
                f"| {name} | {rule} | {thr} | {f(q_tr[0])} | {q_tr[2]} | {f(q_dv[0])} | {q_dv[1]:.2f} | {q_dv[2]} | "
                f"{npk} | {'**yes**' if ok else 'no'} |"
            )
        if not rows:
            print(
                f"| {node} | – | no rule reaches TRAIN precision {TRAIN_BAR} on {MIN_HITS} windows | | | | | | | no |"
            )
    print()
    for rule, names in trusted.items():
        print(f"{rule}: {len(names)} trusted ({', '.join(names)})")


if __name__ == "__main__":
    main()
