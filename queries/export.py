"""`earmark export`: a published version's kept items as files other tools read, and the Hub upload.

Formats (`FORMATS`): `hf` — a Hugging Face datasets folder that `datasets.load_dataset(DIR)` loads as is: one
config per item type (captions, the default; qa; entailment; instructions), split `test`, the clip's audio
embedded as an `Audio` feature (the stored FLAC bytes), a README.md card whose YAML header declares configs,
features and splits; `audiobench` — IFEval-Audio as AudioBench's dataset (one config, split `train`, which its
loader reads); `entailment` — the Audio Entailment CSV with `audio/<clip_id>.wav` beside it; `mecat` — the
MECAT reference folders; `lhotse` — a CutSet manifest with the audio beside it. Parquet files carry the
`datasets` features in their schema metadata (key `huggingface`), so `datasets` decodes `Audio` without
being a dependency of earmark itself.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from earmark.schemas.records import CAPTION_KINDS
from earmark.stages.publish import dataset_card, export_mecat, formats
from earmark.stages.publish.plots import card_section, write_plots
from earmark.storage import Catalog
from earmark.storage.paths import version_name

FORMATS = ("hf", "mecat", "audiobench", "entailment", "lhotse")
HUB_FORMATS = ("hf", "audiobench")  # the formats that are Hugging Face dataset folders (--push)
_LABELS = ["entailment", "neutral", "contradiction"]
_AUDIO_ARROW = pa.struct([("bytes", pa.binary()), ("path", pa.string())])  # datasets' Audio storage


def check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ValueError(f"{out_dir} exists and is not an empty folder; export into a new or empty one")


def export(cat: Catalog, version: str, fmt: str, out_dir: Path, *, license: str = "other") -> dict[str, int]:
    """Write `version` in format `fmt` into `out_dir` (new or empty); returns counts. On failure nothing stays."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; formats: {', '.join(FORMATS)}")
    check_out_dir(out_dir)
    existed = out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        if fmt == "mecat":
            return export_mecat(cat, version, out_dir)
        if fmt == "lhotse":
            return formats.export_lhotse(cat, version, out_dir)
        if fmt == "entailment":
            return export_entailment(cat, version, out_dir)
        if fmt == "audiobench":
            return export_audiobench(cat, version, out_dir, license)
        return export_hf(cat, version, out_dir, license)
    except BaseException:  # also Ctrl-C: no half-written export stays behind
        if not existed:
            shutil.rmtree(out_dir, ignore_errors=True)
        else:
            for path in out_dir.iterdir():
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        raise


def export_entailment(cat: Catalog, version: str, out_dir: Path) -> dict[str, int]:
    rows, skipped = formats.entailment_rows(cat, version)
    formats.write_entailment_csv(rows, out_dir / "entailment.csv")
    (audio_dir := out_dir / "audio").mkdir()
    for clip_id, flac in formats.clip_audio(cat, version, [r["Audio file"].removesuffix(".wav") for r in rows]):
        formats.write_wav(flac, formats.audio_file(audio_dir, clip_id, "wav"))
    return {"clips": len(rows), "hypotheses": 3 * len(rows), "skipped_clips": len(skipped)}


# ------------------------------------------------------------------------------------- HF datasets
class Column:
    """One column: its Arrow type, its `datasets` feature (metadata JSON) and its card YAML entry."""

    def __init__(self, name: str, arrow: pa.DataType, feature: dict, dtype: dict):
        self.name, self.arrow, self.feature, self.yaml = name, arrow, feature, {"name": name, **dtype}


def _text(name: str) -> Column:
    return Column(name, pa.string(), {"dtype": "string", "_type": "Value"}, {"dtype": "string"})


def _int(name: str) -> Column:
    return Column(name, pa.int64(), {"dtype": "int64", "_type": "Value"}, {"dtype": "int64"})


def _texts(name: str) -> Column:
    return Column(
        name,
        pa.list_(pa.string()),
        {"feature": {"dtype": "string", "_type": "Value"}, "_type": "List"},
        {"list": "string"},
    )


def _label(name: str, names: list[str]) -> Column:
    yaml_names = {"class_label": {"names": {str(i): n for i, n in enumerate(names)}}}
    return Column(name, pa.int64(), {"names": names, "_type": "ClassLabel"}, {"dtype": yaml_names})


def _audio(name: str, sr: int | None) -> Column:
    return Column(
        name, _AUDIO_ARROW, {"sampling_rate": sr, "_type": "Audio"}, {"dtype": {"audio": {"sampling_rate": sr}}}
    )


class Config:
    """One `datasets` config: its rows (grouped by clip, the audio added per clip while writing) and columns."""

    def __init__(
        self,
        name: str,
        split: str,
        columns: list[Column],
        rows: list[dict[str, Any]],
        audio: str = "audio",
        folder: str | None = None,
    ):
        self.name, self.split, self.columns, self.audio, self.folder = name, split, columns, audio, folder or name
        self.by_clip: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            self.by_clip.setdefault(row["clip_id"] if "clip_id" in row else row[audio], []).append(row)
        self.rows = len(rows)
        self.num_bytes = 0  # the written file's size, for the card's `splits`

    def schema(self) -> pa.Schema:
        meta = {"info": {"features": {c.name: c.feature for c in self.columns}}}
        return pa.schema([(c.name, c.arrow) for c in self.columns], metadata={"huggingface": json.dumps(meta)})

    def write(self, cat: Catalog, version: str, path: Path, batch: int = 64) -> None:
        """Parquet in row groups of about `batch` rows, the clips' audio read `formats.clip_audio`'s way."""
        schema, pending = self.schema(), []
        path.parent.mkdir(parents=True, exist_ok=True)
        with pq.ParquetWriter(path, schema) as writer:
            for clip_id, flac in formats.clip_audio(cat, version, list(self.by_clip)):
                audio = {"bytes": flac, "path": f"{clip_id}.flac"}
                pending += [{**row, self.audio: audio} for row in self.by_clip[clip_id]]
                if len(pending) >= batch:
                    writer.write_table(pa.Table.from_pylist(pending, schema=schema))
                    pending = []
            if pending:
                writer.write_table(pa.Table.from_pylist(pending, schema=schema))
        self.num_bytes = path.stat().st_size


def _sample_rate(cat: Catalog, version: str) -> int | None:
    rates = cat.query(f"SELECT DISTINCT sample_rate FROM {version_name(version)}.clips")
    return int(rates[0][0]) if len(rates) == 1 else None  # None: datasets keeps each file's own rate


def hf_configs(cat: Catalog, version: str) -> list[Config]:
    """The item types of `version` as `datasets` configs (captions: one row per clip with its references)."""
    v, kept, sr = version_name(version), formats.kept_items(version), _sample_rate(cat, version)
    ids = [_audio("audio", sr), _text("clip_id"), _text("domain")]
    caps = [{"clip_id": c, "domain": e["domain"], **e["captions"]} for c, e in formats.caption_sets(cat, v).items()]
    caps = [{k: row.get(k, []) for k in ("clip_id", "domain", *CAPTION_KINDS)} for row in caps]
    qa_cols = ("item_id", "clip_id", "domain", "category", "difficulty", "question", "answer")
    ent_cols = ("item_id", "clip_id", "domain", "premise", "hypothesis", "label")
    ins_cols = ("item_id", "clip_id", "domain", "dimension", "instruction", "answer", "rule", "rule_content")

    def rows(table: str, cols: Iterable[str], order: str) -> list[dict[str, Any]]:
        cols = list(cols)
        ids = formats.kept_entailment(v) if table == "entailment" else kept  # a premise must be kept text too
        got = cat.query(f"SELECT {', '.join(cols)} FROM {v}.{table} WHERE item_id IN {ids} ORDER BY {order}")
        return [dict(zip(cols, r)) for r in got]

    ent = [{**r, "label": _LABELS.index(r["label"])} for r in rows("entailment", ent_cols, "clip_id, item_id")]
    configs = [
        Config("captions", "test", [*ids, *map(_texts, CAPTION_KINDS)], caps),
        Config(
            "qa",
            "test",
            [*ids, _text("item_id"), *map(_text, qa_cols[3:])],
            rows("qa", qa_cols, "clip_id, qa_index, item_id"),
        ),
        Config(
            "entailment",
            "test",
            [*ids, _text("item_id"), _text("premise"), _text("hypothesis"), _label("label", _LABELS)],
            ent,
        ),
        Config(
            "instructions",
            "test",
            [*ids, _text("item_id"), *map(_text, ins_cols[3:6]), _int("rule"), _text("rule_content")],
            rows("instructions", ins_cols, "clip_id, item_id"),
        ),
    ]
    return [c for c in configs if c.rows]


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "1M<n<10M"


def card_header(configs: list[Config], *, pretty_name: str, license: str, tasks: list[str], tags: list[str]) -> str:
    """The YAML front matter of a dataset card: configs (the first is the default), features, splits."""
    header = {
        "pretty_name": pretty_name,
        "license": license,
        "language": ["en"],
        "size_categories": [_size_category(sum(c.rows for c in configs))],
        "task_categories": tasks,
        "tags": tags,
        "configs": [
            {
                "config_name": c.name,
                "data_files": [{"split": c.split, "path": f"{c.folder}/{c.split}-*"}],
                **({"default": True} if i == 0 else {}),
            }
            for i, c in enumerate(configs)
        ],
        "dataset_info": [
            {
                "config_name": c.name,
                "features": [col.yaml for col in c.columns],
                "splits": [{"name": c.split, "num_bytes": c.num_bytes, "num_examples": c.rows}],
                "download_size": c.num_bytes,
                "dataset_size": c.num_bytes,
            }
            for c in configs
        ],
    }
    plain = json.loads(json.dumps(header))  # no shared objects: YAML without anchors
    return "---\n" + yaml.safe_dump(plain, sort_keys=False, allow_unicode=True) + "---\n\n"


def _write_configs(cat: Catalog, version: str, out_dir: Path, configs: list[Config]) -> None:
    if not configs:
        raise ValueError(f"{cat.dataset} {version} has no kept items to export")
    for c in configs:
        c.write(cat, version, out_dir / c.folder / f"{c.split}-00000-of-00001.parquet")


def export_hf(cat: Catalog, version: str, out_dir: Path, license: str = "other") -> dict[str, int]:
    configs = hf_configs(cat, version)
    _write_configs(cat, version, out_dir, configs)
    names = {"captions": "caption_clips", "qa": "qa_pairs", "entailment": "entailment_hypotheses"}
    counts = {names.get(c.name, "instruction_triples"): c.rows for c in configs}
    if caps := next((c for c in configs if c.name == "captions"), None):
        counts["caption_refs"] = sum(len(r[k]) for rows in caps.by_clip.values() for r in rows for k in CAPTION_KINDS)
    tasks = ["audio-text-to-text"] + ["question-answering"] * any(c.name == "qa" for c in configs)
    usage = (
        f"\n## Loading\n\nExported by `earmark export --format hf`: only items that every QC check kept. Configs: "
        f"{', '.join(c.name for c in configs)} (split `test`; captions: one row per clip with its references by "
        "kind), the clip's audio embedded (FLAC).\n\n```python\nfrom datasets import load_dataset\n"
        f'ds = load_dataset("path/to/this/folder")  # the default config; or load_dataset(..., "{configs[-1].name}")\n'
        "```\n"
    )
    header = card_header(
        configs,
        pretty_name=f"{cat.dataset} {version}",
        license=license,
        tasks=tasks,
        tags=["audio", "captioning", "benchmark", "earmark"],
    )
    plots = write_plots(cat, version, out_dir / "plots")
    (out_dir / "README.md").write_text(
        header + dataset_card(cat, version, counts) + card_section(plots, out_dir) + usage
    )
    return counts


def export_audiobench(cat: Catalog, version: str, out_dir: Path, license: str = "other") -> dict[str, int]:
    """IFEval-Audio exactly as AudioBench's dataset: config `default` (folder `data/`), split `train`."""
    sr = _sample_rate(cat, version)
    columns = [_audio("context", sr), *(_text(c) for c in formats.AUDIOBENCH_COLUMNS[1:])]
    config = Config("default", "train", columns, formats.audiobench_rows(cat, version), audio="context", folder="data")
    _write_configs(cat, version, out_dir, [config] if config.rows else [])
    header = card_header(
        [config],
        pretty_name=f"{cat.dataset} {version} IFEval-Audio",
        license=license,
        tasks=["audio-text-to-text"],
        tags=["audio", "instruction-following", "ifeval-audio", "earmark"],
    )
    usage = (
        "\n## Loading\n\nIFEval-Audio triples exported by `earmark export --format audiobench`, in the columns of "
        "AudioBench's `audiollm_instructionfollowing` dataset (context, instruction, answer, instruction_type, "
        "rule, rule_content; split `train`, which its loader reads).\n"
    )
    counts = {"instruction_triples": config.rows}
    (out_dir / "README.md").write_text(header + dataset_card(cat, version, counts) + usage)
    return counts


# ------------------------------------------------------------------------------------------ the Hub
def hub_token() -> str:
    """The configured Hugging Face token (HF_TOKEN or the token file); a ValueError saying how to set one."""
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise ValueError(
            "--push needs a Hugging Face token with write access: set HF_TOKEN or run `hf auth login` "
            "(nothing was exported or uploaded)"
        )
    return token


@contextmanager
def _hub_online():
    # earmark sets HF_HUB_OFFLINE=1 so that nothing downloads models behind the user's back; --push is an
    # explicit request to reach the Hub, for the upload only.
    from huggingface_hub import constants

    before = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = False
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = before


def push(folder: Path, repo: str, token: str, message: str) -> str:
    """Create the dataset repo `repo` if needed and upload `folder` as one commit; returns the commit URL."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    try:
        with _hub_online():
            api.create_repo(repo, repo_type="dataset", exist_ok=True)
            info = api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset", commit_message=message)
    except Exception as exc:  # HTTP, auth, network: one line for the user, the export stays
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ValueError(
            f"uploading {folder} to the Hugging Face dataset {repo!r} failed ({type(exc).__name__}: {first}); "
            "the export itself is complete there — check the token's write access and the repo name"
        ) from exc
    return str(getattr(info, "commit_url", info))
