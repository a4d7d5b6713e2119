"""What the gender second opinion (EfficientAT mn04 over a voice's segments, `speakers.voice_gender_check`) costs,
on one thread: per voice of 1, 3 and 10 s of 16 kHz audio (upsampled to 32 kHz, as the expert does), after one
warm-up call that loads the model.

    taskset -c 0 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/experts/gender_check_cost.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from earmark.experts.speakers import voice_gender_check


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    a = ap.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    voice_gender_check((0.1 * rng.standard_normal(16000)).astype(np.float32))
    print(f"first call (loads and checks the weights): {1e3 * (time.perf_counter() - t0):.0f} ms")
    print("\n| voice audio | median ms | min ms |\n|---|---|---|")
    for seconds in (1, 3, 10):
        x = (0.1 * rng.standard_normal(16000 * seconds)).astype(np.float32)
        times = []
        for _ in range(a.repeats):
            t = time.perf_counter()
            voice_gender_check(x)
            times.append(1e3 * (time.perf_counter() - t))
        print(f"| {seconds} s | {np.median(times):.1f} | {min(times):.1f} |")


if __name__ == "__main__":
    main()
