"""Labelled MIDI for the music-tag heads: seeded pieces in a few styles with known General MIDI programs.

Each piece is a small arrangement (a chord progression in a random key and mode, at a random tempo) of parts
with known GM programs and roles (pad, block chords, arpeggio, bass, melody, drums), written as a standard MIDI
file by hand (no MIDI library). Its labels follow from how it was made:

* instruments: from the GM programs of its parts (`PROGRAM_LABELS`), "drums" from a channel-10 part;
* genre: from the style template (classical, rock, electronic, jazz, ambient, folk); "random" pieces (random
  programs and roles, to decouple instruments from styles) and solo pieces have no genre truth (masked);
* mood / tempo: "slow" (<= 80 BPM), "fast" (>= 140 BPM) with a masked band between them and the middle;
  "calm" (no drums, <= 100 BPM, soft) and "energetic" (drums, >= 120 BPM, loud), masked when neither holds
  clearly;
* "solo": one melodic part and no drums.

Every part plays through the whole piece (short rests only), so a clip's labels hold in each of its 2 s windows.
Truth here is by construction: it says what was played, not what a listener would call it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

# GM program (0-based) -> instrument labels. Programs not listed are distractors (no instrument label).
PROGRAM_LABELS: dict[int, tuple[str, ...]] = {
    **{p: ("piano",) for p in (0, 1, 2)},
    **{p: ("electric piano",) for p in (4, 5)},
    6: ("harpsichord",),
    **{p: ("mallets",) for p in (8, 9, 11, 12, 13, 14)},
    **{p: ("organ",) for p in (16, 17, 18, 19)},
    21: ("accordion",),
    **{p: ("guitar", "acoustic guitar") for p in (24, 25)},
    **{p: ("guitar", "electric guitar") for p in (26, 27, 28)},
    **{p: ("guitar", "electric guitar", "distorted guitar") for p in (29, 30)},
    **{p: ("bass",) for p in (32, 33, 34, 35, 36, 37, 38, 39)},
    40: ("violin", "strings"),
    41: ("strings",),
    42: ("cello", "strings"),
    **{p: ("strings",) for p in (44, 45, 48, 49)},
    46: ("harp",),
    **{p: ("choir",) for p in (52, 53)},
    **{p: ("trumpet", "brass") for p in (56,)},
    **{p: ("brass",) for p in (57, 58, 60, 61)},
    **{p: ("saxophone",) for p in (64, 65, 66, 67)},
    **{p: ("woodwinds",) for p in (68, 69, 70, 71)},
    **{p: ("flute",) for p in (72, 73, 74, 75)},
    **{p: ("synthesizer",) for p in (80, 81, 84, 85, 87, 88, 89, 90, 91, 92, 94, 95, 50, 51, 38, 39)},
    104: ("sitar",),
    105: ("banjo",),
    110: ("violin", "strings"),  # fiddle
}
# synth bass (38, 39) is both "bass" and "synthesizer"; synth strings (50, 51) are synthesizer only
PROGRAM_LABELS[38] = ("bass", "synthesizer")
PROGRAM_LABELS[39] = ("bass", "synthesizer")
# ensembles and pads: one such part alone is not a "solo"
ENSEMBLES = frozenset((41, 44, 45, 48, 49, 50, 51, 52, 53, 54, 61, *range(88, 96)))
DISTRACTORS = (3, 7, 10, 15, 20, 22, 23, 43, 47, 54, 55, 59, 62, 63, 76, 77, 78, 79, 106, 107, 108, 109, 111)
INSTRUMENTS = sorted({lab for labs in PROGRAM_LABELS.values() for lab in labs} | {"drums"})
GENRES = ("classical", "rock", "electronic", "jazz", "ambient", "folk")
MOODS = ("slow", "fast", "calm", "energetic")
STRUCTURE = ("solo",)
ALL_LABELS = tuple(INSTRUMENTS) + GENRES + MOODS + STRUCTURE

MAJOR = (0, 2, 4, 5, 7, 9, 11)
MINOR = (0, 2, 3, 5, 7, 8, 10)
PROGRESSIONS = ((0, 4, 5, 3), (0, 5, 3, 4), (0, 3, 4, 0), (5, 3, 0, 4), (0, 3, 5, 4), (1, 4, 0, 0), (0, 0, 3, 4))
TPB = 480  # ticks per beat


@dataclass
class Part:
    program: int | None  # None: drums (channel 10)
    role: str  # pad | chords | arp | bass | melody | drums
    octave: int = 4
    velocity: int = 90
    pattern: str = ""  # drum pattern or comping pattern name


@dataclass
class Piece:
    style: str
    tempo: float
    tonic: int
    minor: bool
    parts: list[Part]
    bars: int
    swing: bool = False
    notes: list[tuple[int, int, int, int, int]] = field(default_factory=list)  # (tick, dur, chan, pitch, vel)

    def labels(self) -> dict[str, int]:
        """Label -> 1 / 0 / -1 (masked: no truth for this piece)."""
        out = dict.fromkeys(ALL_LABELS, 0)
        for p in self.parts:
            for lab in PROGRAM_LABELS.get(p.program, ()) if p.program is not None else ("drums",):
                out[lab] = 1
        if self.style in GENRES:
            out[self.style] = 1
        else:
            for g in GENRES:
                out[g] = -1
        drums = any(p.program is None for p in self.parts)
        vel = float(np.mean([p.velocity for p in self.parts]))
        out["slow"] = 1 if self.tempo <= 80 else (0 if self.tempo >= 100 else -1)
        out["fast"] = 1 if self.tempo >= 140 else (0 if self.tempo <= 120 else -1)
        calm = (not drums) and self.tempo <= 100 and vel <= 80
        energetic = drums and self.tempo >= 120 and vel >= 90
        out["calm"] = 1 if calm else (0 if (drums or self.tempo >= 120 or vel >= 95) else -1)
        out["energetic"] = 1 if energetic else (0 if ((not drums) or self.tempo <= 100 or vel <= 75) else -1)
        melodic = [p for p in self.parts if p.program is not None]
        alone = len(melodic) == 1 and not drums
        out["solo"] = 1 if (alone and melodic[0].program not in ENSEMBLES) else (-1 if alone else 0)
        return out


# --------------------------------------------------------------------------- styles
def _pick(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


def style_piece(style: str, rng: np.random.Generator, seconds: float = 12.0) -> Piece:
    """A random piece of one style (see the module doc for the label rules)."""
    minor = bool(rng.random() < 0.5)
    tonic = int(rng.integers(12))
    v = lambda lo, hi: int(rng.integers(lo, hi + 1))  # noqa: E731
    parts: list[Part]
    swing = False
    if style == "classical":
        tempo = float(rng.uniform(56, 150))
        soft = rng.random() < 0.5
        vel = (50, 80) if soft else (75, 110)
        pool = [
            Part(_pick(rng, (48, 49)), "pad", 4, v(*vel)),
            Part(40, "melody", 5, v(*vel)),
            Part(42, "bass", 3, v(*vel)),
            Part(_pick(rng, (0, 1)), "arp", 4, v(*vel)),
            Part(_pick(rng, (73, 72)), "melody", 5, v(*vel)),
            Part(_pick(rng, (68, 71, 70)), "melody", 4, v(*vel)),
            Part(_pick(rng, (60, 61, 57)), "pad", 4, v(*vel)),
            Part(46, "arp", 4, v(*vel)),
            Part(6, "arp", 4, v(*vel)),
            Part(56, "melody", 5, v(*vel)),
            Part(41, "chords", 4, v(*vel)),
        ]
        parts = [pool[i] for i in rng.choice(len(pool), size=int(rng.integers(2, 5)), replace=False)]
    elif style == "rock":
        tempo = float(rng.uniform(100, 175))
        parts = [
            Part(None, "drums", pattern="rock", velocity=v(90, 120)),
            Part(_pick(rng, (29, 30)), "chords", 3, v(90, 120), pattern="power8"),
            Part(_pick(rng, (33, 34)), "bass", 2, v(90, 120), pattern="eighths"),
        ]
        extra = [Part(_pick(rng, (29, 30, 27)), "melody", 5, v(85, 115)), Part(18, "pad", 4, v(80, 100))]
        parts += [extra[i] for i in rng.choice(2, size=int(rng.integers(0, 2)), replace=False)]
    elif style == "electronic":
        tempo = float(rng.uniform(118, 145))
        parts = [
            Part(None, "drums", pattern="four", velocity=v(90, 120)),
            Part(_pick(rng, (38, 39)), "bass", 2, v(90, 120), pattern="offbeat"),
        ]
        extra = [
            Part(_pick(rng, (80, 81, 87, 84)), "melody", 5, v(80, 110)),
            Part(_pick(rng, (88, 89, 90, 94, 95, 50)), "pad", 4, v(70, 100)),
            Part(_pick(rng, (81, 80, 85)), "arp", 5, v(75, 105), pattern="sixteenths"),
        ]
        parts += [extra[i] for i in rng.choice(3, size=int(rng.integers(1, 4)), replace=False)]
    elif style == "jazz":
        tempo = float(rng.uniform(90, 200))
        swing = True
        parts = [
            Part(None, "drums", pattern="swing", velocity=v(60, 95)),
            Part(32, "bass", 2, v(80, 110), pattern="walking"),
            Part(_pick(rng, (0, 4, 26)), "chords", 4, v(60, 90), pattern="comp"),
        ]
        parts += [Part(_pick(rng, (65, 66, 56, 11, 64, 73)), "melody", 5, v(75, 105))] if rng.random() < 0.8 else []
    elif style == "ambient":
        tempo = float(rng.uniform(48, 80))
        pool = [
            Part(_pick(rng, (88, 89, 91, 92, 94, 95)), "pad", 4, v(45, 80)),
            Part(_pick(rng, (49, 50)), "pad", 3, v(45, 75)),
            Part(52, "pad", 4, v(45, 75)),
            Part(_pick(rng, (8, 9, 14, 11)), "melody", 6, v(40, 70), pattern="sparse"),
            Part(_pick(rng, (0, 46)), "melody", 5, v(35, 65), pattern="sparse"),
        ]
        parts = [pool[i] for i in rng.choice(len(pool), size=int(rng.integers(1, 4)), replace=False)]
    elif style == "folk":
        tempo = float(rng.uniform(85, 150))
        parts = [Part(_pick(rng, (24, 25)), "chords", 3, v(75, 105), pattern="strum")]
        extra = [
            Part(110, "melody", 5, v(80, 110)),
            Part(105, "arp", 4, v(80, 110)),
            Part(21, "melody", 4, v(75, 100)),
            Part(32, "bass", 2, v(75, 100)),
            Part(None, "drums", pattern="folk", velocity=v(60, 90)),
        ]
        parts += [extra[i] for i in rng.choice(5, size=int(rng.integers(1, 4)), replace=False)]
    elif style == "solo":
        tempo = float(rng.uniform(50, 170))
        prog = _pick(rng, (0, 0, 1, 24, 25, 40, 42, 73, 46, 6, 19, 65, 56, 12, 4, 27))
        parts = [Part(prog, _pick(rng, ("melody", "arp", "pianoish")), 4, v(50, 110))]
    else:  # random: decorrelates instruments from styles
        tempo = float(rng.uniform(50, 190))
        progs = list(PROGRAM_LABELS) + list(DISTRACTORS)
        n = int(rng.integers(1, 5))
        parts = [
            Part(_pick(rng, progs), _pick(rng, ("pad", "chords", "arp", "bass", "melody")), int(rng.integers(3, 6)),
                 v(45, 115))
            for _ in range(n)
        ]  # fmt: skip
        if rng.random() < 0.5:
            parts.append(
                Part(None, "drums", pattern=_pick(rng, ("rock", "four", "swing", "folk")), velocity=v(60, 115))
            )
    bars = int(np.ceil(seconds * tempo / 60 / 4)) + 1
    piece = Piece(style, round(tempo, 1), tonic, minor, parts, bars, swing)
    compose(piece, rng)
    return piece


# --------------------------------------------------------------------------- notes
def compose(piece: Piece, rng: np.random.Generator) -> None:
    scale = MINOR if piece.minor else MAJOR
    prog = _pick(rng, PROGRESSIONS)
    chan = 0
    for part in piece.parts:
        if part.program is None:
            _drums(piece, part, rng)
            continue
        if chan == 9:
            chan += 1
        part_chan = chan
        chan += 1
        for bar in range(piece.bars):
            deg = prog[bar % len(prog)]
            chord = [piece.tonic + scale[(deg + k) % 7] + 12 * ((deg + k) // 7) for k in (0, 2, 4)]
            _bar(piece, part, part_chan, bar, chord, scale, rng)


def _add(piece: Piece, t_beats: float, dur_beats: float, chan: int, pitch: int, vel: int, rng) -> None:
    if piece.swing and abs(t_beats % 1 - 0.5) < 1e-6:
        t_beats += 1 / 6  # swung eighth
    tick = max(0, int(round(t_beats * TPB + rng.normal(0, 6))))
    vel = int(np.clip(vel + rng.normal(0, 6), 1, 127))
    pitch = int(np.clip(pitch, 0, 127))
    piece.notes.append((tick, max(10, int(dur_beats * TPB * 0.95)), chan, pitch, vel))


def _bar(piece: Piece, part: Part, chan: int, bar: int, chord, scale, rng) -> None:
    b0 = bar * 4.0
    base = 12 * (part.octave + 1)
    role, vel = part.role, part.velocity
    if role == "pad":
        for p in chord:
            _add(piece, b0, 4, chan, base + p, vel, rng)
    elif role == "chords":
        if part.pattern == "power8":
            for k in range(8):
                for p in (chord[0], chord[0] + 7):
                    _add(piece, b0 + k / 2, 0.5, chan, base + p, vel, rng)
        elif part.pattern == "comp":
            for t in sorted(rng.choice(8, size=3, replace=False) / 2):
                for p in chord + [chord[0] + 10]:
                    _add(piece, b0 + t, 0.5, chan, base + p, vel, rng)
        elif part.pattern == "strum":
            for k in range(8):
                if k in (0, 2, 3, 4, 6, 7):
                    for j, p in enumerate(chord + [chord[0] + 12]):
                        _add(piece, b0 + k / 2 + 0.015 * j, 0.5, chan, base + p, vel, rng)
        else:
            step = 2 if piece.tempo < 90 else 1
            for k in range(0, 4, step):
                for p in chord:
                    _add(piece, b0 + k, step, chan, base + p, vel, rng)
    elif role == "arp":
        step = 0.25 if part.pattern == "sixteenths" else (0.5 if piece.tempo < 150 else 1.0)
        seq = chord + [chord[0] + 12, chord[2], chord[1]]
        for k in range(int(4 / step)):
            _add(piece, b0 + k * step, step, chan, base + seq[k % len(seq)], vel, rng)
    elif role == "bass":
        root = base + chord[0]
        if part.pattern == "eighths":
            for k in range(8):
                _add(piece, b0 + k / 2, 0.5, chan, root, vel, rng)
        elif part.pattern == "offbeat":
            for k in range(4):
                _add(piece, b0 + k + 0.5, 0.5, chan, root, vel, rng)
        elif part.pattern == "walking":
            walk = [root, root + scale[2], root + 7, root + _pick(rng, (5, 9, 11, -1))]
            for k in range(4):
                _add(piece, b0 + k, 1, chan, walk[k], vel, rng)
        else:
            for k in (0, 2):
                _add(piece, b0 + k, 2, chan, root if k == 0 else root + 7, vel, rng)
    elif role in ("melody", "pianoish"):
        if role == "pianoish":  # left-hand chord + right-hand melody on one instrument
            for p in chord:
                _add(piece, b0, 4, chan, base - 12 + p, max(1, vel - 15), rng)
        t = 0.0
        sparse = part.pattern == "sparse"
        deg = int(rng.integers(7))
        while t < 4:
            dur = float(
                _pick(rng, (2.0, 4.0) if sparse else ((0.5, 1.0, 1.0, 2.0) if piece.tempo < 140 else (1, 1, 2)))
            )
            deg = int(np.clip(deg + rng.integers(-2, 3), -3, 10))
            pitch = base + 12 + piece.tonic + scale[deg % 7] + 12 * (deg // 7) - 12
            _add(piece, b0 + t, min(dur, 4 - t), chan, pitch, vel, rng)
            t += dur


DRUM = {"kick": 36, "snare": 38, "hat": 42, "open": 46, "ride": 51, "clap": 39, "crash": 49, "tom": 45, "tamb": 54}


def _drums(piece: Piece, part: Part, rng) -> None:
    vel = part.velocity
    for bar in range(piece.bars):
        b0 = bar * 4.0
        hits: list[tuple[float, str]] = []
        if part.pattern == "rock":
            hits = [(0, "kick"), (2, "kick"), (2.5, "kick"), (1, "snare"), (3, "snare")]
            hits += [(k / 2, "hat") for k in range(8)]
        elif part.pattern == "four":
            hits = [(k, "kick") for k in range(4)] + [(k + 0.5, "open") for k in range(4)] + [(1, "clap"), (3, "clap")]
            hits += [(k / 4, "hat") for k in range(16) if k % 2]
        elif part.pattern == "swing":
            hits = [(0, "ride"), (1, "ride"), (1.5, "ride"), (2, "ride"), (3, "ride"), (3.5, "ride")]
            hits += [(1, "hat"), (3, "hat"), (0, "kick")]
        else:  # folk: light kick / snare / tambourine
            hits = [(0, "kick"), (2, "kick"), (1, "snare"), (3, "snare")] + [(k / 2, "tamb") for k in range(8)]
        if bar == 0:
            hits.append((0, "crash"))
        for t, name in hits:
            _add(piece, b0 + t, 0.25, 9, DRUM[name], vel - (15 if name in ("hat", "tamb") else 0), rng)


# --------------------------------------------------------------------------- standard MIDI file
def _vlq(n: int) -> bytes:
    out = [n & 0x7F]
    n >>= 7
    while n:
        out.append(0x80 | (n & 0x7F))
        n >>= 7
    return bytes(reversed(out))


def channel_programs(piece: Piece) -> list[tuple[int, int]]:
    """(MIDI channel, GM program) of the melodic parts, in the order `compose` assigned their channels."""
    out, chan = [], 0
    for part in piece.parts:
        if part.program is None:
            continue
        if chan == 9:
            chan += 1
        out.append((chan, part.program))
        chan += 1
    return out


def timed_events(piece: Piece) -> list[tuple[float, int, str, int, int, int]]:
    """Note on / off events in seconds: (time, 0 = off first, "on" | "off", channel, pitch, velocity)."""
    sec = 60.0 / piece.tempo / TPB
    out = []
    for tick, dur, ch, pitch, vel in piece.notes:
        out.append((tick * sec, 1, "on", ch, pitch, vel))
        out.append(((tick + dur) * sec, 0, "off", ch, pitch, 0))
    return out


def to_midi(piece: Piece) -> bytes:
    """A format-0 standard MIDI file of the piece (tempo, program changes, notes)."""
    events: list[tuple[int, int, bytes]] = [(0, 0, b"\xff\x51\x03" + int(60e6 / piece.tempo).to_bytes(3, "big"))]
    events += [(0, 1, bytes([0xC0 | ch, prog])) for ch, prog in channel_programs(piece)]
    for tick, dur, ch, pitch, vel in piece.notes:
        events.append((tick, 3, bytes([0x90 | ch, pitch, vel])))
        events.append((tick + dur, 2, bytes([0x80 | ch, pitch, 0])))
    events.sort(key=lambda e: (e[0], e[1]))
    track, last = b"", 0
    for tick, _, data in events:
        track += _vlq(tick - last) + data
        last = tick
    track += b"\x00\xff\x2f\x00"
    return b"MThd" + struct.pack(">IHHH", 6, 0, 1, TPB) + b"MTrk" + struct.pack(">I", len(track)) + track


STYLE_WEIGHTS = {
    "classical": 0.16,
    "rock": 0.12,
    "electronic": 0.12,
    "jazz": 0.11,
    "ambient": 0.1,
    "folk": 0.09,
    "solo": 0.1,
    "random": 0.2,
}
