"""Inference of the music-tag heads (numpy): musicnn features per 2 s window -> calibrated tag probabilities.

Per window (experts/learned/windows.py layout) the features are the MTT and MSD musicnn networks' pooled
front-/mid-end features of a 3 s patch centred on the window (`window_midend`; MTT's are the ones the domain
probe already computed for the clip, taken from musicnn's content cache, so only MSD costs a network pass) and
their back-ends' tag logits and 200-d embeddings. The heads (standardisation + a small MLP with one sigmoid per
tag) give window scores; a clip's score per tag is the mean of its windows' scores. Both are mapped to
calibrated probabilities by per-tag isotonic curves fitted on the calibration split (training/MUSIC_TAGS.md).
musicnn's own 50 + 50 tag probabilities are returned too (raw, uncalibrated).
"""

from __future__ import annotations

import hashlib
import json
import threading
from functools import cache
from pathlib import Path

import numpy as np

from earmark.experts.learned.model import logit
from earmark.experts.learned.musicnn import MSD_LABELS, MTT_LABELS, Musicnn, window_midend
from earmark.experts.learned.windows import SR, window_bounds

HERE = Path(__file__).resolve().parent
WEIGHTS = HERE / "music_tags.npz"
TAG_FILE = HERE / "music_tags.json"
BLOCKS = ("mtt_logit", "mtt_emb", "msd_logit", "msd_emb", "mtt_pool", "msd_pool")
_LOCK = threading.Lock()
_STATE: dict = {}


@cache
def weights_id(path: Path = WEIGHTS) -> str:
    """sha256 (first 12 hex digits) of the weights file; the tag file names the weights it was measured with."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def load_tag_file(path: Path = TAG_FILE) -> dict:
    return json.loads(Path(path).read_text())


def window_pools(x: np.ndarray, mtt: Musicnn, msd: Musicnn) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """The clip's analysis windows and their pooled MTT and MSD mid-end features, (n, 1506) each."""
    x = np.asarray(x, np.float32).reshape(-1)
    if x.size < SR // 10:
        x = np.pad(x, (0, SR // 10 - x.size))
    bounds = window_bounds(x.size)
    return bounds, window_midend(mtt, x, bounds), window_midend(msd, x, bounds)


def block_features(mtt: Musicnn, msd: Musicnn, p_mtt: np.ndarray, p_msd: np.ndarray, blocks=BLOCKS) -> np.ndarray:
    """(n, D) head input: the named blocks of the windows' pooled features and back-end outputs, in order."""
    t_mtt, e_mtt = mtt.backend_pooled(p_mtt)
    t_msd, e_msd = msd.backend_pooled(p_msd)
    have = {
        "mtt_logit": logit(t_mtt),
        "mtt_emb": e_mtt,
        "msd_logit": logit(t_msd),
        "msd_emb": e_msd,
        "mtt_pool": p_mtt,
        "msd_pool": p_msd,
    }
    return np.concatenate([have[b] for b in blocks], axis=1).astype(np.float32)


class Heads:
    """Standardise -> ReLU layers -> one sigmoid per tag; per-tag isotonic calibration (window and clip)."""

    def __init__(self, path: Path = WEIGHTS):
        z = np.load(path, allow_pickle=False)
        self.tags = [str(t) for t in z["tags"]]
        self.blocks = tuple(str(b) for b in z["blocks"])
        self.mu, self.sd = z["mu"].astype(np.float32), z["sd"].astype(np.float32)
        self.layers = []
        while f"W{len(self.layers)}" in z:
            i = len(self.layers)
            self.layers.append((z[f"W{i}"].astype(np.float32), z[f"b{i}"].astype(np.float32)))
        # isotonic breakpoints per tag, padded to one length: x (tags, k), y (tags, k)
        self.cal = {lvl: (z[f"cal_{lvl}_x"], z[f"cal_{lvl}_y"]) for lvl in ("window", "clip")}

    def scores(self, X: np.ndarray) -> np.ndarray:
        h = (X - self.mu) / self.sd
        for j, (W, b) in enumerate(self.layers):
            h = h @ W + b
            if j < len(self.layers) - 1:
                h = np.maximum(h, 0)
        return (1 / (1 + np.exp(-np.clip(h, -30, 30)))).astype(np.float32)

    def calibrated(self, S: np.ndarray, level: str) -> np.ndarray:
        cx, cy = self.cal[level]
        S = np.atleast_2d(S)
        return np.stack([np.interp(S[:, k], cx[k], cy[k]) for k in range(len(self.tags))], axis=1)


def _models(path: Path = WEIGHTS) -> tuple[Musicnn, Musicnn, Heads]:
    with _LOCK:
        key = str(path)
        if key not in _STATE:
            _STATE[key] = (Musicnn("MTT_musicnn"), Musicnn("MSD_musicnn"), Heads(Path(path)))
        return _STATE[key]


def tag_clip(samples_16k: np.ndarray, weights: Path = WEIGHTS) -> dict:
    """Tag one 16 kHz mono clip. Returns {"windows": [{"start_s", "end_s", "tags": {tag: calibrated p}}],
    "clip": {tag: calibrated p}, "mtt": {label: p}, "msd": {label: p}} (musicnn's own tags: clip mean of the
    windows' probabilities, uncalibrated)."""
    mtt, msd, heads = _models(weights)
    bounds, p_mtt, p_msd = window_pools(samples_16k, mtt, msd)
    X = block_features(mtt, msd, p_mtt, p_msd, heads.blocks)
    S = heads.scores(X)
    win = heads.calibrated(S, "window")
    clip = heads.calibrated(S.mean(axis=0, keepdims=True), "clip")[0]
    raw_mtt = mtt.backend_pooled(p_mtt)[0].mean(axis=0)
    raw_msd = msd.backend_pooled(p_msd)[0].mean(axis=0)
    return {
        "windows": [
            {"start_s": a / SR, "end_s": b / SR, "tags": dict(zip(heads.tags, map(float, win[i])))}
            for i, (a, b) in enumerate(bounds)
        ],
        "clip": dict(zip(heads.tags, map(float, clip))),
        "mtt": dict(zip(MTT_LABELS, map(float, raw_mtt))),
        "msd": dict(zip(MSD_LABELS, map(float, raw_msd))),
    }
