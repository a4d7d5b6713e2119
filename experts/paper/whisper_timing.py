"""Word times from Whisper's cross-attention, as openai-whisper's `timing.find_alignment` computes them.

The decoder reads <|sot|>… <|notimestamps|> + the transcript's text tokens + <|endoftext|> once; the
attention logits of the checkpoint's alignment heads over the clip's encoder frames are softmaxed, each
frame column standardised over the tokens, median-filtered (width 7) along time, averaged over the heads,
and dynamic time warping through the negated matrix gives the frame at which each token starts
(50 frames per second). A word starts where its first token does and ends where the next word starts.
The DTW is openai-whisper's (MIT licence), compiled with numba where it is installed (librosa brings it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

FRAMES_PER_SECOND = 50  # encoder frames per second of audio
MEDIAN_WIDTH = 7


def _dtw(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(text indices, time indices) of the cheapest monotonic path through cost matrix `x` (tokens × frames);
    ties prefer the diagonal, then a step in tokens, as openai-whisper's `dtw_cpu`."""
    n, m = x.shape
    cost = np.full((n + 1, m + 1), np.inf, dtype=np.float32)
    trace = -np.ones((n + 1, m + 1), dtype=np.float32)
    cost[0, 0] = 0
    for j in range(1, m + 1):
        for i in range(1, n + 1):
            c0, c1, c2 = cost[i - 1, j - 1], cost[i - 1, j], cost[i, j - 1]
            if c0 < c1 and c0 < c2:
                c, t = c0, 0
            elif c1 < c0 and c1 < c2:
                c, t = c1, 1
            else:
                c, t = c2, 2
            cost[i, j] = x[i - 1, j - 1] + c
            trace[i, j] = t
    i, j = n, m
    trace[0, :] = 2
    trace[:, 0] = 1
    path_i, path_j = [], []
    while i > 0 or j > 0:
        path_i.append(i - 1)
        path_j.append(j - 1)
        if trace[i, j] == 0:
            i, j = i - 1, j - 1
        elif trace[i, j] == 1:
            i -= 1
        else:
            j -= 1
    return np.array(path_i[::-1]), np.array(path_j[::-1])


try:  # numba: ~1,000× faster than the interpreter on a 60 × 500 matrix
    import numba

    dtw = numba.njit(cache=True)(_dtw)
except ImportError:  # pragma: no cover - numba comes with librosa in every earmark environment
    dtw = _dtw


def median_filter(x: Any, width: int = MEDIAN_WIDTH) -> Any:
    """Median over a sliding window along the last axis of a (heads, tokens, frames) tensor, reflect-padded."""
    import torch.nn.functional as F

    pad = width // 2
    if x.shape[-1] <= pad:
        return x
    padded = F.pad(x, (pad, pad, 0, 0), mode="reflect")
    return padded.unfold(-1, width, 1).sort()[0][..., pad]


def token_start_times(qk: Any, n_prompt: int, n_frames: int) -> np.ndarray:
    """Start times (s) of the text tokens and of <|endoftext|>, from one clip's alignment-head attention
    logits `qk` (heads, prompt + text + eot tokens, encoder frames); `n_prompt` counts <|sot|>… up to and
    without <|notimestamps|>; `n_frames` is the clip's length in encoder frames."""
    import torch

    weights = torch.softmax(qk[:, :, :n_frames].float(), dim=-1)
    std, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)
    weights = median_filter((weights - mean) / std)
    matrix = weights.mean(dim=0)[n_prompt:-1]  # rows: <|notimestamps|> and the text tokens
    text_idx, time_idx = dtw(-matrix.double().cpu().numpy())
    jumps = np.pad(np.diff(text_idx), (1, 0), constant_values=1).astype(bool)
    return time_idx[jumps] / FRAMES_PER_SECOND


class AlignmentHeads:
    """Captures the alignment heads' attention logits during one decoder forward pass (forward hooks on the
    cross-attention's q and k projections; the attention kernel itself is left as it is, SDPA included)."""

    def __init__(self, model: Any, heads: list[list[int]]) -> None:
        self.heads = [(int(layer), int(head)) for layer, head in heads]
        self.q: dict[int, Any] = {}
        self.k: dict[int, Any] = {}
        self.hooks = []
        layers = model.model.decoder.layers
        for layer in sorted({lay for lay, _ in self.heads}):
            attn = layers[layer].encoder_attn
            self.hooks.append(attn.q_proj.register_forward_hook(self._keep(self.q, layer)))
            self.hooks.append(attn.k_proj.register_forward_hook(self._keep(self.k, layer)))
        self.n_heads = layers[0].encoder_attn.num_heads
        self.head_dim = layers[0].encoder_attn.head_dim

    @staticmethod
    def _keep(store: dict[int, Any], layer: int):
        def hook(module, inputs, output):
            store[layer] = output

        return hook

    def __enter__(self) -> AlignmentHeads:
        return self

    def __exit__(self, *exc: object) -> None:
        for h in self.hooks:
            h.remove()

    def logits(self) -> Any:
        """(batch, heads, tokens, frames) attention logits of the alignment heads, q·k / √d as Whisper's."""
        import torch

        out = []
        for layer, head in self.heads:
            q, k = self.q[layer], self.k[layer]
            q = q.view(q.shape[0], q.shape[1], self.n_heads, self.head_dim)[:, :, head]
            k = k.view(k.shape[0], k.shape[1], self.n_heads, self.head_dim)[:, :, head]
            out.append(torch.einsum("btd,bsd->bts", q.float(), k.float()) * self.head_dim**-0.5)
        return torch.stack(out, dim=1)
