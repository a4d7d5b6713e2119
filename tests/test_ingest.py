"""ingest on real files: formats, resampling, splitting, content ids, and hostile input."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from earmark.core.config import IngestSection
from earmark.schemas.records import Clip, QuarantineRow
from earmark.stages.ingest import assign_shards, decode_clip, discover, identify, ingest_files, source_identity

CFG = IngestSection()


def _tone(seconds: float, sr: int, freq: float = 440.0, channels: int = 1) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    x = 0.3 * np.sin(2 * np.pi * freq * t).astype(np.float32)
    return np.stack([x, 0.5 * x], axis=1) if channels == 2 else x


def _ingest(folder: Path, cfg: IngestSection = CFG) -> tuple[list[Clip], list[QuarantineRow]]:
    """The folder through ingest, rows named by their path in it (ingest shows them under the folder's name)."""
    clips, rows = ingest_files(discover([folder], cfg.allowed_roots).sources, cfg)
    prefix = f"{folder.name}/"
    assert all(r.source_path.startswith(prefix) for r in clips + rows), [r.source_path for r in clips + rows]
    local = [r.model_copy(update={"source_path": r.source_path.removeprefix(prefix)}) for r in clips + rows]
    return local[: len(clips)], local[len(clips) :]


def test_formats_are_standardised_to_16k_mono(tmp_path: Path):
    sf.write(tmp_path / "a.wav", _tone(3, 44100, channels=2), 44100)
    sf.write(tmp_path / "b.flac", _tone(2, 22050, 330), 22050)
    sf.write(tmp_path / "c.ogg", _tone(2, 48000, 550), 48000)
    sf.write(tmp_path / "d.mp3", _tone(2, 16000, 660), 16000)
    clips, quarantine = _ingest(tmp_path)
    assert quarantine == []
    assert sorted(c.source_format for c in clips) == ["flac", "mp3", "ogg", "wav"]
    for clip in clips:
        audio = decode_clip(clip)
        assert audio.sample_rate == 16000 and audio.samples.ndim == 1
        assert abs(audio.duration_s - clip.duration_s) < 1e-3
    wav = next(c for c in clips if c.source_format == "wav")
    assert abs(wav.duration_s - 3.0) < 0.01


def test_long_file_is_split_and_ids_are_content_hashes(tmp_path: Path):
    # int16 samples, so both containers hold bit-identical audio
    x = (3000 * np.random.default_rng(0).standard_normal(int(23.5 * 16000))).astype(np.int16)
    sf.write(tmp_path / "long.wav", x, 16000)
    sf.write(tmp_path / "copy.flac", x, 16000)  # same audio, other container
    clips, quarantine = _ingest(tmp_path)
    long = sorted((c for c in clips if c.source_path == "copy.flac"), key=lambda c: c.clip_index)
    assert [c.duration_s for c in long] == [10.0, 10.0, 3.5]
    assert [c.offset_s for c in long] == [0.0, 10.0, 20.0]
    # identical audio in the second file is recognised as a duplicate, not ingested twice
    assert len(clips) == 3 and sum("duplicate audio" in q.reason for q in quarantine) == 3


def test_hostile_inputs_are_quarantined_with_reason_and_fix(tmp_path: Path):
    sf.write(tmp_path / "good.wav", _tone(2, 16000), 16000)
    (tmp_path / "empty.wav").write_bytes(b"")
    (tmp_path / "notes.mp3").write_text("this is not audio at all " * 50)
    good = (tmp_path / "good.wav").read_bytes()
    (tmp_path / "truncated.wav").write_bytes(good[:30])
    nan = _tone(2, 16000)
    nan[100:200] = np.nan
    sf.write(tmp_path / "nan.wav", nan, 16000, subtype="FLOAT")
    sf.write(tmp_path / "tiny.wav", _tone(0.05, 16000), 16000)
    clips, quarantine = _ingest(tmp_path)
    assert [c.source_path for c in clips] == ["good.wav"]
    reasons = {q.source_path: q.reason for q in quarantine}
    assert set(reasons) == {"empty.wav", "notes.mp3", "truncated.wav", "nan.wav", "tiny.wav"}
    assert "empty" in reasons["empty.wav"]
    assert "NaN" in reasons["nan.wav"]
    assert "shorter than min_clip_s" in reasons["tiny.wav"]
    assert all(q.fix for q in quarantine)


# ---------------------------------------------------------------- issue 45: every input path accounted for
def _wav(path: Path, freq: float = 440.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, _tone(2, 16000, freq), 16000)
    return path


def test_every_path_under_an_input_is_accounted_for(tmp_path: Path):
    """Folder links are followed; a link back into the tree, a link that leads nowhere and a file gone before it
    is read are rows with a reason and a fix; only hidden and non-audio files are skipped, and counted."""
    inputs, other = tmp_path / "inputs", tmp_path / "other"
    _wav(inputs / "a.wav")
    _wav(inputs / "sub" / "b.flac", 550)
    _wav(other / "c.wav", 660)
    (inputs / "linked").symlink_to(other)  # a folder link out of the input folder: followed
    (inputs / "sub" / "back").symlink_to("..")  # back to the input folder: a loop
    (inputs / "sub" / "up").symlink_to("/")  # to a folder above the input folder: a loop too
    (inputs / "gone").symlink_to(tmp_path / "nowhere")  # leads nowhere (a folder, or a file?)
    (inputs / "notes.txt").write_text("not audio")
    _wav(inputs / ".hidden.wav")
    vanishing = _wav(inputs / "vanishing.wav", 770)
    found = discover([inputs])
    vanishing.unlink()  # listed, then gone before ingest reads it
    clips, rows = ingest_files(found.sources, CFG)
    assert sorted(c.source_path for c in clips) == ["inputs/a.wav", "inputs/linked/c.wav", "inputs/sub/b.flac"]
    reasons = {r.source_path: r.reason for r in rows}
    assert set(reasons) == {"inputs/sub/back/", "inputs/sub/up/", "inputs/gone", "inputs/vanishing.wav"}
    assert reasons["inputs/sub/back/"].startswith("symbolic link loop: this folder link leads back to inputs,")
    assert reasons["inputs/sub/up/"].startswith("symbolic link loop: this folder link leads back to /,")
    assert "broken symbolic link" in reasons["inputs/gone"]
    assert "does not exist" in reasons["inputs/vanishing.wav"]
    assert all(r.fix for r in rows) and found.skipped == 2
    assert {s.shown for s in found.sources} == {c.source_path for c in clips} | set(reasons)  # a clip or a row each


def test_a_file_is_named_after_its_own_input_whatever_else_is_built(tmp_path: Path):
    a, b = tmp_path / "A", tmp_path / "deeper" / "B"
    _wav(a / "x.wav")
    _wav(a / "s" / "y.wav", 550)
    _wav(b / "x.wav", 660)
    alone = [s.shown for s in discover([a]).sources]
    assert alone == ["A/s/y.wav", "A/x.wav"]
    assert [s.shown for s in discover([a, b]).sources] == [*alone, "B/x.wav"]  # adding B renames nothing of A
    assert [s.shown for s in discover([b / "x.wav", a]).sources] == [*alone, "B/x.wav"]  # a file: under its folder
    assert discover([a, a / "x.wav", a]).sources == discover([a]).sources  # a path named twice counts once
    _wav(tmp_path / "other" / "A" / "x.wav", 770)
    with pytest.raises(ValueError, match=r"'A/x.wav'.*rename one of the folders"):
        discover([a, tmp_path / "other" / "A"])


def test_a_copy_is_recorded_as_a_duplicate_and_the_file_built_first_keeps_its_clip(tmp_path: Path):
    original = _wav(tmp_path / "in" / "b.wav")
    shutil.copy(original, tmp_path / "in" / "a-copy.wav")  # its name sorts first
    sources = discover([tmp_path / "in"]).sources
    # in/b.wav was built before (the manifest holds it); the copy is new, so it comes after it
    groups, added = assign_shards(sources, {"in/b.wav": 0}, 64)
    assert added == {"in/a-copy.wav": 1}
    first: dict[str, str] = {}
    planned = [identify(group, (), first) for group in groups.values()]
    [[(b, b_key)], [(copy, copy_key)]] = planned
    assert b_key == source_identity(b) and copy.same_as == "in/b.wav" and copy_key.endswith("=in/b.wav")
    clips, _ = ingest_files([b], CFG)
    copied, [row] = ingest_files([copy], CFG)
    assert [c.source_path for c in clips] == ["in/b.wav"] and copied == []
    assert row.source_path == "in/a-copy.wav" and row.reason.startswith("duplicate file: the same bytes as in/b.wav")
