"""`earmark export` on a small hand-built version: a real catalog, real FLAC clips, items with QC rows (one
rejected item per table), read back by the tools the formats are for — `datasets.load_dataset`, lhotse's
`CutSet.from_file`, the column sets of the Audio Entailment CSVs and AudioBench's IFEval-Audio dataset — and
the command's errors for what does not exist."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from earmark.cli.main import main
from earmark.schemas import (
    Caption,
    Clip,
    EntailmentHypothesis,
    InstructionTriple,
    QAPair,
    QCResult,
    QuarantineRow,
    arrow_schema,
    to_table,
)
from earmark.stages.ingest import encode_flac
from earmark.stages.publish.formats import AUDIOBENCH_COLUMNS, ENTAILMENT_COLUMNS
from earmark.storage import Catalog, ShardMeta

SR = 16_000
REPO = Path(__file__).resolve().parents[1]
DOMAINS = {"c_speech": "S00", "c_music": "0M0", "c_sound": "00A"}
# the originals' columns (microsoft/AudioEntailment data/CLE/*.csv header; AudioBench's IFEval-Audio card)
AUDIO_ENTAILMENT_CSV = ["Prompt", "Dataset", "Audio file", "Caption", "Entailment", "Neutral", "Contradiction", "Full response"]  # fmt: skip
AUDIOBENCH_FEATURES = {"context": "audio", "instruction": "string", "answer": "string",
                       "instruction_type": "string", "rule": "string", "rule_content": "string"}  # fmt: skip


def _lin(clip: str) -> dict:
    return dict(clip_id=clip, domain=DOMAINS[clip], prompt_name="p", prompt_sha="0" * 16, model="hand", confidence=0.9)


def _items() -> dict[str, list]:
    caps = [
        Caption(**_lin(c), item_id=f"{c}:{kind}:{i}", kind=kind, ref_index=i, text=f"{kind} {i} of {c}.")
        for c in DOMAINS
        for kind in ("short", "long")
        for i in range(2)
    ]
    qa = [
        QAPair(
            **_lin(c),
            item_id=f"{c}:qa:{i}",
            qa_index=i,
            category="direct_perception",
            difficulty="basic",
            question=f"What is heard in {c}?",
            answer=f"Answer {i}.",
        )
        for c in DOMAINS
        for i in range(2)
    ]
    ent = [
        EntailmentHypothesis(
            **_lin(c),
            item_id=f"{c}:entailment:{label}",
            premise_kind="long",
            premise=f"long 0 of {c}.",
            label=label,
            hypothesis=f"{label} about {c}.",
        )
        for c in ("c_speech", "c_music")  # c_music's neutral is rejected below: no complete triple
        for label in ("entailment", "neutral", "contradiction")
    ] + [  # every hypothesis kept, but the premise is a caption QC rejected (PLANTED): the set must not ship
        EntailmentHypothesis(
            **_lin("c_sound"),
            item_id=f"c_sound:entailment:{label}",
            premise_kind="long",
            premise=PLANTED,
            label=label,
            hypothesis=f"{label} about c_sound.",
        )
        for label in ("entailment", "neutral", "contradiction")
    ]
    ins = [
        InstructionTriple(
            **_lin(c),
            item_id=f"{c}:instruction:{i}",
            dimension=dim,
            instruction=f"Describe {c}, {dim}.",
            answer="A SOUND." if rule == 3 else "a sound",
            rule=rule,
            rule_content="",
        )
        for c in ("c_speech", "c_sound")
        for i, (dim, rule) in enumerate((("Capitalization", 3), ("Symbol", 10)))
    ]
    return {"captions": caps, "qa": qa, "entailment": ent, "instructions": ins}


# c_music keeps no long caption: lhotse's supervision text falls back to a short one, and says so
REJECTED = {"c_sound:long:1", "c_speech:qa:1", "c_music:entailment:neutral", "c_sound:instruction:1"}
REJECTED |= {"c_music:long:0", "c_music:long:1"}
PLANTED = "long 1 of c_sound."  # the text of c_sound:long:1, which QC rejected


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    cat = Catalog(root, "ex")
    t = np.arange(SR) / SR
    clips = [
        Clip(
            clip_id=c,
            source_path=f"{c}.wav",
            source_sha256=c,
            source_format="wav",
            clip_index=0,
            offset_s=0,
            duration_s=1.0,
            sample_rate=SR,
            audio_flac=encode_flac((3000 * np.sin(2 * np.pi * (220 + 220 * n) * t)).astype(np.int16), SR),
        )
        for n, c in enumerate(DOMAINS)
    ]
    items = _items()
    qc = [
        QCResult(
            item_table=table,
            item_id=x.item_id,
            clip_id=x.clip_id,
            check=check,
            keep=check == "a" or x.item_id not in REJECTED,
            reason=None,
            score=None,
        )
        for table, rows in items.items()
        for x in rows
        for check in ("a", "b")
    ]
    tables = {
        "clips": to_table(Clip, clips),
        "quarantine": arrow_schema(QuarantineRow).empty_table(),
        **{t: to_table(type(rows[0]), rows) for t, rows in items.items()},
        "qc": to_table(QCResult, qc),
    }
    cat.write_shard("k_all", tables, ShardMeta(stage="hand", stage_version="t", inputs=[]), None)
    version, _ = cat.publish({t: ["k_all"] for t in tables}, None)
    kept = {t: [x for x in rows if x.item_id not in REJECTED] for t, rows in items.items()}
    texts = {(c.clip_id, c.text) for c in kept["captions"]}  # kept text only, premises too
    kept["entailment"] = [x for x in kept["entailment"] if (x.clip_id, x.premise) in texts]
    return root, version, kept, {c.clip_id: c for c in clips}


def _export(root, fmt, out, *extra):
    return main(["export", "--data-root", str(root), "-d", "ex", "--format", fmt, "-o", str(out), *extra])


def _decode(audio: dict) -> tuple[np.ndarray, int]:
    data, sr = sf.read(io.BytesIO(audio["bytes"]), dtype="float32")
    return data, sr


def test_hf_folder_loads_with_datasets(lake, tmp_path):
    import datasets

    root, _, kept, clips = lake
    out = tmp_path / "hf"
    assert _export(root, "hf", out) == 0
    cache = str(tmp_path / "cache")
    default = datasets.load_dataset(str(out), cache_dir=cache)  # no config, no data_files: the card says it all
    assert list(default) == ["test"] and "long" in default["test"].column_names  # captions is the default
    loaded = {name: datasets.load_dataset(str(out), name, split="test", cache_dir=cache) for name in kept}
    caps = loaded["captions"]
    assert len(caps) == len({c.clip_id for c in kept["captions"]})  # one row per clip, its references in lists
    assert sum(len(r["short"]) + len(r["long"]) for r in caps.select_columns(["short", "long"])) == len(
        kept["captions"]
    )
    for name in ("qa", "entailment", "instructions"):
        assert len(loaded[name]) == len(kept[name]), name
        assert set(loaded[name]["item_id"]) == {x.item_id for x in kept[name]}
    assert loaded["entailment"].features["label"].names == ["entailment", "neutral", "contradiction"]
    assert loaded["instructions"].features["rule"].dtype == "int64"
    assert isinstance(caps.features["audio"], datasets.Audio) and caps.features["audio"].sampling_rate == SR
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "default: true" in card and "license: other" in card
    assert "## Rejections by check" in card and "size_categories" in card  # the publish card's statistics


def _readme_recipe() -> str:
    """The README's block for reading an hf export back (section "Exporting"), as it stands there."""
    readme = (REPO / "README.md").read_text()
    start = readme.index("```python\nfrom datasets import load_dataset\n")
    return readme[start + len("```python\n") : readme.index("```\n", start + 10)]


def test_the_readmes_recipe_reads_an_hf_exports_audio_back_in_the_project_venv(lake, tmp_path):
    """datasets 5 decodes Audio with torchcodec: the recipe ran into an ImportError before torchcodec 0.13 (the CPU
    build that loads beside CPU torch) was pinned."""
    root, _, kept, clips = lake
    out = tmp_path / "hf"
    assert _export(root, "hf", out) == 0
    code = _readme_recipe().replace('"DIR"', repr(str(out)))
    code += "\nimport numpy as np; np.save(OUT, audio); print('SR', sr)\n"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home")}  # datasets' cache: not the user's
    npy = tmp_path / "audio.npy"
    run = subprocess.run(
        [sys.executable, "-c", f"OUT = {str(npy)!r}\n{code}"], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    clip_id, sr, shape = run.stdout.splitlines()[0].split()[:3]
    assert clip_id in clips and (sr, shape) == (str(SR), f"({SR},)"), run.stdout
    np.testing.assert_allclose(np.load(npy), sf.read(io.BytesIO(clips[clip_id].audio_flac), dtype="float32")[0])


def test_audiobench_and_entailment_have_the_original_columns(lake, tmp_path):
    import datasets

    root, version, kept, _ = lake
    ab = tmp_path / "ab"
    assert _export(root, "audiobench", ab, "--version", version) == 0
    ds = datasets.load_dataset(str(ab), cache_dir=str(tmp_path / "cache"))
    assert list(ds) == ["train"]  # AudioBench's loader reads raw_data["train"]
    train = ds["train"]
    assert train.column_names == list(AUDIOBENCH_FEATURES) == list(AUDIOBENCH_COLUMNS)
    assert {k: ("audio" if isinstance(f, datasets.Audio) else f.dtype) for k, f in train.features.items()} == (
        AUDIOBENCH_FEATURES
    )
    assert len(train) == len(kept["instructions"])
    assert sorted(train["instruction_type"]) == [
        "Capitalization Requirements",
        "Capitalization Requirements",
        "Symbol Rules",
    ]
    assert sorted(train["rule"]) == ["10", "3", "3"]
    assert _decode(train.cast_column("context", datasets.Audio(decode=False))[0]["context"])[1] == SR

    ent = tmp_path / "ent"
    assert _export(root, "entailment", ent) == 0
    with (ent / "entailment.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == AUDIO_ENTAILMENT_CSV == list(ENTAILMENT_COLUMNS)
    # c_music lacks its kept neutral hypothesis: left out; ESPnet's recipe joins `Audio file` to the audio folder
    assert [r["Audio file"] for r in rows] == ["c_speech.wav"]
    assert (rows[0]["Caption"], rows[0]["Neutral"]) == ("long 0 of c_speech.", "neutral about c_speech.")
    info = sf.info(ent / "audio" / "c_speech.wav")
    assert (info.samplerate, info.frames, info.subtype) == (SR, SR, "PCM_16")
    assert sorted(p.name for p in (ent / "audio").iterdir()) == ["c_speech.wav"]


def test_lhotse_manifest_loads_with_lhotse(lake, tmp_path, capsys):
    from lhotse import CutSet, RecordingSet, SupervisionSet

    root, _, kept, _ = lake
    out = tmp_path / "lh"
    assert _export(root, "lhotse", out) == 0
    cuts = CutSet.from_file(out / "cuts.jsonl").to_eager()  # .jsonl loads lazily
    assert sorted(cuts.ids) == sorted(DOMAINS)
    cut = cuts["c_sound"]
    audio = cut.load_audio()
    assert audio.shape == (1, SR) and cut.sampling_rate == SR
    sup = cut.supervisions[0]
    assert sup.text == "long 0 of c_sound." and sup.custom["domain"] == "00A"
    assert sup.custom["captions"] == {
        "short": ["short 0 of c_sound.", "short 1 of c_sound."],
        "long": ["long 0 of c_sound."],
    }
    music = cuts["c_music"].supervisions[0]  # no long caption was kept: the first short one, named as such
    assert (music.text, music.custom["text_kind"], sup.custom["text_kind"]) == ("short 0 of c_music.", "short", "long")
    assert (
        "1 of 3 cuts have a short caption as their supervision text (no long caption was kept"
        in capsys.readouterr().out
    )
    assert len(RecordingSet.from_file(out / "recordings.jsonl")) == 3
    assert len(SupervisionSet.from_file(out / "supervisions.jsonl")) == 3
    assert sum(len(r) for c in cuts for r in c.supervisions[0].custom["captions"].values()) == len(kept["captions"])


def test_mecat_export_is_the_reference_layout(lake, tmp_path):
    root, _, kept, _ = lake
    out = tmp_path / "mecat"
    assert _export(root, "mecat", out) == 0
    lines = [json.loads(x) for x in (out / "caption" / "00A.jsonl").read_text().splitlines()]
    assert lines == [{"c_sound": {"short": ["short 0 of c_sound.", "short 1 of c_sound."], "long": ["long 0 of c_sound."], "domain": "00A"}}]  # fmt: skip
    assert sum(1 for p in (out / "qa").glob("*.jsonl") for _ in p.read_text().splitlines()) == len(kept["qa"])


def test_unknown_dataset_or_version_is_a_clear_error_and_creates_nothing(lake, tmp_path, capsys):
    root, _, _, _ = lake
    out = tmp_path / "never"
    assert main(["export", "--data-root", str(root), "-d", "nope", "--format", "hf", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "dataset 'nope' not found" in err and "existing datasets: ex" in err and err.count("\n") == 1
    for version in ("v0042", "42"):
        assert _export(root, "hf", out, "--version", version) == 2
        err = capsys.readouterr().err
        assert f"no version '{version}'" in err and "versions: v0001" in err and err.count("\n") == 1
    assert not out.exists() and not (root / "nope").exists()


def test_export_names_a_version_as_every_command_does(lake, tmp_path, capsys):
    """`--version` takes `v0001`, `1` and `latest` in `export` as in `versions`, `view`, `rerun` and `evaluate`
    (one resolver; export's own refused `1` and `latest`)."""
    root, version, _, _ = lake
    for i, name in enumerate((version, "1", "latest")):
        assert _export(root, "mecat", tmp_path / f"out{i}", "--version", name) == 0, capsys.readouterr().err
    assert (tmp_path / "out0").exists() and (tmp_path / "out1").exists() and (tmp_path / "out2").exists()
    (full := tmp_path / "full").mkdir()
    (full / "keep.txt").write_text("mine")
    assert _export(root, "entailment", full) == 2 and "not an empty folder" in capsys.readouterr().err
    assert [p.name for p in full.iterdir()] == ["keep.txt"]


def test_push_uploads_the_folder_with_a_token_and_refuses_without(lake, tmp_path, monkeypatch, capsys):
    from huggingface_hub import HfApi, constants

    root, _, _, _ = lake
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-tokens"))
    out = tmp_path / "push"
    assert _export(root, "hf", out, "--push", "someone/ex") == 2
    assert "needs a Hugging Face token" in capsys.readouterr().err and not out.exists()
    assert _export(root, "lhotse", out, "--push", "someone/ex") == 2  # only datasets folders go to the Hub
    assert "--format hf or audiobench" in capsys.readouterr().err and not out.exists()

    calls = []

    def create_repo(self, repo_id, **kw):  # the network boundary: HfApi's HTTP calls
        calls.append(("create_repo", repo_id, kw, constants.is_offline_mode()))

    def upload_folder(self, **kw):
        calls.append(("upload_folder", sorted(p.name for p in (tmp_path / "push").iterdir()), kw, self.token))
        return "https://huggingface.co/datasets/someone/ex/commit/abc"

    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    assert _export(root, "hf", out, "--push", "someone/ex") == 0
    (_, repo, kw, offline), (_, files, up, token) = calls
    assert (repo, kw["repo_type"], offline) == ("someone/ex", "dataset", False)  # online for the upload only
    assert constants.is_offline_mode()
    assert files == ["README.md", "captions", "entailment", "instructions", "plots", "qa"] and token == "hf_test_token"
    assert (up["folder_path"], up["repo_id"], up["repo_type"]) == (str(out), "someone/ex", "dataset")
    assert "uploaded to https://huggingface.co/datasets/someone/ex" in capsys.readouterr().out

    def refused(self, **kw):
        raise PermissionError("403 Forbidden: no write access\nmore detail")

    monkeypatch.setattr(HfApi, "upload_folder", refused)
    again = tmp_path / "again"
    assert _export(root, "audiobench", again, "--push", "someone/ex") == 2
    err = capsys.readouterr().err
    assert "PermissionError: 403 Forbidden: no write access)" in err and err.count("\n") == 1
    assert (again / "README.md").exists() and constants.is_offline_mode()


def test_a_failed_export_leaves_nothing(lake, tmp_path, monkeypatch):
    from earmark.stages.publish import formats

    root, _, _, _ = lake

    def broken(*args, **kw):
        yield next(iter(original(*args, **kw)))
        raise OSError("disk full")

    original = formats.clip_audio
    monkeypatch.setattr(formats, "clip_audio", broken)
    out = tmp_path / "half"
    with pytest.raises(OSError, match="disk full"):
        _export(root, "lhotse", out)
    assert not out.exists()
    (out := tmp_path / "empty").mkdir()
    with pytest.raises(OSError, match="disk full"):
        _export(root, "hf", out)
    assert out.is_dir() and not any(out.iterdir())


def _texts(folder) -> str:
    """Every string an export folder holds: text files as they are, Parquet cell by cell."""
    import pyarrow.parquet as pq

    out = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix == ".parquet":
            for column in pq.read_table(path).to_pylist():
                out.extend(str(v) for v in column.values())
        elif path.suffix in (".csv", ".jsonl", ".json", ".md", ".txt"):
            out.append(path.read_text())
    return "\n".join(out)


def test_no_export_carries_a_premise_qc_rejected(lake, tmp_path):
    """The entailment premise is a long caption QC may have rejected: it reached the hf export's `premise` and
    entailment.csv's `Caption` (2 of 17 demo clips)."""
    from earmark.stages.publish import export_items, export_mecat

    root, version, _, _ = lake
    folders = []
    for fmt in ("hf", "audiobench", "entailment", "mecat", "lhotse"):
        assert _export(root, fmt, tmp_path / fmt) == 0
        folders.append(tmp_path / fmt)
    published = tmp_path / "published"  # what the publish stage writes under exports/<version>/
    cat = Catalog(root, "ex")
    export_items(cat, version, published)
    export_mecat(cat, version, published)
    folders.append(published)
    for folder in folders:
        text = _texts(folder)
        assert PLANTED not in text, folder.name
        assert "about c_sound." not in text, folder.name  # nor its hypotheses: a set ships with its premise
    assert "long 0 of c_speech." in _texts(tmp_path / "hf") + _texts(tmp_path / "entailment")  # a kept premise ships


def test_sql_shows_a_clips_audio_as_its_kind_and_size_not_its_bytes(lake, capsys):
    """`earmark sql "SELECT * FROM clips"` printed the FLAC bytes of every clip to the terminal."""
    root, _, _, clips = lake
    capsys.readouterr()
    assert main(["sql", "--data-root", str(root), "-d", "ex", "SELECT * FROM clips ORDER BY clip_id"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert "audio_flac" in header and len(rows) == len(clips)
    for row, clip_id in zip(rows, sorted(clips)):
        size = len(clips[clip_id].audio_flac)
        assert f"<FLAC {size / 1000:.0f} kB>" in row and "fLaC" not in row and "\\x" not in row, row
