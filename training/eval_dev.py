#!/usr/bin/env python3
"""Evaluate the domain tagger on the DEV mixes (DEV sources only; never used for training or
threshold choice).

  python training/eval_dev.py                     # uses experts/learned/probe_weights.npz (the shipped weights)
  python training/eval_dev.py --json out.json     # also write the numbers
  python training/eval_dev.py --errors            # list misclassified clips

Runs the real inference path (`probe_model.tag_clip`) on every dev .wav, prints accuracy,
per-domain accuracy, the 8x8 confusion matrix, clip-level presence precision/recall for
speech / music / sound, window-level presence accuracy, and the speed in x real time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from earmark.experts.learned.model import CNN_WEIGHTS, DECISION, HEADS, WEIGHTS, _get, tag_clip
from earmark.experts.learned.windows import DOMAINS, SR


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--weights", type=Path, default=WEIGHTS)
    ap.add_argument("--cnn-weights", type=Path, default=CNN_WEIGHTS)
    ap.add_argument("--decision", type=Path, default=DECISION)
    ap.add_argument("--mlp-only", action="store_true", help="ignore the CNN head (old m3-style model)")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--errors", action="store_true")
    a = ap.parse_args()
    import soundfile as sf

    tdir = a.cache / ("tagger-tiny" if a.tiny else "tagger")
    recs = [json.loads(line) for line in open(tdir / "mixes" / f"{a.split}.jsonl")]
    if a.tiny and a.cnn_weights == CNN_WEIGHTS:
        a.cnn_weights, a.decision = tdir / "cnn_weights_tiny.npz", tdir / "tagger_decision_tiny.json"
    if a.mlp_only:
        a.cnn_weights = a.decision = None
    models = (a.weights, a.cnn_weights, a.decision)
    t0 = time.time()
    _get(*models)  # load models once (not timed below)
    load_s = time.time() - t0
    preds, clipP, winP, winT = [], [], [], []
    audio_s, proc_s = 0.0, 0.0
    for r in recs:
        x, sr = sf.read(tdir / "mixes" / a.split / f"{r['id']}.wav", dtype="float32")
        assert sr == SR
        t = time.perf_counter()
        out = tag_clip(x, *models)
        proc_s += time.perf_counter() - t
        audio_s += len(x) / SR
        preds.append(out["domain"])
        clipP.append([out["clip"][h] for h in HEADS])
        for w, lab in zip(out["windows"], r["windows"]):
            winP.append([w[h] for h in HEADS])
            winT.append(lab)
    truth = [r["domain"] for r in recs]
    n = len(recs)
    acc = float(np.mean([p == t for p, t in zip(preds, truth)]))
    print(f"{a.split} clips: {n}   domain accuracy: {acc * 100:.1f}%")
    per = {}
    print("\nper-domain accuracy:")
    for d in DOMAINS:
        idx = [i for i, t in enumerate(truth) if t == d]
        if idx:
            per[d] = float(np.mean([preds[i] == d for i in idx]))
            print(f"  {d}: {per[d] * 100:5.1f}%  (n={len(idx)})")
    print("\nconfusion matrix (rows = truth, cols = predicted):")
    print("       " + " ".join(f"{d:>4s}" for d in DOMAINS))
    cm = np.zeros((8, 8), int)
    for p, t in zip(preds, truth):
        cm[DOMAINS.index(t), DOMAINS.index(p)] += 1
    for i, d in enumerate(DOMAINS):
        print(f"  {d}  " + " ".join(f"{v:4d}" for v in cm[i]))
    print("\nclip-level presence (precision / recall / F1):")
    pr = {}
    for j, (h, c) in enumerate(zip(HEADS, "SMA")):
        T = np.array([t[j] == c for t in truth])
        P = np.array([p[j] == c for p in preds])
        tp = int((T & P).sum())
        prec = tp / max(1, P.sum())
        rec = tp / max(1, T.sum())
        f1 = 2 * prec * rec / max(1e-9, prec + rec)
        pr[h] = {"precision": prec, "recall": rec, "f1": f1, "support": int(T.sum())}
        print(
            f"  {h:6s}: P={prec * 100:5.1f}%  R={rec * 100:5.1f}%  F1={f1 * 100:5.1f}%  (positives {int(T.sum())}/{n})"
        )
    winP, winT = np.asarray(winP), np.asarray(winT)
    mlp = _get(*models)[1]
    thr = np.array([mlp.thresholds[h] for h in HEADS])
    wacc = np.array([((winP[:, h] >= thr[h]) == (winT[:, h] == 1))[winT[:, h] >= 0].mean() for h in range(3)])
    print(
        "\nwindow-level (2 s) presence accuracy at the clip thresholds (ambiguous windows skipped): "
        + ", ".join(f"{h} {v * 100:.1f}%" for h, v in zip(HEADS, wacc))
    )
    # the costly errors for single-source material
    fm = sum(1 for p, t in zip(preds, truth) if t in ("00A", "S00") and p[1] == "M")
    fs = sum(1 for p, t in zip(preds, truth) if t in ("0M0", "S00") and p[2] == "A")
    print(
        f"\nsingle-source errors: false music on 00A/S00 clips {fm}/{sum(t in ('00A', 'S00') for t in truth)}, "
        f"false sound on 0M0/S00 clips {fs}/{sum(t in ('0M0', 'S00') for t in truth)}"
    )
    speed = audio_s / proc_s
    print(
        f"\nspeed: {audio_s:.0f} s of audio in {proc_s:.1f} s = {speed:.1f}x real time "
        f"(model load {load_s:.1f} s; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs)"
    )
    if a.errors:
        print("\nerrors:")
        for r, p, cp in zip(recs, preds, clipP):
            if p != r["domain"]:
                info = {k: v for k, v in r.items() if k not in ("windows", "id", "domain")}
                print(f"  {r['id']}: truth {r['domain']} pred {p} clipP={np.round(cp, 2).tolist()} {info}")
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "accuracy": acc,
                    "per_domain": per,
                    "confusion": cm.tolist(),
                    "presence": pr,
                    "window_acc": dict(zip(HEADS, wacc.tolist())),
                    "speed_x_rt": speed,
                    "n": n,
                    "date": time.strftime("%Y-%m-%d %H:%M"),
                    "thresholds": mlp.thresholds,
                    "rules": mlp.rules,
                    "models": [str(m) for m in models],
                    "clips": [
                        {"id": r["id"], "truth": r["domain"], "pred": p, "clip_p": [round(float(v), 5) for v in cp]}
                        for r, p, cp in zip(recs, preds, clipP)
                    ],
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
