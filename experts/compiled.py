"""Compile librosa's numba functions into their cache once, in one process, before two earmark processes can race
to (`make setup` runs `python -m earmark.experts.compiled`).

librosa's beat tracker, pYIN, peak picking and overlap-add are numba functions cached beside the package, in the
venv. Two processes compiling the same function at once on a fresh venv left a cache that segfaulted every later
load (2026-11-28: a parallel `make test` beside `make demo` in one clone; docs/benchmarks-history.md, issue [2/3]).
Each call below runs the function on the dtype and arguments the experts use, so the cache holds what they load."""

from __future__ import annotations

import time

import numpy as np

from earmark.experts.base import SAMPLE_RATE
from earmark.experts.music import hpss, tempo_and_beats
from earmark.experts.speakers import pitch_track


def compile_librosa() -> float:
    """Run each numba-compiled path of the embedded experts once on a generated pulsed tone; seconds taken."""
    import librosa

    t0 = time.perf_counter()
    t = np.arange(4 * SAMPLE_RATE) / SAMPLE_RATE
    x = (0.3 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 2 * t) > 0)).astype(np.float32)
    tempo_and_beats(x)  # onset strength, beat tracking, peak picking
    hpss(x)  # STFT, median filtering, overlap-add
    pitch_track(x)  # pYIN and its Viterbi decoding
    librosa.feature.chroma_cqt(y=x, sr=SAMPLE_RATE, hop_length=512)  # the music expert's key
    return time.perf_counter() - t0


if __name__ == "__main__":
    print(f"librosa's numba functions compiled and cached in {compile_librosa():.1f} s")
