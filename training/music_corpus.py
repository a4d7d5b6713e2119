"""Labelled music for the music-tag heads: General MIDI renders (three soundfont packages, one per split) and
real recordings labelled from their own metadata.

    python training/music_corpus.py renders [--n-train 2000 --n-cal 500 --n-dev 500]
    python training/music_corpus.py real          # real recordings with labels from metadata (music_real_labels.py)

Renders: seeded pieces from `music_midi.py` (styles, GM programs -> labels), rendered at 16 kHz by Debian's
`fluidsynth` (libfluidsynth through ctypes, the soundfont loaded once) with one soundfont package per split, so a split's timbres are never seen by another:

| split | soundfont (Debian package, licence)                                   |
|-------|-----------------------------------------------------------------------|
| train | FluidR3_GM.sf2 (fluid-soundfont-gm, MIT) + sf_GMbank.sf2 (csound-soundfont, LGPL-2.1) |
| cal   | TimGM6mb.sf2 (timgm6mb-soundfont, GPL-2)                              |
| dev   | MuseScore_General_Full.sf2 (musescore-general-soundfont-lossless, MIT)     |

Setup (root): `apt-get install fluidsynth fluid-soundfont-gm csound-soundfont timgm6mb-soundfont
musescore-general-soundfont-lossless`. Each clip: 10 s cut 0.5 s into the render, reverb / chorus on or off at
random, RMS level -30 ... -12 dBFS; FLAC under <cache>/music_tags/renders/<split>/, one JSON line per clip in
<cache>/music_tags/renders/<split>.jsonl (style, tempo, key, programs, labels: 1 / 0 / -1 = masked).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import soundfile as sf

import music_midi as mm

SR = 16000
CLIP_S = 10.0
SOUNDFONTS = {
    "train": [
        ("fluid-soundfont-gm", "/usr/share/sounds/sf2/FluidR3_GM.sf2"),
        ("csound-soundfont", "/usr/share/sounds/sf2/sf_GMbank.sf2"),
    ],
    "cal": [("timgm6mb-soundfont", "/usr/share/sounds/sf2/TimGM6mb.sf2")],
    "dev": [("musescore-general-soundfont-lossless", "/usr/share/sounds/sf2/MuseScore_General_Full.sf2")],
}
# the CI smoke run (train_music_tags.py --tiny) uses only the two small soundfonts (a few MB each)
TINY_SOUNDFONTS = {
    "train": [("csound-soundfont", "/usr/share/sounds/sf2/sf_GMbank.sf2")],
    "cal": [("timgm6mb-soundfont", "/usr/share/sounds/sf2/TimGM6mb.sf2")],
    "dev": [("timgm6mb-soundfont", "/usr/share/sounds/sf2/TimGM6mb.sf2")],
}
SPLIT_SEED = {"train": 1, "cal": 2, "dev": 3, "train2": 4, "cal2": 5, "dev2": 6}
# "<split>2": the same soundfonts, new pieces, and production / channel effects (`degrade`)
for _s in ("train", "cal", "dev"):
    SOUNDFONTS[_s + "2"] = SOUNDFONTS[_s]


def degrade(x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    """Random production and channel effects, so the heads and their calibration meet less clean music than a
    soundfont's: band limits, saturation, compression, low bit depth / sample rate (8-bit game music), noise."""
    from scipy import signal

    done = []
    if rng.random() < 0.35:
        cut = float(rng.uniform(2500, 7000))
        x = signal.sosfilt(signal.butter(4, cut, "low", fs=SR, output="sos"), x)
        done.append(f"lowpass {cut:.0f} Hz")
    if rng.random() < 0.25:
        cut = float(rng.uniform(80, 400))
        x = signal.sosfilt(signal.butter(2, cut, "high", fs=SR, output="sos"), x)
        done.append(f"highpass {cut:.0f} Hz")
    if rng.random() < 0.3:
        drive = float(rng.uniform(2, 8))
        x = np.tanh(drive * x / (np.abs(x).max() + 1e-9)) / np.tanh(drive)
        done.append(f"saturation x{drive:.1f}")
    if rng.random() < 0.3:  # a crude RMS compressor: 4:1 above the 60th percentile envelope
        env = np.sqrt(signal.sosfilt(signal.butter(1, 8, "low", fs=SR, output="sos"), x**2).clip(1e-12))
        thr = np.percentile(env, 60)
        x = x * np.where(env > thr, (thr / env) ** 0.75, 1.0)
        done.append("compression 4:1")
    if rng.random() < 0.15:
        bits, hold = int(rng.integers(4, 9)), int(rng.integers(1, 4))
        q = 2.0 ** (bits - 1)
        x = np.repeat(np.round(x[::hold] / (np.abs(x).max() + 1e-9) * q) / q, hold)[: x.size]
        done.append(f"{bits}-bit, 1/{hold} rate")
    if rng.random() < 0.35:
        snr = float(rng.uniform(20, 45))
        rms = float(np.sqrt(np.mean(x**2))) + 1e-12
        x = x + rng.standard_normal(x.size) * rms * 10 ** (-snr / 20)
        done.append(f"noise {snr:.0f} dB SNR")
    return np.asarray(x, np.float32), done


def ensure_synth(fonts: dict[str, list[tuple[str, str]]]) -> None:
    """Install libfluidsynth and the soundfont packages `fonts` names when they are missing (Debian, as root)."""
    import ctypes.util
    import shutil
    import subprocess

    want = sorted({pkg for v in fonts.values() for pkg, path in v if not Path(path).exists()})
    if ctypes.util.find_library("fluidsynth") is None:
        want.append("libfluidsynth3")
    if not want:
        return
    if not shutil.which("apt-get"):
        raise RuntimeError(f"the music renders need Debian packages {want} (fluidsynth and GM soundfonts)")
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *want], check=True)


def cache_dir(cache: str | None = None) -> Path:
    return Path(cache or os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")) / "music_tags"


class Synth:
    """libfluidsynth (Debian's `fluidsynth` package) through ctypes: the soundfont is loaded once per process and
    a piece is rendered from its note list (the same events its MIDI file holds)."""

    def __init__(self, font: str):
        import ctypes

        lib = ctypes.CDLL("libfluidsynth.so.3")
        lib.new_fluid_settings.restype = ctypes.c_void_p
        lib.new_fluid_synth.restype = ctypes.c_void_p
        lib.new_fluid_synth.argtypes = [ctypes.c_void_p]
        lib.fluid_settings_setnum.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double]
        lib.fluid_settings_setint.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        lib.fluid_synth_sfload.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        for name in ("fluid_synth_noteon", "fluid_synth_program_change"):
            getattr(lib, name).argtypes = [ctypes.c_void_p] + [ctypes.c_int] * (3 if "noteon" in name else 2)
        lib.fluid_synth_noteoff.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        lib.fluid_synth_system_reset.argtypes = [ctypes.c_void_p]
        lib.fluid_synth_set_reverb_on.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.fluid_synth_set_chorus_on.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.fluid_synth_write_float.argtypes = [ctypes.c_void_p, ctypes.c_int] + [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_int,
        ] * 2
        settings = lib.new_fluid_settings()
        lib.fluid_settings_setnum(settings, b"synth.sample-rate", float(SR))
        lib.fluid_settings_setnum(settings, b"synth.gain", 0.5)
        lib.fluid_settings_setint(settings, b"synth.polyphony", 512)
        self.lib, self.synth, self.ct = lib, lib.new_fluid_synth(settings), ctypes
        if lib.fluid_synth_sfload(self.synth, font.encode(), 1) < 0:
            raise RuntimeError(f"fluidsynth could not load the soundfont {font}")

    def _write(self, n: int) -> np.ndarray:
        left, right = np.zeros(n, np.float32), np.zeros(n, np.float32)
        p = self.ct.c_void_p
        self.lib.fluid_synth_write_float(self.synth, n, p(left.ctypes.data), 0, 1, p(right.ctypes.data), 0, 1)
        return (left + right) / 2

    def render(self, piece: mm.Piece, seconds: float, reverb: bool, chorus: bool) -> np.ndarray:
        lib, syn = self.lib, self.synth
        lib.fluid_synth_system_reset(syn)
        lib.fluid_synth_set_reverb_on(syn, int(reverb))
        lib.fluid_synth_set_chorus_on(syn, int(chorus))
        for ch, prog in mm.channel_programs(piece):
            lib.fluid_synth_program_change(syn, ch, prog)
        events = sorted(mm.timed_events(piece))  # (seconds, order, kind, chan, pitch, vel): offs before ons
        out, pos = [], 0
        for t, _, kind, ch, pitch, vel in events:
            at = min(int(round(t * SR)), int(seconds * SR))
            if at > pos:
                out.append(self._write(at - pos))
                pos = at
            if kind == "on":
                lib.fluid_synth_noteon(syn, ch, pitch, vel)
            else:
                lib.fluid_synth_noteoff(syn, ch, pitch)
        if pos < int(seconds * SR):
            out.append(self._write(int(seconds * SR) - pos))
        return np.concatenate(out)


_SYNTHS: dict[str, Synth] = {}


def render_one(split: str, index: int, seed: int, out_dir: Path, fonts=SOUNDFONTS) -> dict | None:
    """Compose, render and level one clip; None when every attempt renders silence."""
    for attempt in range(5):
        rng = np.random.default_rng([seed, SPLIT_SEED[split], index, attempt])
        style = str(rng.choice(list(mm.STYLE_WEIGHTS), p=list(mm.STYLE_WEIGHTS.values())))
        piece = mm.style_piece(style, rng, seconds=CLIP_S + 2)
        package, font = fonts[split][int(rng.integers(len(fonts[split])))]
        reverb, chorus = bool(rng.random() < 0.6), bool(rng.random() < 0.4)
        if font not in _SYNTHS:
            _SYNTHS[font] = Synth(font)
        x = _SYNTHS[font].render(piece, CLIP_S + 0.5, reverb, chorus)[int(0.5 * SR) :]
        effects: list[str] = []
        if split.endswith("2"):
            x, effects = degrade(x, np.random.default_rng([seed, SPLIT_SEED[split], index, attempt, 9]))
        rms = float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))
        if rms < 1e-4:
            continue
        level = float(rng.uniform(-30, -12))
        x = x * (10 ** (level / 20) / rms)
        peak = float(np.abs(x).max())
        if peak > 0.99:
            x *= 0.99 / peak
        cid = f"{split}-{index:05d}"
        sf.write(out_dir / f"{cid}.flac", x.astype(np.float32), SR)
        (out_dir / f"{cid}.mid").write_bytes(mm.to_midi(piece))
        return {
            "id": cid,
            "split": split,
            "source": "render",
            "package": package,
            "style": style,
            "tempo": piece.tempo,
            "key": int(piece.tonic),
            "minor": piece.minor,
            "programs": [p.program for p in piece.parts],
            "roles": [p.role for p in piece.parts],
            "reverb": reverb,
            "chorus": chorus,
            "level_dbfs": round(level, 2),
            "effects": effects,
            "attempt": attempt,
            "labels": piece.labels(),
        }
    return None


def renders(cache: Path, counts: dict[str, int], seed: int, fonts=SOUNDFONTS) -> None:
    ensure_synth(fonts)
    for split, n in counts.items():
        out_dir = cache / "renders" / split
        out_dir.mkdir(parents=True, exist_ok=True)
        index_path = cache / "renders" / f"{split}.jsonl"
        done = {}
        if index_path.exists():
            done = {r["id"]: r for r in map(json.loads, index_path.read_text().splitlines())}
        todo = [i for i in range(n) if f"{split}-{i:05d}" not in done]
        rows = [render_one(split, i, seed, out_dir, fonts) for i in todo]
        rows = sorted([r for r in rows if r] + list(done.values()), key=lambda r: r["id"])
        rows = [r for r in rows if int(r["id"].rsplit("-", 1)[1]) < n]
        index_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"{split}: {len(rows)} clips ({len(todo)} rendered now) -> {index_path}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["renders", "real"])
    ap.add_argument("--cache", default=None)
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--n-train", type=int, default=2000)
    ap.add_argument("--n-cal", type=int, default=500)
    ap.add_argument("--n-dev", type=int, default=500)
    ap.add_argument("--degraded", action="store_true", help="render the degraded splits train2 / cal2 / dev2")
    a = ap.parse_args(argv)
    cache = cache_dir(a.cache)
    if a.step == "renders":
        counts = {"train": a.n_train, "cal": a.n_cal, "dev": a.n_dev}
        if a.degraded:
            counts = {k + "2": v for k, v in counts.items()}
        renders(cache, counts, a.seed)
    else:
        import music_real

        music_real.build(cache)


if __name__ == "__main__":
    main()
