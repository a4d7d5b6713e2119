"""How fast can an exact DATE be on this CPU? FLOPs of the transformer pass vs the machine's sgemm rate.

DATE embeds every reference and candidate sentence of a group once with tf-idf-weighted input embeddings;
the pass is exact fp32 (the <=1e-4 agreement with mecat rules out int8/bf16 shortcuts). This counts the
FLOPs of that pass for the 500-clip content_long group of benchmarks/scoring/date_speed.py (padding to the batch
max in length-sorted batches of 32 included) and measures the CPU's fp32 GEMM rate at the shape of the
model's feed-forward layer: FLOPs / rate is a lower bound on any exact implementation's time.

    python benchmarks/scoring/date_flops.py [--clips 500]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from date_speed import load_group  # noqa: E402  (this folder's script)

from earmark.metrics.date_embed import tokenize  # noqa: E402
from earmark.metrics.similarity import load_sbert  # noqa: E402


def token_counts(model, texts: list[str], batch: int = 32) -> tuple[int, int, int, float]:
    unique = sorted(set(texts))
    lengths = (tokenize(model, unique)[0] != 0).sum(1)
    ordered = torch.sort(lengths, descending=True).values
    padded = sum(int(ordered[i : i + batch].max()) * len(ordered[i : i + batch]) for i in range(0, len(ordered), batch))
    return len(unique), int(lengths.sum()), padded, float((lengths.float() ** 2).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clips", type=int, default=500)
    args = ap.parse_args()
    cands, refs = load_group(args.clips)
    model = load_sbert()
    cfg = model[0].auto_model.config
    h, ff, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    total = 0.0
    for name, texts in (("references", [r for rs in refs for r in rs]), ("candidates", cands)):
        n, tokens, padded, sq = token_counts(model, texts)
        flops = 2 * padded * layers * (4 * h * h + 2 * h * ff) + 2 * 2 * layers * h * sq  # linear + attention
        total += flops
        print(f"{name}: {n} unique sentences, {tokens} tokens ({padded} with padding), {flops / 1e9:.0f} GFLOP")
    print(f"total {total / 1e9:.0f} GFLOP")
    a, b = torch.randn(512, h), torch.randn(h, ff)
    for threads in sorted({1, os.cpu_count() or 1}):
        torch.set_num_threads(threads)
        for _ in range(3):
            a @ b
        n, t0 = 200, time.perf_counter()
        for _ in range(n):
            a @ b
        rate = 2 * 512 * h * ff * n / (time.perf_counter() - t0) / 1e9
        print(
            f"fp32 GEMM {512}x{h}x{ff}, {threads} thread(s): {rate:.0f} GFLOP/s -> "
            f"an exact forward pass needs >= {total / 1e9 / rate:.1f} s"
        )


if __name__ == "__main__":
    main()
