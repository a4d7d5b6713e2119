"""ingest: any readable audio file → 16 kHz mono ≤10 s clips with content-hash ids.

A file that cannot be used becomes a `QuarantineRow` saying what was wrong and what to do; it never stops
the run. `clip_id` is the hash of the clip's 16-bit PCM, so the same audio gets the same id wherever it
came from, and re-encoding a source file that decodes to the same samples changes nothing downstream.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import replace
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
from earmark.stages.ingest.inputs import AUDIO_SUFFIXES, Discovery, Source, discover, nothing_to_read  # noqa: F401
from earmark.stages.ingest.sources import drop_reasons, plan_source
from earmark.storage.shards import file_sha256

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


def source_identity(source: Source, allowed_roots: Sequence[Path] = ()) -> str:
    """What an ingest shard's key depends on per source: its shown name and content (None: not readable), the
    problem found while listing it, or the earlier source whose bytes it repeats."""
    return _identity(source, None if source.problem else safe_sha256(source.path, allowed_roots))


def _identity(source: Source, sha: str | None) -> str:
    if source.problem:
        return f"{source.shown}:!{source.problem[0]}"
    return f"{source.shown}:{sha}={source.same_as}" if source.same_as else f"{source.shown}:{sha}"


def identify(
    sources: Sequence[Source], allowed_roots: Sequence[Path], first: dict[str, str]
) -> list[tuple[Source, str]]:
    """Each source with its identity (`source_identity`); a file whose bytes an earlier one has is marked as
    that one's duplicate (`same_as`): it is recorded, not ingested, and the earlier file keeps its clips.

    `first` (sha256 → shown name) is filled as sources are hashed; a build passes one dict to the calls for
    all its shards, in shard order, so files already in the manifest (the lower shards) come first and a copy
    added later never takes their place.
    """
    out = []
    for source in sources:
        sha = None if source.problem else safe_sha256(source.path, allowed_roots)
        if sha is not None and first.setdefault(sha, source.shown) != source.shown:
            source = replace(source, same_as=first[sha])
        out.append((source, _identity(source, sha)))
    return out


def assign_shards(
    sources: Sequence[Source], manifest: Mapping[str, int], per_shard: int
) -> tuple[dict[int, list[Source]], dict[str, int]]:
    """Group sources into ingest shards without moving any source already assigned (the append-only manifest).

    A source in `manifest` (shown name → shard) stays in its shard; new ones fill new shards after the
    highest one, `per_shard` at a time, in the given (name) order. So adding files to a built corpus creates
    new shards only, and every existing shard (and everything downstream of it) keeps its key. A removed file
    only shrinks its own shard. Returns (shard → sources, the new assignments to append to the manifest).
    """
    groups: dict[int, list[Source]] = {}
    new: list[Source] = []
    for s in sources:
        shard = manifest.get(s.shown)
        if shard is None:
            new.append(s)
        else:
            groups.setdefault(shard, []).append(s)
    first = max(manifest.values(), default=-1) + 1
    added: dict[str, int] = {}
    for i in range(0, len(new), per_shard):
        shard = first + i // per_shard
        groups[shard] = new[i : i + per_shard]
        added.update({s.shown: shard for s in groups[shard]})
    return dict(sorted(groups.items())), added


def run(sources: Sequence[Source], cfg: IngestSection, inputs: object = None) -> dict[str, list]:
    """The stage function: a group of sources → {clips, quarantine} (it reads no shards)."""
    clips, quarantine = ingest_files(sources, cfg)
    return {"clips": clips, "quarantine": quarantine}


def safe_sha256(path: Path, allowed_roots: Sequence[Path] = ()) -> str | None:
    """The file's sha256 when it is a regular file earmark may read (never a FIFO, which would block)."""
    try:
        check_source(path, allowed_roots)
    except UnusableInput:
        return None
    try:
        return file_sha256(path)
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


def ingest_files(sources: Sequence[Source], cfg: IngestSection) -> tuple[list[Clip], list[QuarantineRow]]:
    """Ingest a shard's sources; a clip whose audio already appeared earlier in the shard is kept once."""
    clips: list[Clip] = []
    quarantine: list[QuarantineRow] = []
    seen: dict[str, str] = {}
    for source in sources:
        if row := not_read(source, cfg.allowed_roots):
            quarantine.append(row)
            continue
        got, bad = ingest_file(source.path, cfg, source.shown)
        quarantine += bad
        for clip in got:
            if clip.clip_id in seen:
                quarantine.append(
                    QuarantineRow(
                        source_path=f"{source.shown}#{clip.clip_index}",
                        source_sha256=clip.source_sha256,
                        stage="ingest",
                        reason=f"duplicate audio: identical to clip {clip.clip_id} from {seen[clip.clip_id]}",
                        fix="nothing to do; the clip is kept once",
                    )
                )
                continue
            seen[clip.clip_id] = source.shown
            clips.append(clip)
    return clips, quarantine


def not_read(source: Source, allowed_roots: Sequence[Path] = ()) -> QuarantineRow | None:
    """The row for a source ingest does not read: a problem found while listing it, or a copy of an earlier
    file (`same_as`, see `identify`)."""
    if source.problem:
        reason, fix = source.problem
        return QuarantineRow(source_path=source.shown, source_sha256=None, stage="ingest", reason=reason, fix=fix)
    if source.same_as:
        return QuarantineRow(
            source_path=source.shown,
            source_sha256=safe_sha256(source.path, allowed_roots),
            stage="ingest",
            reason=f"duplicate file: the same bytes as {source.same_as}, whose clips the dataset holds; not read again",
            fix="nothing to do; the clips are kept once, under the first path (remove the copy if it is not needed)",
        )
    return None
