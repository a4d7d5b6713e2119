"""Every record earmark writes, one pydantic model each.

These models are the single source of truth: rows are validated with them and the Parquet/Arrow schema
of each table is derived from them (`schemas.arrow.arrow_schema`). Every row carries its lineage: expert
rows say which expert, backend and version produced them; LLM rows carry the prompt name, prompt sha and
model id.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DomainCode = Literal["000", "S00", "0M0", "00A", "SM0", "S0A", "0MA", "SMA"]
DOMAIN_CODES: tuple[str, ...] = ("000", "S00", "0M0", "00A", "SM0", "S0A", "0MA", "SMA")
CaptionKind = Literal["short", "long", "speech", "music", "sound", "environment"]
CAPTION_KINDS: tuple[str, ...] = ("short", "long", "speech", "music", "sound", "environment")
QACategory = Literal[
    "direct_perception",
    "sound_characteristics",
    "quality_assessment",
    "environment_reasoning",
    "inference_judgement",
    "application_context",
]
QA_CATEGORIES: tuple[str, ...] = QACategory.__args__  # type: ignore[attr-defined]
Difficulty = Literal["basic", "intermediate", "advanced", "complex"]
EntailmentLabel = Literal["entailment", "neutral", "contradiction"]
ItemTable = Literal["captions", "qa", "entailment", "instructions"]
# the generated item tables: the built-in ones; earmark.stages.synthesize.registry.register adds an item type's
ITEM_TABLES: list[str] = list(ItemTable.__args__)  # type: ignore[attr-defined]
IFEvalDimension = Literal["Content", "Capitalization", "Symbol", "List Structure", "Length", "Format"]


def domain_code(speech: bool, music: bool, sound: bool) -> str:
    """The MECAT domain code for the presence of speech, music and sound events."""
    return ("S" if speech else "0") + ("M" if music else "0") + ("A" if sound else "0")


def domain_flags(code: str) -> tuple[bool, bool, bool]:
    """(speech, music, sound) presence for a MECAT domain code."""
    return code[0] == "S", code[1] == "M", code[2] == "A"


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExpertRecord(Record):
    """Lineage every expert row carries."""

    clip_id: str
    expert: str
    backend: str
    expert_version: str


# --------------------------------------------------------------------------------------------- ingest
class Clip(Record):
    """A ≤10 s, 16 kHz mono piece of a source file. `clip_id` is the content hash of its PCM."""

    clip_id: str
    source_path: str
    source_sha256: str
    source_format: str
    clip_index: int
    offset_s: float
    duration_s: float
    sample_rate: int
    audio_flac: bytes = Field(repr=False)


class QuarantineRow(Record):
    """An input (or item) that could not be processed, with the reason and what to do about it."""

    source_path: str
    source_sha256: str | None
    stage: str
    reason: str
    fix: str


# -------------------------------------------------------------------------------------------- experts
class TimeSpan(Record):
    start_s: float
    end_s: float


class SpeechActivity(ExpertRecord):
    segments: list[TimeSpan]
    speech_s: float
    speech_ratio: float
    max_prob: float


class Word(Record):
    word: str
    start_s: float
    end_s: float
    prob: float


class Transcript(ExpertRecord):
    text: str
    language: str
    language_prob: float
    words: list[Word]
    avg_logprob: float
    no_speech_prob: float
    vad_speech_s: float
    skipped_reason: str | None


class SpeechQuality(ExpertRecord):
    """DNSMOS P.835 (+ P.808) predicted MOS on a 1–5 scale, of the clip's speech only (None without speech)."""

    ovrl_mos: float | None
    sig_mos: float | None
    bak_mos: float | None
    p808_mos: float | None
    speech_s: float  # seconds of VAD speech scored
    skipped_reason: str | None


class AcousticProfile(ExpertRecord):
    rms_dbfs: float
    peak_dbfs: float
    lufs: float | None
    crest_db: float
    clipping_ratio: float
    silence_ratio: float


class DomainDecision(ExpertRecord):
    """The MECAT domain code with the per-content probabilities it was derived from."""

    domain: DomainCode
    speech_prob: float
    music_prob: float
    sound_prob: float
    silent: bool
    features: list[NamedValue]
    # per-window probabilities of "speech", "music", "sound" (a learned tagger; empty for a heuristic)
    windows: list[WindowTags] = []


class NamedValue(Record):
    name: str
    value: float


# ------------------------------------------------------------------- expert slots added for issue [3/7]
# One record per slot; the embedded default and the paper backend of a slot write the same record to the
# same table, and say which they are in `backend` (a heuristic's backend starts with "heuristic:").


class LabelProb(Record):
    """A label with its probability (0–1)."""

    label: str
    prob: float


class WindowTags(Record):
    start_s: float
    end_s: float
    tags: list[LabelProb]


class SoundEvents(ExpertRecord):
    """Table `tags`: sound-event labels per non-overlapping window (2 s) and for the whole clip."""

    label_set: str  # e.g. "audioset-527"; "heuristic-coarse" for the offline default
    window_s: float
    windows: list[WindowTags]
    clip_tags: list[LabelProb]  # top labels over the clip (max over windows), descending prob


class AudioSetScores(ExpertRecord):
    """Table `yamnet`: an AudioSet tagger's scores of every class of its label set, per frame and pooled over the
    clip. Scores are by class index: class i is row i of the label set's class map (for "audioset-yamnet-tflite-1",
    experts/yamnet/yamnet_class_map.csv: index, AudioSet MID, name). Uncalibrated: the evidence states an event from
    them, or from the event head's window probabilities, only under the measured policy (experts/yamnet/events.py)."""

    label_set: str  # "audioset-yamnet-tflite-1"
    frame_s: float  # each frame's length (0.975 s)
    hop_s: float  # frame i starts at i * hop_s (0.48 s)
    padded_s: float  # zeros appended to the clip to fill its last frame
    frame_scores: list[list[float]]  # [frame][class], the model's scores (YAMNet's: steps of 1/256)
    clip_max: list[float]  # [class]: max over the frames
    clip_mean: list[float]  # [class]: mean over the frames
    embedding: list[float]  # the model's embedding averaged over the frames (YAMNet: 1,024-d, dequantised int8)
    top: list[LabelProb]  # the classes with the highest clip_max, descending (by name, for reading)
    event_head: str | None = None  # sha256 (12 hex) of the event head over the embedding; None: not run
    window_events: list[list[float]] = []  # [2 s window][node of the head's policy]: the head's probabilities


class SpeakerTurn(Record):
    speaker: str
    start_s: float
    end_s: float


class Diarization(ExpertRecord):
    """Table `diarization`: who spoke when."""

    n_speakers: int
    turns: list[SpeakerTurn]
    skipped_reason: str | None


class SpeakerProfile(Record):
    speaker: str
    speech_s: float
    gender: list[LabelProb]
    age_band: list[LabelProb]
    emotion: list[LabelProb]
    accent: list[LabelProb]
    pitch_median_hz: float | None
    pitch_iqr_hz: float | None
    energy_dbfs: float | None
    method: str  # how the labels were obtained, e.g. "heuristic:pitch-energy" or an HF model id


class VoicePitch(Record):
    """A group of the clip's speech segments whose median pitches lie together: one voice, or voices alike."""

    pitch_median_hz: float
    speech_s: float  # voiced speech of the group's segments
    segments: int
    gender: list[LabelProb]
    # a second opinion on the gender: EfficientAT mn04's P("Male speech, man speaking") as "male" and P("Female
    # speech, woman speaking") as "female" over the group's segments; [] where none was taken
    gender_check: list[LabelProb] = []


class SpeakerAttributes(ExpertRecord):
    """Table `speakers`: per-speaker gender / age band / emotion / accent with probabilities."""

    speakers: list[SpeakerProfile]
    skipped_reason: str | None
    # the VAD segments grouped by pitch, independently of the diarization (a check on its count; empty when
    # the backend does not measure pitch)
    voices: list[VoicePitch] = []


class TranscriptCheck(ExpertRecord):
    """Table `asr_check`: signs that the transcript is a Whisper hallucination rather than speech."""

    flags: list[str]  # e.g. "known_phrase", "repetition", "no_vad_support", "low_confidence"
    hallucination_score: float  # 0 = looks like real speech, 1 = almost surely hallucinated
    vad_support: float  # share of word time inside VAD speech segments


class StemLevel(Record):
    stem: str  # "vocals", "drums", "bass", "other" (demucs) or "harmonic", "percussive" (HPSS)
    rms_dbfs: float
    energy_share: float


class Separation(ExpertRecord):
    """Table `separation`: source separation summary (stems' levels); vocals go back through the speech path."""

    method: str
    stems: list[StemLevel]
    vocals_speech_s: float | None  # VAD speech found in the vocals stem (demucs) — None when not separated
    skipped_reason: str | None


class MusicAnalysis(ExpertRecord):
    """Table `music`: tempo, beats, key, loudness contour, and tags (empty when no tagger is configured)."""

    analyzed: bool
    skipped_reason: str | None
    tempo_bpm: float | None
    tempo_confidence: float | None  # pulse clarity × octave check: how safe it is to state the tempo
    beat_times_s: list[float]
    beat_strength: float | None
    key: str | None  # e.g. "A minor"
    key_confidence: float | None
    harmonic_ratio: float | None
    loudness_contour_db: list[float]  # short-term loudness per 0.5 s hop
    # instrument / genre / mood tags of the clip. Embedded profile (tagger "musictags:<sha>"): the tags the tag
    # file (earmark.experts.learned.musictags, music_tags.json) lets into the evidence, each with its calibrated
    # probability; paper profile with a music tagger: that model's top labels
    tags: list[LabelProb]
    tagger: str | None
    # the same tags per 2 s analysis window (embedded tagger; empty otherwise)
    window_tags: list[WindowTags] = Field(default_factory=list)
    # never evidence: the embedded heads' tags that are not precise enough (calibrated) and musicnn's own 50 MTT
    # + 50 MSD tag probabilities ("mtt:piano", "msd:jazz"; uncalibrated), for inspection
    candidate_tags: list[LabelProb] = Field(default_factory=list)


class RoomAcoustics(ExpertRecord):
    """Table `acoustics`: reverberation, SNR and effective bandwidth estimates (+ PLCMOS where computed)."""

    rt60_s: float | None  # blind estimate; None when the clip has no usable decays
    drr_db: float | None
    snr_db: float | None
    bandwidth_hz: float
    plcmos: float | None
    method: str


class NISQAScores(ExpertRecord):
    """Table `nisqa` (paper profile): NISQA MOS and its four dimensions, 1–5, of the clip's speech only (None
    without enough speech, with the reason)."""

    mos: float | None
    noisiness: float | None
    discontinuity: float | None
    coloration: float | None
    loudness: float | None
    speech_s: float | None = None  # seconds of VAD speech scored (None in shards from before speech-only)
    skipped_reason: str | None = None


class AudioDescription(ExpertRecord):
    """Table `description`: an optional global description by an audio-language model (off by default)."""

    text: str
    model: str


# ------------------------------------------------------------------------------------------ synthesis
Writer = Literal["llm", "rule", "rule_fallback", "human"]


class LLMLineage(Record):
    clip_id: str
    domain: DomainCode
    prompt_name: str
    prompt_sha: str
    model: str
    confidence: float
    # who wrote the text: the model ("llm"), the templates of prompts/ by configuration ("rule"), or the templates
    # after the model's reply for this item was rejected ("rule_fallback"; `model` is "rule" for both), or a reviewer's
    # rewrite ("human", `model` "human:<reviewer>")
    writer: Writer = "llm"


class Caption(LLMLineage):
    """One of the 3 synonymous references for one caption kind of one clip."""

    item_id: str
    kind: CaptionKind
    ref_index: int
    text: str


class QAPair(LLMLineage):
    item_id: str
    qa_index: int
    category: QACategory
    difficulty: Difficulty
    question: str
    answer: str


class EntailmentHypothesis(LLMLineage):
    item_id: str
    premise_kind: CaptionKind
    premise: str
    label: EntailmentLabel
    hypothesis: str


class InstructionTriple(LLMLineage):
    item_id: str
    dimension: IFEvalDimension
    instruction: str
    answer: str
    rule: int
    rule_content: str


class Rejection(Record):
    """An LLM generation that failed validation after its repair attempt (kept, with the reason)."""

    clip_id: str
    table: str
    prompt_name: str
    prompt_sha: str
    model: str
    reason: str
    raw: str


DomainDecision.model_rebuild()
