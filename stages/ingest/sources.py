"""One source file cannot flood a benchmark: which of its clips are kept, and how far one text may spread.

A 20-minute file of digital silence became 120 clips, and 1,800 of 1,848 published captions were the same 15
sentences. Three bounds, each with its reason on a row:

- at ingest (`plan_source`), per source file: silent clips (RMS below `[ingest] silence_dbfs`) after the
  first are dropped; so is a clip whose audio repeats an earlier kept clip of the file (`audio_similarity`: the
  best normalised cross-correlation of their mean-removed log-mel spectrograms over every time shift with at
  least half of the shorter clip overlapping, ≥ `[ingest] near_duplicate_similarity`) — a loop's clips match at
  the loop's phase; then at most `[ingest] max_clips_per_source` clips are kept, spread evenly over the file.
  What was dropped is one quarantine row per source and cause (`source#clips`), which the build prints;
- at filter, the QC checks `same_source` and `source_spread` (earmark.stages.filter.sources).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SR = 16_000
_HOP, _NFFT, _BANDS = 320, 640, 40  # 20 ms hops, 40 ms windows, 40 mel bands (50 Hz – 7.6 kHz)
MIN_OVERLAP = 0.5  # of the shorter clip, for a time shift to count


# ------------------------------------------------------------------------------------------- audio
def rms_dbfs(samples: np.ndarray) -> float:
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
    return 20 * np.log10(rms) if rms > 0 else float("-inf")


def audio_features(samples: np.ndarray) -> np.ndarray:
    """Bands × frames log-mel power with each band's mean removed (level and channel colour drop out)."""
    import librosa

    mel = librosa.filters.mel(sr=SR, n_fft=_NFFT, n_mels=_BANDS, fmin=50, fmax=7600)
    x = np.asarray(samples, dtype=np.float32)
    if x.size < _NFFT:
        x = np.pad(x, (0, _NFFT - x.size))
    power = np.abs(librosa.stft(x, n_fft=_NFFT, hop_length=_HOP, center=False)) ** 2
    feats = np.log(mel @ power + 1e-8)
    return feats - feats.mean(axis=1, keepdims=True)


def audio_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """The best normalised cross-correlation of two clips' `audio_features` over every time shift that overlaps
    at least MIN_OVERLAP of the shorter clip: 1 for the same audio at any offset, ~0.6 for two sentences of one
    voice, ~0 for two stretches of noise."""
    ta, tb = a.shape[1], b.shape[1]
    n = 1 << int(np.ceil(np.log2(ta + tb)))
    corr = np.fft.irfft((np.fft.rfft(a, n) * np.conj(np.fft.rfft(b, n))).sum(axis=0), n)
    ea = np.concatenate([[0.0], np.cumsum((a**2).sum(axis=0))])
    eb = np.concatenate([[0.0], np.cumsum((b**2).sum(axis=0))])
    least = max(1, int(min(ta, tb) * MIN_OVERLAP))
    lags = np.arange(-(tb - least), ta - least + 1)  # a[t] against b[t - lag]
    a0, a1 = np.maximum(0, lags), np.minimum(ta, tb + lags)
    b0, b1 = a0 - lags, a1 - lags
    den = np.sqrt((ea[a1] - ea[a0]) * (eb[b1] - eb[b0]))
    ok = (a1 - a0 >= least) & (den > 1e-9)
    return float(np.max(corr[lags[ok] % n] / den[ok])) if ok.any() else 0.0


@dataclass(frozen=True)
class Dropped:
    index: int  # the clip's index in its file
    cause: str  # "silent" | "repeat" | "cap"
    like: int | None = None  # the kept clip it repeats
    similarity: float | None = None


def plan_source(
    pieces: Sequence[np.ndarray], max_clips: int, similarity: float, silence_dbfs: float
) -> tuple[list[int], list[Dropped]]:
    """Which clips of one file to keep (indices, in order) and why the others go (see the module doc)."""
    kept: list[int] = []
    dropped: list[Dropped] = []
    feats: dict[int, np.ndarray] = {}
    silent_kept: int | None = None
    for i, piece in enumerate(pieces):
        if rms_dbfs(piece) < silence_dbfs:
            if silent_kept is None:
                silent_kept = i
                kept.append(i)
            else:
                dropped.append(Dropped(i, "silent", silent_kept))
            continue
        f = feats[i] = audio_features(piece)
        best = max(((audio_similarity(f, feats[k]), k) for k in kept if k in feats), default=(0.0, None))
        if best[1] is not None and best[0] >= similarity:
            dropped.append(Dropped(i, "repeat", best[1], round(best[0], 3)))
        else:
            kept.append(i)
    if max_clips and len(kept) > max_clips:  # evenly over the file, first and last included
        chosen = {kept[int(round(j))] for j in np.linspace(0, len(kept) - 1, max_clips)}
        dropped += [Dropped(i, "cap") for i in kept if i not in chosen]
        kept = [i for i in kept if i in chosen]
    return kept, sorted(dropped, key=lambda d: d.index)


def spans(indices: Sequence[int]) -> str:
    """`[0, 1, 2, 5, 7, 8]` → "0-2,5,7-8"."""
    out: list[str] = []
    for i in sorted(indices):
        if out and int(out[-1].split("-")[-1]) == i - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def drop_reasons(drops: Sequence[Dropped], kept: Sequence[int], n: int, cfg: Any) -> list[tuple[str, str, str]]:
    """(clips, reason, fix) per cause, for one quarantine row each."""
    by_cause: dict[str, list[Dropped]] = defaultdict(list)
    for d in drops:
        by_cause[d.cause].append(d)
    out = []
    if silent := by_cause.get("silent"):
        out.append(
            (
                spans([d.index for d in silent]),
                f"{len(silent)} of the file's {n} clips are silent (RMS below ingest.silence_dbfs = "
                f"{cfg.silence_dbfs:g} dBFS) like its kept clip #{silent[0].like}; one silent clip per file is kept",
                "nothing to do; trim the silence from the file if its clips matter",
            )
        )
    if repeats := by_cause.get("repeat"):
        pairs = ", ".join(f"#{d.index} ~ #{d.like} ({d.similarity:.2f})" for d in repeats[:4])
        out.append(
            (
                spans([d.index for d in repeats]),
                f"{len(repeats)} of the file's {n} clips repeat the audio of an earlier kept clip (similarity ≥ "
                f"ingest.near_duplicate_similarity = {cfg.near_duplicate_similarity:g}: {pairs}"
                f"{', …' if len(repeats) > 4 else ''})",
                "nothing to do: one copy is kept; raise ingest.near_duplicate_similarity to keep near-repeats",
            )
        )
    if capped := by_cause.get("cap"):
        out.append(
            (
                spans([d.index for d in capped]),
                f"{len(capped)} of the file's {n} clips dropped: at most ingest.max_clips_per_source = "
                f"{cfg.max_clips_per_source} clips per source file (kept, spread over it: #{spans(kept)})",
                "raise ingest.max_clips_per_source (0: no limit) or split the recording into files",
            )
        )
    return out
