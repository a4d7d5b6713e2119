"""Feature extraction of the paper profile's GPU experts: on the CPU (host work inside the `gpu` slot) and on
the model's device, timed on the same clips in one run, with how far the two are apart.

    .venv-paper/bin/python benchmarks/experts/paper_features.py --clips 32                 # CPU: both paths on the CPU
    python benchmarks/experts/paper_features.py --clips 256 --device cuda                   # a GPU worker

- AST tagger: the extractor's Kaldi filter banks per 2 s window (torchaudio on the CPU, as transformers
  runs it) against `experts.paper.hf.ast_fbank` on `--device` (needs torchaudio);
- NISQA: resampling to 48 kHz, then librosa's mel spectrogram (torchmetrics' helper) against
  `experts.paper.nisqa.melspec_db` on `--device`.

Clips are speech-like (a gliding harmonic tone in syllables over noise), `--clip-s` long. × real time = audio
seconds / seconds, on the threads given (`--threads`, default 1: per core). Each path runs once before the
timing. The device paths synchronise before their clock stops.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

SR = 16_000


def speechlike(n: int, seconds: float, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(int(SR * seconds)) / SR
    out = []
    for i in range(n):
        f0 = 120 + 10 * (i % 9)
        voiced = np.sin(2 * np.pi * (f0 + 40 * np.sin(3 * t + i)) * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t + i))
        out.append((0.3 * voiced + 0.01 * rng.standard_normal(t.size)).astype(np.float32))
    return out


def _timed(fn, device: str) -> tuple[float, object]:
    import torch

    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    began = time.perf_counter()
    out = fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - began, out


def ast_features(audios: list[np.ndarray], device: str) -> dict:
    import torch
    from transformers import ASTFeatureExtractor

    from earmark.experts.paper.hf import ast_fbank

    extractor = ASTFeatureExtractor()
    window = 2 * SR
    windows = [a[s : s + window] for a in audios for s in range(0, a.size - window + 1, window)]
    cpu_s, ref = _timed(lambda: extractor(windows, sampling_rate=SR, return_tensors="pt")["input_values"], "cpu")
    dev_s, ours = _timed(lambda: ast_fbank(extractor, windows, device)["input_values"], device)
    return {
        "windows": len(windows),
        "cpu_s": round(cpu_s, 3),
        "device_s": round(dev_s, 3),
        "max_abs_diff": float((ours.cpu() - ref).abs().max()),
        "bitwise_equal": bool(torch.equal(ours.cpu(), ref)),
    }


def nisqa_features(audios: list[np.ndarray], device: str) -> dict:
    import soxr
    from torchmetrics.functional.audio.nisqa import _get_librosa_melspec

    from earmark.experts.paper.nisqa import melspec_db

    args = dict(ms_n_fft=4096, ms_hop_length=0.01, ms_win_length=0.02, ms_n_mels=48, ms_fmax=20000)
    rate = 48_000
    resample_s, up = _timed(lambda: [soxr.resample(a, SR, rate).astype(np.float32) for a in audios], "cpu")
    cpu_s, ref = _timed(lambda: [_get_librosa_melspec(y[None], rate, args)[0] for y in up], "cpu")
    dev_s, ours = _timed(lambda: [melspec_db(y, rate, args, device) for y in up], device)
    diff = max(float(np.abs(o.cpu().numpy() - r).max()) for o, r in zip(ours, ref))
    return {
        "resample_s": round(resample_s, 3),
        "cpu_s": round(cpu_s, 3),
        "device_s": round(dev_s, 3),
        "max_abs_diff_db": diff,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=32)
    parser.add_argument("--clip-s", type=float, default=10.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    audios = speechlike(args.clips, args.clip_s)
    audio_s = args.clips * args.clip_s
    result = {
        "machine": platform.processor() or platform.machine(),
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "torch": torch.__version__,
        "threads": args.threads,
        "device": args.device,
        "audio_s": audio_s,
        "ast": ast_features(audios, args.device),
        "nisqa": nisqa_features(audios, args.device),
    }
    print("| features | CPU s | × real time | on " + args.device + " s | × real time | max abs diff |")
    print("|---|---|---|---|---|---|")
    for name, key in (("AST fbank, 2 s windows", "ast"), ("NISQA mel spectrogram (48 kHz)", "nisqa")):
        r = result[key]
        diff = r.get("max_abs_diff", r.get("max_abs_diff_db"))
        print(
            f"| {name} | {r['cpu_s']:.3f} | {audio_s / r['cpu_s']:.0f} | {r['device_s']:.3f} | "
            f"{audio_s / r['device_s']:.0f} | {diff:.2e} |"
        )
    print(
        f"| NISQA resampling to 48 kHz (soxr, CPU in both) | {result['nisqa']['resample_s']:.3f} | "
        f"{audio_s / result['nisqa']['resample_s']:.0f} | | | |"
    )
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
