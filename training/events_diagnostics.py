#!/usr/bin/env python3
"""Threshold-free diagnostics of the event tagger's features: out-of-fold ROC AUC and average precision per class.

  python training/events_diagnostics.py --tag tagger-ev                    # v1 + mn1mid (the shipped features)
  python training/events_diagnostics.py --tag tagger-ev --features v1      # without the musicnn block
  python training/events_diagnostics.py --tag tagger-ev --features v1+mn1mid+lm1 # + a log-mel statistics block

Same folds and network family as train_events.py (4 fold models; positives weighted 5, dropout 0.5, 25 epochs, no
early stopping); prints the mean over classes of the OOF (TRAIN, by package) and DEV (mean of the 4 fold models)
ROC AUC and average precision, the OOF means per scene, and with -v every class. The `lm1` block (per 2 s window and
64 log-mel bands: max - median, mean, std, 90th percentile - median, max and mean positive flux; 384 numbers) is
computed here and cached under <cache>/<tag>/features/lm1; it was tried and not adopted.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

import train_events as te


def lm1(x: np.ndarray) -> np.ndarray:
    from earmark.experts.learned.model import logmel
    from earmark.experts.learned.windows import window_bounds

    M, out = logmel(x), []
    for a, b in window_bounds(len(x)):
        W = M[a // 320 : max(a // 320 + 1, b // 320)]
        fl = np.maximum(np.diff(W, axis=0, prepend=W[:1]), 0)
        med = np.median(W, axis=0)
        out.append(
            np.concatenate(
                [W.max(0) - med, W.mean(0), W.std(0), np.percentile(W, 90, axis=0) - med, fl.max(0), fl.mean(0)]
            )
        )
    return np.asarray(out, np.float32)


def lm1_block(tdir: Path, split: str, recs: list[dict]) -> np.ndarray:
    import soundfile as sf

    d = tdir / "features" / "lm1"
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for r in recs:
        f = d / f"{r['sha1']}.npy"
        if not f.exists():
            x, _ = sf.read(tdir / "mixes" / split / f"{r['id']}.wav", dtype="float32")
            np.save(f, lm1(x))
        out.append(np.load(f))
    return np.concatenate(out)


def fit_predict(X, Y, Xs, seed, epochs=25, hidden=256, pw=5.0, wd=1e-2, drop=0.5, lr=1e-3):
    """train_events.fit_mlp_fixed on standardised X; its probabilities for each array of Xs."""
    layers = te.fit_mlp_fixed(X, Y, hidden, epochs, seed, lr=lr, wd=wd, dropout=drop, pos_weight=pw)
    return [te.forward(layers, 0.0, 1.0, x) for x in Xs]


def scores(P, T, mask=None):
    from sklearn.metrics import average_precision_score, roc_auc_score

    out = []
    for j in range(T.shape[1]):
        m = (T[:, j] >= 0) & (mask if mask is not None else True)
        y = T[m, j] == 1
        out.append(
            (roc_auc_score(y, P[m, j]), average_precision_score(y, P[m, j]))
            if 3 <= y.sum() < len(y) - 3
            else (np.nan, np.nan)
        )
    return np.asarray(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--tag", default="tagger")
    ap.add_argument("--features", choices=("v1+mn1mid", "v1", "v1+mn1mid+lm1"), default="v1+mn1mid")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    tdir = a.cache / a.tag
    tr, dv = te.load(tdir, "ev_train"), te.load(tdir, "ev_dev")
    classes = json.loads((tdir / "mixes" / "ev_train.meta.json").read_text())["classes"]
    kind = "v1" if a.features == "v1" else "v1+mn1mid"
    X, cidx = te.features(tdir, "ev_train", tr, kind=kind)
    Xd, _ = te.features(tdir, "ev_dev", dv, kind=kind)
    if a.features.endswith("lm1"):
        X = np.concatenate([X, lm1_block(tdir, "ev_train", tr)], 1)
        Xd = np.concatenate([Xd, lm1_block(tdir, "ev_dev", dv)], 1)
    Y, Yd = te.targets(tr, classes), te.targets(dv, classes)
    fold = np.asarray([tr[i]["fold"] for i in cidx])
    mu, sd = X.mean(0), X.std(0) + 1e-4
    Xn, Xdn = ((X - mu) / sd).astype(np.float32), ((Xd - mu) / sd).astype(np.float32)
    oof, Pd = np.zeros(Y.shape, np.float32), np.zeros(Yd.shape, np.float32)
    for k in range(int(fold.max()) + 1):
        po, pdv = fit_predict(Xn[fold != k], Y[fold != k], [Xn[fold == k], Xdn], seed=k)
        oof[fold == k], Pd = po, Pd + pdv / (fold.max() + 1)
    so, sdv = scores(oof, Y), scores(Pd, Yd)
    print(
        f"features {a.features} ({X.shape[1]}): OOF AUC {np.nanmean(so[:, 0]):.3f} AP {np.nanmean(so[:, 1]):.3f} | "
        f"DEV AUC {np.nanmean(sdv[:, 0]):.3f} AP {np.nanmean(sdv[:, 1]):.3f} (means over classes)"
    )
    scene = np.asarray([tr[i]["scene"] for i in cidx])
    for sc in ("quiet", "bed", "music", "speech", "speech_music"):
        s = scores(oof, Y, scene == sc)
        print(f"  OOF on {sc:12s} clips: AUC {np.nanmean(s[:, 0]):.3f} AP {np.nanmean(s[:, 1]):.3f}")
    if a.v:
        for j, c in enumerate(classes):
            print(
                f"  {c[:32]:32s} OOF AUC {so[j, 0]:.3f} AP {so[j, 1]:.3f} | DEV AUC {sdv[j, 0]:.3f} AP {sdv[j, 1]:.3f}"
            )


if __name__ == "__main__":
    main()
