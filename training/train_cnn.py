#!/usr/bin/env python3
"""Log-mel CNN head of the domain tagger (trained on CPU with torch; inference is numpy).

  python training/train_cnn.py cache             # log-mels of the TRAIN (and DEV) mixes, float16
  python training/train_cnn.py train --epochs 20 # -> training/cnn_weights.npz (+ holdout preds)

Input: 2 s windows of 64-band log-mel (1024-point FFT, 20 ms hop, 100 frames), the same
windows as the MLP probe. Model: 4 conv blocks (3x3 conv, BatchNorm, ReLU, pooling),
global max + mean pooling, 3 sigmoid heads, masked BCE (ambiguous = don't care),
SpecAugment-style time / frequency masks, random gain, mixup-free. The clip-level holdout
is the same as the MLP's (train_probe.holdout_ids), so the holdout stays unseen by both.
DEV is never read in `train`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from earmark.experts.learned.model import CNN_WEIGHTS, MEL_N, MEL_WIN_FRAMES, mel_windows
from earmark.experts.learned.windows import window_bounds
from tagger_data import cache_logmels, holdout_ids, log, train_parts


def load_windows(tdir: Path, split: str, recs):
    """(N, 100, 64) float16 windows, (N, 3) labels in {0, 1, -1 = don't care}, clip index."""
    import soundfile as sf

    X, Y, cidx = [], [], []
    for i, r in enumerate(recs):
        M = np.load(tdir / "logmel" / f"{r['sha1']}.npy").astype(np.float32)
        n = sf.info(str(tdir / "mixes" / split / f"{r['id']}.wav")).frames
        b = window_bounds(n)
        assert len(b) == len(r["windows"]), r["id"]
        X.append(mel_windows(M, b).astype(np.float16))
        Y.append(np.asarray(r["windows"], np.float32))
        cidx += [i] * len(b)
    return np.concatenate(X), np.concatenate(Y), np.asarray(cidx)


# --------------------------------------------------------------------------- model
def build_net(ch=(16, 32, 64, 64), hidden=64):
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            layers, c_in = [], 1
            for i, c in enumerate(ch):
                layers += [nn.Conv2d(c_in, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU()]
                if i < len(ch) - 1:
                    layers.append(nn.MaxPool2d(2))
                c_in = c
            self.body = nn.Sequential(*layers)
            self.fc1 = nn.Linear(2 * c_in, hidden)
            self.drop = nn.Dropout(0.2)
            self.fc2 = nn.Linear(hidden, 3)

        def forward(self, x):  # x: (B, T, F) normalised log-mel
            h = self.body(x[:, None])  # (B, C, T', F')
            h = h.mean(dim=3)  # average over frequency
            h = torch.cat([h.amax(dim=2), h.mean(dim=2)], dim=1)
            return self.fc2(self.drop(torch.relu(self.fc1(h))))

    return Net()


def export_npz(net, norm, path: Path, meta: dict, extra: dict | None = None):
    """Fold BatchNorm into the convolutions and save plain float32 arrays."""
    from torch import nn

    w = {"mel_mu": norm[0].astype(np.float32), "mel_sd": norm[1].astype(np.float32)}
    mods = list(net.body)
    k = 0
    for i, m in enumerate(mods):
        if isinstance(m, nn.Conv2d):
            bn = mods[i + 1]
            g = (bn.weight / (bn.running_var + bn.eps).sqrt()).detach().numpy()
            W = m.weight.detach().numpy() * g[:, None, None, None]
            b = (m.bias.detach().numpy() - bn.running_mean.detach().numpy()) * g + bn.bias.detach().numpy()
            pool = i + 3 < len(mods) and isinstance(mods[i + 3], nn.MaxPool2d)
            w[f"conv{k}_W"], w[f"conv{k}_b"] = W.astype(np.float32), b.astype(np.float32)
            w[f"conv{k}_pool"] = np.array(int(pool))
            k += 1
    w["fc1_W"] = net.fc1.weight.detach().numpy().T.astype(np.float32)
    w["fc1_b"] = net.fc1.bias.detach().numpy().astype(np.float32)
    w["fc2_W"] = net.fc2.weight.detach().numpy().T.astype(np.float32)
    w["fc2_b"] = net.fc2.bias.detach().numpy().astype(np.float32)
    w.update(extra or {})
    np.savez_compressed(path, **w, meta=json.dumps(meta))


def masked_bce(logits, y):
    import torch

    m = (y >= 0).float()
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y.clamp(min=0), reduction="none")
    return (loss * m).sum() / m.sum().clamp(min=1)


def predict_torch(net, X, norm, bs=256):
    import torch

    net.eval()
    out = []
    mu, sd = torch.from_numpy(norm[0]), torch.from_numpy(norm[1])
    with torch.no_grad():
        for i in range(0, len(X), bs):
            xb = (torch.from_numpy(X[i : i + bs].astype(np.float32)) - mu) / sd
            out.append(torch.sigmoid(net(xb)).numpy())
    return np.concatenate(out) if out else np.zeros((0, 3), np.float32)


def train_main(a, rest, tdir):
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--bs", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--wd", type=float, default=1e-4)
    ap.add_argument("--ch", default="16,32,64,64")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--holdout", type=float, default=0.15)
    ap.add_argument("--limit-batches", type=int, default=0, help="timing runs: batches per epoch")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-ext", action="store_true", help="ignore the train2 (x1 extension) mixes")
    b = ap.parse_args(rest)
    torch.set_num_threads(1)
    torch.manual_seed(b.seed)
    rng = np.random.default_rng(b.seed)
    out = b.out or ((tdir / "cnn_weights_tiny.npz") if a.tiny else CNN_WEIGHTS)
    Xs, Ys, Hs, recs = [], [], [], []
    for sp, prs in train_parts(tdir, not b.no_ext):
        cache_logmels(tdir, sp, prs)
        X_, Y_, c_ = load_windows(tdir, sp, prs)
        Hs.append(np.isin(c_, sorted(holdout_ids(prs, b.holdout, 0))))
        Xs.append(X_), Ys.append(Y_)
        recs += prs
        log(f"{sp}: {len(prs)} clips, {len(X_)} windows")
    X, Y, hm = np.concatenate(Xs), np.concatenate(Ys), np.concatenate(Hs)
    del Xs
    Xtr, Ytr, Xho, Yho = X[~hm], Y[~hm], X[hm], Y[hm]
    mu = Xtr[::7].astype(np.float32).mean(axis=(0, 1))
    sd = Xtr[::7].astype(np.float32).std(axis=(0, 1)) + 1e-3
    norm = (mu.astype(np.float32), sd.astype(np.float32))
    log(
        f"cnn: {len(Xtr)} train windows, {len(Xho)} holdout windows; "
        f"positives {(Ytr == 1).mean(0).round(3)}, masked {(Ytr < 0).mean(0).round(3)}"
    )
    ch = tuple(int(c) for c in b.ch.split(","))
    net = build_net(ch, b.hidden)
    log(f"params: {sum(p.numel() for p in net.parameters())}")
    opt = torch.optim.AdamW(net.parameters(), lr=b.lr, weight_decay=b.wd)
    steps = (len(Xtr) // b.bs) if not b.limit_batches else b.limit_batches
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=b.lr, total_steps=b.epochs * steps, pct_start=0.15)
    mu_t, sd_t = torch.from_numpy(norm[0]), torch.from_numpy(norm[1])
    best = (1e9, None, -1)
    hist = []
    for ep in range(b.epochs):
        net.train()
        perm = rng.permutation(len(Xtr))
        t0, tot = time.time(), 0.0
        for s in range(steps):
            idx = np.sort(perm[s * b.bs : (s + 1) * b.bs])
            xb = torch.from_numpy(Xtr[idx].astype(np.float32))
            yb = torch.from_numpy(Ytr[idx])
            B = len(idx)
            # random gain (+-6 dB) on half of the batch, SpecAugment masks (1 time, 1 freq)
            g = torch.from_numpy(rng.uniform(-6, 6, (B, 1, 1)).astype(np.float32))
            xb = xb + g * (torch.rand(B, 1, 1) < 0.5)
            xb = (xb - mu_t) / sd_t
            for j in range(B):
                if rng.random() < 0.5:
                    t = int(rng.integers(0, 16))
                    t0_ = int(rng.integers(0, MEL_WIN_FRAMES - t + 1))
                    xb[j, t0_ : t0_ + t, :] = 0.0
                if rng.random() < 0.5:
                    f = int(rng.integers(0, 10))
                    f0_ = int(rng.integers(0, MEL_N - f + 1))
                    xb[j, :, f0_ : f0_ + f] = 0.0
            loss = masked_bce(net(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            tot += loss.item()
        ph = predict_torch(net, Xho, norm)
        with torch.no_grad():
            lh = float(masked_bce(torch.logit(torch.from_numpy(ph).clamp(1e-6, 1 - 1e-6)), torch.from_numpy(Yho)))
        m = Yho >= 0
        acc = [float(((ph[:, h] >= 0.5) == (Yho[:, h] == 1))[m[:, h]].mean()) for h in range(3)]
        hist.append(
            {
                "epoch": ep + 1,
                "train_loss": tot / steps,
                "hold_loss": lh,
                "hold_win_acc": acc,
                "s": round(time.time() - t0, 1),
            }
        )
        log(
            f"epoch {ep + 1}: train loss {tot / steps:.4f} holdout loss {lh:.4f} "
            f"win acc {np.round(acc, 3)} ({time.time() - t0:.0f} s)"
        )
        if lh < best[0]:
            best = (lh, {k: v.clone() for k, v in net.state_dict().items()}, ep + 1)
    net.load_state_dict(best[1])
    net.eval()
    meta = {
        "trained": time.strftime("%Y-%m-%d %H:%M"),
        "epochs": b.epochs,
        "best_epoch": best[2],
        "ch": ch,
        "hidden": b.hidden,
        "lr": b.lr,
        "wd": b.wd,
        "bs": b.bs,
        "seed": b.seed,
        "n_train_windows": int(len(Xtr)),
        "history": hist,
        "label_version": recs[0].get("label_version"),
    }
    export_npz(net, norm, out, meta)
    torch.save(net.state_dict(), tdir / (out.stem + ".pt"))  # torch copy stays in the cache
    log(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB), best epoch {best[2]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["cache", "train"])
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--splits", default="train,train2,hold,dev,dev_m3")
    ap.add_argument("--tiny", action="store_true")
    a, rest = ap.parse_known_args()
    tdir = a.cache / ("tagger-tiny" if a.tiny else "tagger")
    if a.step == "cache":
        for split in a.splits.split(","):
            p = tdir / "mixes" / f"{split}.jsonl"
            if p.exists():
                cache_logmels(tdir, split, [json.loads(line) for line in open(p)])
        return
    train_main(a, rest, tdir)


if __name__ == "__main__":
    main()
