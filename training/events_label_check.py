#!/usr/bin/env python3
"""Material for the by-hand check of the weak event labels: a seeded random sample of labelled source files.

  python training/events_label_check.py --n 100 --out /tmp/evcheck      # sample.json + sheet_XX.png (10 per sheet)

For each sampled file (from <cache>/<tag>/sources.jsonl, rows with an event class): package, path, class, split,
duration, Silero VAD speech fraction / max, a Whisper tiny.en transcript when the VAD hears speech (max > 0.5),
and a log-mel spectrogram with its waveform envelope, ten to a PNG sheet. The checker looks at these (nobody can
listen here) and writes a verdict per file into training/events_label_check.md.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

SR = 16000


def sample(rows: list[dict], n: int, seed: int, exclude: set[str] = frozenset()) -> list[dict]:
    lab = sorted((r for r in rows if r.get("event") and r["uid"] not in exclude), key=lambda r: r["uid"])
    rng = np.random.default_rng(seed)
    return [lab[i] for i in sorted(rng.choice(len(lab), size=min(n, len(lab)), replace=False))]


def transcript(x: np.ndarray) -> str:
    from faster_whisper import WhisperModel

    from earmark.experts.learned.model import whisper_model_dir

    global _WM
    if "_WM" not in globals():
        _WM = WhisperModel(str(whisper_model_dir()), device="cpu", compute_type="int8", cpu_threads=1)
    segs, _ = _WM.transcribe(x[: 30 * SR], beam_size=1, language="en", vad_filter=False)
    return " ".join(s.text.strip() for s in segs)[:120]


def sheet(items: list[tuple[dict, np.ndarray]], path: Path) -> None:
    import librosa
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(items), 1, figsize=(11, 1.9 * len(items)))
    for ax, (r, x) in zip(np.atleast_1d(axes), items):
        x = x[: 8 * SR]
        M = librosa.power_to_db(
            librosa.feature.melspectrogram(y=x, sr=SR, n_fft=1024, hop_length=160, n_mels=80), ref=np.max, top_db=80
        )
        ax.imshow(M, origin="lower", aspect="auto", cmap="magma", extent=[0, len(x) / SR, 0, 80])
        env = np.sqrt(np.convolve(x**2, np.ones(320) / 320, "same"))
        ax.plot(np.arange(len(x)) / SR, 40 + 38 * env / (env.max() + 1e-9), color="cyan", lw=0.6)
        ax.set_yticks([])
        ax.set_title(
            f"#{r['n']} {r['event']} | {r['pkg']}: {r['path'][-70:]} | {r['duration']:.2f}s "
            f"vad {r['vad_frac']:.2f}/{r['vad_max']:.2f}",
            fontsize=8,
            loc="left",
        )
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=70)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--tag", default="tagger")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=33)
    ap.add_argument("--exclude", type=Path, default=None, help="a previous sample.json whose files are skipped")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    tdir = a.cache / a.tag
    rows = [json.loads(line) for line in open(tdir / "sources.jsonl")]
    ex = {r["uid"] for r in json.loads(a.exclude.read_text())} if a.exclude else set()
    picks = sample(rows, a.n, a.seed, ex)
    a.out.mkdir(parents=True, exist_ok=True)
    items = []
    for i, r in enumerate(picks):
        x = np.load(tdir / "sources" / f"{r['uid']}.npy").astype(np.float32) / 32767
        r = {**r, "n": i + 1, "transcript": transcript(x) if r["vad_max"] > 0.5 else ""}
        items.append((r, x))
    for s in range(0, len(items), 10):
        sheet(items[s : s + 10], a.out / f"sheet_{s // 10:02d}.png")
    (a.out / "sample.json").write_text(json.dumps([r for r, _ in items], indent=1))
    print(f"{len(items)} files -> {a.out}")


if __name__ == "__main__":
    main()
