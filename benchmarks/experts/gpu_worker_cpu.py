"""CPU core-seconds per audio second of everything a GPU worker still does on the CPU, on one thread.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/experts/gpu_worker_cpu.py --per-domain 2 \\
        --out benchmarks/results/gpu_worker_cpu_DATE.json

The analyze stage runs as a worker runs it. The synthetic corpus (8 MECAT domains) is ingested into a fresh
catalog as one clip shard. Then every expert's shard job goes through `run_job`, in dependency order and in this
process: it reads the clips and the tables the expert needs, decodes the FLAC, analyses, then writes and registers
its table. Every math library gets one thread (torch, OpenMP/MKL/OpenBLAS, numba, ONNX Runtime's pools are
created after the variables are set). The paper profile runs with the random-weight stand-ins of
paper_throughput.py, routed by the corpus' true domains (`--route truth`, as on the device).

Process CPU time (`time.process_time`: every thread of the process, so a pool's spinning counts) is split into:

- `decode`: FLAC decoding of the clips. Each expert's shard decodes its clips again. Here it is done on the
  calling thread so that its CPU time is its own.
- `io`: the rest of `run_job`: reading the inputs from the catalog, building the Arrow tables, writing Parquet,
  registering the shard.
- `cpu experts`: `analyze()` of the experts that do not hold the `gpu` slot on a CUDA worker.
- `slot host`: `analyze()` of the slot experts, minus the CPU time inside their outermost torch module forwards.
  On a CUDA worker that part is kernels on the GPU. DNSMOS and PLCMOS run through their torch port here, as on a
  CUDA worker (`as_on_cuda`); torch work outside modules (Whisper's log-mel, AST's filter banks) counts as host
  work although a CUDA worker runs it on the GPU: the figure is pessimistic there.
- `launch estimate`: what those forwards still cost the host on a GPU: the aten ops they dispatched, times the
  host seconds per op. The per-op figure is measured here (`host_us_per_op`: a transformer layer on tiny CPU
  tensors, where Python, module calls and dispatch are nearly all of the time), plus `--launch-us` per op for
  the CUDA launch itself, which is an assumption (default 5 µs), not a measurement. An expert's op count is
  per batch (eager PyTorch runs the same ops on a bigger batch), and every expert here runs its clips as one
  batch; `launch_at_batch` rescales to a worker's batch (`--device-batch`, default 64) full of such clips.
- `ingest`: decoding the source files, resampling and FLAC-encoding the clips. It runs once per clip, before
  analyze, and need not run on a GPU node; it is listed apart from the worker's figure.

The figure is core-seconds per audio second: the goal is <= 0.12, so that 16 cores keep ahead of 100× real time.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # one thread, set before numpy / torch load (a --workers child keeps its parent's)
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[_var] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # support: not installed
from expert_throughput import paper_config  # noqa: E402  (this folder's script)

from earmark.core.config import AnalyzeSection  # noqa: E402
from support.worker_cpu import as_on_cuda, markdown, measure, scaling_passes  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-domain", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", choices=["embedded", "paper"], default="paper")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--models-dir", type=Path, default=Path("/tmp/earmark-bench-models"))
    ap.add_argument("--whisper-tokenizer", type=Path)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="another [analyze] field")
    ap.add_argument("--launch-us", type=float, default=5.0, help="assumed CUDA launch cost per aten op (µs)")
    ap.add_argument("--device-batch", type=int, default=64, help="a GPU worker's batch, for the launch estimate")
    ap.add_argument("--route", choices=["profile", "truth"], default="truth")
    ap.add_argument(
        "--workers", type=int, nargs="*", default=[], help="then the CPU experts alone in N processes (several: each)"
    )
    ap.add_argument("--repeat", type=int, default=1, help="--workers: the clips this many times over")
    ap.add_argument("--context-out", type=Path, help="--workers: save what the passes need (pickle) here")
    ap.add_argument(
        "--context-in", type=Path, help="only the --workers passes, on a --context-out file (nothing else runs)"
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.context_in:
        if args.profile == "paper":
            as_on_cuda()
        scaling = scaling_passes(pickle.loads(args.context_in.read_bytes()), args.workers, args.repeat)
        print(json.dumps(scaling, indent=1))
        if args.out:
            args.out.write_text(json.dumps({"cpu_experts_workers": scaling, "command": " ".join(sys.argv)}, indent=1))
        return 0
    if args.profile == "paper":
        ns = argparse.Namespace(
            device="cpu",
            batch_size=args.batch_size,
            models_dir=args.models_dir,
            random_models=True,
            whisper_tokenizer=args.whisper_tokenizer,
            set=["asr_backend=transformers", "asr_max_new_tokens=40", *args.set],
        )
        cfg = paper_config(ns)
    else:
        cfg = AnalyzeSection()
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(
            cfg,
            args.per_domain,
            args.seed,
            Path(tmp),
            args.launch_us,
            args.route == "truth",
            args.workers,
            args.device_batch,
            args.repeat,
            args.context_out,
        )
    result["command"] = " ".join(sys.argv)
    print(markdown(result))
    print(
        f"\n{result['clips']} clips, {result['audio_s']} s of audio; host {result['host_us_per_op']} µs per aten op "
        f"(+ {result['launch_us_assumed']} µs assumed per CUDA launch); the launch estimate at this run's one batch "
        f"per expert: {result['launch_estimate_at_this_batch_core_s']} core-s"
    )
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
