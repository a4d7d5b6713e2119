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

from earmark.core.config import IngestSection
from earmark.experts.base import SAMPLE_RATE, ClipAudio
from earmark.schemas.records import Clip, QuarantineRow
from earmark.stages.base import StageSpec
from earmark.stages.ingest.checks import (
    UnusableInput,
    check_source,
    clean_raw,
    explain_failure,
    truncated_wav,
    wav_sample_rate,
)
from earmark.stages.ingest.sources import drop_reasons, plan_source
from earmark.storage.paths import within_any

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
STAGE_VERSION = "2"  # 2: silent, repeating and surplus clips of one source file dropped (stages/ingest/sources.py)
REEXPORT_HEADER = "re-export the file from its source; its header is damaged"


def spec(cfg: IngestSection) -> StageSpec:
    """Every ingest setting changes what is cut (files_per_shard only groups files, so it is left out)."""
    config = {
        "sr": SAMPLE_RATE,
        "max": cfg.max_clip_s,
        "min": cfg.min_clip_s,
        "maxfile": cfg.max_file_s,
        "per_source": [cfg.max_clips_per_source, cfg.near_duplicate_similarity, cfg.silence_dbfs],
    }
    if cfg.allowed_roots:  # only when set, so datasets built without roots keep their shard keys
        config["roots"] = sorted(map(str, cfg.allowed_roots))
    return StageSpec("ingest", STAGE_VERSION, writes=("clips", "quarantine"), config=config)


def display_path(path: Path, root: Path | None) -> str:
    return str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)


def source_identity(path: Path, root: Path | None, allowed_roots: Sequence[Path] = ()) -> str:
    """What an ingest shard's key depends on per file: its displayed path and content (None: not readable)."""
    return f"{display_path(path, root)}:{safe_sha256(path, allowed_roots)}"


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


def _real(path: Path) -> Path | None:
    """`path` with every symlink followed, or None for a loop or a missing target."""
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError):  # Python 3.11 raises RuntimeError for a symlink loop
        return None


def input_root(paths: Sequence[Path]) -> Path | None:
    """The directory that displayed source paths are relative to: the inputs' common directory."""
    dirs = [p.resolve() if p.is_dir() else (_real(p.parent) or p.parent.absolute()) for p in map(Path, paths)]
    return Path(os.path.commonpath(dirs)) if dirs else None


def run(files: Sequence[Path], root: Path | None, cfg: IngestSection, inputs: object = None) -> dict[str, list]:
    """The stage function: a group of files → {clips, quarantine} (it reads no shards)."""
    clips, quarantine = ingest_files(files, cfg, root)
    return {"clips": clips, "quarantine": quarantine}


def discover(inputs: Iterable[Path], allowed_roots: Sequence[Path] = ()) -> list[Path]:
    """Audio files under the given files/directories, sorted; hidden files and non-audio suffixes skipped.

    A file is listed by its real path (symlinks followed), except a link that leads nowhere (a loop, a missing
    target) or outside `allowed_roots`: that one keeps the link's own name, so its quarantine row names it.
    """
    found: set[Path] = set()
    for p in inputs:
        p = Path(p)
        if p.is_dir():
            candidates = [
                f
                for f in p.rglob("*")
                if f.suffix.lower() in AUDIO_SUFFIXES and not f.name.startswith(".") and not f.is_dir()
            ]
        elif p.exists() or p.is_symlink():
            candidates = [p]
        else:
            raise FileNotFoundError(f"input {p} does not exist: pass audio files or directories that contain them")
        for f in candidates:
            real = _real(f)
            if real is None or (allowed_roots and not within_any(real, allowed_roots)):
                found.add((_real(f.parent) or f.parent.absolute()) / f.name)
            else:
                found.add(real)
    return sorted(found)


def safe_sha256(path: Path, allowed_roots: Sequence[Path] = ()) -> str | None:
    """The file's sha256 when it is a regular file earmark may read (never a FIFO, which would block)."""
    try:
        check_source(path, allowed_roots)
    except UnusableInput:
        return None
    return file_sha256(path)


def file_sha256(path: Path) -> str | None:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


def _decode_ffmpeg(path: Path, sample_rate: int, max_s: float) -> tuple[np.ndarray | None, str]:
    """(samples, "") or (None, ffmpeg's last error line); decodes at most a second past `max_s`."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise UnusableInput(
            "libsndfile cannot decode this format and ffmpeg is not installed",
            "install ffmpeg (apt-get install ffmpeg) or convert the file to WAV/FLAC",
        )
    cmd = [ffmpeg, "-nostdin", "-v", "error", "-i", str(path), "-t", f"{max_s + 1:.3f}"]
    proc = subprocess.run(
        [*cmd, "-f", "f32le", "-ac", "1", "-ar", str(sample_rate), "-"], capture_output=True, timeout=600
    )
    if proc.returncode != 0 or not proc.stdout:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()
        return None, msg[-1] if msg else "no audio stream"
    return np.frombuffer(proc.stdout, dtype=np.float32).copy(), ""


def _too_long(seconds: float, cfg: IngestSection, at_least: bool = False) -> UnusableInput:
    return UnusableInput(
        f"file is {'over ' if at_least else ''}{seconds:.0f} s long, more than the maximum duration "
        f"ingest.max_file_s = {cfg.max_file_s:g} s",
        "split it into shorter files (e.g. `ffmpeg -i IN -f segment -segment_time 600 OUT%03d.flac`) "
        "or raise ingest.max_file_s",
    )


def load_audio(path: Path, cfg: IngestSection = IngestSection()) -> np.ndarray:
    """Decode to float32 mono at 16 kHz, or raise UnusableInput with reason and fix."""
    head = check_source(path, cfg.allowed_roots)
    try:
        info = sf.info(str(path))
        sf_error = None
    except (sf.LibsndfileError, RuntimeError, OSError) as exc:
        info, sf_error = None, str(exc)
    if info is not None:
        if info.samplerate <= 0:
            raise UnusableInput(f"invalid header: it declares a sample rate of {info.samplerate} Hz", REEXPORT_HEADER)
        if info.frames <= 0:
            raise UnusableInput("file has a header but no audio frames", "re-export the file; it holds no samples")
        if info.frames / info.samplerate > cfg.max_file_s:
            raise _too_long(info.frames / info.samplerate, cfg)
        if info.format == "WAV" and (cut := truncated_wav(info.extra_info)):
            raise UnusableInput(cut, "copy the file again or re-export it; the end of its audio is missing")
        try:
            data, sr = sf.read(str(path), dtype="float32", always_2d=True)
        except (sf.LibsndfileError, RuntimeError, OSError) as exc:
            raise explain_failure(path, head, str(exc), None, header_ok=True) from exc
        audio = data.mean(axis=1)
        if sr != SAMPLE_RATE:
            audio = soxr.resample(audio, sr, SAMPLE_RATE, quality="HQ").astype(np.float32)
    else:
        if wav_sample_rate(head) == 0:
            raise UnusableInput(
                f"invalid WAV header: it declares a sample rate of 0 Hz (libsndfile: {clean_raw(sf_error or '', path)})",
                REEXPORT_HEADER,
            )
        decoded, ff_error = _decode_ffmpeg(path, SAMPLE_RATE, cfg.max_file_s)
        if decoded is None:
            raise explain_failure(path, head, sf_error, ff_error, header_ok=False)
        if decoded.size > cfg.max_file_s * SAMPLE_RATE:
            raise _too_long(cfg.max_file_s, cfg, at_least=True)
        audio = decoded
    if audio.size == 0:
        raise UnusableInput("file decodes to zero samples", "re-export the file; it holds no audio")
    if not np.all(np.isfinite(audio)):
        nan, inf = int(np.isnan(audio).sum()), int(np.isinf(audio).sum())
        counts = " and ".join([f"{nan} NaN (not a number)"] * bool(nan) + [f"{inf} infinite"] * bool(inf))
        raise UnusableInput(
            f"audio contains invalid sample values: {counts} of {audio.size} samples (at 16 kHz mono)",
            "the file was written from a broken float buffer; re-render or re-export it (e.g. as 16-bit PCM)",
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
    sha = safe_sha256(path, cfg.allowed_roots)
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
                reason=f"the decoder failed on this file in an unexpected way ({type(exc).__name__}: {exc})",
                fix="convert the file to WAV/FLAC and retry; if that file fails too, report it as an earmark bug",
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
    kept, drops = plan_source(
        [piece for _, piece in pieces], cfg.max_clips_per_source, cfg.near_duplicate_similarity, cfg.silence_dbfs
    )
    for clips_dropped, reason, fix in drop_reasons(drops, kept, len(pieces), cfg):
        quarantine.append(
            QuarantineRow(
                source_path=f"{shown}#{clips_dropped}", source_sha256=sha, stage="ingest", reason=reason, fix=fix
            )
        )
    fmt = path.suffix.lower().lstrip(".")
    clips = []
    for index in kept:
        offset, piece = pieces[index]
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
