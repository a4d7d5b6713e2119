"""A bad-input corpus: every kind of file ingest must refuse with a readable reason, next to odd but good ones.

`write_bad_input_corpus(root)` writes it under `root/inputs` (plus `root/outside`, a folder that is not an
allowed source root) and returns one `BadInputCase` per file: what it is, whether ingest must turn it into
clips or a quarantine row, and words the quarantine reason must contain. Used by tests/test_bad_input.py and
benchmarks/pipeline/bad_input.py; ingest it with `IngestSection(max_file_s=MAX_FILE_S, allowed_roots=[root/"inputs"])`.
Some cases depend on the machine: `unreadable` (chmod 000) reads fine for root, so it is left out there
(`skipped` says why); a socket file is the unreadable case that holds for every user.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

MAX_FILE_S = 5.0  # the corpus's `too long` file is 6 s: ingest with max_file_s = 5


@dataclass(frozen=True)
class BadInputCase:
    name: str  # the file name under inputs/
    kind: str  # what the case is, for tables
    expect: str  # "clip" or "quarantine"
    reason_has: tuple[str, ...] = ()  # words the quarantine reason must contain (case-insensitive)


def _tone(seconds: float, sr: int, channels: int = 1, freq: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    x = (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)
    return np.stack([x * (0.5 + 0.5 * c / max(channels, 1)) for c in range(channels)], axis=1) if channels > 1 else x


def _bytes(fmt: str, seconds: float = 2.0, sr: int = 16000, subtype: str | None = None) -> bytes:
    import io

    buf = io.BytesIO()
    sf.write(buf, _tone(seconds, sr), sr, format=fmt, subtype=subtype)
    return buf.getvalue()


def write_bad_input_corpus(root: Path) -> tuple[list[BadInputCase], dict[str, str]]:
    """Write the corpus under `root/inputs`; returns (cases, {case name: why it was left out})."""
    d = Path(root) / "inputs"
    outside = Path(root) / "outside"
    d.mkdir(parents=True)
    outside.mkdir()
    cases: list[BadInputCase] = []
    skipped: dict[str, str] = {}

    def bad(name: str, kind: str, *words: str) -> None:
        cases.append(BadInputCase(name, kind, "quarantine", tuple(words)))

    def good(name: str, kind: str) -> None:
        cases.append(BadInputCase(name, kind, "clip"))

    # ---- good, if unusual
    sf.write(d / "rate_8k.wav", _tone(2, 8000), 8000)
    good("rate_8k.wav", "8 kHz WAV")
    sf.write(d / "rate_192k.flac", _tone(2, 192000, freq=550), 192000)
    good("rate_192k.flac", "192 kHz FLAC")
    sf.write(d / "eight_channels.wav", _tone(2, 48000, channels=8, freq=660), 48000)
    good("eight_channels.wav", "8-channel 48 kHz WAV")
    for name, freq in (("ünïcödé 音声.wav", 700), ("name with spaces.flac", 770), ('it\'s "quoted".ogg', 880)):
        sf.write(d / name, _tone(2, 16000, freq=freq), 16000)
        good(name, f"odd file name ({name})")
    # ---- unusable files
    (d / "empty.wav").write_bytes(b"")
    bad("empty.wav", "empty file (0 bytes)", "empty")
    flac = _bytes("FLAC")
    (d / "truncated.flac").write_bytes(flac[: len(flac) // 2])
    bad("truncated.flac", "truncated FLAC data", "corrupt or truncated flac")
    wav = _bytes("WAV", subtype="PCM_16")
    (d / "cut.wav").write_bytes(wav[: len(wav) // 2])
    bad("cut.wav", "truncated WAV data", "truncated wav audio data")
    (d / "header_only.wav").write_bytes(wav[:30])
    bad("header_only.wav", "WAV cut inside its header", "damaged or truncated wav header")
    (d / "corrupt_header.flac").write_bytes(flac[:4] + bytes(range(200, 238)) + flac[42:])
    bad("corrupt_header.flac", "corrupt FLAC header (STREAMINFO overwritten)", "flac")
    nan = _tone(2, 16000)
    nan[100:200] = np.nan
    sf.write(d / "nan.wav", nan, 16000, subtype="FLOAT")
    bad("nan.wav", "NaN samples (float WAV)", "nan")
    inf = _tone(2, 16000)
    inf[5000] = np.inf
    sf.write(d / "inf.wav", inf, 16000, subtype="FLOAT")
    bad("inf.wav", "infinite samples (float WAV)", "infinite")
    zero = bytearray(wav)
    zero[24:28] = struct.pack("<I", 0)
    (d / "zero_rate.wav").write_bytes(bytes(zero))
    bad("zero_rate.wav", "0 Hz sample rate in the header", "0 hz")
    (d / "notes.flac").write_text("these are meeting notes, not audio\n" * 40)
    bad("notes.flac", "text with an audio extension", "not an audio file", "text")
    rng = np.random.default_rng(7)
    (d / "random.mp3").write_bytes(b"\x00" + rng.integers(0, 256, 4000, dtype=np.uint8).tobytes())
    bad("random.mp3", "random bytes with an audio extension", "not an audio file")
    sf.write(d / "tiny.wav", _tone(0.05, 16000), 16000)
    bad("tiny.wav", "shorter than min_clip_s", "shorter than min_clip_s")
    sf.write(d / "too_long.flac", _tone(MAX_FILE_S + 1, 16000), 16000)
    bad("too_long.flac", f"longer than max_file_s ({MAX_FILE_S:g} s)", "maximum duration")
    # ---- paths that lead nowhere, or somewhere they must not
    os.symlink("loop_b.wav", d / "loop_a.wav")
    os.symlink("loop_a.wav", d / "loop_b.wav")
    bad("loop_a.wav", "symlink loop (a → b → a)", "symbolic link loop")
    bad("loop_b.wav", "symlink loop (b → a → b)", "symbolic link loop")
    os.symlink("gone.wav", d / "dangling.wav")
    bad("dangling.wav", "symlink to a missing file", "broken symbolic link")
    sf.write(outside / "secret.wav", _tone(2, 16000, freq=990), 16000)
    os.symlink(outside / "secret.wav", d / "escape.wav")
    bad("escape.wav", "symlink out of the allowed source roots", "outside the allowed source roots")
    os.mkfifo(d / "pipe.wav")
    bad("pipe.wav", "a FIFO named .wav (reading would block)", "not a regular file", "fifo")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(d / "socket.wav"))
        bad("socket.wav", "a socket named .wav (cannot be opened, even by root)", "not a regular file", "socket")
    except OSError as exc:  # a path too long for AF_UNIX
        skipped["socket.wav"] = f"cannot create a socket file here ({exc})"
    finally:
        sock.close()
    sf.write(d / "unreadable.wav", _tone(2, 16000, freq=1100), 16000)
    os.chmod(d / "unreadable.wav", 0)
    if os.access(d / "unreadable.wav", os.R_OK):  # root (or CAP_DAC_OVERRIDE) reads it anyway
        os.chmod(d / "unreadable.wav", 0o644)
        (d / "unreadable.wav").unlink()
        skipped["unreadable.wav"] = (
            "running as root: chmod 000 does not stop root from reading a file "
            "(tests/test_bad_input.py checks this case as uid 65534)"
        )
    else:
        bad("unreadable.wav", "no read permission (chmod 000)", "permission denied")
    return cases, skipped
