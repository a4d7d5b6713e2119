"""The demo corpus: deterministic bytes, readable clips of every domain, hostile inputs that ingest refuses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from earmark.core.config import IngestSection
from earmark.corpus import CorpusItem, generate_corpus, load_manifest
from earmark.schemas.records import DOMAIN_CODES
from earmark.stages.ingest import ingest_file

HOSTILE = {"empty.wav", "notes.mp3", "truncated.wav", "nan.wav", "tiny.wav"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[CorpusItem]:
    return generate_corpus(tmp_path_factory.mktemp("corpus_a"), per_domain=1, seed=3)


def test_same_seed_same_bytes_other_seed_other_audio(corpus: list[CorpusItem], tmp_path: Path) -> None:
    again = generate_corpus(tmp_path / "b", per_domain=1, seed=3)
    assert [(i.path.name, i.domain, i.description) for i in again] == [
        (i.path.name, i.domain, i.description) for i in corpus
    ]
    for a, b in zip(corpus, again):
        if a.path.suffix == ".ogg":  # libsndfile gives each OGG stream a random serial: compare samples
            np.testing.assert_array_equal(sf.read(a.path)[0], sf.read(b.path)[0])
        else:
            assert a.path.read_bytes() == b.path.read_bytes(), a.path.name
    other = generate_corpus(tmp_path / "c", per_domain=1, seed=4, hostile=False)
    s0a = next(i for i in corpus if i.domain == "S0A").path
    assert (tmp_path / "c" / s0a.name).read_bytes() != s0a.read_bytes()
    assert len(other) == len(DOMAIN_CODES)


def test_every_domain_is_present_and_readable(corpus: list[CorpusItem]) -> None:
    clips = [i for i in corpus if i.domain is not None]
    assert sorted(i.domain for i in clips) == sorted(DOMAIN_CODES)
    suffixes, channels, rates, durations = set(), set(), set(), {}
    for item in clips:
        audio, sr = sf.read(item.path, always_2d=True)
        assert np.isfinite(audio).all() and np.abs(audio).max() <= 1.0, item.path.name
        suffixes.add(item.path.suffix)
        channels.add(audio.shape[1])
        rates.add(sr)
        durations[item.path.name] = len(audio) / sr
        if item.path.suffix == ".wav":
            assert sf.info(item.path).subtype == "PCM_16"
    assert {".wav", ".flac", ".ogg"} <= suffixes
    assert channels == {1, 2} and rates == {16_000, 44_100}
    assert durations["0M0_00.wav"] == pytest.approx(14.0) and durations["S00_00.wav"] == pytest.approx(8.0)
    # Content is there: only the silence domain is (near) silent.
    for item in clips:
        rms = float(np.sqrt(np.mean(sf.read(item.path)[0] ** 2)))
        assert (rms < 1e-3) == (item.domain == "000"), (item.path.name, rms)


def test_hostile_inputs_are_written_and_ingest_quarantines_them(corpus: list[CorpusItem]) -> None:
    hostile = {i.path.name: i for i in corpus if i.domain is None}
    assert set(hostile) == HOSTILE
    assert hostile["empty.wav"].path.stat().st_size == 0
    for name in ("notes.mp3", "truncated.wav"):
        with pytest.raises(sf.LibsndfileError):
            sf.read(hostile[name].path)
    assert np.isnan(sf.read(hostile["nan.wav"].path)[0]).any()
    assert sf.info(hostile["tiny.wav"].path).duration < 0.1
    for item in corpus:
        clips, quarantined = ingest_file(item.path, IngestSection())
        if item.domain is None:
            assert not clips and quarantined and quarantined[0].reason, item.path.name
        else:
            assert len(clips) == (2 if item.path.name == "0M0_00.wav" else 1) and not quarantined, item.path.name


def test_manifest_round_trips(corpus: list[CorpusItem]) -> None:
    out_dir = corpus[0].path.parent
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert manifest["seed"] == 3 and all("/" not in it["path"] for it in manifest["items"])
    assert load_manifest(out_dir) == corpus
