"""Window layout shared by the corpus builder, the trainer and the inference module.

A clip (16 kHz mono, up to 10 s) is cut into 2 s analysis windows: windows start
at 0, 2, 4 ... s; if a tail of more than 0.1 s is left, one more window is
aligned to the end of the clip (it overlaps the previous one). A clip shorter
than 2 s is one window covering the whole clip.
"""

from __future__ import annotations

SR = 16000
WIN_S = 2.0
MAX_CLIP_S = 10.0


def window_bounds(n_samples: int, sr: int = SR, win_s: float = WIN_S) -> list[tuple[int, int]]:
    """Return [(start, end), ...] sample indices of the analysis windows."""
    win = int(round(win_s * sr))
    if n_samples <= win:
        return [(0, max(int(n_samples), 1))]
    bounds = []
    start = 0
    while start + win <= n_samples:
        bounds.append((start, start + win))
        start += win
    if n_samples - bounds[-1][1] > int(0.1 * sr):
        bounds.append((n_samples - win, n_samples))
    return bounds


DOMAINS = ["000", "S00", "0M0", "00A", "SM0", "S0A", "0MA", "SMA"]
