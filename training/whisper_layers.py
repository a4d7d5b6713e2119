#!/usr/bin/env python3
"""Experiment (negative result, 2026-11-25): do Whisper tiny.en's *intermediate* encoder layers help the tagger?

Whisper-AT (Gong et al. 2023) found that a Whisper encoder's intermediate layers carry sound-event information
that the last layer (tuned for ASR) suppresses. The shipped tagger pools only the last layer (CTranslate2
int8). This script re-implements the encoder in numpy from the CTranslate2 `model.bin` of the shipped Whisper
tiny.en (fp16 weights; its last-layer output correlates 0.998-0.9996 with CTranslate2's int8 output) and
appends per 2 s window: mean and std of layers 0, 1, 2 and the mean of layer 2 over non-speech frames
(2688 numbers, block "wl1"). Result in training/README.md ("Whisper intermediate layers").

  python training/whisper_layers.py extract hold 0 2 & python training/whisper_layers.py extract hold 1 2
  python training/whisper_layers.py extract train2 0 2 & python training/whisper_layers.py extract train2 1 2
  python training/whisper_layers.py compare 0 1      # seeds
"""

import json
import struct
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import erf

DT = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def read_ct2(path):
    f = open(path, "rb").read()
    o = 0

    def u(fmt):
        nonlocal o
        v = struct.unpack_from(fmt, f, o)
        o += struct.calcsize(fmt)
        return v[0]

    def s():
        nonlocal o
        n = u("H")
        v = f[o : o + n - 1].decode()
        o += n
        return v

    ver = u("I")
    name = s()
    u("I")
    nv = u("I")  # version, name, revision, number of variables
    out = {}
    for _ in range(nv):
        k = s()
        r = u("B")
        shape = [u("I") for _ in range(r)]
        dt = u("B")
        nb = u("I")
        if dt == 5:
            a = np.frombuffer(f, np.uint16, nb // 2, o).astype(np.uint32) << 16
            a = a.view(np.float32)
        else:
            a = np.frombuffer(f, DT[dt], nb // np.dtype(DT[dt]).itemsize, o)
        out[k] = a.reshape(shape) if shape else a
        o += nb
    na = u("I")
    for _ in range(na):
        a = s()
        b = s()
        out[a] = out[b]
    return ver, name, out


class WhisperEncoderLayers:
    """Whisper tiny.en encoder in numpy (fp32), returning every layer's output."""

    def __init__(self, path):
        _, _, w = read_ct2(path)
        self.w = {
            k[len("encoder/") :]: (v.astype(np.float32) if v.dtype == np.float16 else v)
            for k, v in w.items()
            if k.startswith("encoder/")
        }
        self.nh = int(self.w["num_heads"][0])
        self.nl = sum(1 for k in self.w if k.endswith("ffn/linear_0/weight"))

    @staticmethod
    def _gelu(x):
        return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))

    @staticmethod
    def _ln(x, g, b, eps=1e-5):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + eps) * g + b

    @staticmethod
    def _conv(x, W, b, stride):  # x (C, T), W (O, C, 3), pad 1
        xp = np.pad(x, ((0, 0), (1, 1)))
        T = (x.shape[1] + 2 - 3) // stride + 1
        cols = np.stack([xp[:, k : k + stride * (T - 1) + 1 : stride] for k in range(3)], 0)  # (3, C, T)
        return np.einsum("ock,kct->ot", W, cols, optimize=True) + b[:, None]

    def __call__(self, mel):  # mel (80, F) -> list of (F/2, 384), layer outputs [l0..l_{n-1}, final_ln]
        w = self.w
        x = self._gelu(self._conv(mel, w["conv1/weight"], w["conv1/bias"], 1))
        x = self._gelu(self._conv(x, w["conv2/weight"], w["conv2/bias"], 2)).T
        x = x + w["position_encodings/encodings"][: len(x)]
        outs = []
        T, D = x.shape
        H = self.nh
        dh = D // H
        for i in range(self.nl):
            p = f"layer_{i}/"
            h = self._ln(x, w[p + "self_attention/layer_norm/gamma"], w[p + "self_attention/layer_norm/beta"])
            qkv = h @ w[p + "self_attention/linear_0/weight"].T + w[p + "self_attention/linear_0/bias"]
            q, k, v = (qkv[:, j * D : (j + 1) * D].reshape(T, H, dh).transpose(1, 0, 2) for j in range(3))
            s = q @ k.transpose(0, 2, 1) / np.sqrt(dh)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(T, D)
            x = x + a @ w[p + "self_attention/linear_1/weight"].T + w[p + "self_attention/linear_1/bias"]
            h = self._ln(x, w[p + "ffn/layer_norm/gamma"], w[p + "ffn/layer_norm/beta"])
            h = self._gelu(h @ w[p + "ffn/linear_0/weight"].T + w[p + "ffn/linear_0/bias"])
            x = x + h @ w[p + "ffn/linear_1/weight"].T + w[p + "ffn/linear_1/bias"]
            outs.append(x)
        outs.append(self._ln(x, w["layer_norm/gamma"], w["layer_norm/beta"]))
        return outs


def extract(split, i, n):
    import soundfile as sf

    from earmark.experts.learned.model import (
        CHUNK,
        ENC_HOP,
        FEATURE_VERSION,
        MUSICNN_MID_VERSION,
        FeatureExtractor,
        whisper_model_dir,
    )
    from earmark.experts.learned.windows import window_bounds

    T = Path("/work/data-cache/tagger")
    recs = [json.loads(line) for line in open(T / "mixes" / f"{split}.jsonl")]
    dirs = {k: T / "features" / k for k in (FEATURE_VERSION, MUSICNN_MID_VERSION, "wl1")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    fe = FeatureExtractor()
    enc = WhisperEncoderLayers(whisper_model_dir() / "model.bin")

    def wl_feats(x, bounds, vadp):
        xp = np.zeros(CHUNK, np.float32)
        xp[: len(x)] = x[:CHUNK]
        mel = fe.wm.feature_extractor(xp)[:, :1000].astype(np.float32)
        outs = enc(mel)
        L = [o[: max(1, int(np.ceil(len(x) / ENC_HOP)))] for o in outs[:3]]
        rows = []
        for a, b in bounds:
            ea, eb = a // ENC_HOP, max(a // ENC_HOP + 1, int(np.ceil(b / ENC_HOP)))
            v = vadp[np.minimum((np.arange(ea, ea + len(L[0][ea:eb])) * ENC_HOP) // 512, len(vadp) - 1)]
            ns = v < 0.35
            r = []
            for E in L:
                E = E[ea:eb]
                r += [E.mean(0), E.std(0)]
            E = L[2][ea:eb]
            r.append(E[ns].mean(0) if ns.sum() >= 3 else E.mean(0))
            rows.append(np.concatenate(r))
        return np.stack(rows)

    t0 = time.time()
    done = 0
    for j, r in enumerate(recs):
        if j % n != i:
            continue
        fs = {k: d / f"{r['sha1']}.npy" for k, d in dirs.items()}
        if all(f.exists() for f in fs.values()):
            continue
        x, sr = sf.read(T / "mixes" / split / f"{r['id']}.wav", dtype="float32")
        assert len(x) <= CHUNK
        if not fs[FEATURE_VERSION].exists():
            F, b = fe.extract(x)
            np.save(fs[FEATURE_VERSION], F.astype(np.float32))
        b = window_bounds(len(x))
        if not fs[MUSICNN_MID_VERSION].exists():
            np.save(fs[MUSICNN_MID_VERSION], fe.musicnn_features(x, b, MUSICNN_MID_VERSION).astype(np.float16))
        if not fs["wl1"].exists():
            np.save(fs["wl1"], wl_feats(x, b, fe.vad(x)).astype(np.float16))
        done += 1
        if done % 100 == 0:
            print(split, i, j, f"{(time.time() - t0) / done:.3f} s/clip", flush=True)
    print("done", split, i, done, time.time() - t0, flush=True)


def compare(seeds):
    from earmark.experts.learned.model import FEATURE_VERSION, aggregate
    from earmark.experts.learned.windows import DOMAINS
    from tagger_data import holdout_ids
    from train_probe import choose_thresholds, clip_truth, fit_mlp_masked

    T = Path("/work/data-cache/tagger")

    def load(split, kinds, limit=None):
        recs = [json.loads(line) for line in open(T / "mixes" / f"{split}.jsonl")]
        recs = [r for r in recs if all((T / "features" / k / f"{r['sha1']}.npy").exists() for k in kinds)]
        X, Y, c = [], [], []
        for i, r in enumerate(recs):
            X.append(
                np.concatenate([np.load(T / "features" / k / f"{r['sha1']}.npy").astype(np.float32) for k in kinds], 1)
            )
            Y.append(np.asarray(r["windows"], np.float32))
            c += [i] * len(X[-1])
        return recs, np.concatenate(X), np.concatenate(Y), np.asarray(c)

    sets = {
        "A v1+mn": [FEATURE_VERSION, "mn1mid"],
        "B v1+mn+wl": [FEATURE_VERSION, "mn1mid", "wl1"],
        "C v1+wl": [FEATURE_VERSION, "wl1"],
    }
    for name, kinds in sets.items():
        for seed in seeds:
            recs, X, Y, c = load("train2", kinds)
            h = holdout_ids(recs, 0.15, seed)
            hm = np.isin(c, sorted(h))
            mu = X[~hm].mean(0)
            sd = X[~hm].std(0) + 1e-4
            layers, ep = fit_mlp_masked(
                X[~hm], Y[~hm], X[hm], Y[hm], mu, sd, (256,), 0.05, 200, seed, dropout=0.5, lr=3e-4
            )

            def pred(Xe, mu=mu, sd=sd, layers=layers):
                z = (Xe - mu) / sd
                for k, (W, b) in enumerate(layers):
                    z = z @ W + b
                    if k < len(layers) - 1:
                        z = np.maximum(z, 0)
                return 1 / (1 + np.exp(-z))

            t, acc_h, _, _ = choose_thresholds(pred(X[hm]), c[hm], recs, "max")
            hr, HX, HY, hc = load("hold", kinds)
            P = np.stack([aggregate(pred(HX)[hc == i], "max") for i in range(len(hr))])
            Tt = np.asarray([clip_truth(r) for r in hr])
            pr = np.stack([P[:, k] >= t[k] for k in range(3)], 1)
            ok = ((pr == (Tt == 1)) | (Tt < 0)).all(1)
            per = {d: round(float(np.mean([o for o, r in zip(ok, hr) if r["domain"] == d])), 2) for d in DOMAINS}
            print(
                f"{name} seed {seed}: n_train {len(recs)} ep {ep} train2-holdout {acc_h:.3f} | hold ({len(hr)}) {ok.mean():.3f} {per}",
                flush=True,
            )


if __name__ == "__main__":
    if sys.argv[1] == "extract":
        extract(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        compare([int(s) for s in sys.argv[2:]] or [0])
