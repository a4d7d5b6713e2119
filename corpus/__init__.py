"""A demo corpus whose MECAT domains are known by construction, synthesised from nothing.

Tests, the domain-accuracy benchmark and offline demos need audio with a known domain and no downloads:
speech comes from espeak-ng, music from additive synthesis (harmonic partials + ADSR, chord progressions,
optional drums), sound events from filtered noise (knocks, barks, footsteps, a car, rain, typing, a door,
wind). Everything is deterministic given the seed: each item draws from its own generator seeded by
(seed, domain, index), so an item does not change when `per_domain` does. Formats vary on purpose (FLAC,
OGG, one stereo 44.1 kHz file, one 14 s file that ingest splits into two clips of the same domain), and
`hostile=True` adds the broken inputs ingest must quarantine (their domain is None).
OGG files decode identically across runs but their bytes differ (libsndfile picks a random stream serial).
"""

from __future__ import annotations

import json
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from earmark.corpus.sounds import SR, Espeak, at_level, event_track, music_track, pink, speech_track
from earmark.schemas.records import DOMAIN_CODES, domain_flags

LONG_DURATION_S = 14.0  # > 10 s so ingest must split it


@dataclass(frozen=True)
class CorpusItem:
    path: Path
    domain: str | None  # None for hostile inputs that ingest must quarantine
    description: str


def _clip(code: str, rng: np.random.Generator, n: int, tts: Espeak, index: int) -> tuple[np.ndarray, str]:
    if code == "000":
        if index == 0:
            return np.zeros(n), "digital silence (all zeros)"
        db = float(rng.uniform(-80, -65))
        return pink(rng, n) * 10 ** (db / 20), f"near-silence, noise floor at {db:.0f} dBFS"
    speech, music, sound = domain_flags(code)
    parts, descs = [], []
    if speech:
        x, d = speech_track(rng, n, tts)
        parts.append(at_level(x, 0.0))
        descs.append(d)
    if music:
        x, d = music_track(rng, n)
        gain = float(rng.uniform(-12, -6)) if speech else 0.0  # speech stays dominant in S**
        parts.append(at_level(x, gain))
        descs.append(d + (f" at {gain:.0f} dB" if speech else ""))
    if sound:
        x, d = event_track(rng, n)
        gain = float(rng.uniform(-10, -4)) if speech else (float(rng.uniform(-4, 2)) if music else 0.0)
        parts.append(at_level(x, gain))
        descs.append(d + (f" at {gain:.0f} dB" if speech or music else ""))
    if code == "S00":
        parts.append(at_level(pink(rng, n), -50))  # a quiet room, not a studio
    mix = at_level(sum(parts), float(rng.uniform(-26, -18)))
    mix /= max(1.0, np.max(np.abs(mix)) / 0.97)
    return mix, "; ".join(descs)


def _float_wav(samples: np.ndarray) -> bytes:
    """IEEE-float mono WAV by hand: libsndfile would add a PEAK chunk with a timestamp (not reproducible)."""
    data = samples.astype("<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, 1, SR, SR * 4, 4, 32)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _hostile(out_dir: Path, rng: np.random.Generator) -> list[CorpusItem]:
    (out_dir / "empty.wav").write_bytes(b"")
    (out_dir / "notes.mp3").write_text("Shopping list: milk, eggs, bread.\nThis is not audio.\n")
    good = out_dir / "_tmp.wav"
    sf.write(good, rng.standard_normal(SR) * 0.1, SR, subtype="PCM_16")
    (out_dir / "truncated.wav").write_bytes(good.read_bytes()[:20] + b"\x00garbage")  # fmt chunk cut short
    good.unlink()
    noisy = (rng.standard_normal(SR) * 0.1).astype(np.float32)
    noisy[SR // 4 : SR // 2] = np.nan
    (out_dir / "nan.wav").write_bytes(_float_wav(noisy))
    sf.write(out_dir / "tiny.wav", rng.standard_normal(int(0.05 * SR)) * 0.1, SR, subtype="PCM_16")
    return [
        CorpusItem(out_dir / "empty.wav", None, "hostile: empty file"),
        CorpusItem(out_dir / "notes.mp3", None, "hostile: a text file named .mp3"),
        CorpusItem(out_dir / "truncated.wav", None, "hostile: WAV header truncated"),
        CorpusItem(out_dir / "nan.wav", None, "hostile: float WAV with NaN samples"),
        CorpusItem(out_dir / "tiny.wav", None, "hostile: 0.05 s, too short to matter"),
    ]


def generate_corpus(
    out_dir: Path, per_domain: int = 2, seed: int = 0, duration_s: float = 8.0, hostile: bool = True
) -> list[CorpusItem]:
    """Write `per_domain` clips of every MECAT domain (+ hostile inputs) to `out_dir` and a manifest.json."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    items: list[CorpusItem] = []
    with tempfile.TemporaryDirectory() as scratch:
        tts = Espeak(Path(scratch))
        for d, code in enumerate(DOMAIN_CODES):
            for i in range(per_domain):
                rng = np.random.default_rng([seed, d, i])
                k = d * per_domain + i
                stereo, long = (code, i) == ("S00", 0), (code, i) == ("0M0", 0)
                n = int((LONG_DURATION_S if long else duration_s) * SR)
                x, desc = _clip(code, rng, n, tts, i)
                ext = "wav" if stereo or long else "flac" if k % 5 == 2 else "ogg" if k % 5 == 4 else "wav"
                path = out_dir / f"{code}_{i:02d}.{ext}"
                if stereo:
                    y = soxr.resample(x, SR, 44_100)
                    y = np.stack([y, 0.85 * np.roll(y, 8)], axis=1)
                    sf.write(path, y, 44_100, subtype="PCM_16")
                    desc += " [stereo 44.1 kHz]"
                elif ext == "ogg":
                    sf.write(path, x, SR, format="OGG", subtype="VORBIS")
                else:
                    sf.write(path, x, SR, subtype="PCM_16")
                items.append(CorpusItem(path, code, desc + (f" [{LONG_DURATION_S:.0f} s: 2 clips]" if long else "")))
    if hostile:
        items += _hostile(out_dir, np.random.default_rng([seed, 99]))
    manifest = {
        "seed": seed,
        "per_domain": per_domain,
        "duration_s": duration_s,
        "items": [{"path": it.path.name, "domain": it.domain, "description": it.description} for it in items],
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return items


def load_manifest(out_dir: Path) -> list[CorpusItem]:
    """The items of a corpus written by `generate_corpus`."""
    data = json.loads((Path(out_dir) / "manifest.json").read_text())
    return [CorpusItem(Path(out_dir) / it["path"], it["domain"], it["description"]) for it in data["items"]]
