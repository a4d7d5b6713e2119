"""What bf16 / fp16 autocast changes in the paper profile's Hugging Face classifiers, against fp32 on the same
inputs: label probabilities, the labels kept, and time.

    python benchmarks/experts/paper_precision.py [--models-dir DIR] [--classifier ID ...] [--device cuda] [--clips 16]

`--classifier` names model directories under `--models-dir` (e.g. your AudioSet tagger and speaker-attribute
classifiers; `[analyze] models_dir`). Without one, a randomly initialised AST-base with AudioSet's 527 outputs
is built there first (as benchmarks/experts/paper_throughput.py does): its outputs are noise, so its figures say what
the arithmetic does, not what a trained model's labels do — run it on your weights before you set
`[analyze] precision`. Inputs: `--clips` generated clips (noise + tones) cut into the tagger's 2 s windows.
Per classifier and precision: max and mean |Δ probability|, top-1 label agreement, how many of the labels at or
above `--keep-prob` differ, and seconds per pass (after a warm-up pass).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # support: not installed

from paper_throughput import TAGGER, audioset_labels, clips  # noqa: E402

from earmark.experts.audio import samples_16k  # noqa: E402
from earmark.experts.paper.hf import classify, default_activation, load_classifier  # noqa: E402
from support import random_weights as rw  # noqa: E402


def windows(n: int, seconds: float, window_s: float = 2.0) -> list[np.ndarray]:
    w = int(window_s * 16_000)
    out = []
    for clip in clips(n, seconds):
        x = samples_16k(clip)
        out += [x[i : i + w] for i in range(0, x.size - w + 1, w)]
    return out


def compare(path: Path, device: str, audios: list[np.ndarray], batch: int, precisions: list[str], keep: float):
    import torch

    clf = load_classifier(path, device)
    activation = default_activation(clf, multi_label=True)

    def run(precision: str) -> tuple[np.ndarray, float]:
        classify(clf, audios[:batch], batch, activation, precision)  # warm-up
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t = time.perf_counter()
        probs = classify(clf, audios, batch, activation, precision)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return probs, time.perf_counter() - t

    ref, ref_s = run("fp32")
    rows = [("fp32", 0.0, 0.0, 1.0, 0, ref_s)]
    for precision in precisions:
        probs, seconds = run(precision)
        delta = np.abs(probs - ref)
        top1 = float(np.mean(probs.argmax(1) == ref.argmax(1)))
        flipped = int(np.sum((probs >= keep) != (ref >= keep)))
        rows.append((precision, float(delta.max()), float(delta.mean()), top1, flipped, seconds))
    return rows, int(np.sum(ref >= keep))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", type=Path, default=Path("/tmp/earmark-bench-models"))
    ap.add_argument("--classifier", nargs="*", default=[], help="model directories under --models-dir")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precisions", nargs="+", default=["bf16", "fp16"], choices=["bf16", "fp16"])
    ap.add_argument("--clips", type=int, default=16)
    ap.add_argument("--clip-s", type=float, default=10.0)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--keep-prob", type=float, default=0.05, help="the tagger's keep_prob default")
    args = ap.parse_args()
    names = args.classifier
    if not names:
        names = [TAGGER]
        if not (args.models_dir / TAGGER / "config.json").exists():
            rw.ast_classifier(args.models_dir / TAGGER, audioset_labels(), **rw.AST_BASE)
    audios = windows(args.clips, args.clip_s)
    import torch

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, device {args.device}, torch {torch.__version__}; "
        f"{len(audios)} windows of 2 s from {args.clips} generated clips; batch {args.batch_size}\n"
    )
    print(
        "| classifier | precision | max abs Δ prob | mean abs Δ prob | top-1 agreement | kept labels changed | s / pass |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in names:
        rows, kept = compare(
            args.models_dir / name, args.device, audios, args.batch_size, args.precisions, args.keep_prob
        )
        for precision, dmax, dmean, top1, flipped, seconds in rows:
            print(
                f"| {name} | {precision} | {dmax:.2e} | {dmean:.2e} | {100 * top1:.1f} % | "
                f"{flipped} of {kept} | {seconds:.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
