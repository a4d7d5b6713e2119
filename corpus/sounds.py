"""The sounds of the demo corpus: espeak-ng speech, additive-synthesis music, filtered-noise events.

Every generator draws from the numpy Generator it is given, so a corpus item is fixed by its seed.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr
from scipy import signal

SR = 16_000

SENTENCES = (
    "The train to the city leaves from platform four in ten minutes.",
    "Please remember to water the plants while I am away this week.",
    "I think the meeting was moved to Thursday afternoon.",
    "Could you pass me the salt and the pepper, please?",
    "The museum opens at nine and closes early on Sundays.",
    "We walked along the river until the sun went down.",
    "My brother bought a new bicycle for his birthday.",
    "The weather report says it will be cold and windy tomorrow.",
    "She read the letter twice before putting it back in the drawer.",
    "Turn left at the bakery and the library is on your right.",
    "Our team finished the project two days ahead of schedule.",
    "The children were laughing in the garden all morning.",
    "Do you know where I left my keys and my phone?",
    "The soup needs a little more garlic and some fresh herbs.",
    "He has been learning to play chess since last winter.",
    "The flight was delayed because of heavy fog at the airport.",
    "Let me check the calendar and call you back later today.",
    "The old bridge was closed for repairs during the summer.",
    "Every morning she runs three miles before breakfast.",
    "The printer on the second floor is out of paper again.",
    "We should book the tickets before the prices go up.",
    "The doctor said to rest and drink plenty of water.",
    "A small boat drifted slowly toward the harbour.",
    "I have never seen so many stars in the night sky.",
    "The store will be closed on the first of next month.",
    "Can you explain the last part of the lecture again?",
    "The cat sleeps on the windowsill when the sun is out.",
    "They painted the kitchen a bright shade of yellow.",
    "This recipe takes about forty minutes from start to finish.",
    "Thank you for coming, and please drive home safely.",
)
VOICES = (
    "en-us",
    "en",
    "en+f2",
    "en-us+f3",
    "en-us+f5",
    "en-us+m3",
    "en-gb-scotland",
    "en-gb-scotland+f3",
    "en-gb-x-rp+m3",
    "en-029",
    "en-us+klatt",
    "en-us+Annie",
    "en-us+belinda",
)


# ------------------------------------------------------------------------------------------ helpers
def _active_rms(x: np.ndarray) -> float:
    """RMS over the 50 ms frames within 30 dB of the loudest: sparse events are levelled by what sounds."""
    hop = SR // 20
    frames = x[: len(x) // hop * hop].reshape(-1, hop)
    rms = np.sqrt(np.mean(frames**2, axis=1) + 1e-20)
    active = rms[rms > rms.max() * 10 ** (-30 / 20)]
    return float(np.sqrt(np.mean(active**2)))


def at_level(x: np.ndarray, db: float) -> np.ndarray:
    return x / max(_active_rms(x), 1e-12) * 10 ** (db / 20)


def _bandpass(x: np.ndarray, lo: float, hi: float, order: int = 2) -> np.ndarray:
    return signal.sosfilt(signal.butter(order, [lo, min(hi, SR / 2 - 100)], "band", fs=SR, output="sos"), x)


def _filt(x: np.ndarray, cutoff: float, kind: str, order: int = 2) -> np.ndarray:
    return signal.sosfilt(signal.butter(order, cutoff, kind, fs=SR, output="sos"), x)


def pink(rng: np.random.Generator, n: int) -> np.ndarray:
    spec = np.fft.rfft(rng.standard_normal(n))
    spec[1:] /= np.sqrt(np.arange(1, len(spec)))
    x = np.fft.irfft(spec, n)
    return x / (np.std(x) + 1e-12)


def _place(track: np.ndarray, event: np.ndarray, start: int) -> None:
    end = min(len(track), start + len(event))
    if start < end:
        track[start:end] += event[: end - start]


def _decay(n: int, tau_s: float) -> np.ndarray:
    return np.exp(-np.arange(n) / (tau_s * SR))


# ------------------------------------------------------------------------------------------- speech
class Espeak:
    """espeak-ng renders into a scratch dir; identical requests within one run are rendered once."""

    def __init__(self, scratch: Path) -> None:
        if shutil.which("espeak-ng") is None:
            raise RuntimeError(
                "generate_corpus needs espeak-ng for its speech clips: "
                "install it (apt-get install espeak-ng) and run again"
            )
        self.scratch = scratch
        self.cache: dict[tuple[str, str, int, int], np.ndarray] = {}

    def __call__(self, text: str, voice: str, rate: int, pitch: int) -> np.ndarray:
        key = (text, voice, rate, pitch)
        if key not in self.cache:
            out = self.scratch / f"tts_{len(self.cache)}.wav"
            cmd = ["espeak-ng", "-v", voice, "-s", str(rate), "-p", str(pitch), "-w", str(out), text]
            subprocess.run(cmd, check=True, capture_output=True)
            x, sr = sf.read(out, dtype="float64")
            self.cache[key] = soxr.resample(x, sr, SR)
        return self.cache[key]


def speech_track(rng: np.random.Generator, n: int, tts: Espeak) -> tuple[np.ndarray, str]:
    speakers = [(str(rng.choice(VOICES)), int(rng.integers(135, 190)), int(rng.integers(30, 71)))]
    if rng.random() < 0.3:  # a short dialogue between two voices
        speakers.append((str(rng.choice(VOICES)), int(rng.integers(135, 190)), int(rng.integers(30, 71))))
    out, pos, said = np.zeros(n), int(rng.uniform(0.05, 0.4) * SR), []
    while pos < n - SR // 2:
        voice, rate, pitch = speakers[len(said) % len(speakers)]
        sentence = str(rng.choice(SENTENCES))
        x = at_level(tts(sentence, voice, rate, pitch), 0.0)
        _place(out, x, pos)
        said.append(sentence)
        pos += len(x) + int(rng.uniform(0.15, 0.6) * SR)
    out[-SR // 50 :] *= np.linspace(1, 0, SR // 50)
    who = " and ".join(f"{v} ({r} wpm, pitch {p})" for v, r, p in speakers)
    return out, f"speech by {who}: '{said[0]}'" + (f" +{len(said) - 1} more" if len(said) > 1 else "")


# -------------------------------------------------------------------------------------------- music
# Timbres: (partial amplitude profile, attack s, decay s, sustain level, release s, pluck tau or None)
TIMBRES: dict[str, tuple[Callable[[int], float], float, float, float, float, float | None]] = {
    "pad": (lambda k: 1 / k, 0.08, 0.2, 0.7, 0.25, None),
    "organ": (
        lambda k: (1.0, 0.8, 0.6, 0.4, 0.2, 0.3, 0.1, 0.2)[k - 1] if k <= 8 else 0.0,
        0.01,
        0.05,
        0.9,
        0.05,
        None,
    ),
    "reed": (lambda k: 1 / k if k % 2 else 0.15 / k, 0.03, 0.1, 0.8, 0.1, None),
    "pluck": (lambda k: 1 / k**1.2, 0.003, 0.0, 1.0, 0.05, 0.35),
    "piano": (lambda k: 1 / k**1.5, 0.004, 0.0, 1.0, 0.1, 0.8),
}
PROGRESSIONS = ((0, 4, 5, 3), (0, 5, 3, 4), (0, 3, 4, 0), (5, 3, 0, 4), (0, 3, 0, 4))
MAJOR, MINOR = (0, 2, 4, 5, 7, 9, 11), (0, 2, 3, 5, 7, 8, 10)


def _note(midi: float, dur_s: float, timbre: str, vibrato: float = 0.0) -> np.ndarray:
    amp_of, att, dec, sus, rel, tau = TIMBRES[timbre]
    n = int((dur_s + rel) * SR)
    t = np.arange(n) / SR
    f0 = 440.0 * 2 ** ((midi - 69) / 12)
    phase = 2 * np.pi * f0 * (t + vibrato * np.sin(2 * np.pi * 5.5 * t) / (2 * np.pi * 5.5))
    x = sum(amp_of(k) * np.sin(k * phase) for k in range(1, 16) if k * f0 < SR / 2 - 500 and amp_of(k) > 0)
    if tau is not None:  # struck/plucked: exponential decay, higher partials die first is approximated by tau
        env = _decay(n, tau * (440 / f0) ** 0.3)
    else:
        env = np.interp(t, [0, att, att + dec, dur_s, dur_s + rel], [0, 1, sus, sus, 0])
    env[-int(rel * SR) :] *= np.linspace(1, 0, int(rel * SR))
    return x * env


def _drums(rng: np.random.Generator, n: int, beat_s: float) -> np.ndarray:
    kick_n, hat_n, snare_n = int(0.35 * SR), int(0.06 * SR), int(0.2 * SR)
    t = np.arange(kick_n) / SR
    kick = np.sin(2 * np.pi * np.cumsum(45 + 80 * np.exp(-t / 0.03)) / SR) * _decay(kick_n, 0.12)
    hat = _filt(rng.standard_normal(hat_n), 5000, "high") * _decay(hat_n, 0.015) * 0.35
    snare = (
        _bandpass(rng.standard_normal(snare_n), 1000, 5000) * 0.6
        + np.sin(2 * np.pi * 185 * np.arange(snare_n) / SR) * 0.4
    ) * _decay(snare_n, 0.06)
    out, step = np.zeros(n), beat_s / 2
    for k in range(int(n / SR / step) + 1):
        at = int(k * step * SR)
        _place(out, hat * (1.0 if k % 2 == 0 else 0.6), at)
        if k % 8 in (0, 4) or (k % 8 == 5 and rng.random() < 0.4):
            _place(out, kick, at)
        if k % 8 in (2, 6):
            _place(out, snare, at)
    return out


def music_track(rng: np.random.Generator, n: int) -> tuple[np.ndarray, str]:
    bpm = float(rng.uniform(76, 140))
    beat = 60.0 / bpm
    root, minor = int(rng.integers(48, 60)), bool(rng.random() < 0.4)
    scale = MINOR if minor else MAJOR
    prog = PROGRESSIONS[int(rng.integers(len(PROGRESSIONS)))]
    chord_t, lead_t = rng.choice(["pad", "organ", "reed", "piano"]), rng.choice(["pluck", "reed", "organ", "piano"])

    def pitch(degree: int) -> int:
        return root + 12 * (degree // 7) + scale[degree % 7]

    chords, lead, bass = np.zeros(n), np.zeros(n), np.zeros(n)
    bar, arpeggio = 4 * beat, bool(rng.random() < 0.4)
    for b in range(int(n / SR / bar) + 1):
        deg, at = prog[b % len(prog)], int(b * bar * SR)
        if arpeggio:  # up-down eighths over the triad
            for r, j in enumerate((0, 2, 4, 2, 0, 2, 4, 2)):
                _place(chords, _note(pitch(deg + j), beat / 2, chord_t), at + int(r * beat / 2 * SR))
        else:
            for d in (deg, deg + 2, deg + 4):
                _place(chords, _note(pitch(d), bar * 0.95, chord_t), at)
        for r in range(4):
            _place(bass, _note(pitch(deg) - 12, beat * 0.9, "pluck"), at + int(r * beat * SR))
    step, deg = beat / (2 if rng.random() < 0.5 else 1), 7
    vib = 0.004 if lead_t == "reed" else 0.0
    for k in range(int(n / SR / step)):
        if rng.random() < 0.15:
            continue  # a rest
        deg = int(np.clip(deg + rng.choice([-2, -1, 0, 1, 1, 2]), 4, 13))
        _place(lead, _note(pitch(deg) + 12, step * 0.9, lead_t, vib), int(k * step * SR))
    with_drums = bool(rng.random() < 0.6)
    mix = at_level(chords, -3) + at_level(lead, 0) + at_level(bass, -6)
    if with_drums:
        mix += at_level(_drums(rng, n, beat), -4)
    key = f"{['C', 'C#', 'D', 'D#', 'E', 'F', 'F#', 'G', 'G#', 'A', 'A#', 'B'][root % 12]} {'minor' if minor else 'major'}"
    desc = f"music in {key} at {bpm:.0f} bpm, {chord_t} {'arpeggios' if arpeggio else 'chords'}, {lead_t} melody"
    return mix, desc + (", drums" if with_drums else "")


# --------------------------------------------------------------------------------------- sound events
def _knock(rng: np.random.Generator) -> np.ndarray:
    out, f = np.zeros(int(1.2 * SR)), float(rng.uniform(150, 600))
    for k in range(int(rng.integers(2, 5))):
        hit = _bandpass(rng.standard_normal(int(0.06 * SR)), f * 0.7, f * 1.4) * _decay(int(0.06 * SR), 0.012)
        click = rng.standard_normal(len(hit)) * _decay(len(hit), 0.002)
        _place(out, hit * 4 + click, int(k * rng.uniform(0.13, 0.3) * SR))
    return out


def _bark(rng: np.random.Generator) -> np.ndarray:
    out, f1, f2 = np.zeros(int(1.5 * SR)), float(rng.uniform(450, 900)), float(rng.uniform(1200, 2200))
    for k in range(int(rng.integers(1, 4))):
        m = int(rng.uniform(0.12, 0.25) * SR)
        t = np.arange(m) / SR
        noise = rng.standard_normal(m)
        body = _bandpass(noise, f1 * 0.8, f1 * 1.25) + 0.6 * _bandpass(noise, f2 * 0.85, f2 * 1.15)
        harsh = 0.55 + 0.45 * np.sign(np.sin(2 * np.pi * rng.uniform(30, 60) * t))
        env = np.minimum(t / 0.01, 1) * np.exp(-t / (m / SR / 2.5))
        _place(out, body * harsh * env, int(k * rng.uniform(0.3, 0.45) * SR))
    return out


def _footsteps(rng: np.random.Generator) -> np.ndarray:
    steps, interval = int(rng.integers(4, 8)), float(rng.uniform(0.45, 0.65))
    out, at = np.zeros(int((steps * interval * 1.3 + 0.3) * SR)), 0.0
    for _ in range(steps):
        m = int(0.09 * SR)
        thud = _filt(rng.standard_normal(m), 300, "low") * _decay(m, 0.025) * 3
        scuff = _bandpass(rng.standard_normal(m), 1000, 3000) * _decay(m, 0.04) * 0.3
        _place(out, thud + scuff, int(at * SR))
        at += interval * rng.uniform(0.75, 1.3)
    return out


def _car(rng: np.random.Generator) -> np.ndarray:
    m = int(rng.uniform(3.0, 6.0) * SR)
    t = np.arange(m) / SR
    rumble = _filt(np.cumsum(rng.standard_normal(m)) * 0.02, float(rng.uniform(500, 1200)), "low", 4)
    tyres = _bandpass(rng.standard_normal(m), 600, 3000) * 0.2
    swell = 1 / (1 + ((t - t[-1] / 2) / (t[-1] / 6)) ** 2)
    return (rumble / (np.std(rumble) + 1e-12) + tyres) * swell


def _door(rng: np.random.Generator) -> np.ndarray:
    m = int(0.5 * SR)
    boom = _bandpass(rng.standard_normal(m), 60, float(rng.uniform(150, 300))) * _decay(m, 0.09) * 4
    return boom + rng.standard_normal(m) * _decay(m, 0.01) * 0.8


def _typing(rng: np.random.Generator) -> np.ndarray:
    out, at = np.zeros(int(3.5 * SR)), 0.0
    for _ in range(int(rng.integers(6, 16))):
        click = _bandpass(rng.standard_normal(int(0.01 * SR)), 1500, 6000) * _decay(int(0.01 * SR), 0.002)
        _place(out, click, int(at * SR))
        at += float(rng.exponential(0.15)) + 0.05
    return out


def _rain(rng: np.random.Generator, n: int) -> np.ndarray:
    out = _filt(pink(rng, n), 400, "high") * 0.15
    for at in rng.integers(0, n, int(rng.uniform(20, 60) * n / SR)):
        drop = _filt(rng.standard_normal(int(0.004 * SR)), 2000, "high") * _decay(int(0.004 * SR), 0.001)
        _place(out, drop * rng.uniform(0.3, 2.0), int(at))
    return out


def _wind(rng: np.random.Generator, n: int) -> np.ndarray:
    gust = np.interp(np.arange(n), np.linspace(0, n, 6), rng.uniform(0.1, 1.0, 6))
    return _bandpass(pink(rng, n), 150, float(rng.uniform(800, 2000))) * gust


EVENTS = {
    "door knocks": _knock,
    "dog barks": _bark,
    "footsteps": _footsteps,
    "a car passing": _car,
    "a door slam": _door,
    "typing": _typing,
}
TEXTURES = {"rain": _rain, "wind": _wind}


def event_track(rng: np.random.Generator, n: int) -> tuple[np.ndarray, str]:
    out, names = np.zeros(n), []
    if rng.random() < 0.3:
        name = str(rng.choice(list(TEXTURES)))
        out += at_level(TEXTURES[name](rng, n), -8)
        names.append(name)
    for name in rng.choice(list(EVENTS), size=int(rng.integers(2, 4)), replace=False):
        for _ in range(int(rng.integers(1, 3))):  # irregular times, levels within ±5 dB
            _place(out, at_level(EVENTS[name](rng), float(rng.uniform(-5, 5))), int(rng.uniform(0, 0.85) * n))
        names.append(str(name))
    out += at_level(pink(rng, n), -45)  # room tone
    return out, "sound events: " + ", ".join(names)


# ---------------------------------------------------------------------------------------------- clips
