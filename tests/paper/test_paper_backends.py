"""Every paper-profile backend executed on randomly initialised tiny models, in the paper venv (`make test-paper`).

tests/test_experts_paper.py covers what the core venv can import (transformers classifiers, faster-whisper,
NISQA, record logic); this module runs the rest on the real packages of requirements/paper.txt: whisperX's
CTC alignment, pyannote.audio 4's SpeakerDiarization pipeline class loaded from a pipeline directory,
demucs' HTDemucs with its vocals stem through Silero VAD, the CLAP margin check, and the whole profile
with all of them switched on. Each runs on every device here (CPU; CUDA too where there is a GPU).
Models are built from configs into a temporary models directory; nothing is downloaded (HF_HUB_OFFLINE=1).
Outputs are noise, so the assertions are about records, routing, lineage and offline loading.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from earmark.core.config import AnalyzeSection, FilterSection
from earmark.experts import build_experts
from earmark.experts.base import ClipAudio
from earmark.experts.models import MissingWeights
from earmark.schemas.records import SoundEvents, TimeSpan
from support import random_weights as rw
from tests.test_experts_offline import _domain
from tests.test_experts_paper import (
    EMOTION,
    GENDER,
    HF_WHISPER,
    SR,
    TAGGER,
    WHISPER,
    activity,
    models,  # noqa: F401  (the module-scoped fixture: a dir of tiny models)
    noise_clip,
)

DEVICES = ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]
ALIGN, AGE = "test/wav2vec2-ctc-en", "test/age-w2v2"
DIARIZATION = "pyannote/speaker-diarization-community-1"
DIARIZATION_31 = "pyannote/speaker-diarization-3.1"


@pytest.fixture(scope="module")
def paper_models(models):  # noqa: F811  (the imported fixture)
    """The core test's models directory plus the models only the paper venv can build or run."""
    rw.wav2vec2_ctc(models / ALIGN)
    rw.wav2vec2_classifier(models / AGE, ["teen", "twenties", "thirties", "forties+"], layer_norm=True, seed=2)
    rw.pyannote_pipeline(models / DIARIZATION, clustering="VBxClustering")
    rw.pyannote_pipeline(models / DIARIZATION_31, clustering="AgglomerativeClustering", seed=1)
    rw.demucs_repo(models / "demucs", "htdemucs")
    from support.nisqa_checkpoint import random_checkpoint

    (models / "nisqa").mkdir(exist_ok=True)
    random_checkpoint(models / "nisqa/nisqa.tar")
    from earmark.metrics.similarity import default_sbert_path

    rw.clap_model(models / "laion/clap-htsat-unfused", default_sbert_path())
    return models


def tone(clip_id: str, seconds: float, hz: float = 220.0) -> ClipAudio:
    t = np.arange(int(SR * seconds)) / SR
    harmonics = sum(np.sin(2 * np.pi * hz * k * t) / k for k in (1, 2, 3))
    return ClipAudio(clip_id, (0.2 * harmonics).astype(np.float32))


# ------------------------------------------------------------------------------- tagger (AST)
@pytest.mark.parametrize("device", DEVICES)
def test_ast_tagger_windows_on_device(paper_models, device):
    from earmark.experts.paper.tagger import AudioSetTagsExpert, TaggerDomainExpert

    clips = [noise_clip("a", 4.5), tone("b", 2.0)]
    recs = AudioSetTagsExpert(TAGGER, paper_models, device=device, batch_size=4, keep_prob=0.0).analyze(clips, {})
    assert [len(r.windows) for r in recs] == [3, 1] and all(isinstance(r, SoundEvents) for r in recs)
    cpu = AudioSetTagsExpert(TAGGER, paper_models, device="cpu", batch_size=1, keep_prob=0.0).analyze(clips, {})
    for r, q in zip(recs, cpu):  # the device and batching do not change the tags
        got = {t.label: t.prob for w in r.windows for t in w.tags}
        assert got == pytest.approx({t.label: t.prob for w in q.windows for t in w.tags}, abs=2e-3)
    doms = TaggerDomainExpert(TAGGER).analyze(clips, {"tags": {r.clip_id: r for r in recs}})
    assert all(len(d.domain) == 3 for d in doms)


@pytest.mark.parametrize("device", DEVICES)
def test_ast_filter_banks_on_device_are_the_extractors(device):
    """Off the CPU the tagger computes AST's Kaldi filter banks on its device (`hf.ast_fbank`): on the CPU they
    are the extractor's own bit for bit (padding, cutting and normalisation included), on CUDA within 1e-3."""
    import torch
    from transformers import ASTFeatureExtractor

    from earmark.experts.paper.hf import ast_fbank

    extractor = ASTFeatureExtractor()
    rng = np.random.default_rng(0)
    audios = [(0.1 * rng.standard_normal(n)).astype(np.float32) for n in (32000, 8000, 200000)]
    ref = extractor(audios, sampling_rate=16000, return_tensors="pt", padding=True)["input_values"]
    ours = ast_fbank(extractor, audios, device)["input_values"]
    assert ours.device.type == device and ours.shape == ref.shape == (3, extractor.max_length, extractor.num_mel_bins)
    if device == "cpu":
        assert torch.equal(ours, ref)
    else:
        assert (ours.cpu() - ref).abs().max() < 1e-3


# ------------------------------------------------------------------------------- ASR + whisperX alignment
@pytest.mark.parametrize("device", DEVICES)
def test_whisperx_aligns_a_known_transcript_with_the_ctc_model(paper_models, device):
    from earmark.experts.paper.asr import FasterWhisperPaperExpert

    expert = FasterWhisperPaperExpert(WHISPER, paper_models, device=device, align_model=ALIGN)
    assert expert.backend == f"faster-whisper:{WHISPER}+whisperx:{ALIGN}"
    audio = noise_clip("a", 3.0).samples
    result = {"language": "en", "segments": [{"text": " Hello world, it's me.", "start": 0.2, "end": 2.5}]}
    words = expert._align(result, audio)
    assert [w["word"] for w in words] == ["Hello", "world,", "it's", "me."]
    starts = [w["start"] for w in words]
    assert starts == sorted(starts) and 0.2 <= starts[0] and all(w["start"] <= w["end"] <= 2.6 for w in words)
    assert all(0 <= w["probability"] <= 1 for w in words)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["faster-whisper", "transformers"])
def test_whisper_then_whisperx_in_the_asr_expert(paper_models, device, backend):
    from earmark.experts.paper.asr import FasterWhisperPaperExpert
    from earmark.experts.paper.asr_hf import TransformersWhisperPaperExpert

    clips = [noise_clip("c0", 3.0), noise_clip("c1", 6.0, 1), noise_clip("c2", 1.0, 2)]
    vad = {c.clip_id: activity(c.clip_id, 0.0 if c.clip_id == "c2" else 1.0) for c in clips}
    kind, model = (
        (FasterWhisperPaperExpert, WHISPER)
        if backend == "faster-whisper"
        else (TransformersWhisperPaperExpert, HF_WHISPER)
    )
    expert = kind(model, paper_models, device=device, align_model=ALIGN, batch_size=2, max_new_tokens=16)
    assert expert.backend == f"{backend}:{model}+whisperx:{ALIGN}"
    recs = expert.analyze(clips, {"vad": vad})
    assert [r.skipped_reason for r in recs] == [None, None, "no speech detected by VAD"]
    for r, c in zip(recs[:2], clips):
        assert r.backend == expert.backend and r.language and 0 < r.language_prob <= 1
        assert all(0 <= w.start_s <= w.end_s <= c.duration_s for w in r.words)


# ------------------------------------------------------------------------------- pyannote diarization
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model_id", [DIARIZATION, DIARIZATION_31])
def test_pyannote_pipeline_from_a_pipeline_directory(paper_models, device, model_id):
    from earmark.experts.paper.diarize import PyannoteDiarizationExpert

    clips = [noise_clip("a", 7.0), noise_clip("b", 3.0, 1), noise_clip("c", 2.0, 2)]
    vad = {c.clip_id: activity(c.clip_id, 0.0 if c.clip_id == "c" else 2.0) for c in clips}
    recs = PyannoteDiarizationExpert(model_id, paper_models, device=device).analyze(clips, {"vad": vad})
    assert [r.clip_id for r in recs] == ["a", "b", "c"]
    assert recs[2].skipped_reason == "no speech detected by VAD" and recs[2].turns == []
    for r, c in zip(recs[:2], clips):
        assert r.backend == f"pyannote.audio:{model_id}" and 0 <= r.n_speakers <= 3
        assert r.n_speakers == len({t.speaker for t in r.turns})
        assert {t.speaker for t in r.turns} == {f"S{i + 1}" for i in range(r.n_speakers)}
        assert all(0 <= t.start_s < t.end_s <= c.duration_s for t in r.turns)
    assert os.environ["PYANNOTE_METRICS_ENABLED"] == "false"  # pyannote's usage telemetry stays off


def test_a_pyannote_3_config_without_plda_fails_when_built(tmp_path):
    from earmark.experts.paper.diarize import PyannoteDiarizationExpert

    rw.pyannote_pipeline(tmp_path / "p31", clustering="AgglomerativeClustering", plda=False)
    with pytest.raises(MissingWeights, match=r"names no `plda`.*speaker-diarization-community-1.*plda: \$model/plda"):
        PyannoteDiarizationExpert(str(tmp_path / "p31"))


# ------------------------------------------------------------------------------- speaker attributes
@pytest.mark.parametrize("device", DEVICES)
def test_gender_age_emotion_on_pyannote_speakers(paper_models, device):
    from earmark.experts.paper.diarize import PyannoteDiarizationExpert
    from earmark.experts.paper.speakers import HFSpeakerAttributesExpert

    clips = [noise_clip("a", 6.0), noise_clip("b", 3.0, 1)]
    vad = {c.clip_id: activity(c.clip_id, 2.0) for c in clips}
    diar = PyannoteDiarizationExpert(DIARIZATION, paper_models, device=device).analyze(clips, {"vad": vad})
    cfg = {"gender": GENDER, "age_band": AGE, "emotion": EMOTION}
    recs = HFSpeakerAttributesExpert(cfg, paper_models, device=device).analyze(
        clips, {"diarization": {d.clip_id: d for d in diar}}
    )
    for r, d in zip(recs, diar):
        assert [s.speaker for s in r.speakers] == sorted({t.speaker for t in d.turns})
        for s in r.speakers:
            assert {p.label for p in s.gender} == {"female", "male"}
            assert {p.label for p in s.age_band} == {"teen", "twenties", "thirties", "forties+"}
            assert {p.label for p in s.emotion} == {"neu", "hap", "ang", "sad"}
            assert s.accent == []  # not configured: never invented


# ------------------------------------------------------------------------------- demucs
@pytest.mark.parametrize("device", DEVICES)
def test_demucs_stems_with_vocals_back_through_vad(paper_models, device):
    from earmark.experts.paper.music import DemucsSeparationExpert

    clips = [tone("m", 3.0), noise_clip("n", 2.0), tone("s", 1.5, 330.0)]
    doms = {"m": _domain("m", "0M0"), "n": _domain("n", "S00"), "s": _domain("s", "SM0")}
    expert = DemucsSeparationExpert("htdemucs", paper_models, device=device, batch_size=2)
    recs = expert.analyze(clips, {"domain": doms})
    assert [r.clip_id for r in recs] == ["m", "n", "s"]
    assert recs[1].stems == [] and recs[1].vocals_speech_s is None and "no music" in recs[1].skipped_reason
    for r in (recs[0], recs[2]):
        assert r.skipped_reason is None and r.method == "demucs:htdemucs"
        assert [s.stem for s in r.stems] == ["drums", "bass", "other", "vocals"]
        assert sum(s.energy_share for s in r.stems) == pytest.approx(1, abs=1e-3)
        assert r.vocals_speech_s is not None and 0 <= r.vocals_speech_s <= 3.0
    stems = expert.separate([clips[0].samples])[0]
    assert {k: v.shape for k, v in stems.items()} == {k: (3 * SR,) for k in ("drums", "bass", "other", "vocals")}


# ------------------------------------------------------------------------------- NISQA
@pytest.mark.parametrize("device", DEVICES)
def test_nisqa_on_device(paper_models, device):
    from earmark.experts.paper.nisqa import DIMENSIONS, NISQAExpert

    clips = [noise_clip("a", 3.0), tone("b", 2.0)]
    expert = NISQAExpert("nisqa/nisqa.tar", paper_models, device=device)
    assert expert.device == device  # masks built on the model's device (nisqa.forward): CUDA works too
    vad = {
        c.clip_id: activity(c.clip_id, c.duration_s).model_copy(
            update={"segments": [TimeSpan(start_s=0.0, end_s=c.duration_s)]}
        )
        for c in clips
    }
    recs = expert.analyze(clips, {"vad": vad})
    assert all(np.isfinite([getattr(r, d) for d in DIMENSIONS]).all() for r in recs)


# ------------------------------------------------------------------------------- CLAP margin
@pytest.mark.parametrize("device", DEVICES)
def test_clap_margin_check_on_device(paper_models, device):
    from earmark.stages.filter.margin import ClapBackend, margin_checks, require_clap
    from tests.test_qc import _cap

    audio = {f"k{i}": tone(f"k{i}", 1.0, 220.0 * (i + 1)).samples for i in range(4)}
    backend = ClapBackend(require_clap("laion/clap-htsat-unfused", paper_models), audio, SR, device=device)
    caps = [_cap("long", f"A steady tone number {i} plays.", clip=f"k{i}") for i in range(4)]
    rows = margin_checks(caps, backend, FilterSection(margin_backend="clap"))
    assert len(rows) == 4 and {r.check for r in rows} == {"margin:clap"}
    assert all(r.score is not None and np.isfinite(r.score) and r.keep == (r.score >= 6.0) for r in rows)


# ------------------------------------------------------------------------------- the whole profile
@pytest.mark.parametrize("device", DEVICES)
def test_paper_profile_with_every_backend_switched_on(paper_models, device):
    cfg = AnalyzeSection(
        profile="paper",
        models_dir=paper_models,
        device=device,
        batch_size=4,
        tagger_model=TAGGER,
        asr_model=WHISPER,
        asr_align_model=ALIGN,
        diarization_model=DIARIZATION,
        gender_model=GENDER,
        age_model=AGE,
        emotion_model=EMOTION,
        separation_model="htdemucs",
        music_tagger_model=TAGGER,
        nisqa_model="nisqa/nisqa.tar",
    )
    experts = build_experts(cfg)
    paper = {n: experts[n].backend.split(":")[0] for n in ("tags", "asr", "diarization", "speakers", "separation")}
    assert paper == {
        "tags": "audioset-tagger",
        "asr": "faster-whisper",
        "diarization": "pyannote.audio",
        "speakers": "hf-audio-classification",
        "separation": "demucs",
    }
    assert list(experts)[-1] == "nisqa" and experts["music"].backend.endswith(f"+tagger:{TAGGER}")
    assert experts["asr"].backend.endswith(f"+whisperx:{ALIGN}")
    clips = [noise_clip("a", 4.0), tone("b", 3.0)]
    context: dict = {}
    for name, expert in experts.items():
        if name == "asr":
            expert.max_new_tokens = 8  # random weights never stop on their own
        recs = expert.analyze(clips, {n: context[n] for n in expert.needs})
        assert [r.clip_id for r in recs] == ["a", "b"] and all(isinstance(r, expert.record) for r in recs)
        context[name] = {r.clip_id: r for r in recs}
    for cid in ("a", "b"):  # routing: demucs ran exactly on the clips the tagger's domain says hold music
        has_music = context["domain"][cid].domain[1] == "M"
        assert bool(context["separation"][cid].stems) == has_music
