#!/usr/bin/env python3
"""Experiment: a small log-mel CNN as the sound-event tagger (45 classes per 2 s window), compared with the MLP on
pooled frozen features (train_events.py / events_diagnostics.py). Not shipped; results in /work/evcnn/report.md.

  nice -n 15 python training/events_cnn.py cache            # 64-band log-mel windows (100 x 64, float16) of
                                                            # ev_train + ev_dev -> /work/evcnn/mel_<split>.npy
  nice -n 15 python training/events_cnn.py mlp              # (optional, for late fusion) the MLP's OOF and DEV
                                                            # probabilities exactly as events_diagnostics.py
                                                            # (cached features only) -> /work/evcnn/mlp_preds.npz
  nice -n 15 python training/events_cnn.py run --epochs E   # K-fold CNN -> OOF, all-fold CNN -> DEV, report

Same records, targets (1 salient, 0 absent, -1 masked), folds, calibration (isotonic on OOF) and threshold rule
(train_events.choose_threshold: lowest calibrated threshold with OOF precision >= 0.90 and >= 10 hits) as
train_events.py. DEV is only scored at the end; nothing (epochs, thresholds, architecture) is chosen on it. The
number of epochs is fixed up front (no validation split, no early stopping): one-cycle LR schedule to the end.

Model (train_cnn.build_net family): 4 conv blocks (3x3 conv, BatchNorm, ReLU, 2x2 max pooling after the first
three) 16-32-64-64, frequency mean, global max + mean over time, FC 128, dropout 0.3, 45 logits; masked BCE with
pos_weight 5 (as the MLP); random gain +-6 dB on half the batch, one SpecAugment time mask (< 16 frames) and one
frequency mask (< 10 bands) each with p = 0.5; per-band standardisation from the training windows.

Timings (2026-11-27, 2 CPU cores shared with other nice-5 work, nice 15, torch 2 threads, --epochs 8 --bs 128):
cache 92 s (5760 clips, ~16 ms/clip); mlp 179 s (1 thread); run: fold models 1112 / 1104 / 876 / 560 s (40-240 s
per epoch depending on the other load), all-fold model 989 s, scoring ~15 s; total run 78 min.
Result (8 epochs, fixed up front): CNN OOF AUC 0.743 AP 0.037, DEV AUC 0.799 AP 0.085, 0 classes with an OOF
threshold -- worse than the MLP (0.794 / 0.109 / 0.819 / 0.177); details in /work/evcnn/report.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import train_events as te
from earmark.experts.learned.model import MEL_N, MEL_WIN_FRAMES, logmel, mel_windows
from earmark.experts.learned.windows import SR, window_bounds

OUT = Path("/work/evcnn")


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def corpus(a):
    tdir = a.cache / a.tag
    tr, dv = te.load(tdir, "ev_train"), te.load(tdir, "ev_dev")
    classes = json.loads((tdir / "mixes" / "ev_train.meta.json").read_text())["classes"]
    return tdir, tr, dv, classes


# --------------------------------------------------------------------------- cache
def clip_windows(tdir: Path, split: str, r: dict) -> np.ndarray:
    import soundfile as sf

    x, sr = sf.read(tdir / "mixes" / split / f"{r['id']}.wav", dtype="float32")
    assert sr == SR
    b = window_bounds(len(x))
    assert len(b) == len(r["windows"]), (r["id"], len(b), len(r["windows"]))
    return mel_windows(logmel(x), b).astype(np.float16)


def cache_main(a):
    tdir, tr, dv, _ = corpus(a)
    d = OUT / "mel"
    for split, recs in (("ev_train", tr), ("ev_dev", dv)):
        (d / split).mkdir(parents=True, exist_ok=True)
        if a.limit:
            recs = recs[: a.limit]
        t0, done = time.time(), 0
        for r in recs:
            f = d / split / f"{r['id']}.npy"
            if f.exists():
                continue
            np.save(f, clip_windows(tdir, split, r))
            done += 1
            if done % 500 == 0:
                log(f"  {split}: {done} ({(time.time() - t0) / done * 1000:.1f} ms/clip)")
        log(
            f"{split}: {len(recs)} clips, {done} computed in {time.time() - t0:.1f} s "
            f"({(time.time() - t0) / max(done, 1) * 1000:.1f} ms/clip)"
        )
        if not a.limit:  # one array per split, rows aligned with train_events.targets
            X = np.concatenate([np.load(d / split / f"{r['id']}.npy") for r in recs])
            np.save(OUT / f"mel_{split}.npy", X)
            log(f"  -> {OUT / f'mel_{split}.npy'} {X.shape}")


# --------------------------------------------------------------------------- model
def build_net(n_out: int, ch=(16, 32, 64, 64), hidden=128, drop=0.3):
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            layers, c_in = [], 1
            for i, c in enumerate(ch):
                layers += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU()]
                if i < len(ch) - 1:
                    layers.append(nn.MaxPool2d(2))
                c_in = c
            self.body = nn.Sequential(*layers)
            self.fc1 = nn.Linear(2 * c_in, hidden)
            self.drop = nn.Dropout(drop)
            self.fc2 = nn.Linear(hidden, n_out)

        def forward(self, x):  # x: (B, T, F) standardised log-mel
            h = self.body(x[:, None]).mean(dim=3)  # (B, C, T')
            h = torch.cat([h.amax(dim=2), h.mean(dim=2)], dim=1)
            return self.fc2(self.drop(torch.relu(self.fc1(h))))

    return Net()


def fit(X, Y, epochs, seed, a, tag=""):
    """Train on (X float16 (N, 100, 64), Y int8 (N, C)); returns (net, norm)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    sub = X[::7].astype(np.float32)
    norm = (sub.mean(axis=(0, 1)).astype(np.float32), (sub.std(axis=(0, 1)) + 1e-3).astype(np.float32))
    del sub
    mu_t, sd_t = torch.from_numpy(norm[0]), torch.from_numpy(norm[1])
    net = build_net(Y.shape[1], ch=tuple(int(c) for c in a.ch.split(",")), hidden=a.hidden)
    opt = torch.optim.AdamW(net.parameters(), lr=a.lr, weight_decay=a.wd)
    steps = len(X) // a.bs
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=epochs * steps, pct_start=0.15)
    pw = torch.full((Y.shape[1],), float(a.pos_weight))
    for ep in range(epochs):
        net.train()
        perm = rng.permutation(len(X))
        t0, tot = time.time(), 0.0
        for s in range(steps):
            idx = np.sort(perm[s * a.bs : (s + 1) * a.bs])
            B = len(idx)
            xb = torch.from_numpy(X[idx].astype(np.float32))
            yb = torch.from_numpy(Y[idx].astype(np.float32))
            g = rng.uniform(-6, 6, (B, 1, 1)) * (rng.random((B, 1, 1)) < 0.5)
            xb = (xb + torch.from_numpy(g.astype(np.float32)) - mu_t) / sd_t
            # SpecAugment: one time mask (< 16 frames) and one frequency mask (< 10 bands), each with p = 0.5
            tw = rng.integers(0, 16, B) * (rng.random(B) < 0.5)
            t0_ = rng.integers(0, MEL_WIN_FRAMES - tw + 1)
            fw = rng.integers(0, 10, B) * (rng.random(B) < 0.5)
            f0_ = rng.integers(0, MEL_N - fw + 1)
            ar_t, ar_f = np.arange(MEL_WIN_FRAMES)[None], np.arange(MEL_N)[None]
            mt = (ar_t >= t0_[:, None]) & (ar_t < (t0_ + tw)[:, None])
            mf = (ar_f >= f0_[:, None]) & (ar_f < (f0_ + fw)[:, None])
            keep = ~(mt[:, :, None] | mf[:, None, :])
            xb = xb * torch.from_numpy(keep.astype(np.float32))
            z = net(xb)
            m = (yb >= 0).float()
            loss = nn.functional.binary_cross_entropy_with_logits(z, yb.clamp(min=0), reduction="none", pos_weight=pw)
            loss = (loss * m).sum() / m.sum().clamp(min=1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            tot += loss.item()
            if a.limit_batches and s + 1 >= a.limit_batches:
                log(
                    f"  {tag} timing: {s + 1} batches of {a.bs} in {time.time() - t0:.1f} s "
                    f"-> {(time.time() - t0) / (s + 1) * steps:.0f} s/epoch ({steps} batches)"
                )
                return net, norm
        log(f"  {tag} epoch {ep + 1}/{epochs}: train loss {tot / steps:.4f} ({time.time() - t0:.0f} s)")
    return net, norm


def predict(net, norm, X, bs=512):
    import torch

    net.eval()
    mu, sd = torch.from_numpy(norm[0]), torch.from_numpy(norm[1])
    out = []
    with torch.no_grad():
        for i in range(0, len(X), bs):
            out.append(torch.sigmoid(net((torch.from_numpy(X[i : i + bs].astype(np.float32)) - mu) / sd)).numpy())
    return np.concatenate(out)


# --------------------------------------------------------------------------- evaluation
def scores(P, T):
    """Per class (AUC, AP) on unmasked windows (same rule as events_diagnostics.scores)."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    out = []
    for j in range(T.shape[1]):
        m = T[:, j] >= 0
        y = T[m, j] == 1
        out.append(
            (roc_auc_score(y, P[m, j]), average_precision_score(y, P[m, j]))
            if 3 <= y.sum() < len(y) - 3
            else (np.nan, np.nan)
        )
    return np.asarray(out)


def evaluate(name, oof, Pd, Y, Yd, classes):
    """Headline numbers and per-class rows exactly as train_events.train (calibrate / choose_threshold / pr_at)."""
    so, sdv = scores(oof, Y), scores(Pd, Yd)
    rows = []
    for j, c in enumerate(classes):
        m = Y[:, j] >= 0
        cal = te.calibrate(oof[m, j], Y[m, j])
        q = np.interp(oof[m, j], cal["x"], cal["y"])
        thr, st = te.choose_threshold(q, Y[m, j])
        md = Yd[:, j] >= 0
        qd = np.interp(Pd[md, j], cal["x"], cal["y"])
        t_rep = thr if thr is not None else st["best_threshold"]
        dp, dr, dtp, dpos = te.pr_at(qd, Yd[md, j], t_rep)
        rows.append(
            {
                "class": c,
                "threshold": thr,
                "t_rep": t_rep,
                "oof_p": st["precision"],
                "oof_r": st["recall"],
                "oof_hits": st["hits"],
                "dev_p": None if np.isnan(dp) else dp,
                "dev_r": None if np.isnan(dr) else dr,
                "dev_hits": dtp,
                "dev_pos": dpos,
                "oof_auc": so[j, 0],
                "oof_ap": so[j, 1],
                "dev_auc": sdv[j, 0],
                "dev_ap": sdv[j, 1],
            }
        )
    n_thr = sum(r["threshold"] is not None for r in rows)
    n_dev = sum(
        r["threshold"] is not None and (r["dev_p"] or 0) >= te.PRECISION_BAR and r["dev_hits"] > 0 for r in rows
    )
    head = {
        "name": name,
        "oof_auc": float(np.nanmean(so[:, 0])),
        "oof_ap": float(np.nanmean(so[:, 1])),
        "dev_auc": float(np.nanmean(sdv[:, 0])),
        "dev_ap": float(np.nanmean(sdv[:, 1])),
        "n_thr": n_thr,
        "n_dev": n_dev,
    }
    log(
        f"{name}: OOF AUC {head['oof_auc']:.3f} AP {head['oof_ap']:.3f} | DEV AUC {head['dev_auc']:.3f} "
        f"AP {head['dev_ap']:.3f} | {n_thr} classes with an OOF threshold, {n_dev} with DEV precision >= 0.90"
    )
    return head, rows


def table(rows) -> str:
    def f(v):
        return "–" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.2f}"

    out = [
        "| class | OOF threshold | OOF P | OOF R | DEV P | DEV R | DEV positives | OOF AUC / AP | DEV AUC / AP |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["threshold"] is None, -(r["dev_p"] or 0), r["class"])):
        thr = f"{r['threshold']:.2f}" if r["threshold"] is not None else f"none (best {r['t_rep']:.2f})"
        out.append(
            f"| {r['class']} | {thr} | {f(r['oof_p'])} | {f(r['oof_r'])} | {f(r['dev_p'])} | {f(r['dev_r'])} "
            f"| {r['dev_pos']} | {f(r['oof_auc'])} / {f(r['oof_ap'])} | {f(r['dev_auc'])} / {f(r['dev_ap'])} |"
        )
    return "\n".join(out)


# --------------------------------------------------------------------------- MLP predictions (fusion)
def mlp_main(a):
    """OOF and DEV probabilities of the MLP exactly as events_diagnostics.main (DEV = mean of the 4 fold models)."""
    import events_diagnostics as ed

    tdir, tr, dv, classes = corpus(a)
    t0 = time.time()
    X, cidx = te.features(tdir, "ev_train", tr)
    Xd, _ = te.features(tdir, "ev_dev", dv)
    Y, Yd = te.targets(tr, classes), te.targets(dv, classes)
    fold = np.asarray([tr[i]["fold"] for i in cidx])
    mu, sd = X.mean(0), X.std(0) + 1e-4
    Xn, Xdn = ((X - mu) / sd).astype(np.float32), ((Xd - mu) / sd).astype(np.float32)
    oof, Pd = np.zeros(Y.shape, np.float32), np.zeros(Yd.shape, np.float32)
    for k in range(int(fold.max()) + 1):
        po, pdv = ed.fit_predict(Xn[fold != k], Y[fold != k], [Xn[fold == k], Xdn], seed=k)
        oof[fold == k], Pd = po, Pd + pdv / (fold.max() + 1)
        log(f"MLP fold {k} done ({time.time() - t0:.0f} s)")
    np.savez(OUT / "mlp_preds.npz", oof=oof, dev=Pd)
    evaluate("MLP (events_diagnostics)", oof, Pd, Y, Yd, classes)
    log(f"MLP: {time.time() - t0:.0f} s")


# --------------------------------------------------------------------------- run
def run_main(a):
    import torch

    torch.set_num_threads(a.threads)
    np.random.seed(a.seed)
    t_start = time.time()
    tdir, tr, dv, classes = corpus(a)
    Y, Yd = te.targets(tr, classes), te.targets(dv, classes)
    X = np.load(OUT / "mel_ev_train.npy", mmap_mode=None)
    assert len(X) == len(Y), (X.shape, Y.shape)
    cidx = np.concatenate([[i] * len(r["windows"]) for i, r in enumerate(tr)])
    fold = np.asarray([tr[i]["fold"] for i in cidx])
    K = int(fold.max()) + 1
    log(f"train windows {X.shape}, folds {K}, epochs {a.epochs}")
    if a.limit_batches:  # timing only
        fit(X[fold != 0], Y[fold != 0], 1, a.seed, a, "fold 0")
        return
    tag = f"e{a.epochs}" + ("" if a.ch == "16,32,64,64" else "_ch" + a.ch.replace(",", "-"))
    oof_path = OUT / f"cnn_oof_{tag}.npy"
    keep = np.ones(len(Y), bool)
    if a.partial:  # out of time: score only the folds whose fold model finished (MLP on the same windows)
        pdf = np.load(OUT / f"cnn_devfolds_{tag}.npy")
        done_k = [k for k in range(K) if np.abs(pdf[k]).sum() > 0]
        keep = np.isin(fold, done_k)
        oof = np.load(OUT / f"cnn_oof_{tag}_partial.npy")
        tag += f"_folds{''.join(map(str, done_k))}"
        log(f"partial: folds {done_k} only ({keep.sum()} windows); DEV = mean of those fold models")
        a.no_final = True
        np.save(OUT / f"cnn_devfolds_{tag}.npy", pdf[done_k])
    elif oof_path.exists():
        oof = np.load(oof_path)
    else:
        oof = np.zeros(Y.shape, np.float32)
        Xd = np.load(OUT / "mel_ev_dev.npy")
        pd_folds = np.zeros((K, len(Yd), Y.shape[1]), np.float32)  # saved only, scored at the end (as diagnostics)
        for k in range(K):
            t0 = time.time()
            net, norm = fit(X[fold != k], Y[fold != k], a.epochs, a.seed + k, a, f"fold {k}")
            oof[fold == k] = predict(net, norm, X[fold == k])
            pd_folds[k] = predict(net, norm, Xd)
            np.save(OUT / f"cnn_devfolds_{tag}.npy", pd_folds)
            so = scores(oof[fold == k], Y[fold == k])
            log(
                f"fold {k}: {time.time() - t0:.0f} s; fold OOF AUC {np.nanmean(so[:, 0]):.3f} "
                f"AP {np.nanmean(so[:, 1]):.3f}"
            )
            np.save(OUT / f"cnn_oof_{tag}_partial.npy", oof)
        np.save(oof_path, oof)
        del Xd
    t_oof = time.time() - t_start
    dev_path = OUT / f"cnn_dev_{tag}.npy"
    if a.no_final:
        Pd = np.load(OUT / f"cnn_devfolds_{tag}.npy").mean(0)
    elif dev_path.exists():
        Pd = np.load(dev_path)
    else:
        t0 = time.time()
        net, norm = fit(X, Y, a.epochs, a.seed + 99, a, "all folds")
        del X
        Xd = np.load(OUT / "mel_ev_dev.npy")
        assert len(Xd) == len(Yd)
        Pd = predict(net, norm, Xd)  # DEV is read only here, after every choice is made
        np.save(dev_path, Pd)
        torch.save(net.state_dict(), OUT / f"cnn_all_{tag}.pt")
        log(f"all-fold model: {time.time() - t0:.0f} s")
    heads, per = [], {}
    cname = f"CNN {tag}" + (", DEV = mean of fold models" if a.no_final else ", DEV = all-fold model")
    h, per[cname] = evaluate(cname, oof[keep], Pd, Y[keep], Yd, classes)
    heads.append(h)
    fp = OUT / f"cnn_devfolds_{tag}.npy"
    if fp.exists() and not a.no_final:  # DEV as the mean of the K fold models (how events_diagnostics scores the MLP)
        h, per[f"CNN {tag}, DEV = mean of fold models"] = evaluate(
            f"CNN {tag}, DEV = mean of fold models", oof, np.load(fp).mean(0), Y, Yd, classes
        )
        heads.append(h)
    mp = OUT / "mlp_preds.npz"
    if mp.exists():
        m = np.load(mp)
        h, per["MLP (rerun, events_diagnostics)"] = evaluate(
            "MLP (rerun, events_diagnostics)", m["oof"][keep], m["dev"], Y[keep], Yd, classes
        )
        heads.append(h)
        h, per["fusion (CNN + MLP) / 2"] = evaluate(
            "fusion (CNN + MLP) / 2", ((oof + m["oof"]) / 2)[keep], (Pd + m["dev"]) / 2, Y[keep], Yd, classes
        )
        heads.append(h)
    res = {
        "heads": heads,
        "per_class": per,
        "epochs": a.epochs,
        "ch": a.ch,
        "no_final": a.no_final,
        "partial": a.partial,
        "oof_s": t_oof,
        "total_s": time.time() - t_start,
    }
    (OUT / f"results_{tag}.json").write_text(json.dumps(res, indent=1, default=float))
    md = [
        "| model | OOF AUC | OOF AP | DEV AUC | DEV AP | classes with OOF threshold | of them DEV P >= 0.90 |",
        "|---|---|---|---|---|---|---|",
    ]
    for h in heads:
        md.append(
            f"| {h['name']} | {h['oof_auc']:.3f} | {h['oof_ap']:.3f} | {h['dev_auc']:.3f} | {h['dev_ap']:.3f} "
            f"| {h['n_thr']} | {h['n_dev']} |"
        )
    for k, rows in per.items():
        md += ["", f"### {k}", "", table(rows)]
    (OUT / f"tables_{tag}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["cache", "mlp", "run"])
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--tag", default="tagger-ev")
    ap.add_argument("--limit", type=int, default=0, help="cache: only the first N clips per split (timing)")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--bs", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--wd", type=float, default=1e-4)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--ch", default="16,32,64,64", help="conv channels of the 4 blocks")
    ap.add_argument("--partial", action="store_true", help="evaluate the finished folds of an unfinished run")
    ap.add_argument(
        "--no-final",
        action="store_true",
        help="skip the all-fold model: DEV = mean of the K fold models (as events_diagnostics)",
    )
    ap.add_argument("--pos-weight", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit-batches", type=int, default=0, help="run: time this many batches of fold 0 and stop")
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    {"cache": cache_main, "mlp": mlp_main, "run": run_main}[a.step](a)


if __name__ == "__main__":
    main()
