"""ingest on real files: formats, resampling, splitting, content ids, and hostile input."""

from pathlib import Path

import numpy as np
import soundfile as sf

from earmark.core.config import IngestSection
from earmark.stages.ingest import decode_clip, discover, ingest_files

CFG = IngestSection()


def _tone(seconds: float, sr: int, freq: float = 440.0, channels: int = 1) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    x = 0.3 * np.sin(2 * np.pi * freq * t).astype(np.float32)
    return np.stack([x, 0.5 * x], axis=1) if channels == 2 else x


def test_formats_are_standardised_to_16k_mono(tmp_path: Path):
    sf.write(tmp_path / "a.wav", _tone(3, 44100, channels=2), 44100)
    sf.write(tmp_path / "b.flac", _tone(2, 22050, 330), 22050)
    sf.write(tmp_path / "c.ogg", _tone(2, 48000, 550), 48000)
    sf.write(tmp_path / "d.mp3", _tone(2, 16000, 660), 16000)
    clips, quarantine = ingest_files(discover([tmp_path]), CFG, tmp_path)
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
    clips, quarantine = ingest_files(discover([tmp_path]), CFG, tmp_path)
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
    clips, quarantine = ingest_files(discover([tmp_path]), CFG, tmp_path)
    assert [c.source_path for c in clips] == ["good.wav"]
    reasons = {q.source_path: q.reason for q in quarantine}
    assert set(reasons) == {"empty.wav", "notes.mp3", "truncated.wav", "nan.wav", "tiny.wav"}
    assert "empty" in reasons["empty.wav"]
    assert "NaN" in reasons["nan.wav"]
    assert "shorter than min_clip_s" in reasons["tiny.wav"]
    assert all(q.fix for q in quarantine)
