"""Stable ingest shards: files already built keep their shard, new files form new shards (append-only manifest),
and a file's name (what the manifest and the shard keys hold) does not depend on the other inputs."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from earmark.stages.ingest import Source, assign_shards


def _sources(root: Path, names: list[str]) -> list[Source]:
    return [Source(root / n, n) for n in names]


def _names(groups: dict[int, list[Source]]) -> dict[int, list[str]]:
    return {k: [s.shown for s in v] for k, v in groups.items()}


def test_new_files_form_new_shards_and_old_ones_stay_put(tmp_path):
    first, added = assign_shards(_sources(tmp_path, ["b.wav", "d.wav", "f.wav"]), {}, 2)
    assert _names(first) == {0: ["b.wav", "d.wav"], 1: ["f.wav"]}
    assert added == {"b.wav": 0, "d.wav": 0, "f.wav": 1}

    # "a.wav" sorts first and "e.wav" in the middle: with slicing they would shift every later shard
    second, added2 = assign_shards(_sources(tmp_path, ["a.wav", "b.wav", "d.wav", "e.wav", "f.wav"]), added, 2)
    assert _names(second) == {0: ["b.wav", "d.wav"], 1: ["f.wav"], 2: ["a.wav", "e.wav"]}
    assert added2 == {"a.wav": 2, "e.wav": 2}

    # a removed file shrinks only its own shard; an emptied shard is simply absent
    third, added3 = assign_shards(_sources(tmp_path, ["a.wav", "b.wav", "e.wav"]), {**added, **added2}, 2)
    assert _names(third) == {0: ["b.wav"], 2: ["a.wav", "e.wav"]}
    assert added3 == {}


@pytest.mark.slow
def test_adding_one_file_to_a_built_corpus_computes_only_its_shards(tmp_path, prefect_harness):
    from earmark.core.config import load_config
    from earmark.corpus import generate_corpus
    from earmark.flows.build import run_build
    from earmark.storage import Catalog

    items = [i for i in generate_corpus(tmp_path / "corpus", per_domain=1, seed=5) if i.domain in {"S00", "0M0"}]
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for item in items[:-1]:
        shutil.copy(item.path, inputs / item.path.name)
    overrides = {"data_root": str(tmp_path / "data"), "dataset": "grow", "inputs": [str(inputs)]}
    cfg = load_config(None, {**overrides, "ingest.files_per_shard": 1})
    first = run_build(cfg, until="analyze")
    n_experts = sum(1 for stage in first["shards"] if stage.startswith("analyze"))
    assert first["shards"]["ingest"]["computed"] == len(items) - 1

    # the new file's name sorts before every other one: slicing the sorted list would move them all
    shutil.copy(items[-1].path, inputs / f"0-{items[-1].path.name}")
    second = run_build(cfg, until="analyze")
    assert second["created"]
    assert second["shards"]["ingest"]["computed"] == 1
    analyzed = {stage: n["computed"] for stage, n in second["shards"].items() if stage.startswith("analyze")}
    assert len(analyzed) == n_experts and set(analyzed.values()) == {1}, analyzed
    manifest = Catalog(Path(cfg.data_root), cfg.dataset).manifest()
    assert manifest[f"inputs/0-{items[-1].path.name}"] == len(items) - 1 and len(manifest) == len(items)


def _tone(path: Path, freq: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(2 * 16_000) / 16_000
    sf.write(path, (0.2 * np.sin(2 * np.pi * freq * t)).astype(np.float32), 16_000)


@pytest.mark.slow
def test_adding_a_folder_computes_only_what_it_adds(tmp_path, prefect_harness):
    """Issue 45: `build A` then `build A B` (`--until analyze`, the `levels` expert): every shard of A's clips
    is skipped and their rows are unchanged; a copy in B of a file of A is recorded as its duplicate, and A's
    file keeps its clip."""
    from conftest import CatalogConnection
    from earmark.core.config import load_config
    from earmark.flows.build import run_build

    a, b = tmp_path / "A", tmp_path / "B"
    for i, freq in enumerate((220, 330, 440)):
        _tone(a / f"speech{i}.wav", freq)
    _tone(b / "speech1.wav", 550)  # the name of a file of A, other audio
    shutil.copy(a / "speech2.wav", b / "0-copy.wav")  # a copy of a file of A, its name sorting before all
    overrides = {
        "data_root": str(tmp_path / "data"),
        "dataset": "grow",
        "inputs": [str(a)],
        "ingest.files_per_shard": 1,
        "analyze.only": ["levels"],
    }
    first = run_build(load_config(None, overrides), until="analyze")
    second = run_build(load_config(None, {**overrides, "inputs": [str(a), str(b)]}), until="analyze")
    assert first["shards"]["ingest"] == first["shards"]["analyze:levels"] == {"computed": 3, "skipped": 0}
    assert second["shards"]["ingest"] == second["shards"]["analyze:levels"] == {"computed": 2, "skipped": 3}

    con = CatalogConnection(tmp_path / "data", "grow")
    v1, v2 = first["version"], second["version"]
    for table in ("clips", "levels"):
        before = {repr(row) for row in con.execute(f"SELECT * FROM {v1}.{table}").fetchall()}
        after = {repr(row) for row in con.execute(f"SELECT * FROM {v2}.{table}").fetchall()}
        assert len(before) == 3 and before <= after and len(after) == 4, table  # B adds one clip: speech1's
    clips = dict(con.execute(f"SELECT source_path, clip_id FROM {v2}.clips").fetchall())
    assert sorted(clips) == ["A/speech0.wav", "A/speech1.wav", "A/speech2.wav", "B/speech1.wav"]
    [(reason,)] = con.execute(f"SELECT reason FROM {v2}.quarantine WHERE source_path = 'B/0-copy.wav'").fetchall()
    assert reason.startswith("duplicate file: the same bytes as A/speech2.wav")
