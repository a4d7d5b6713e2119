"""A version's kept items in the shapes of the benchmarks they reproduce (what publish and `earmark export` write).

Only items that every QC check of the version kept (`kept_items`) leave the catalog, and an entailment
hypothesis only with a premise that is itself a kept caption (`kept_entailment`). The shapes follow the
originals, checked against them:
- Audio Entailment (microsoft/AudioEntailment, data/CLE/*.csv and data/ACE/*.csv): one row per clip with the
  columns `Prompt, Dataset, Audio file, Caption, Entailment, Neutral, Contradiction, Full response`; ESPnet's
  recipe (egs2/clotho_v2/cls1/local/data_prep_clotho_entailment.py) joins `Audio file` to an audio folder and
  keeps `*.wav` files only. A clip needs all three kept hypotheses: one without is left out and counted (a
  triple is the unit the benchmark balances its classes on).
- IFEval-Audio in AudioBench (YichenG170/AudioLLMInstructionFollowing; AudioBench's
  src/dataset_src/audiollm_instruction_following_dataset.py reads it): `context` (Audio), `instruction`,
  `answer`, `instruction_type`, `rule`, `rule_content`, all text but the audio; `instruction_type` spells the
  dimension out as AudioBench's scorer groups it ("Symbol Rules", "List and Structure Requirements", …).
- lhotse: a CutSet of MonoCuts (one per clip), each with its Recording and one SupervisionSegment whose text
  is the clip's first kept long caption — else its first kept reference of another kind, named in `custom`
  (`text_kind`) and counted — and whose `custom` holds every kept caption by kind and the domain.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import soundfile as sf

from earmark.schemas.records import CAPTION_KINDS
from earmark.storage import Catalog
from earmark.storage.paths import inside, plain_name, version_name

_KEPT = "(SELECT item_id FROM {v}.qc GROUP BY item_id HAVING bool_and(keep))"

ENTAILMENT_COLUMNS = (
    "Prompt",
    "Dataset",
    "Audio file",
    "Caption",
    "Entailment",
    "Neutral",
    "Contradiction",
    "Full response",
)
AUDIOBENCH_COLUMNS = ("context", "instruction", "answer", "instruction_type", "rule", "rule_content")
# earmark's dimension → AudioBench's instruction_type (the keys of its per-dimension scores)
AUDIOBENCH_DIMENSION = {
    "Content": "Content Requirements",
    "Capitalization": "Capitalization Requirements",
    "Symbol": "Symbol Rules",
    "List Structure": "List and Structure Requirements",
    "Length": "Length Requirements",
    "Format": "Format Requirements",
}
_LABELS = ("entailment", "neutral", "contradiction")


def kept_items(version: str) -> str:
    """SQL subquery of the item ids every QC check of `version` kept (what exports and evaluation use)."""
    return _KEPT.format(v=version_name(version))


def kept_entailment(version: str) -> str:
    """SQL subquery of the kept entailment hypotheses whose premise is the text of a kept caption of their clip.
    QC's `premise` check rejects the others in versions built since it exists; this keeps an older version's
    rejected premises out of exports as well."""
    v, kept = version_name(version), kept_items(version)
    return (
        f"(SELECT e.item_id FROM {v}.entailment e WHERE e.item_id IN {kept} AND EXISTS (SELECT 1 FROM {v}.captions c "
        f"WHERE c.clip_id = e.clip_id AND c.text = e.premise AND c.item_id IN {kept}))"
    )


def clip_audio(cat: Catalog, version: str, ids: Sequence[str], batch: int = 64) -> Iterator[tuple[str, bytes]]:
    """(clip_id, FLAC bytes) of the clips, read lazily in batches (a version's audio never sits in memory)."""
    ids = sorted(ids)
    for i in range(0, len(ids), batch):
        yield from cat.query(
            f"SELECT clip_id, audio_flac FROM {version_name(version)}.clips "
            "WHERE clip_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY clip_id",
            [ids[i : i + batch]],
        )


def audio_file(out_dir: Path, clip_id: str, suffix: str) -> Path:
    return inside(out_dir, f"{plain_name(clip_id, 'clip id')}.{suffix}")


def write_wav(flac: bytes, path: Path) -> None:
    """A clip's FLAC as 16-bit PCM WAV (lossless: ingest stores 16-bit PCM)."""
    data, sr = sf.read(io.BytesIO(flac), dtype="int16")
    sf.write(path, data, sr, subtype="PCM_16")


# ---------------------------------------------------------------------------------------- entailment
def entailment_rows(cat: Catalog, version: str) -> tuple[list[dict[str, str]], list[str]]:
    """Audio Entailment CSV rows (one per clip with all three kept hypotheses) and the clips left out."""
    v = version_name(version)
    rows = cat.query(
        f"SELECT clip_id, label, hypothesis, premise, prompt_name, prompt_sha FROM {v}.entailment "
        f"WHERE item_id IN {kept_entailment(v)} ORDER BY clip_id, item_id"
    )
    by_clip: dict[str, dict[str, Any]] = {}
    for clip_id, label, hypothesis, premise, prompt_name, prompt_sha in rows:
        entry = by_clip.setdefault(clip_id, {"Caption": premise, "Prompt": f"{prompt_name}@{prompt_sha}"})
        entry.setdefault(label, hypothesis)  # one per label; a `~rev` rewrite replaces a rejected original
    out, skipped = [], []
    for clip_id, entry in by_clip.items():
        if not all(label in entry for label in _LABELS):
            skipped.append(clip_id)
            continue
        out.append(
            {
                "Prompt": entry["Prompt"],
                "Dataset": f"{cat.dataset} {v}",
                "Audio file": f"{clip_id}.wav",
                "Caption": entry["Caption"],
                "Entailment": entry["entailment"],
                "Neutral": entry["neutral"],
                "Contradiction": entry["contradiction"],
                "Full response": "",
            }
        )
    return out, skipped


def write_entailment_csv(rows: Sequence[dict[str, str]], path: Path) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=ENTAILMENT_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(buf.getvalue())


# ------------------------------------------------------------------------------------------- ifeval
def audiobench_rows(cat: Catalog, version: str) -> list[dict[str, str]]:
    """IFEval-Audio records in AudioBench's columns; `context` is the clip id (the caller embeds the audio)."""
    v = version_name(version)
    rows = cat.query(
        f"SELECT clip_id, instruction, answer, dimension, rule, rule_content FROM {v}.instructions "
        f"WHERE item_id IN {kept_items(v)} ORDER BY clip_id, item_id"
    )
    return [
        {
            "context": clip_id,
            "instruction": instruction,
            "answer": answer,
            "instruction_type": AUDIOBENCH_DIMENSION[dimension],
            "rule": str(rule),  # AudioBench's dataset stores the rule code as a string
            "rule_content": rule_content,
        }
        for clip_id, instruction, answer, dimension, rule, rule_content in rows
    ]


# ------------------------------------------------------------------------------------------- lhotse
def caption_sets(cat: Catalog, version: str) -> dict[str, dict[str, Any]]:
    """clip id → {"domain", "captions": {kind: [kept references in order]}} for clips with a kept caption."""
    v = version_name(version)
    out: dict[str, dict[str, Any]] = {}
    for clip_id, domain, kind, text in cat.query(
        f"SELECT clip_id, domain, kind, text FROM {v}.captions WHERE item_id IN {kept_items(v)} "
        "ORDER BY clip_id, kind, ref_index"
    ):
        entry = out.setdefault(clip_id, {"domain": domain, "captions": {}})
        entry["captions"].setdefault(kind, []).append(text)
    for entry in out.values():
        entry["captions"] = {k: entry["captions"][k] for k in CAPTION_KINDS if k in entry["captions"]}
    return out


def text_of(captions: dict[str, list[str]]) -> tuple[str | None, str | None]:
    """(kind, text) of a cut's supervision: the first kept long caption, else the first kept reference of the
    other kinds in MECAT's order (short, speech, music, sound, environment); the export counts the cuts whose
    text is not a long caption, and `earmark export` says how many."""
    return next(((kind, refs[0]) for kind in ("long", *CAPTION_KINDS) if (refs := captions.get(kind))), (None, None))


def lhotse_cut(clip_id: str, audio_path: Path, flac: bytes, entry: dict[str, Any]) -> dict[str, Any]:
    """One MonoCut as lhotse serialises it (`MonoCut.to_dict()`), written without importing lhotse."""
    info = sf.info(io.BytesIO(flac))
    duration = info.frames / info.samplerate
    caps = entry["captions"]
    kind, text = text_of(caps)
    recording = {
        "id": clip_id,
        "sources": [{"type": "file", "channels": [0], "source": str(audio_path)}],
        "sampling_rate": info.samplerate,
        "num_samples": info.frames,
        "duration": duration,
        "channel_ids": [0],
    }
    supervision = {
        "id": clip_id,
        "recording_id": clip_id,
        "start": 0.0,
        "duration": duration,
        "channel": 0,
        "text": text,
        "language": "English",
        "custom": {"domain": entry["domain"], "captions": caps, "text_kind": kind},
    }
    return {
        "id": clip_id,
        "start": 0.0,
        "duration": duration,
        "channel": 0,
        "supervisions": [supervision],
        "recording": recording,
        "type": "MonoCut",
    }


def export_lhotse(cat: Catalog, version: str, out_dir: Path) -> dict[str, int]:
    """`audio/<clip_id>.flac` (the stored bytes, absolute paths in the manifests), `cuts.jsonl`, and the same
    recordings and supervisions as `recordings.jsonl` / `supervisions.jsonl`."""
    sets = caption_sets(cat, version)
    audio_dir = out_dir / "audio"
    audio_dir.mkdir(parents=True, exist_ok=True)
    lines: dict[str, list[str]] = {"cuts": [], "recordings": [], "supervisions": []}
    for clip_id, flac in clip_audio(cat, version, list(sets)):
        path = audio_file(audio_dir, clip_id, "flac")
        path.write_bytes(flac)
        cut = lhotse_cut(clip_id, path.resolve(), flac, sets[clip_id])
        lines["cuts"].append(json.dumps(cut, ensure_ascii=False))
        lines["recordings"].append(json.dumps(cut["recording"], ensure_ascii=False))
        lines["supervisions"].extend(json.dumps(s, ensure_ascii=False) for s in cut["supervisions"])
    for name, rows in lines.items():
        (out_dir / f"{name}.jsonl").write_text("".join(f"{r}\n" for r in rows))
    fallbacks: dict[str, int] = {}
    for entry in sets.values():
        kind = text_of(entry["captions"])[0]
        if kind != "long":
            fallbacks[str(kind)] = fallbacks.get(str(kind), 0) + 1
    return {
        "cuts": len(lines["cuts"]),
        "caption_refs": sum(len(r) for e in sets.values() for r in e["captions"].values()),
        **{f"text_{kind}": n for kind, n in sorted(fallbacks.items())},
    }
