#!/usr/bin/env python3
"""Train the learned sound-event tagger (AudioSet-named classes per 2 s window) and write its shipped files.

  python training/build_corpus.py download && python training/build_corpus.py scan     # sources (see README)
  python training/build_corpus.py events                  # ev_train (4800) + ev_dev (960) labelled mixes
  python training/train_events.py                         # features (cached) -> fold models -> out-of-fold
                                                          # calibration + thresholds -> the fold models as the shipped ensemble -> DEV report
                                                          # -> experts/learned/events_weights.npz + events_classes.json
  python training/train_events.py --cache-shard 0/2 &  python training/train_events.py --cache-shard 1/2   # fill
                                                          # the feature cache in 2 processes first (optional)
  python training/train_events.py --tiny                  # CI smoke run (tiny corpus, writes into the cache only)

Inputs are the domain tagger's window features (experts/learned/model.py, feature version v1+mn1mid: Whisper tiny.en
encoder pooled, Silero VAD, DSP, musicnn mid-end; cached by clip content hash as in train_probe.py). Targets per
window and class: 1 where an event of the class is salient, 0 where none is audible, masked where one is audible
but not salient (build_corpus.event_truth / class_windows).

Model selection uses TRAIN data only: the ev_train clips come in K folds whose labelled events come from disjoint
packages per class (event_mixes.py); a model trained on the other folds predicts each fold (out-of-fold, OOF). Per
class, isotonic regression of the truth on the OOF probability is the calibration, and the threshold is the lowest
calibrated probability at which the OOF precision reaches PRECISION_BAR (with at least MIN_OOF_HITS true hits);
a class without such a threshold is shipped with in_evidence = false. With `--schedule fixed` (the default) the K
fold models, each trained a fixed number of epochs, are the shipped ensemble (the mean of their sigmoids); with
`--schedule early-stopping` one network is then trained on all folds. DEV (ev_dev: other packages) is only scored, at those thresholds, and written to the class file and
training/EVENTS.md; nothing is chosen on it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from earmark.experts.learned.events import EVENT_CLASSES, EVENT_WEIGHTS, LABEL_SET
from earmark.experts.learned.model import FEATURE_VERSION_MUSICNN_MID, MUSICNN_MID_VERSION

HERE = Path(__file__).resolve().parent

PRECISION_BAR = 0.90
MIN_OOF_HITS = 10  # true positive windows at the threshold, out of fold
T_GRID = np.round(np.arange(0.30, 0.991, 0.01), 3)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def load(tdir: Path, split: str) -> list[dict]:
    return [json.loads(line) for line in open(tdir / "mixes" / f"{split}.jsonl")]


def features(tdir: Path, split: str, recs: list[dict], shard: tuple[int, int] = (0, 1), kind: str = "v1+mn1mid"):
    """(X (n_windows, D), clip index per window); D = the probe's v1 (+ mn1mid) window features (cached)."""
    from train_probe import features_for, musicnn_features_for

    if shard[1] > 1:  # only fill the caches for every n-th clip
        sub = [r for i, r in enumerate(recs) if i % shard[1] == shard[0]]
        features_for(tdir, split, sub, [])
        if kind != "v1":
            musicnn_features_for(tdir, split, sub, [], kind=MUSICNN_MID_VERSION)
        return None, None
    X, _, cidx = features_for(tdir, split, recs, [])
    if kind == "v1":
        return X.astype(np.float32), cidx
    M = musicnn_features_for(tdir, split, recs, [], kind=MUSICNN_MID_VERSION)
    return np.concatenate([X, M], axis=1).astype(np.float32), cidx


def targets(recs: list[dict], classes: list[str]) -> np.ndarray:
    """(n_windows, C) in {1, 0, -1 = masked}."""
    rows = []
    for r in recs:
        nw = len(r["windows"])
        cw = r.get("class_windows", {})
        rows.append(np.array([cw.get(c, [0] * nw) for c in classes], np.int8).T.reshape(nw, len(classes)))
    return np.concatenate(rows)


def _mlp(X, Y, hidden: int, seed: int, lr: float, wd: float, dropout: float, pos_weight: float):
    """The network (standardised input -> hidden ReLU, dropout -> one logit per class), its AdamW optimiser, the
    masked multi-label BCE with positives weighted (events are rare: ~1 % of windows per class) and the seeded
    batch-order generator."""
    import torch
    from torch import nn

    torch.set_num_threads(int(os.environ.get("EARMARK_TRAIN_THREADS", "1")))
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    net = nn.Sequential(nn.Linear(X.shape[1], hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, Y.shape[1]))
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=wd)
    pw = torch.full((Y.shape[1],), float(pos_weight))

    def mloss(z, y):
        m = (y >= 0).float()
        loss = nn.functional.binary_cross_entropy_with_logits(z, y.clamp(min=0), reduction="none", pos_weight=pw)
        return (loss * m).sum() / m.sum().clamp(min=1)

    return net, opt, mloss, rng


def _layers(net) -> list:
    from torch import nn

    lin = [m for m in net if isinstance(m, nn.Linear)]
    return [(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy()) for m in lin]


def fit_mlp(
    X,
    Y,
    Xv,
    Yv,
    hidden: int,
    epochs: int,
    seed: int,
    lr: float = 1e-3,
    wd: float = 1e-2,
    dropout: float = 0.5,
    patience: int = 8,
    pos_weight: float = 5.0,
):
    """`_mlp` with early stopping on (Xv, Yv). Returns [(W, b), ...]."""
    import torch

    net, opt, mloss, rng = _mlp(X, Y, hidden, seed, lr, wd, dropout, pos_weight)
    xt, yt = torch.from_numpy(X), torch.from_numpy(Y.astype(np.float32))
    xv, yv = torch.from_numpy(Xv), torch.from_numpy(Yv.astype(np.float32))
    from train_probe import train_early_stopped

    layers, best_epoch, best_loss = train_early_stopped(net, opt, mloss, xt, yt, xv, yv, epochs, patience, rng)
    log(f"    MLP: best epoch {best_epoch}, val loss {best_loss:.4f}")
    return layers


def fit_mlp_fixed(
    X,
    Y,
    hidden: int,
    epochs: int,
    seed: int,
    lr: float = 1e-3,
    wd: float = 1e-2,
    dropout: float = 0.5,
    pos_weight: float = 5.0,
):
    """`_mlp` trained for a fixed number of epochs, mini-batches of 256 in a seeded order (no early-stopping
    split). Returns [(W, b), ...]."""
    import torch

    net, opt, mloss, rng = _mlp(X, Y, hidden, seed, lr, wd, dropout, pos_weight)
    xt, yt = torch.from_numpy(X), torch.from_numpy(Y.astype(np.float32))
    for _ in range(epochs):
        net.train()
        perm = torch.from_numpy(rng.permutation(len(xt)))
        for i in range(0, len(xt), 256):
            idx = perm[i : i + 256]
            loss = mloss(net(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    return _layers(net)


def forward_ensemble(members, mu, sd, X) -> np.ndarray:
    """The mean of the members' sigmoid outputs (experts.probe.events.EventTagger.raw does the same)."""
    return np.mean([forward(layers, mu, sd, X) for layers in members], axis=0)


def forward(layers, mu, sd, X) -> np.ndarray:
    h = (X - mu) / sd
    for j, (W, b) in enumerate(layers):
        h = h @ W + b
        if j < len(layers) - 1:
            h = np.maximum(h, 0)
    return 1 / (1 + np.exp(-np.clip(h, -30, 30)))


def val_split(cidx: np.ndarray, frac: float, seed: int) -> np.ndarray:
    """A window mask selecting `frac` of the clips (early-stopping set)."""
    clips = np.unique(cidx)
    rng = np.random.default_rng(seed)
    pick = rng.choice(clips, size=max(1, int(round(frac * len(clips)))), replace=False)
    return np.isin(cidx, pick)


def calibrate(p: np.ndarray, y: np.ndarray) -> dict:
    """Isotonic P(y = 1 | p) as breakpoints (x increasing, y non-decreasing) in [0.001, 0.999]."""
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(out_of_bounds="clip", y_min=0.001, y_max=0.999).fit(p, y.astype(float))
    return {"x": [round(float(v), 6) for v in iso.X_thresholds_], "y": [round(float(v), 6) for v in iso.y_thresholds_]}


def pr_at(q: np.ndarray, y: np.ndarray, t: float) -> tuple[float, float, int, int]:
    """Precision, recall, true hits and positives of `q >= t` (masked windows already removed)."""
    pred = q >= t
    tp = int((pred & (y == 1)).sum())
    npred, npos = int(pred.sum()), int((y == 1).sum())
    return (tp / npred if npred else float("nan")), (tp / npos if npos else float("nan")), tp, npos


def choose_threshold(q: np.ndarray, y: np.ndarray) -> tuple[float | None, dict]:
    """The lowest calibrated threshold whose OOF precision reaches PRECISION_BAR with >= MIN_OOF_HITS hits."""
    for t in T_GRID:
        p, r, tp, npos = pr_at(q, y, float(t))
        if tp >= MIN_OOF_HITS and p >= PRECISION_BAR:
            return float(t), {"precision": round(p, 4), "recall": round(r, 4), "hits": tp, "positives": npos}
    best = max(T_GRID, key=lambda t: (np.nan_to_num(pr_at(q, y, float(t))[0]), -t))
    p, r, tp, npos = pr_at(q, y, float(best))
    return None, {
        "precision": round(float(np.nan_to_num(p)), 4),
        "recall": round(float(np.nan_to_num(r)), 4),
        "hits": tp,
        "positives": npos,
        "best_threshold": float(best),
    }


def file_support(recs: list[dict], cls: str) -> tuple[int, int]:
    """Distinct source files and packages of a class's salient events in a split."""
    files, pkgs = set(), set()
    for r in recs:
        for e in r["events"]:
            if e["class"] == cls and 1 in e["windows"]:
                files.add(e["src"])
                pkgs.add(e["pkg"])
    return len(files), len(pkgs)


def train(a) -> None:
    tdir = a.cache / a.tag
    if a.tiny and not (tdir / "mixes" / "ev_dev.jsonl").exists():  # download, scan, mix (domain + event mixes)
        step = "events" if (tdir / "sources.jsonl").exists() else "all"
        subprocess.run(
            [sys.executable, str(HERE / "build_corpus.py"), step, "--tiny", "--cache", str(a.cache)], check=True
        )
    tr, dv = load(tdir, "ev_train"), load(tdir, "ev_dev")
    meta = json.loads((tdir / "mixes" / "ev_train.meta.json").read_text())
    classes, by_file = meta["classes"], set(meta["oof_by_file"])
    if a.cache_shard:
        shard = tuple(int(v) for v in a.cache_shard.split("/"))
        features(tdir, "ev_train", tr, shard, a.features)
        features(tdir, "ev_dev", dv, shard, a.features)
        return
    t0 = time.time()
    X, cidx = features(tdir, "ev_train", tr, kind=a.features)
    Xd, cidx_d = features(tdir, "ev_dev", dv, kind=a.features)
    log(f"features: train {X.shape}, dev {Xd.shape} ({time.time() - t0:.0f} s)")
    Y, Yd = targets(tr, classes), targets(dv, classes)
    fold = np.asarray([tr[i]["fold"] for i in cidx])
    mu, sd = X.mean(axis=0), X.std(axis=0) + 1e-4
    Xn = X  # standardised inside forward / fit via mu, sd
    oof = np.zeros(Y.shape, np.float32)
    K = int(max(fold)) + 1
    members = []
    for k in range(K):
        log(f"fold {k}: train on the other folds, predict fold {k}")
        trn = fold != k
        Xa, Ya = ((Xn[trn] - mu) / sd).astype(np.float32), Y[trn]
        if a.schedule == "fixed":  # the fold models are the shipped ensemble
            layers = fit_mlp_fixed(Xa, Ya, a.hidden, a.epochs, a.seed + k)
            members.append(layers)
        else:
            v = val_split(cidx[trn], 0.1, a.seed + k)
            layers = fit_mlp(Xa[~v], Ya[~v], Xa[v], Ya[v], a.hidden, a.epochs, a.seed + k)
        oof[fold == k] = forward(layers, mu, sd, X[fold == k])
    if a.schedule == "early-stopping":
        log("final model: all folds")
        v = val_split(cidx, 0.1, a.seed + 99)
        Xa = ((X - mu) / sd).astype(np.float32)
        members = [fit_mlp(Xa[~v], Y[~v], Xa[v], Y[v], a.hidden, a.epochs, a.seed + 99)]
    Pd = forward_ensemble(members, mu, sd, Xd)
    out_classes = []
    for j, c in enumerate(classes):
        m = Y[:, j] >= 0
        cal = calibrate(oof[m, j], Y[m, j])
        q = np.interp(oof[m, j], cal["x"], cal["y"])
        thr, oof_stats = choose_threshold(q, Y[m, j])
        md = Yd[:, j] >= 0
        qd = np.interp(Pd[md, j], cal["x"], cal["y"])
        t_rep = thr if thr is not None else oof_stats["best_threshold"]
        dp, dr, dtp, dpos = pr_at(qd, Yd[md, j], t_rep)
        nf, npk = file_support(dv, c)
        ntf, ntp = file_support(tr, c)
        out_classes.append(
            {
                "name": c,
                "in_evidence": thr is not None,
                "threshold": t_rep,
                "calibration": cal,
                "oof": {**oof_stats, "split": "by file" if c in by_file else "by package"},
                "dev": {
                    "precision": None if np.isnan(dp) else round(dp, 4),
                    "recall": None if np.isnan(dr) else round(dr, 4),
                    "hits": dtp,
                    "positives": dpos,
                    "files": nf,
                    "packages": npk,
                },
                "train_files": ntf,
                "train_packages": ntp,
            }
        )
        log(
            f"  {c:34s} thr {t_rep:.2f} {'EVID' if thr is not None else 'out '} OOF P {oof_stats['precision']:.3f} "
            f"R {oof_stats['recall']:.3f} | DEV P {dp:.3f} R {dr:.3f} (pos {dpos}, files {nf}, pkgs {npk})"
        )
    wpath = a.out_dir / ("events_weights_tiny.npz" if a.tiny else EVENT_WEIGHTS.name)
    cpath = a.out_dir / ("events_classes_tiny.json" if a.tiny else EVENT_CLASSES.name)
    arrays = {"mu": mu.astype(np.float32), "sd": sd.astype(np.float32)}
    for m, layers in enumerate(members):  # one member: W0, b0, ...; an ensemble: m0_W0, m0_b0, m1_W0, ...
        prefix = f"m{m}_" if len(members) > 1 else ""
        for i, (W, b) in enumerate(layers):
            arrays[f"{prefix}W{i}"], arrays[f"{prefix}b{i}"] = W.astype(np.float16), b.astype(np.float32)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(wpath, **arrays)
    doc = {
        "label_set": LABEL_SET,
        "weights": wpath.name,
        "feature_version": FEATURE_VERSION_MUSICNN_MID if a.features != "v1" else "v1",
        "weights_sha256": hashlib.sha256(wpath.read_bytes()).hexdigest(),
        "trained": time.strftime("%Y-%m-%d %H:%M"),
        "seed": a.seed,
        "hidden": a.hidden,
        "schedule": a.schedule,
        "epochs": a.epochs,
        "members": len(members),
        "precision_bar": PRECISION_BAR,
        "min_oof_hits": MIN_OOF_HITS,
        "train": {"clips": len(tr), "windows": int(len(X)), "folds": K},
        "dev": {"clips": len(dv), "windows": int(len(Xd))},
        "threshold_rule": "lowest calibrated probability with out-of-fold precision >= precision_bar (TRAIN only)",
        "calibration_rule": "isotonic, out-of-fold TRAIN windows (folds by package per class)",
        "classes": out_classes,
    }
    cpath.write_text(json.dumps(doc, indent=1))
    md = report_markdown(doc)
    (tdir / ("events_report_tiny.md" if a.tiny else "events_report.md")).write_text(md + "\n")
    print(md)
    n_ev = sum(c["in_evidence"] for c in out_classes)
    n_dev = sum(c["in_evidence"] and (c["dev"]["precision"] or 0) >= PRECISION_BAR for c in out_classes)
    log(
        f"wrote {wpath} ({wpath.stat().st_size / 1e6:.2f} MB) and {cpath}: {len(classes)} classes, {n_ev} in "
        f"evidence (OOF), {n_dev} of them with DEV precision >= {PRECISION_BAR}"
    )


def report_markdown(doc: dict) -> str:
    """The per-class table of a class file: OOF (TRAIN, by package) and DEV precision / recall at the threshold."""

    def f(v):
        return "–" if v is None else f"{v:.2f}"

    rows = [
        "| class | in evidence | threshold | OOF P | OOF R | DEV P | DEV R | DEV positive windows | DEV files / "
        "packages | TRAIN files / packages |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in sorted(doc["classes"], key=lambda c: (not c["in_evidence"], -(c["dev"]["precision"] or 0), c["name"])):
        o, d = c["oof"], c["dev"]
        rows.append(
            f"| {c['name']} | {'yes' if c['in_evidence'] else 'no'} | {c['threshold']:.2f} | "
            f"{f(o['precision'])} | {f(o['recall'])} | {f(d['precision'])} | {f(d['recall'])} | "
            f"{d['positives']} | {d['files']} / {d['packages']} | {c['train_files']} / {c['train_packages']} |"
        )
    ev = [c for c in doc["classes"] if c["in_evidence"]]
    ok = [c for c in ev if (c["dev"]["precision"] or 0) >= doc["precision_bar"] and c["dev"]["hits"] > 0]
    rows.append("")
    rows.append(
        f"{len(doc['classes'])} classes; {len(ev)} in evidence (OOF precision >= {doc['precision_bar']} with "
        f">= {doc['min_oof_hits']} hits); {len(ok)} of them reach DEV precision >= {doc['precision_bar']}."
    )
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--tag", default=None, help="cache sub-folder of the corpus (default tagger; tagger-tiny)")
    ap.add_argument("--out-dir", type=Path, default=None, help="where the weights and class file go")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument(
        "--schedule",
        choices=("fixed", "early-stopping"),
        default="fixed",
        help="fixed: the K fold models, each trained --epochs epochs, are the shipped ensemble (chosen "
        "over early-stopping because more classes pass the out-of-fold precision rule, 9 vs 5: a "
        "TRAIN-only criterion); early-stopping: one model on all folds, stopped on a 10 %% split",
    )
    ap.add_argument("--epochs", type=int, default=None, help="default: 25 (fixed), 60 (early-stopping)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-shard", default="", metavar="I/N", help="only fill the feature cache, shard I of N")
    ap.add_argument(
        "--features",
        choices=("v1+mn1mid", "v1"),
        default="v1+mn1mid",
        help="window features (v1 alone: an ablation, not for shipping)",
    )
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    a.tag = a.tag or ("tagger-tiny" if a.tiny else "tagger")
    if a.out_dir is None:
        a.out_dir = (a.cache / a.tag) if a.tiny else EVENT_WEIGHTS.parent
    a.epochs = a.epochs or (25 if a.schedule == "fixed" else 60)
    if a.tiny:
        a.hidden, a.epochs = 16, 5
    np.random.seed(a.seed)
    train(a)


if __name__ == "__main__":
    main()
