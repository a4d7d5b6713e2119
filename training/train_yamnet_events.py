"""An event head over YAMNet's embedding: which AudioSet classes and ontology groups it may state, and from which score.

    python training/yamnet_embeddings.py --split ev_train --split ev_dev     # the features (cached)
    python training/train_yamnet_events.py --tag tagger-ev                    # fold models -> OOF thresholds -> DEV

YAMNet's own scores name stylised game effects poorly (calibrate_yamnet.py: 12 classes and groups reach DEV
precision 0.90). Its 1,024-d embedding is a general audio-event representation learned on AudioSet; this head
learns the labelled classes from it. Input per 2 s window: max and mean of the frames' embeddings and the max of
their 521 scores (`earmark.experts.yamnet.events.window_features`). Truth per window and node (a labelled class,
or an ontology group of them: positive where any class under it is salient) is calibrate_yamnet.py's: unknown
content (an effect bed, an unlabelled effect) is masked unless positive.

Selection uses TRAIN only: ev_train's folds have disjoint packages per class (event_mixes.py); a network trained
on the other folds predicts each fold (out of fold, OOF), and a node's threshold is the lowest grid point where
its OOF precision >= 0.93 on >= 10 windows (none: the node is out). The K fold networks are the shipped ensemble
(the mean of their sigmoids), so the OOF scores are those of networks like the shipped ones. DEV (ev_dev, other
packages) then confirms: a node states events when its DEV precision at the threshold >= 0.90 on >= 10 true
windows from >= 2 DEV packages. Writes `experts/yamnet/event_head.npz` (float16 weights) and
`experts/yamnet/event_head.json` (per node: threshold, TRAIN OOF and DEV precision / recall, in_evidence).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_yamnet import BAR, GROUPS, MIN_HITS, MIN_PACKAGES, SHOWN_PACKAGES, TRAIN_BAR, pr, truth  # noqa: E402
from earmark.experts.yamnet.events import (  # noqa: E402
    HEAD,
    HEAD_POLICY,
    POLICY,
    EventHead,
    class_names,
    group_indices,
    load_policy,
    ontology,
)
from earmark.experts.yamnet.model import EMBEDDING_DIM, LABEL_SET, MODEL_SHA256  # noqa: E402
from train_events import fit_mlp_fixed  # noqa: E402
from yamnet_embeddings import features  # noqa: E402

# thresholds from 0.05 to 0.99999, even in the logit: a head's sigmoid saturates, and precision is decided near 1
GRID = np.round(1 / (1 + np.exp(-np.linspace(np.log(0.05 / 0.95), np.log(0.99999 / 0.00001), 160))), 5)


def log(*a) -> None:
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def node_targets(recs, wins, nodes, labelled):
    """(n_windows, n_nodes) truth in {1, 0, -1} and, per node, the package of each positive window."""
    cols, pkgs = [], []
    for node in nodes:
        t, p = truth(recs, wins, node, labelled)
        cols.append(t)
        pkgs.append(p)
    return np.stack(cols, axis=1), pkgs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--tag", default="tagger-ev")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--pos-weight", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train-bar", type=float, default=TRAIN_BAR)
    ap.add_argument(
        "--oof-bag", type=int, default=1,
        help="networks per fold whose mean scores the fold's windows (the shipped head is a mean of networks too)",
    )  # fmt: skip
    ap.add_argument("--out", type=Path, default=HEAD)
    ap.add_argument("--policy", type=Path, default=HEAD_POLICY)
    ap.add_argument(
        "--score-policy", type=Path, default=POLICY, help="calibrate_yamnet.py's policy: YAMNet's own score thresholds"
    )
    ap.add_argument(
        "--choose", choices=["recall", "precision"], default="precision", help="how a node's rule is chosen"
    )
    ap.add_argument("--dry-run", action="store_true", help="print the table, write nothing")
    a = ap.parse_args()
    tr, trf = features(a.cache, a.tag, "ev_train", 2)
    dv, dvf = features(a.cache, a.tag, "ev_dev", 2)
    labelled = {e["class"] for r in tr + dv for e in r["events"] if e["class"]}
    onto = ontology()
    nodes = sorted(c for c in labelled if c in onto.nodes) + [g for g in GROUPS if g not in labelled]
    log(f"{len(nodes)} nodes; TRAIN {len(tr)} clips, DEV {len(dv)} clips")
    Ytr, _ = node_targets(tr, trf, nodes, labelled)
    Ydv, pdv = node_targets(dv, dvf, nodes, labelled)
    Xtr, Xdv = np.concatenate(trf), np.concatenate(dvf)
    fold = np.concatenate([np.full(len(w), r["fold"]) for r, w in zip(tr, trf)])
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0) + 1e-3
    K = int(fold.max()) + 1
    oof = np.zeros(Ytr.shape, np.float32)
    members = []
    for k in range(K):
        t0 = time.time()
        bag = []
        for m in range(a.oof_bag):  # member 0 of each fold is shipped; the fold's bag scores its windows
            layers = fit_mlp_fixed(
                ((Xtr[fold != k] - mu) / sd).astype(np.float32), Ytr[fold != k], a.hidden, a.epochs,
                a.seed + k + 100 * m, pos_weight=a.pos_weight,
            )  # fmt: skip
            # fit_mlp_fixed learns on standardised input: fold the standardisation into the first layer
            W0, b0 = layers[0]
            layers = [(W0 / sd[:, None], b0 - (mu / sd) @ W0)] + layers[1:]
            # as shipped: weights in float16, biases in float32
            bag.append(tuple((W.astype(np.float16).astype(np.float32), b.astype(np.float32)) for W, b in layers))
        members.append(bag[0])
        oof[fold == k] = EventHead(tuple(bag), tuple(nodes), "")(Xtr[fold == k])
        log(f"fold {k}: {time.time() - t0:.0f} s")
    sdv = EventHead(tuple(members), tuple(nodes), "")(Xdv)  # the shipped ensemble, as the expert runs it
    names = list(class_names())
    score_rules = {c["name"]: c for c in load_policy(a.score_policy)["classes"] if "train" in c}
    rows = []
    for j, node in enumerate(nodes):
        t_tr, t_dv = Ytr[:, j], Ydv[:, j]
        head_tr, head_dv = oof[:, j], sdv[:, j]
        thr = next(
            (
                g
                for g in GRID
                if (q := pr(head_tr, t_tr, g))[0] is not None and q[0] >= a.train_bar and q[2] >= MIN_HITS
            ),
            None,
        )
        row = {"name": node, "mid": onto.nodes[node].mid, "group": node not in labelled, "output": j}
        row["head_threshold"] = float(thr) if thr is not None else None
        # YAMNet's own group score (calibrate_yamnet.py's rule, chosen on TRAIN), where it passed its TRAIN bar
        idx = group_indices(names, node) + 2 * EMBEDDING_DIM
        sr = score_rules.get(node)
        s_thr = sr["threshold"] if sr and not sr["why"].startswith("TRAIN") and idx.size else None
        row["score_threshold"] = s_thr
        sc_tr = Xtr[:, idx].max(axis=1) if idx.size else np.zeros(len(Xtr))
        sc_dv = Xdv[:, idx].max(axis=1) if idx.size else np.zeros(len(Xdv))
        # the rule, among those that pass the TRAIN bar: `--choose recall` takes either where their union passes,
        # else the one with more TRAIN hits; `--choose precision` also tries both at once and takes the one with
        # the highest TRAIN precision (more hits among equals)
        cands = []
        if thr is not None and s_thr is not None:
            cands.append(("either", (head_tr >= thr) | (sc_tr >= s_thr), (head_dv >= thr) | (sc_dv >= s_thr)))
            if a.choose == "precision":
                cands.append(("both", (head_tr >= thr) & (sc_tr >= s_thr), (head_dv >= thr) & (sc_dv >= s_thr)))
        if thr is not None:
            cands.append(("head", head_tr >= thr, head_dv >= thr))
        if s_thr is not None:
            cands.append(("scores", sc_tr >= s_thr, sc_dv >= s_thr))
        chosen = None
        for rule, ptr, pdv_ in cands:
            p, r_, tp, fp, pos = pr(ptr.astype(float), t_tr, 0.5)
            if p is None or p < a.train_bar or tp < MIN_HITS:
                continue
            if a.choose == "precision":
                if chosen is None or (p, tp) > (chosen[4], chosen[3]):
                    chosen = (rule, ptr, pdv_, tp, p)
            elif chosen is None or rule == "either" or tp > chosen[3]:
                chosen = (rule, ptr, pdv_, tp, p)
                if rule == "either":
                    break
        if chosen is None:
            row.update(
                rule=None,
                in_evidence=False,
                why="neither the head nor YAMNet's scores pass the TRAIN bar on >= 10 windows",
            )
            ptr, pdv_ = head_tr >= (thr or 0.5), head_dv >= (thr or 0.5)
        else:
            row["rule"], ptr, pdv_ = chosen[0], chosen[1], chosen[2]
        p, r_, tp, fp, pos = pr(ptr.astype(float), t_tr, 0.5)
        row["train"] = {
            "precision": None if p is None else round(p, 3),
            "recall": round(r_, 3),
            "tp": tp,
            "fp": fp,
            "positives": pos,
        }
        p, r_, tp, fp, pos = pr(pdv_.astype(float), t_dv, 0.5)
        pk = sorted({x for x in pdv[j][pdv_ & (t_dv == 1)] if x})
        row["dev"] = {
            "precision": None if p is None else round(p, 3),
            "recall": round(r_, 3),
            "tp": tp,
            "fp": fp,
            "positives": pos,
            "packages": len(pk),
        }
        if chosen is not None:
            ok = p is not None and p >= BAR and tp >= MIN_HITS and len(pk) >= MIN_PACKAGES
            row.update(in_evidence=ok, why="" if ok else "DEV precision < 0.90, or < 10 true windows, or < 2 packages")
        rows.append(row)
    depth = {r["name"]: len(onto.ancestors(r["name"])) for r in rows}
    rows.sort(key=lambda r: (-depth[r["name"]], r["name"]))
    print(
        "| class or group | in evidence | rule | head from | scores from | TRAIN P | TRAIN R | TRAIN hits | DEV P | DEV R | DEV hits | DEV packages |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    f = lambda x: "–" if x is None else f"{x:.2f}"  # noqa: E731
    for r in rows:
        t, d = r["train"], r["dev"]
        g = lambda x: "–" if x is None else f"{x:.4g}"  # noqa: E731
        print(
            f"| {r['name']}{' (group)' if r['group'] else ''} | {'yes' if r['in_evidence'] else 'no'} | {r['rule'] or '–'} | "
            f"{g(r['head_threshold'])} | {g(r['score_threshold'])} | "
            f"{f(t['precision'])} | {t['recall']:.2f} | {t['tp']} | {f(d['precision'])} | {d['recall']:.2f} | {d['tp']} | {d['packages']} |"
        )
    n = sum(r["in_evidence"] for r in rows)
    n3 = sum(r["in_evidence"] and r["dev"]["packages"] >= SHOWN_PACKAGES for r in rows)
    n_tr = sum(r["rule"] is not None for r in rows)
    print(
        f"\n{len(rows)} classes and groups tried; {n_tr} pass the TRAIN out-of-fold bar (the hyperparameters were chosen "
        f"by this count); {n} state events, {n3} of them shown on >= 3 DEV packages"
    )
    if a.dry_run:
        return
    arrays = {}
    for m, layers in enumerate(members):
        for li, (W, b) in enumerate(layers):
            arrays[f"m{m}_W{li}"] = W.astype(np.float16)
            arrays[f"m{m}_b{li}"] = b.astype(np.float32)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    a.out.write_bytes(buf.getvalue())
    meta = {
        "label_set": LABEL_SET,
        "model_sha256": MODEL_SHA256,
        "head_sha256": hashlib.sha256(buf.getvalue()).hexdigest(),
        "window_s": 2.0,
        "members": K,
        "nodes": nodes,
        "trained": {"hidden": a.hidden, "epochs": a.epochs, "pos_weight": a.pos_weight, "seed": a.seed},
        "precision_bar": BAR,
        "train_bar": a.train_bar,
        "min_hits": MIN_HITS,
        "min_dev_packages": MIN_PACKAGES,
        "data": {"train": f"{a.tag}/ev_train ({len(tr)} clips)", "dev": f"{a.tag}/ev_dev ({len(dv)} clips)"},
        "classes": rows,
    }
    a.policy.write_text(json.dumps(meta, indent=1) + "\n")
    print(f"(written to {a.out}, {a.policy})")


if __name__ == "__main__":
    main()
