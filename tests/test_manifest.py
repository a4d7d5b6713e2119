"""Stable ingest shards: files already built keep their shard, new files form new shards (append-only manifest)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from earmark.stages.ingest import assign_shards


def _files(root: Path, names: list[str]) -> list[Path]:
    return [root / n for n in names]


def test_new_files_form_new_shards_and_old_ones_stay_put(tmp_path):
    first, added = assign_shards(_files(tmp_path, ["b.wav", "d.wav", "f.wav"]), tmp_path, {}, 2)
    assert {k: [p.name for p in v] for k, v in first.items()} == {0: ["b.wav", "d.wav"], 1: ["f.wav"]}
    assert added == {"b.wav": 0, "d.wav": 0, "f.wav": 1}

    # "a.wav" sorts first and "e.wav" in the middle: with slicing they would shift every later shard
    files = _files(tmp_path, ["a.wav", "b.wav", "d.wav", "e.wav", "f.wav"])
    second, added2 = assign_shards(files, tmp_path, added, 2)
    assert {k: [p.name for p in v] for k, v in second.items()} == {
        0: ["b.wav", "d.wav"],
        1: ["f.wav"],
        2: ["a.wav", "e.wav"],
    }
    assert added2 == {"a.wav": 2, "e.wav": 2}

    # a removed file shrinks only its own shard; an emptied shard is simply absent
    third, added3 = assign_shards(_files(tmp_path, ["a.wav", "b.wav", "e.wav"]), tmp_path, {**added, **added2}, 2)
    assert {k: [p.name for p in v] for k, v in third.items()} == {0: ["b.wav"], 2: ["a.wav", "e.wav"]}
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
    assert manifest[f"0-{items[-1].path.name}"] == len(items) - 1 and len(manifest) == len(items)
