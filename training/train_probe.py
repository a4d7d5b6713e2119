#!/usr/bin/env python3
"""Train the speech / music / sound window heads of the domain tagger.

  python training/build_corpus.py all          # once: sources + mixes (see README)
  python training/train_probe.py               # features (cached) + MLP + thresholds
                                               # -> experts/learned/probe_weights.npz (shipped)
  python training/train_probe.py --tiny        # CI smoke run (< 3 min): builds the tiny corpus,
                                               # writes weights into the tiny cache only

Only TRAIN mixes are used: 85 % of the clips train the MLP, the other 15 % (a clip-level
holdout, stratified by domain) choose the aggregation and the three clip thresholds. The DEV
set is never read here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from earmark.experts.learned.model import FEATURE_VERSION, HEADS, MLP, WEIGHTS, FeatureExtractor, aggregate
from earmark.experts.learned.windows import DOMAINS, SR
from tagger_data import cache_logmels, holdout_ids, load_split, log, train_parts

HERE = Path(__file__).resolve().parent


def features_for(tdir: Path, split: str, recs, fx_holder: list):
    """Per-clip window features, cached as <tdir>/features/<version>/<id>.npy."""
    import soundfile as sf

    fdir = tdir / "features" / FEATURE_VERSION
    fdir.mkdir(parents=True, exist_ok=True)
    X, Y, clip_idx = [], [], []
    t0, done = time.time(), 0
    for i, r in enumerate(recs):
        f = fdir / f"{r['sha1']}.npy"  # keyed by the clip's PCM content
        if f.exists():
            F = np.load(f)
        else:
            if not fx_holder:
                fx_holder.append(FeatureExtractor())
            x, sr = sf.read(tdir / "mixes" / split / f"{r['id']}.wav", dtype="float32")
            assert sr == SR
            F, bounds = fx_holder[0].extract(x)
            assert len(bounds) == len(r["windows"]), (r["id"], len(bounds), len(r["windows"]))
            np.save(f, F.astype(np.float32))
            done += 1
            if done % 200 == 0:
                log(f"  features {split}: {i + 1}/{len(recs)} ({(time.time() - t0) / done:.3f} s/clip)")
        X.append(F)
        Y.append(np.asarray(r["windows"], np.float32))
        clip_idx += [i] * len(F)
    return np.concatenate(X), np.concatenate(Y), np.asarray(clip_idx)


def musicnn_features_for(
    tdir: Path, split: str, recs, holder: list, shard: tuple[int, int] = (0, 1), kind: str = "mn1"
):
    """Per-clip musicnn window features, cached as <tdir>/features/<kind>/<sha1>.npy; rows align with
    features_for(). kind "mn1": 50 MTT tags + 200-d embedding per 2 s window, each clip's rows transformed
    by model.musicnn_block(); "mn1mid": max | mean of the 753 front-/mid-end features (float16 cache); see
    experts/learned/musicnn.py. With shard=(i, n) only every n-th clip from i is computed (parallel cache
    filling) and nothing is returned."""
    import soundfile as sf

    from earmark.experts.learned.model import MUSICNN_MID_VERSION, MUSICNN_VERSION, musicnn_block
    from earmark.experts.learned.musicnn import Musicnn, window_features, window_midend
    from earmark.experts.learned.windows import window_bounds

    assert kind in (MUSICNN_VERSION, MUSICNN_MID_VERSION), kind
    block = musicnn_block if kind == MUSICNN_VERSION else (lambda M: M.astype(np.float32))
    compute = window_features if kind == MUSICNN_VERSION else window_midend
    fdir = tdir / "features" / kind
    fdir.mkdir(parents=True, exist_ok=True)
    out, t0, done = [], time.time(), 0
    for i, r in enumerate(recs):
        f = fdir / f"{r['sha1']}.npy"
        if f.exists():
            out.append(block(np.load(f)))
            continue
        if i % shard[1] != shard[0]:
            continue
        if not holder:
            holder.append(Musicnn())
        x, sr = sf.read(tdir / "mixes" / split / f"{r['id']}.wav", dtype="float32")
        assert sr == SR
        F = compute(holder[0], x, window_bounds(len(x)))
        assert len(F) == len(r["windows"]), (r["id"], len(F), len(r["windows"]))
        np.save(f, F if kind == MUSICNN_VERSION else F.astype(np.float16))
        out.append(block(F))
        done += 1
        if done % 200 == 0:
            log(f"  musicnn {split}: {i + 1}/{len(recs)} ({(time.time() - t0) / done:.3f} s/clip)")
    if shard[1] > 1:
        return None
    return np.concatenate(out)


def train_early_stopped(net, opt, mloss, xt, yt, xv, yv, epochs, patience, rng):
    """Mini-batches of 256 in a seeded order per epoch; keep the weights of the epoch with the lowest validation
    loss, stop after `patience` epochs without one. Returns ([(W, b) per Linear layer], best epoch, its loss)."""
    import torch
    from torch import nn

    best, bad = (1e9, None, 0), 0
    for ep in range(epochs):
        net.train()
        perm = torch.from_numpy(rng.permutation(len(xt)))
        for i in range(0, len(xt), 256):
            idx = perm[i : i + 256]
            loss = mloss(net(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        net.eval()
        with torch.no_grad():
            lv = float(mloss(net(xv), yv)) if len(xv) else 0.0
        if lv < best[0] - 1e-4:
            best, bad = (lv, {k: v.clone() for k, v in net.state_dict().items()}, ep + 1), 0
        else:
            bad += 1
            if bad >= patience:
                break
    net.load_state_dict(best[1])
    lin = [m for m in net if isinstance(m, nn.Linear)]
    return [(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy()) for m in lin], best[2], best[0]


def fit_mlp_masked(Xtr, Ytr, Xva, Yva, mu, sd, hidden, wd, epochs, seed, patience=10, dropout=0.1, lr=1e-3):
    """MLP heads with a masked BCE (label -1 = ambiguous = don't care), torch on one thread.
    Early stopping on the masked loss of the clip-level holdout windows."""
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    dims = [Xtr.shape[1], *hidden, 3]
    mods = []
    for i in range(len(dims) - 1):
        mods.append(nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            mods += [nn.ReLU(), nn.Dropout(dropout)]
    net = nn.Sequential(*mods)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=wd)
    xt = torch.from_numpy(((Xtr - mu) / sd).astype(np.float32))
    yt = torch.from_numpy(Ytr.astype(np.float32))
    xv = torch.from_numpy(((Xva - mu) / sd).astype(np.float32))
    yv = torch.from_numpy(Yva.astype(np.float32))

    def mloss(z, y):
        m = (y >= 0).float()
        loss = nn.functional.binary_cross_entropy_with_logits(z, y.clamp(min=0), reduction="none")
        return (loss * m).sum() / m.sum().clamp(min=1)

    layers, best_epoch, _ = train_early_stopped(net, opt, mloss, xt, yt, xv, yv, epochs, patience, rng)
    return layers, best_epoch


def clip_truth(r) -> list[int]:
    """Clip labels [s, m, a] in {1, 0, -1 = ambiguous}; m3-format records: from the domain code."""
    if "clip_labels" in r:
        return list(r["clip_labels"])
    c = r["domain"]
    return [int(c[0] == "S"), int(c[1] == "M"), int(c[2] == "A")]


def choose_thresholds(pw: np.ndarray, clip_idx: np.ndarray, recs, agg: str):
    """Grid-search the three clip thresholds for domain accuracy on the holdout clips
    (an ambiguous clip label counts as correct whatever is predicted)."""
    ids = np.unique(clip_idx)
    P = np.stack([aggregate(pw[clip_idx == i], agg) for i in ids])
    T = np.asarray([clip_truth(recs[i]) for i in ids])
    grid = np.round(np.arange(0.05, 0.96, 0.025), 3)
    # per-head correctness for each threshold, then the joint domain accuracy
    corr = {h: np.stack([((P[:, h] >= t) == (T[:, h] == 1)) | (T[:, h] < 0) for t in grid]) for h in range(3)}
    best, best_t = -1.0, (0.5, 0.5, 0.5)
    for a, ta in enumerate(grid):
        ca = corr[0][a]
        for b, tb in enumerate(grid):
            cab = ca & corr[1][b]
            accs = (cab[None, :] & corr[2]).mean(axis=1)
            c = int(np.argmax(accs - 1e-4 * np.abs(grid - 0.5)))
            score = accs[c] - 1e-4 * (abs(ta - 0.5) + abs(tb - 0.5) + abs(grid[c] - 0.5))
            if score > best:
                best, best_t = score, (float(ta), float(tb), float(grid[c]))
    pred = np.stack([P[:, h] >= best_t[h] for h in range(3)], axis=1)
    acc = float(((pred == (T == 1)) | (T < 0)).all(axis=1).mean())
    return best_t, acc, P, T


def train(a):
    tdir = a.cache / ("tagger-tiny" if a.tiny else "tagger")
    if a.tiny and not (tdir / "mixes" / "dev.jsonl").exists():
        subprocess.run(
            [sys.executable, str(HERE / "build_corpus.py"), "all", "--tiny", "--cache", str(a.cache)], check=True
        )
    parts = train_parts(tdir, not a.no_ext)
    recs, Xs, Ys, cs, hs = [], [], [], [], []
    fx, mn = [], []
    for sp, prs in parts:
        if a.limit:
            rng0 = np.random.default_rng(0)
            prs = [prs[i] for i in sorted(rng0.choice(len(prs), size=min(a.limit, len(prs)), replace=False))]
        log(f"{sp} clips: {len(prs)}")
        if a.musicnn_cache:
            musicnn_features_for(
                tdir, sp, prs, mn, tuple(int(v) for v in a.musicnn_cache.split("/")), a.musicnn or "mn1"
            )
            continue
        X_, Y_, c_ = features_for(tdir, sp, prs, fx)
        if a.musicnn:
            X_ = np.concatenate([X_, musicnn_features_for(tdir, sp, prs, mn, kind=a.musicnn)], axis=1)
        h_ = holdout_ids(prs, a.holdout, a.seed)  # clip-level holdout, stratified by domain
        hs.append(np.isin(c_, sorted(h_)))
        Xs.append(X_), Ys.append(Y_), cs.append(c_ + len(recs))
        recs += prs
    if a.musicnn_cache:
        return tdir
    X, Y, cidx, hmask = np.concatenate(Xs), np.concatenate(Ys), np.concatenate(cs), np.concatenate(hs)
    hold = set(np.unique(cidx[hmask]).tolist())
    log(
        f"windows: {X.shape}, positives per head: {(Y == 1).mean(axis=0).round(3)}, "
        f"masked: {(Y < 0).mean(axis=0).round(3)}"
    )
    Xtr, Ytr = X[~hmask], Y[~hmask]
    mu = Xtr.mean(axis=0)
    sd = Xtr.std(axis=0) + 1e-4
    fv = f"{FEATURE_VERSION}+{a.musicnn}" if a.musicnn else FEATURE_VERSION
    hidden = tuple(int(h) for h in a.hidden.split(",") if h)
    t0 = time.time()
    layers, n_ep = fit_mlp_masked(
        Xtr, Ytr, X[hmask], Y[hmask], mu, sd, hidden, a.alpha, a.epochs, a.seed, dropout=a.dropout, lr=a.lr
    )
    log(f"MLP {hidden} trained in {time.time() - t0:.0f}s, best epoch {n_ep}")
    weights = {"mu": mu.astype(np.float32), "sd": sd.astype(np.float32)}
    for i, (W, b) in enumerate(layers):
        weights[f"W{i}"] = W.astype(np.float32)
        weights[f"b{i}"] = b.astype(np.float32)
    # choose aggregation + thresholds on the holdout clips (TRAIN sources only)
    tmp = a.out.with_suffix(".tmp.npz")
    np.savez(tmp, **weights, thresholds=np.array([0.5, 0.5, 0.5], np.float32), agg="max", feature_version=fv)
    mlp = MLP(tmp)
    tmp.unlink()
    pw = mlp.predict(X[hmask])
    hid = cidx[hmask]
    Yh = Y[hmask]
    win_acc = np.array([((pw[:, h] >= 0.5) == (Yh[:, h] == 1))[Yh[:, h] >= 0].mean() for h in range(3)])
    log(f"holdout window accuracy @0.5 (speech, music, sound): {win_acc.round(3)}")
    best = None
    for agg in ("max", "top2"):
        t, acc, P, T = choose_thresholds(pw, hid, recs, agg)
        log(f"holdout clip domain accuracy with agg={agg}: {acc:.3f} thresholds={t}")
        if best is None or acc > best[2] + 1e-9:
            best = (agg, t, acc)
    agg, thr, acc = best
    meta = {
        "trained": time.strftime("%Y-%m-%d %H:%M"),
        "n_train_clips": len(recs) - len(hold),
        "n_holdout_clips": len(hold),
        "n_windows": int(len(Xtr)),
        "hidden": hidden,
        "alpha": a.alpha,
        "dropout": a.dropout,
        "lr": a.lr,
        "seed": a.seed,
        "label_version": recs[0].get("label_version"),
        "holdout_domain_acc": acc,
        "agg": agg,
        "thresholds": thr,
        "feature_version": fv,
        "dim": int(X.shape[1]),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        a.out, **weights, thresholds=np.asarray(thr, np.float32), agg=agg, feature_version=fv, meta=json.dumps(meta)
    )
    log(f"wrote {a.out} ({a.out.stat().st_size / 1e6:.2f} MB): {json.dumps(meta)}")
    return tdir


# --------------------------------------------------------------------------- fusion / decision
RULES = [("max", 1.0), ("top2", 1.0), ("pair", 1.25), ("pair", 1.5), ("pair", 2.0)]
W_MLP = (0.0, 0.25, 0.5, 0.75, 1.0)
T_GRID = np.round(np.arange(0.05, 0.96, 0.0125), 4)


def selection_sets(tdir: Path, tiny: bool):
    """The TRAIN-source selection sets: the 15 % clip holdouts of the TRAIN mixes (broad levels,
    ambiguous heads masked; `holdout15` of the m3 mixes, `holdout15_x1` of the extension) and
    the dev-like `hold` mixes (realistic levels, unambiguous)."""
    sets = {}
    for sp, recs in train_parts(tdir):
        hold = holdout_ids(recs, 0.15, 0)
        sets["holdout15" if sp == "train" else "holdout15_x1"] = (sp, [recs[i] for i in sorted(hold)])
    if (tdir / "mixes" / "hold.jsonl").exists():
        sets["hold"] = ("hold", load_split(tdir, "hold"))
    return sets


def window_probs_for(tdir, split, recs, tagger, fx):
    """MLP and CNN window probabilities per clip: list of (p_mlp (n,3), p_cnn (n,3))."""
    import soundfile as sf

    from earmark.experts.learned.model import mel_windows
    from earmark.experts.learned.windows import window_bounds

    X, _, cidx = features_for(tdir, split, recs, fx)
    cache_logmels(tdir, split, recs)
    pm = tagger.mlp.predict(X)
    out = []
    for i, r in enumerate(recs):
        M = np.load(tdir / "logmel" / f"{r['sha1']}.npy").astype(np.float32)
        n = sf.info(str(tdir / "mixes" / split / f"{r['id']}.wav")).frames
        pc = tagger.cnn.predict(mel_windows(M, window_bounds(n)))
        out.append((pm[cidx == i], pc))
    return out


def _best_simple(data, h, names=None):
    """Best (w_mlp, rule, ratio, threshold) for head h: mean clip accuracy over the sets."""
    from earmark.experts.learned.model import clip_scores

    best = None
    for w in W_MLP:
        for rule, ratio in RULES:
            accs = []
            for wp, T, _, idx in data.values():
                S = np.asarray([clip_scores(w * pm + (1 - w) * pc, [rule] * 3, [ratio] * 3)[h] for pm, pc in wp])
                t = T[:, h]
                m = (t >= 0) & idx
                accs.append(np.stack([((S >= th) == (t == 1))[m].mean() for th in T_GRID]))
            acc = np.mean(accs, axis=0)
            # prefer thresholds near 0.5, simpler rules and an even blend on (near-)ties
            pen = 1e-4 * np.abs(T_GRID - 0.5) + (0 if rule == "max" else 2e-4) + 1e-4 * abs(w - 0.5)
            k = int(np.argmax(acc - pen))
            cand = (acc[k] - pen[k], w, rule, ratio, float(T_GRID[k]))
            if best is None or cand[0] > best[0]:
                best = cand
    return best[1:]


def select(a):
    """Per head, choose between (1) a blend of the MLP and CNN window probabilities + a clip rule
    (max / top-2 / adjacent pair) + threshold and (2) a logistic stacker on clip statistics of
    both models, by 5-fold cross-validated clip accuracy on the TRAIN-source selection sets
    (mean over the sets); then fit the chosen method on all selection clips. DEV is not read.
    The reported selection-set accuracies are out-of-fold."""
    from sklearn.linear_model import LogisticRegression

    from earmark.experts.learned.model import CNN_WEIGHTS, DECISION, Tagger, clip_scores, stack_features

    tdir = a.cache / ("tagger-tiny" if a.tiny else "tagger")
    wpath = a.out
    cpath = (tdir / "cnn_weights_tiny.npz") if a.tiny else CNN_WEIGHTS
    dpath = (tdir / "tagger_decision_tiny.json") if a.tiny else DECISION
    tagger = Tagger(wpath, cpath, None)
    fx = []
    sets = selection_sets(tdir, a.tiny)
    data = {}
    rng = np.random.default_rng(0)
    for name, (split, recs) in sets.items():
        wp = window_probs_for(tdir, split, recs, tagger, fx)
        data[name] = (
            wp,
            np.asarray([clip_truth(r) for r in recs]),
            [r["domain"] for r in recs],
            np.ones(len(recs), bool),
        )
        log(f"selection set {name}: {len(recs)} clips")
    fold = {n: rng.integers(0, 5, len(d[1])) for n, d in data.items()}
    F = {n: np.stack([stack_features(pm, pc) for pm, pc in d[0]]) for n, d in data.items()}
    K = 5 if not a.tiny else 2
    oof = {n: {} for n in data}  # name -> head -> (simple pred, stack pred) out of fold
    dec = {"w_mlp": [], "rules": [], "ratios": [], "thresholds": [], "stack": {}, "cv": {}}
    for h, head in enumerate(HEADS):
        ps = {n: np.zeros(len(d[1]), bool) for n, d in data.items()}
        pk = {n: np.zeros(len(d[1]), bool) for n, d in data.items()}
        for k in range(K):
            tr = {n: (d[0], d[1], d[2], fold[n] != k) for n, d in data.items()}
            w, rule, ratio, th = _best_simple(tr, h)
            Ftr = np.concatenate([F[n][(fold[n] != k) & (data[n][1][:, h] >= 0)] for n in data])
            ytr = np.concatenate([data[n][1][(fold[n] != k) & (data[n][1][:, h] >= 0), h] for n in data])
            clf = LogisticRegression(C=0.1, max_iter=3000).fit(Ftr, ytr) if len(set(ytr)) > 1 else None
            for n, d in data.items():
                te = fold[n] == k
                S = np.asarray(
                    [
                        clip_scores(w * pm + (1 - w) * pc, [rule] * 3, [ratio] * 3)[h]
                        for (pm, pc), t in zip(d[0], te)
                        if t
                    ]
                )
                ps[n][te] = S >= th
                pk[n][te] = (clf.predict_proba(F[n][te])[:, 1] >= 0.5) if clf is not None else S >= th
        cv = {}
        for n, d in data.items():
            m = d[1][:, h] >= 0
            cv[n] = {
                "simple": float((ps[n] == (d[1][:, h] == 1))[m].mean()),
                "stack": float((pk[n] == (d[1][:, h] == 1))[m].mean()),
            }
        use_stack = np.mean([c["stack"] for c in cv.values()]) > np.mean([c["simple"] for c in cv.values()]) + 0.002
        w, rule, ratio, th = _best_simple(data, h)
        if use_stack:
            Fa = np.concatenate([F[n][data[n][1][:, h] >= 0] for n in data])
            ya = np.concatenate([data[n][1][data[n][1][:, h] >= 0, h] for n in data])
            clf = LogisticRegression(C=0.1, max_iter=3000).fit(Fa, ya)
            dec["stack"][str(h)] = {"coef": clf.coef_[0].round(6).tolist(), "intercept": float(clf.intercept_[0])}
            rule, ratio, th = "stack", 1.0, 0.5
        for n in data:
            oof[n][h] = pk[n] if use_stack else ps[n]
        dec["w_mlp"].append(w), dec["rules"].append(rule), dec["ratios"].append(ratio), dec["thresholds"].append(th)
        dec["cv"][head] = cv
        log(
            f"{head}: {'stacker' if use_stack else f'w_mlp={w} rule={rule} ratio={ratio} t={th}'}; "
            f"{K}-fold clip acc "
            + ", ".join(f"{n} simple {c['simple']:.4f} stack {c['stack']:.4f}" for n, c in cv.items())
        )
    summary = {}
    for n, (_wp, T, doms, _) in data.items():
        pred = np.stack([oof[n][h] for h in range(3)], axis=1)
        ok = ((pred == (T == 1)) | (T < 0)).all(axis=1)
        per = {d: float(np.mean([o for o, dd in zip(ok, doms) if dd == d])) for d in DOMAINS if d in doms}
        summary[n] = {"n": int(len(ok)), "domain_acc_oof": float(ok.mean()), "per_domain_oof": per}
        log(
            f"{n}: out-of-fold domain accuracy {ok.mean():.4f}  per domain {dict((d, round(v, 3)) for d, v in per.items())}"
        )
    dec["selection"] = summary
    dec["selected"] = time.strftime("%Y-%m-%d %H:%M")
    dec["models"] = [Path(wpath).name, Path(cpath).name]
    dec["note"] = "chosen on TRAIN-source selection sets only (15 % clip holdouts + dev-like hold); DEV never read"
    dpath.write_text(json.dumps(dec, indent=1))
    log(f"wrote {dpath}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--hidden", default="256")
    ap.add_argument("--alpha", type=float, default=0.05, help="AdamW weight decay")
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--holdout", type=float, default=0.15)
    ap.add_argument("--limit", type=int, default=0, help="use only this many train clips")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--no-ext", action="store_true", help="ignore the train2 (x1 extension) mixes")
    ap.add_argument("--no-eval", action="store_true")
    ap.add_argument(
        "--musicnn",
        choices=("mn1", "mn1mid"),
        default=None,
        help="append musicnn window features: mn1 = tags + embedding, mn1mid = pooled mid-end",
    )
    ap.add_argument(
        "--musicnn-cache",
        default="",
        metavar="I/N",
        help="only fill the musicnn feature cache for shard I of N (run N of these in parallel)",
    )
    ap.add_argument(
        "--select", action="store_true", help="only choose the MLP/CNN fusion + decision rule (needs both weights)"
    )
    a = ap.parse_args()
    np.random.seed(a.seed)
    if a.out is None:
        a.out = (a.cache / "tagger-tiny" / "probe_weights_tiny.npz") if a.tiny else WEIGHTS
    if a.tiny:
        a.hidden, a.epochs = "32", 50
    if a.select:
        select(a)
        return
    train(a)
    if a.tiny:  # CI smoke run: tiny CNN (1 epoch) + fusion selection
        subprocess.run(
            [
                sys.executable,
                str(HERE / "train_cnn.py"),
                "train",
                "--tiny",
                "--cache",
                str(a.cache),
                "--epochs",
                "1",
                "--ch",
                "8,8,16,16",
                "--hidden",
                "16",
            ],
            check=True,
        )
        select(a)
    if a.tiny and not a.no_eval:
        subprocess.run(
            [sys.executable, str(HERE / "eval_dev.py"), "--tiny", "--cache", str(a.cache), "--weights", str(a.out)],
            check=True,
        )


if __name__ == "__main__":
    main()
