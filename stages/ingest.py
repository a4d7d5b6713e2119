"""ingest: any readable audio file → 16 kHz mono ≤10 s clips with content-hash ids.

A file that cannot be used becomes a `QuarantineRow` saying what was wrong and what to do; it never stops
the run. `clip_id` is the hash of the clip's 16-bit PCM, so the same audio gets the same id wherever it
came from, and re-encoding a source file that decodes to the same samples changes nothing downstream.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from earmark.config import IngestSection
from earmark.experts.base import SAMPLE_RATE, ClipAudio
from earmark.schemas.records import Clip, QuarantineRow
from earmark.stages.base import StageSpec

AUDIO_SUFFIXES = {
    ".wav",
    ".flac",
    ".ogg",
    ".oga",
    ".opus",
    ".mp3",
    ".aiff",
    ".aif",
    ".au",
    ".m4a",
    ".aac",
    ".wma",
    ".webm",
    ".mka",
}
STAGE_VERSION = "1"


def spec(cfg: IngestSection) -> StageSpec:
    """Every ingest setting changes what is cut (files_per_shard only groups files, so it is left out)."""
    config = {"sr": SAMPLE_RATE, "max": cfg.max_clip_s, "min": cfg.min_clip_s, "maxfile": cfg.max_file_s}
    return StageSpec("ingest", STAGE_VERSION, writes=("clips", "quarantine"), config=config)


def display_path(path: Path, root: Path | None) -> str:
    return str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)


def source_identity(path: Path, root: Path | None) -> str:
    """What an ingest shard's key depends on per file: its displayed path and content."""
    return f"{display_path(path, root)}:{file_sha256(path)}"


def assign_shards(
    files: Sequence[Path], root: Path | None, manifest: Mapping[str, int], per_shard: int
) -> tuple[dict[int, list[Path]], dict[str, int]]:
    """Group files into ingest shards without moving any file already assigned (the append-only manifest).

    A file in `manifest` (display path → shard) stays in its shard; new files fill new shards after the
    highest one, `per_shard` at a time, in path order. So adding files to a built corpus creates new shards
    only, and every existing shard (and everything downstream of it) keeps its key. A removed file only
    shrinks its own shard. Returns (shard → files, the new assignments to append to the manifest).
    """
    groups: dict[int, list[Path]] = {}
    new: list[Path] = []
    for f in files:
        shard = manifest.get(display_path(f, root))
        if shard is None:
            new.append(f)
        else:
            groups.setdefault(shard, []).append(f)
    first = max(manifest.values(), default=-1) + 1
    added: dict[str, int] = {}
    for i in range(0, len(new), per_shard):
        shard = first + i // per_shard
        groups[shard] = new[i : i + per_shard]
        added.update({display_path(f, root): shard for f in groups[shard]})
    return dict(sorted(groups.items())), added


def input_root(paths: Sequence[Path]) -> Path | None:
    """The directory that displayed source paths are relative to: the inputs' common directory."""
    dirs = [p.resolve() if p.is_dir() else p.resolve().parent for p in paths]
    return Path(os.path.commonpath(dirs)) if dirs else None


def run(files: Sequence[Path], root: Path | None, cfg: IngestSection, inputs: object = None) -> dict[str, list]:
    """The stage function: a group of files → {clips, quarantine} (it reads no shards)."""
    clips, quarantine = ingest_files(files, cfg, root)
    return {"clips": clips, "quarantine": quarantine}


class UnusableInput(Exception):
    def __init__(self, reason: str, fix: str):
        super().__init__(reason)
        self.reason = reason
        self.fix = fix


def discover(inputs: Iterable[Path]) -> list[Path]:
    """Audio files under the given files/directories, sorted; hidden files and non-audio suffixes skipped."""
    found: set[Path] = set()
    for p in inputs:
        p = Path(p)
        if p.is_dir():
            for f in p.rglob("*"):
                if f.suffix.lower() in AUDIO_SUFFIXES and not f.name.startswith(".") and not f.is_dir():
                    found.add(f.resolve())
        elif p.exists() or p.is_symlink():
            found.add(p.resolve() if p.exists() else p)
        else:
            raise FileNotFoundError(f"input {p} does not exist: pass audio files or directories that contain them")
    return sorted(found)


def file_sha256(path: Path) -> str | None:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


def _decode_ffmpeg(path: Path, sample_rate: int) -> np.ndarray:
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise UnusableInput(
            "soundfile cannot decode this format and ffmpeg is not installed",
            "install ffmpeg (apt-get install ffmpeg) or convert the file to WAV/FLAC",
        )
    proc = subprocess.run(
        [ffmpeg, "-nostdin", "-v", "error", "-i", str(path), "-f", "f32le", "-ac", "1", "-ar", str(sample_rate), "-"],
        capture_output=True,
        timeout=600,
    )
    if proc.returncode != 0 or not proc.stdout:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()
        raise UnusableInput(
            f"not decodable audio ({msg[-1] if msg else 'no audio stream'})",
            "check that the file is a complete audio file; re-export it as WAV or FLAC",
        )
    return np.frombuffer(proc.stdout, dtype=np.float32).copy()


def load_audio(path: Path, cfg: IngestSection = IngestSection()) -> np.ndarray:
    """Decode to float32 mono at 16 kHz, or raise UnusableInput with reason and fix."""
    if not path.exists():
        raise UnusableInput("file does not exist (broken link?)", "fix or remove the link")
    if path.stat().st_size == 0:
        raise UnusableInput(
            "file is empty (0 bytes)", "re-copy or re-export the file; remove it if it is a placeholder"
        )
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, OSError):
        info = None
    if info is not None:
        if info.frames <= 0 or info.samplerate <= 0:
            raise UnusableInput("file has no audio frames", "re-export the file; it holds a header but no samples")
        if info.frames / info.samplerate > cfg.max_file_s:
            raise UnusableInput(
                f"file is {info.frames / info.samplerate:.0f} s long, over max_file_s={cfg.max_file_s:.0f}",
                "split it into shorter files or raise ingest.max_file_s",
            )
        try:
            data, sr = sf.read(str(path), dtype="float32", always_2d=True)
        except (sf.LibsndfileError, RuntimeError, OSError) as exc:
            raise UnusableInput(f"decoding failed: {exc}", "the file is truncated or corrupt; re-export it") from exc
        audio = data.mean(axis=1)
        if sr != SAMPLE_RATE:
            audio = soxr.resample(audio, sr, SAMPLE_RATE, quality="HQ").astype(np.float32)
    else:
        audio = _decode_ffmpeg(path, SAMPLE_RATE)
    if audio.size == 0:
        raise UnusableInput("file decodes to zero samples", "re-export the file; it holds no audio")
    if not np.all(np.isfinite(audio)):
        raise UnusableInput(
            "audio contains NaN or infinite sample values",
            "the file was written from a broken float buffer; re-render or re-export it",
        )
    peak = float(np.max(np.abs(audio)))
    if peak > 1.0:  # float files may exceed full scale; keep the shape, note nothing is lost but level
        audio = audio / peak
    return audio.astype(np.float32, copy=False)


def encode_flac(pcm16: np.ndarray, sample_rate: int) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, pcm16, sample_rate, format="FLAC", subtype="PCM_16")
    return buf.getvalue()


def decode_clip(clip: Clip) -> ClipAudio:
    data, sr = sf.read(io.BytesIO(clip.audio_flac), dtype="float32")
    return ClipAudio(clip_id=clip.clip_id, samples=data, sample_rate=sr)


def split_clips(audio: np.ndarray, cfg: IngestSection) -> tuple[list[tuple[float, np.ndarray]], float]:
    """(offset_s, samples) pieces of at most max_clip_s; returns also the seconds of a dropped short tail."""
    step = int(cfg.max_clip_s * SAMPLE_RATE)
    min_len = int(cfg.min_clip_s * SAMPLE_RATE)
    pieces, dropped = [], 0.0
    for start in range(0, len(audio), step):
        piece = audio[start : start + step]
        if len(piece) < min_len:
            dropped = len(piece) / SAMPLE_RATE
            continue
        pieces.append((start / SAMPLE_RATE, piece))
    return pieces, dropped


def ingest_file(
    path: Path, cfg: IngestSection, display_path: str | None = None
) -> tuple[list[Clip], list[QuarantineRow]]:
    """One source file → its clips, or quarantine rows explaining why (part of) it is unusable."""
    shown = display_path or str(path)
    sha = file_sha256(path) if path.exists() else None
    try:
        audio = load_audio(path, cfg)
    except UnusableInput as bad:
        return [], [QuarantineRow(source_path=shown, source_sha256=sha, stage="ingest", reason=bad.reason, fix=bad.fix)]
    except Exception as exc:  # a decoder bug on hostile input must not end the run
        return [], [
            QuarantineRow(
                source_path=shown,
                source_sha256=sha,
                stage="ingest",
                reason=f"unexpected decoder error {type(exc).__name__}: {exc}",
                fix="convert the file to WAV/FLAC and retry",
            )
        ]
    pieces, dropped = split_clips(audio, cfg)
    quarantine = []
    if not pieces:
        quarantine.append(
            QuarantineRow(
                source_path=shown,
                source_sha256=sha,
                stage="ingest",
                reason=f"audio is {len(audio) / SAMPLE_RATE:.2f} s long, shorter than min_clip_s={cfg.min_clip_s}",
                fix="use a longer recording or lower ingest.min_clip_s",
            )
        )
    elif dropped:
        quarantine.append(
            QuarantineRow(
                source_path=f"{shown}@tail",
                source_sha256=sha,
                stage="ingest",
                reason=f"final {dropped:.2f} s after the last full clip is shorter than min_clip_s={cfg.min_clip_s}; dropped",
                fix="nothing to do unless that tail matters; then lower ingest.min_clip_s",
            )
        )
    fmt = path.suffix.lower().lstrip(".")
    clips = []
    for index, (offset, piece) in enumerate(pieces):
        pcm16 = np.clip(np.round(piece * 32767.0), -32768, 32767).astype(np.int16)
        clip_id = hashlib.sha256(pcm16.tobytes()).hexdigest()[:20]
        clips.append(
            Clip(
                clip_id=clip_id,
                source_path=shown,
                source_sha256=sha or "",
                source_format=fmt,
                clip_index=index,
                offset_s=round(offset, 3),
                duration_s=round(len(pcm16) / SAMPLE_RATE, 3),
                sample_rate=SAMPLE_RATE,
                audio_flac=encode_flac(pcm16, SAMPLE_RATE),
            )
        )
    return clips, quarantine


def ingest_files(
    paths: Sequence[Path], cfg: IngestSection, root: Path | None = None
) -> tuple[list[Clip], list[QuarantineRow]]:
    """Ingest a shard's files; a clip whose audio already appeared earlier in the shard is kept once."""
    clips: list[Clip] = []
    quarantine: list[QuarantineRow] = []
    seen: dict[str, str] = {}
    for path in paths:
        shown = display_path(path, root)
        got, bad = ingest_file(path, cfg, shown)
        quarantine += bad
        for clip in got:
            if clip.clip_id in seen:
                quarantine.append(
                    QuarantineRow(
                        source_path=f"{shown}#{clip.clip_index}",
                        source_sha256=clip.source_sha256,
                        stage="ingest",
                        reason=f"duplicate audio: identical to clip {clip.clip_id} from {seen[clip.clip_id]}",
                        fix="nothing to do; the clip is kept once",
                    )
                )
                continue
            seen[clip.clip_id] = shown
            clips.append(clip)
    return clips, quarantine
