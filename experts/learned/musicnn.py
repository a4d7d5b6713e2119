"""musicnn (Pons & Serra 2019, MTT_musicnn) in numpy: 50 MagnaTagATune music tags + a 200-d embedding.

The weights are the TensorFlow checkpoint shipped in the `musicnn` wheel (PyPI `musicnn==0.1.0`, ISC
licence, installed with --no-deps: only its files are read, TensorFlow is never imported). The checkpoint
is read by a small pure-Python TensorFlow "tensor bundle" reader (the `.index` file is an SSTable of
BundleEntryProto records pointing into `.data-00000-of-00001`), and the forward pass is re-implemented
here (validated against the original TensorFlow graph: tags agree to ~1e-6, see training/README.md). The MSD_musicnn
checkpoint has the same network (`Musicnn("MSD_musicnn")`, tags `MSD_LABELS`; checked against TensorFlow too,
training/MUSIC_TAGS.md).

Input: 16 kHz mono; 96-band log-mel (n_fft 512, hop 256, librosa power mel, float16,
log10(10000 x + 1)), the model was trained on 3 s patches (187 frames).

Model (`build_musicnn`, MTT): input batch-norm; front-end = timbral convs 7x38 and 7x67 (204 filters
each, max over frequency) + temporal convs 128/64/32x1 (51 filters each, max over frequency), conv ->
ReLU -> batch-norm; mid-end = three 7-frame 1-D convs (64 filters, the 2nd and 3rd residual); back-end
= max and mean over time of the 753 dense-connected features, batch-norm, dense 200 ReLU, batch-norm
(the "penultimate" embedding), dense 50 -> sigmoid.

    m = Musicnn()
    F = m.frames(logmel_musicnn(x))          # (T, 753) per-frame mid-end features of a whole clip
    tags, emb = m.backend(F[a:b])            # (50,), (200,) for the frames a..b (a 3 s patch: 187)
"""

from __future__ import annotations

import hashlib
import importlib.util
import struct
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

SR = 16000
N_FFT = 512
HOP = 256
N_MELS = 96
PATCH = 187  # frames in 3 s: librosa.time_to_frames(3, sr=16000, n_fft=512, hop_length=256) + 1
BN_EPS = 1e-3  # tf.compat.v1.layers.batch_normalization default
MTT_LABELS = [
    "guitar", "classical", "slow", "techno", "strings", "drums", "electronic", "rock", "fast", "piano",
    "ambient", "beat", "violin", "vocal", "synth", "female", "indian", "opera", "male", "singing",
    "vocals", "no vocals", "harpsichord", "loud", "quiet", "flute", "woman", "male vocal", "no vocal", "pop",
    "soft", "sitar", "solo", "man", "classic", "choir", "voice", "new age", "dance", "male voice",
    "female vocal", "beats", "harp", "cello", "no voice", "weird", "country", "metal", "female voice", "choral",
]  # fmt: skip
# MSD_musicnn (same network, Million Song Dataset last.fm tags; `Musicnn("MSD_musicnn")`), musicnn's own order
MSD_LABELS = [
    "rock", "pop", "alternative", "indie", "electronic", "female vocalists", "dance", "00s", "alternative rock",
    "jazz", "beautiful", "metal", "chillout", "male vocalists", "classic rock", "soul", "indie rock", "Mellow",
    "electronica", "80s", "folk", "90s", "chill", "instrumental", "punk", "oldies", "blues", "hard rock", "ambient",
    "acoustic", "experimental", "female vocalist", "guitar", "Hip-Hop", "70s", "party", "country",
    "easy listening", "sexy", "catchy", "funk", "electro", "heavy metal", "Progressive rock", "60s", "rnb",
    "indie pop", "sad", "House", "happy",
]  # fmt: skip


# --------------------------------------------------------------------------- TF checkpoint reader
def _varint(b: bytes, p: int) -> tuple[int, int]:
    r = s = 0
    while True:
        c = b[p]
        p += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, p


def _block_entries(b: bytes) -> list[tuple[bytes, bytes]]:
    """Key/value pairs of one SSTable block (prefix-compressed keys, restart array at the end)."""
    n_restarts = struct.unpack_from("<I", b, len(b) - 4)[0]
    end = len(b) - 4 - 4 * n_restarts
    p, key, out = 0, b"", []
    while p < end:
        shared, p = _varint(b, p)
        non_shared, p = _varint(b, p)
        vlen, p = _varint(b, p)
        key = key[:shared] + b[p : p + non_shared]
        p += non_shared
        out.append((key, b[p : p + vlen]))
        p += vlen
    return out


def _block(f: bytes, handle: bytes) -> bytes:
    off, q = _varint(handle, 0)
    size, _ = _varint(handle, q)
    if f[off + size] != 0:  # trailer: compression type (0 = none; TF bundles are written uncompressed)
        raise ValueError("compressed SSTable block in a TF checkpoint index (snappy is not supported)")
    return f[off : off + size]


def _proto_fields(b: bytes):
    p = 0
    while p < len(b):
        tag, p = _varint(b, p)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            v, p = _varint(b, p)
        elif wire == 2:
            n, p = _varint(b, p)
            v, p = b[p : p + n], p + n
        elif wire == 5:
            v, p = b[p : p + 4], p + 4
        elif wire == 1:
            v, p = b[p : p + 8], p + 8
        else:
            raise ValueError(f"protobuf wire type {wire}")
        yield field, v


def read_tf_checkpoint(prefix: str | Path) -> dict[str, np.ndarray]:
    """All float32 tensors of a single-shard TF (v2 bundle) checkpoint: {name: array}."""
    prefix = str(prefix)
    f = Path(prefix + ".index").read_bytes()
    if struct.unpack_from("<Q", f, len(f) - 8)[0] != 0xDB4775248B80FB57:
        raise ValueError(f"{prefix}.index is not an SSTable")
    footer = f[-48:]
    _, p = _varint(footer, 0)  # metaindex handle (unused)
    _, p = _varint(footer, p)
    data = Path(prefix + ".data-00000-of-00001").read_bytes()
    out: dict[str, np.ndarray] = {}
    for _, handle in _block_entries(_block(f, footer[p:])):
        for key, val in _block_entries(_block(f, handle)):
            if not key:  # the BundleHeaderProto
                continue
            dtype, shape, offset, size, shard = 1, [], 0, 0, 0
            for field, v in _proto_fields(val):
                if field == 1:
                    dtype = v
                elif field == 2:  # TensorShapeProto: repeated Dim dim = 2 {int64 size = 1}
                    shape = [dict(_proto_fields(d)).get(1, 0) for n, d in _proto_fields(v) if n == 2]
                elif field == 3:
                    shard = v
                elif field == 4:
                    offset = v
                elif field == 5:
                    size = v
            if dtype != 1 or shard != 0:  # DT_FLOAT only (beta powers etc. are float too)
                continue
            out[key.decode()] = np.frombuffer(data, "<f4", count=size // 4, offset=offset).reshape(shape).copy()
    return out


def checkpoint_prefix(model: str = "MTT_musicnn") -> str:
    """The checkpoint prefix inside the installed wheel: '<site-packages>/musicnn/<model>/' (files '.index' …)."""
    spec = importlib.util.find_spec("musicnn")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the musicnn package (its model files) is not installed: pip install --no-deps musicnn==0.1.0"
        )
    return str(Path(list(spec.submodule_search_locations)[0]) / model) + "/"


# --------------------------------------------------------------------------- features
_MEL_FB: np.ndarray | None = None


def logmel_musicnn(x: np.ndarray) -> np.ndarray:
    """(T, 96) musicnn input: librosa power mel (centered STFT) -> float16 -> log10(10000 x + 1)."""
    global _MEL_FB
    import librosa

    if _MEL_FB is None:
        _MEL_FB = librosa.filters.mel(sr=SR, n_fft=N_FFT, n_mels=N_MELS).astype(np.float32)
    x = np.asarray(x, np.float32).reshape(-1)
    S = np.abs(librosa.stft(x, n_fft=N_FFT, hop_length=HOP, center=True)) ** 2
    mel = (_MEL_FB @ S).T.astype(np.float16)
    return np.log10(10000 * mel.astype(np.float32) + 1).astype(np.float32)


class Musicnn:
    """numpy MTT_musicnn (inference; batch-norm in inference mode, folded into scale/shift)."""

    def __init__(self, model: str = "MTT_musicnn", weights: dict[str, np.ndarray] | None = None):
        w = weights if weights is not None else read_tf_checkpoint(checkpoint_prefix(model))
        self.name = model
        bn = []
        for i in range(11):
            n = "batch_normalization" + (f"_{i}" if i else "")
            scale = w[n + "/gamma"] / np.sqrt(w[n + "/moving_variance"] + BN_EPS)
            bn.append((scale.astype(np.float32), (w[n + "/beta"] - w[n + "/moving_mean"] * scale).astype(np.float32)))
        conv = []
        for i in range(8):
            n = "conv2d" + (f"_{i}" if i else "")
            conv.append((w[n + "/kernel"].astype(np.float32), w[n + "/bias"].astype(np.float32)))
        self.bn, self.conv = bn, conv
        self.dense = [
            (w["dense/kernel"].astype(np.float32), w["dense/bias"].astype(np.float32)),
            (w["dense_1/kernel"].astype(np.float32), w["dense_1/bias"].astype(np.float32)),
        ]

    # front-end + mid-end --------------------------------------------------------------------
    def frames(self, mel: np.ndarray) -> np.ndarray:
        """(T, 96) log-mel -> (T, 753) mid-end features: [front-end 561 | conv1 64 | res2 64 | res3 64]."""
        x = np.asarray(mel, np.float32) * self.bn[0][0][0] + self.bn[0][1][0]
        T = len(x)
        feats = []
        # timbral: pad 3 frames each side, 'valid' conv 7 x F, ReLU, BN, max over frequency
        xp = np.pad(x, ((3, 3), (0, 0)))
        for ci, bi in ((0, 1), (1, 2)):
            W, b = self.conv[ci]  # (7, kf, 1, 204)
            kt, kf = W.shape[:2]
            win = np.lib.stride_tricks.sliding_window_view(xp, (kt, kf))  # (T, 96-kf+1, 7, kf)
            y = win.reshape(-1, kt * kf) @ W.reshape(kt * kf, -1) + b
            y = np.maximum(y, 0) * self.bn[bi][0] + self.bn[bi][1]
            feats.append(y.reshape(T, -1, W.shape[-1]).max(axis=1))
        # temporal: 'same' conv k x 1 along time per mel band (TF pads (k-1)//2 before), ReLU, BN, max over freq
        for ci, bi in ((2, 3), (3, 4), (4, 5)):
            W, b = self.conv[ci]  # (k, 1, 1, 51)
            k = W.shape[0]
            xp2 = np.pad(x, (((k - 1) // 2, k - 1 - (k - 1) // 2), (0, 0)))
            win = np.lib.stride_tricks.sliding_window_view(xp2, k, axis=0)  # (T, 96, k)
            y = win.reshape(-1, k) @ W.reshape(k, -1) + b
            y = np.maximum(y, 0) * self.bn[bi][0] + self.bn[bi][1]
            feats.append(y.reshape(T, N_MELS, -1).max(axis=1))
        front = np.concatenate(feats, axis=1)  # (T, 561)
        outs = [front]
        h = front
        for j, (ci, bi) in enumerate(((5, 6), (6, 7), (7, 8))):
            W, b = self.conv[ci]  # (7, C, 1, 64)
            hp = np.pad(h, ((3, 3), (0, 0)))
            win = np.lib.stride_tricks.sliding_window_view(hp, (7, hp.shape[1]))[:, 0]  # (T, 7, C)
            y = win.reshape(T, -1) @ W.reshape(-1, W.shape[-1]) + b
            y = np.maximum(y, 0) * self.bn[bi][0] + self.bn[bi][1]
            h = y if j == 0 else y + h
            outs.append(h)
        return np.concatenate(outs, axis=1).astype(np.float32)

    # back-end ----------------------------------------------------------------------------------
    def backend(self, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(T, 753) frames (one patch) or (n, T, 753) -> tag probabilities (…, 50), embedding (…, 200)."""
        F = np.asarray(F, np.float32)
        pooled = np.stack([F.max(axis=-2), F.mean(axis=-2)], axis=-1)  # TF: concat on axis 2 -> interleaved
        z = pooled.reshape(*pooled.shape[:-2], -1) * self.bn[9][0] + self.bn[9][1]
        z = np.maximum(z @ self.dense[0][0] + self.dense[0][1], 0) * self.bn[10][0] + self.bn[10][1]
        logits = z @ self.dense[1][0] + self.dense[1][1]
        return (1 / (1 + np.exp(-logits))).astype(np.float32), z.astype(np.float32)

    def backend_pooled(self, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The back-end on pooled features (…, 1506) laid out as `window_midend` gives them ([max 753 | mean 753])
        -> tag probabilities (…, 50), embedding (…, 200); the same as `backend` on the frames they pool."""
        P = np.asarray(P, np.float32)
        pooled = np.stack([P[..., :753], P[..., 753:]], axis=-1)
        z = pooled.reshape(*pooled.shape[:-2], -1) * self.bn[9][0] + self.bn[9][1]
        z = np.maximum(z @ self.dense[0][0] + self.dense[0][1], 0) * self.bn[10][0] + self.bn[10][1]
        logits = z @ self.dense[1][0] + self.dense[1][1]
        return (1 / (1 + np.exp(-logits))).astype(np.float32), z.astype(np.float32)

    def patches(self, mel_patches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(n, 187, 96) patches, each run on its own like the original extractor -> tags, embeddings."""
        res = [self.backend(self.frames(p)) for p in mel_patches]
        return np.stack([r[0] for r in res]), np.stack([r[1] for r in res])


def window_frames(a: int, b: int, n_frames: int, span: int = PATCH) -> tuple[int, int]:
    """Frame range (span frames, centred on samples a..b, shifted to lie inside the clip)."""
    centre = (a + b) / 2 / HOP
    f0 = int(round(centre - span / 2))
    f0 = max(0, min(f0, n_frames - span))
    return f0, min(n_frames, f0 + span)


def window_features(model: Musicnn, x: np.ndarray, bounds) -> np.ndarray:
    """(n_windows, 250) per analysis window: the 50 MTT tag probabilities and the 200-d embedding of a
    3 s patch centred on the window (front- and mid-end run once over the whole clip)."""
    F = model.frames(logmel_musicnn(x))
    rows = []
    for a, b in bounds:
        f0, f1 = window_frames(a, b, len(F))
        tags, emb = model.backend(F[f0:f1])
        rows.append(np.concatenate([tags, emb]))
    return np.stack(rows).astype(np.float32)


# Pooled mid-end features and log-mels of recent clips, by content: the domain probe computes MTT's for every
# clip, and the music tagger (experts/learned/musictags) asks for the same clip again in a later stage of the same
# process, so its MTT tags cost no network pass and MSD's pass reuses the log-mel. Bounded (a few MB).
_CACHE: OrderedDict[tuple, np.ndarray] = OrderedDict()
_CACHE_LOCK = threading.Lock()
CACHE_POOLS, CACHE_MELS = 2048, 64  # ~15 KB per pooled 10 s clip (float16), ~240 KB per 10 s log-mel


def _cached(key: tuple, limit: int, make) -> np.ndarray:
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    value = make()
    with _CACHE_LOCK:
        _CACHE[key] = value
        kind = key[0]
        keys = [k for k in _CACHE if k[0] == kind]
        for k in keys[: max(0, len(keys) - limit)]:
            del _CACHE[k]
    return value


def clip_key(x: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(x, np.float32).tobytes()).hexdigest()


def cached_logmel(x: np.ndarray) -> np.ndarray:
    """`logmel_musicnn(x)`, kept for the last CACHE_MELS clips."""
    return _cached(("mel", clip_key(x)), CACHE_MELS, lambda: logmel_musicnn(x))


def window_midend(model: Musicnn, x: np.ndarray, bounds) -> np.ndarray:
    """(n_windows, 1506) per analysis window: max | mean over a 3 s patch centred on the window of the 753
    per-frame front-/mid-end features (the back-end's own pooling, before its tag-trained dense layers),
    rounded to float16 like the training cache. Kept for the last CACHE_POOLS (model, clip, windows)."""

    def make() -> np.ndarray:
        F = model.frames(cached_logmel(x))
        rows = []
        for a, b in bounds:
            f0, f1 = window_frames(a, b, len(F))
            rows.append(np.concatenate([F[f0:f1].max(axis=0), F[f0:f1].mean(axis=0)]))
        return np.stack(rows).astype(np.float16)

    key = ("pool", getattr(model, "name", id(model)), clip_key(x), tuple(map(tuple, bounds)))
    return _cached(key, CACHE_POOLS, make).astype(np.float32)
