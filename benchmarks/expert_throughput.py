"""Throughput of a profile's expert stage, per expert and in total (× real time; peak GPU memory on CUDA).

    PYTHONPATH=. python benchmarks/expert_throughput.py --per-domain 3 --out expert_throughput.json
    python benchmarks/expert_throughput.py --profile paper --random-models --device cuda --per-domain 32

Generates the synthetic corpus (earmark.corpus, the 8 MECAT domains in equal parts), ingests it, and runs
every expert of the profile in dependency order on all clips as one batch, as one analyze shard would, with
the profile's routing (separation and music analysis only where the domain decision has music, ASR,
diarization, speaker attributes and speech quality only on VAD speech). Each expert first runs once on one
clip so model loading and compilation stay out of the timing (reported separately as `warmup_s`).
× real time = seconds of audio / seconds of compute; the total is the stage's, Σ over its experts.

`--profile paper` uses the models in `--models-dir`; `--random-models` first builds the paper_throughput.py
stand-ins there (AST-base tagger, Whisper large-v3 dims in CTranslate2, NISQA v2.0, random weights) and turns
off the paper parts it has no stand-in for (pyannote, attribute classifiers, demucs, music tagger: their
embedded fallbacks run). `--set name=value` sets any other `[analyze]` field (`none` for None).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from earmark.config import (
    AnalyzeSection,  # noqa: E402
    IngestSection,
)
from earmark.corpus import generate_corpus  # noqa: E402
from earmark.experts import build_experts  # noqa: E402
from earmark.stages.ingest import decode_clip, ingest_file  # noqa: E402


def _cuda_peak() -> float | None:
    """Peak GPU memory since the last reset, GiB (None without torch or CUDA)."""
    if "torch" not in sys.modules:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


def _reset_cuda_peak() -> None:
    if "torch" in sys.modules:
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()


def run(per_domain: int, seed: int, workdir: Path, cfg: AnalyzeSection | None = None) -> dict:
    clips = []
    for item in generate_corpus(workdir, per_domain=per_domain, seed=seed, hostile=False):
        rows, _ = ingest_file(item.path, IngestSection())
        clips += [decode_clip(r) for r in rows]
    audio_s = sum(c.duration_s for c in clips)
    experts = build_experts(cfg or AnalyzeSection())
    context: dict[str, dict] = {}
    per_expert = {}
    for name, expert in experts.items():
        start = time.perf_counter()
        expert.analyze(clips[:1], context)
        warm = time.perf_counter() - start
        _reset_cuda_peak()
        start = time.perf_counter()
        records = expert.analyze(clips, context)
        took = time.perf_counter() - start
        context[name] = {r.clip_id: r for r in records}
        skipped = sum(1 for r in records if getattr(r, "skipped_reason", None))
        per_expert[name] = {
            "backend": expert.backend,
            "seconds": round(took, 2),
            "warmup_s": round(warm, 2),
            "x_realtime": round(audio_s / took, 1),
            "clips_routed_away": skipped,
            "gpu_peak_gib": _cuda_peak(),
        }
    total = sum(v["seconds"] for v in per_expert.values())
    return {
        "profile": (cfg or AnalyzeSection()).profile,
        "clips": len(clips),
        "audio_s": round(audio_s, 1),
        "cpu_count": os.cpu_count(),
        "experts": per_expert,
        "total_s": round(total, 2),
        "total_x_realtime": round(audio_s / total, 1),
    }


def markdown(result: dict) -> str:
    lines = ["| expert | backend | s | × real time | clips routed away | peak GPU GiB |", "|---|---|---|---|---|---|"]
    for name, v in result["experts"].items():
        gpu = "–" if v.get("gpu_peak_gib") is None else f"{v['gpu_peak_gib']:.2f}"
        lines.append(
            f"| `{name}` | `{v['backend']}` | {v['seconds']:.2f} | {v['x_realtime']:.0f} | "
            f"{v.get('clips_routed_away', 0)} | {gpu} |"
        )
    lines.append(f"| **total** | | {result['total_s']:.2f} | {result['total_x_realtime']:.1f} | | |")
    return "\n".join(lines)


def paper_config(args: argparse.Namespace) -> AnalyzeSection:
    fields: dict = {"profile": "paper", "device": args.device, "batch_size": args.batch_size}
    if args.models_dir:
        fields["models_dir"] = args.models_dir
    if args.random_models:
        from benchmarks.paper_throughput import NISQA, TAGGER, WHISPER, build

        root = args.models_dir or Path("/tmp/earmark-bench-models")
        build(root, args.device)
        fields.update(
            models_dir=root,
            tagger_model=TAGGER,
            asr_model=WHISPER,
            asr_compute_type="float16" if args.device == "cuda" else "int8",
            nisqa_model=NISQA if (root / NISQA).exists() else None,
            diarization_model=None,
            gender_model=None,
            emotion_model=None,
            separation_model=None,
        )
    for item in args.set:
        name, _, value = item.partition("=")
        fields[name] = None if value.lower() == "none" else value
    return AnalyzeSection(**fields)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-domain", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--profile", choices=["embedded", "paper"], default="embedded")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--models-dir", type=Path)
    parser.add_argument("--random-models", action="store_true", help="paper: build random-weight stand-ins first")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="another [analyze] field")
    args = parser.parse_args(argv)
    cfg = paper_config(args) if args.profile == "paper" else AnalyzeSection()
    with tempfile.TemporaryDirectory() as tmp:
        result = run(args.per_domain, args.seed, Path(tmp), cfg)
    print(
        f"{result['profile']} profile: {result['clips']} clips, {result['audio_s']} s of audio, {result['cpu_count']} CPUs\n"
    )
    print(markdown(result))
    if args.out:
        args.out.write_text(json.dumps({**result, "markdown": markdown(result)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
