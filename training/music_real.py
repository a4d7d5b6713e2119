"""Labelled real recordings for evaluating the music-tag heads (never trained on; reported apart from renders).

Two kinds, both from Debian packages already in the corpus cache (training/build_corpus.py `download`):

* `real`: whole recordings (sample-pack loops, game tracks) whose own name or metadata says what they hold
  (`RECORDINGS`: file, labels, where the labels come from). A loop is repeated to fill 10 s; a track gives
  up to three 10 s excerpts. Labels are exhaustive only where the source is (a drum break holds only drums, a
  tracker's comment lists every instrument it uses); elsewhere the other labels of that group are masked.
* `sampled`: single recorded notes of lmms-common's instrument samples, pitched by resampling and sequenced by
  `music_midi` pieces (1-3 instruments per clip, optional lmms drum hits): real timbres, known instruments,
  exhaustive labels; genre masked, tempo labels from the piece.

Licences: sonic-pi-samples (CC0 / CC-BY / MIT, see its copyright file), lmms-common (GPL-2+, CC-BY-SA, CC0 …),
supertux-data (GPL-2+/3+, CC-BY-SA), freedroidrpg-data (GPL-2+), megaglest-data (CC-BY-SA-3.0), tuxtype-data
(GPL; chiptune2 GFDL-1.2+).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf

import music_midi as mm

SR = 16000
CLIP = 10 * SR
SP = "sonic-pi-samples/usr/share/sonic-pi/samples"
LM = "lmms-common/usr/share/lmms/samples"
ST = "supertux-data/usr/share/games/supertux2/music"
INSTR = set(mm.INSTRUMENTS)
GENRE = set(mm.GENRES)

# (package-relative path, labels, exhaustive groups, evidence)
RECORDINGS: list[tuple[str, tuple[str, ...], tuple[str, ...], str]] = [
    *[(f"{SP}/{n}.flac", ("drums",), ("instrument",), "name: the Amen / a breakbeat drum break")
      for n in ("loop_amen", "loop_amen_full", "loop_breakbeat")],
    *[(f"{SP}/{n}.flac", ("guitar", "electric guitar", "solo"), ("instrument",), "name: guit_e_* (electric guitar)")
      for n in ("guit_e_fifths", "guit_e_slide")],
    *[(f"{SP}/{n}.flac", ("guitar", "solo"), (), "name: guit_* (guitar)") for n in ("guit_em9", "guit_harmonics")],
    (f"{SP}/ambi_piano.flac", ("piano", "ambient"), (), "name: ambi_piano (ambient category, piano)"),
    (f"{SP}/ambi_choir.flac", ("choir", "ambient"), (), "name: ambi_choir (ambient category, choir)"),
    *[(f"{LM}/beats/{n}.ogg", ("drums",), ("instrument",), "folder beats/, name: a drum break")
      for n in ("break01", "break02", "break03")],
    *[(f"{LM}/beats/{n}.ogg", ("drums", "electronic"), ("instrument",), "folder beats/, name: 909 / electro / house / jungle")
      for n in ("909beat01", "electro_beat01", "electro_beat02", "house_loop01", "jungle01")],
    *[(f"{LM}/bassloops/{n}.ogg", ("bass", "synthesizer", "electronic"), ("instrument",), "folder bassloops/, name: techno / rave / TB-303 bass")
      for n in ("tb303_01", "techno_bass01", "techno_bass02", "rave_bass01", "rave_bass02")],
    *[(f"{LM}/bassloops/{n}.ogg", ("synthesizer", "electronic"), (), "name: techno_synth")
      for n in ("techno_synth01", "techno_synth02", "techno_synth03", "techno_synth04")],
    ("freedroidrpg-data/usr/share/freedroidrpg/data/sound/music/TheBeginning.ogg", ("ambient",), ("genre",),
     "vorbis GENRE=ambient"),
    ("freedroidrpg-data/usr/share/freedroidrpg/data/sound/music/temple.ogg", ("electronic",), ("genre",),
     "vorbis GENRE=dnb (drum and bass)"),
    ("megaglest-data/usr/share/games/megaglest/techs/megapack/factions/romans/music/romans.ogg", ("classical",),
     ("genre",), "vorbis GENRE=Classical"),
    (f"{ST}/retro/fortress_old.ogg", ("guitar", "electric guitar", "choir", "drums", "bass"), ("instrument",),
     "vorbis COMMENTS: the tracker's instrument list (Ibanez Electric Guitar, Choir, Bass Drum, TR909 Claps, Bass)"),
    (f"{ST}/retro/cave_old.ogg", ("cello", "harp", "strings"), ("instrument",),
     "vorbis COMMENTS: the tracker's instrument list (Cello, Concert Harp, Tiny Strings, two FX samples)"),
    (f"{ST}/antarctic/chipdisko.ogg", ("electronic",), (), "title: Mortimer's Chipdisko (chiptune disco)"),
    ("tuxtype-data/usr/share/tuxtype/sounds/chiptune2.ogg", ("electronic",), (), "title: Chiptune2"),
]  # fmt: skip

# lmms single-note samples -> labels (exhaustive: the clip holds only the instruments it was built from)
NOTES: dict[str, tuple[str, ...]] = {
    "piano01": ("piano",),
    "piano02": ("piano",),
    "cello01": ("cello", "strings"),
    "violin_fingered01": ("violin", "strings"),
    "violin_double_stop01": ("violin", "strings"),
    "flute01": ("flute",),
    "trumpet01": ("trumpet", "brass"),
    "church_organ01": ("organ",),
    "church_organ03": ("organ",),
    "e_organ01": ("organ",),
    "harpsichord01": ("harpsichord",),
    "steel_guitar01": ("guitar", "acoustic guitar"),
    "steel_guitar_heavy_distorted01": ("guitar", "electric guitar", "distorted guitar"),
    "steel_guitar_medium_distorted01": ("guitar", "electric guitar", "distorted guitar"),
    "bassslap02": ("bass",),
    "e_piano_accord01": ("electric piano",),
}
DRUM_HITS = {"kick": "bassdrum_acoustic01", "snare": "snare_acoustic01", "hat": "hihat_closed01"}


def _load(path: Path, seconds: float | None = None) -> np.ndarray:
    import librosa

    x, _ = librosa.load(path, sr=SR, mono=True, duration=seconds)
    return x.astype(np.float32)


def _level(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    rms = float(np.sqrt(np.mean(x.astype(np.float64) ** 2))) or 1e-9
    x = x * (10 ** (rng.uniform(-30, -12) / 20) / rms)
    return (x * min(1.0, 0.99 / max(float(np.abs(x).max()), 1e-9))).astype(np.float32)


def label_row(pos: tuple[str, ...], exhaustive: tuple[str, ...]) -> dict[str, int]:
    """1 for the named labels; 0 for the other labels of an exhaustive group; -1 (no truth) for the rest."""
    out = dict.fromkeys(mm.ALL_LABELS, -1)
    for lab in mm.ALL_LABELS:
        group = "instrument" if lab in INSTR else ("genre" if lab in GENRE else "other")
        if group in exhaustive:
            out[lab] = 0
    for lab in pos:
        out[lab] = 1
    if "instrument" in exhaustive:  # one instrument alone is a solo when it is not an ensemble
        out["solo"] = 1 if "solo" in pos else out["solo"]
    return out


def recordings(pkgs: Path, out_dir: Path, rng: np.random.Generator) -> list[dict]:
    rows = []
    for rel, pos, exhaustive, evidence in RECORDINGS:
        path = pkgs / rel
        if not path.exists():
            print(f"missing {path}: skipped")
            continue
        x = _load(path)
        pieces = (
            [np.resize(x, CLIP)]
            if x.size < 3 * CLIP
            else [x[o : o + CLIP] for o in (x.size // 4, x.size // 2, 3 * x.size // 4 - CLIP // 2)]
        )
        for k, seg in enumerate(pieces):
            cid = f"real-{Path(rel).stem}-{k}"
            sf.write(out_dir / f"{cid}.flac", _level(seg, rng), SR)
            rows.append({"id": cid, "split": "real", "source": "recording", "package": rel.split("/")[0], "path": rel,
                         "evidence": evidence, "looped": bool(x.size < CLIP), "labels": label_row(pos, exhaustive)})  # fmt: skip
    return rows


def _note_bank(pkgs: Path) -> dict[str, tuple[np.ndarray, float]]:
    """Each note sample's first 1.5 s and its median pitch (MIDI number, pYIN)."""
    import librosa

    bank = {}
    for name in list(NOTES) + list(DRUM_HITS.values()):
        folder = "drums" if name in DRUM_HITS.values() else "instruments"
        x = _load(pkgs / LM / folder / f"{name}.ogg", 1.5)
        if name in NOTES:
            f0, voiced, _ = librosa.pyin(x, fmin=40, fmax=2000, sr=SR)
            f0 = f0[voiced & np.isfinite(f0)]
            pitch = float(librosa.hz_to_midi(np.median(f0))) if f0.size else 60.0
        else:
            pitch = 0.0
        bank[name] = (x, pitch)
    return bank


def _sequence(piece: mm.Piece, names: list[str | None], bank, seconds: float) -> np.ndarray:
    """Sum of the piece's notes, each a resampled copy of its part's note sample (drums: the hit samples)."""
    import soxr

    out = np.zeros(int(seconds * SR) + SR, np.float32)
    sec = 60.0 / piece.tempo / mm.TPB
    chans = {ch: names[i] for i, (ch, _) in enumerate(mm.channel_programs(piece))}
    drum_by_pitch = {mm.DRUM["kick"]: "kick", mm.DRUM["snare"]: "snare", mm.DRUM["hat"]: "hat"}
    for tick, dur, ch, pitch, vel in piece.notes:
        start = int(tick * sec * SR)
        if start >= out.size:
            continue
        if ch == 9:
            hit = drum_by_pitch.get(pitch)
            if hit is None:
                continue
            note = bank[DRUM_HITS[hit]][0][: SR // 2]
        else:
            x, base = bank[chans[ch]]
            ratio = 2 ** ((pitch - base) / 12)
            n = min(int(dur * sec * SR), x.size)
            note = soxr.resample(x, SR * ratio, SR)[:n] if abs(ratio - 1) > 1e-3 else x[:n]
            fade = min(len(note), int(0.03 * SR))
            note = note.copy()
            note[len(note) - fade :] *= np.linspace(1, 0, fade, dtype=np.float32)
        seg = note[: out.size - start] * (vel / 127)
        out[start : start + seg.size] += seg
    return out[: int(seconds * SR)]


def sampled(pkgs: Path, out_dir: Path, n: int, seed: int) -> list[dict]:
    bank = _note_bank(pkgs)
    rows = []
    for i in range(n):
        rng = np.random.default_rng([seed, 7, i])
        names = list(rng.choice(list(NOTES), size=int(rng.choice([1, 1, 2, 3])), replace=False))
        piece = mm.Piece(
            "sampled", round(float(rng.uniform(56, 170)), 1), int(rng.integers(12)), bool(rng.random() < 0.5), [], 0
        )
        roles = ["melody", "chords", "arp", "bass", "pad"]
        piece.parts = [mm.Part(program=0, role=str(rng.choice(roles)), octave=int(rng.integers(3, 6)),
                               velocity=int(rng.integers(70, 120))) for _ in names]  # fmt: skip
        drums = bool(rng.random() < 0.3)
        if drums:
            piece.parts.append(mm.Part(None, "drums", pattern="rock", velocity=int(rng.integers(80, 115))))
        piece.bars = int(np.ceil(11 * piece.tempo / 240)) + 1
        mm.compose(piece, rng)
        x = _sequence(piece, [str(v) for v in names], bank, 10.0)
        if float(np.abs(x).max()) < 1e-4:
            continue
        pos = tuple(sorted({lab for nm in names for lab in NOTES[str(nm)]} | ({"drums"} if drums else set())))
        labels = label_row(pos, ("instrument",))
        labels["solo"] = 1 if (len(names) == 1 and not drums) else 0
        labels["slow"] = 1 if piece.tempo <= 80 else (0 if piece.tempo >= 100 else -1)
        labels["fast"] = 1 if piece.tempo >= 140 else (0 if piece.tempo <= 120 else -1)
        cid = f"sampled-{i:04d}"
        sf.write(out_dir / f"{cid}.flac", _level(x, rng), SR)
        rows.append({"id": cid, "split": "real", "source": "sampled", "package": "lmms-common", "samples": [str(v) for v in names],
                     "drums": drums, "tempo": piece.tempo, "labels": labels})  # fmt: skip
    return rows


def build(cache: Path, pkgs: Path | None = None, n_sampled: int = 200, seed: int = 20261126) -> None:
    pkgs = pkgs or cache.parent / "pkgs"
    out_dir = cache / "real" / "real"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = recordings(pkgs, out_dir, np.random.default_rng([seed, 5])) + sampled(pkgs, out_dir, n_sampled, seed)
    (cache / "real" / "real.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"real: {sum(r['source'] == 'recording' for r in rows)} recording clips, "
          f"{sum(r['source'] == 'sampled' for r in rows)} sampled clips -> {cache / 'real' / 'real.jsonl'}")  # fmt: skip
