"""Paper-profile backends on randomly initialised tiny models (real transformers / CTranslate2 code paths).

Nothing is downloaded: the models are built from configs into a temporary models directory. Outputs are
noise, so the tests assert what does not depend on the weights: record shapes and lineage, batching
equivalence (a batch gives what one-at-a-time gives), label → domain routing, and the error text when
weights or packages are missing.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from earmark.core.config import AnalyzeSection
from earmark.experts import build_experts
from earmark.experts.base import ClipAudio
from earmark.experts.models import MissingPackage, MissingWeights, model_path, require_weights
from earmark.experts.paper.audioset import MUSIC_LABELS, SPEECH_LABELS, category
from earmark.experts.paper.diarize import PyannoteDiarizationExpert, annotation_tracks, turns_to_record
from earmark.experts.paper.tagger import AudioSetTagsExpert, TaggerDomainExpert
from earmark.schemas.records import (
    Diarization,
    DomainDecision,
    LabelProb,
    SoundEvents,
    SpeakerTurn,
    SpeechActivity,
    TimeSpan,
    WindowTags,
)
from support import random_weights as rw

SR = 16_000
TAGGER = "MIT/ast-finetuned-audioset-10-10-0.4593"
WHISPER = "Systran/faster-whisper-large-v3"
HF_WHISPER = "openai/whisper-large-v3"
GENDER, EMOTION = "test/gender-w2v2", "test/emotion-w2v2"
AUDIOSET_SUBSET = [
    "Speech",
    "Male speech, man speaking",
    "Music",
    "Guitar",
    "Singing",
    "Dog",
    "Silence",
    "Inside, small room",
]
TINY_WHISPER = dict(
    d_model=64,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=2,
    decoder_attention_heads=2,
    encoder_ffn_dim=128,
    decoder_ffn_dim=128,
    num_mel_bins=80,
)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("models")
    rw.ast_classifier(
        root / TAGGER,
        AUDIOSET_SUBSET,
        num_mel_bins=64,
        max_length=200,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
    )
    rw.wav2vec2_classifier(root / GENDER, ["female", "male"], layer_norm=True)
    rw.wav2vec2_classifier(root / EMOTION, ["neu", "hap", "ang", "sad"], layer_norm=False, seed=1)
    rw.whisper_ct2(root / WHISPER, dims=TINY_WHISPER)
    rw.whisper_hf(root / HF_WHISPER, dims=TINY_WHISPER)
    return root


def noise_clip(clip_id: str, seconds: float, seed: int = 0) -> ClipAudio:
    rng = np.random.default_rng(seed)
    return ClipAudio(clip_id, (0.1 * rng.standard_normal(int(SR * seconds))).astype(np.float32))


def activity(clip_id: str, speech_s: float) -> SpeechActivity:
    return SpeechActivity(
        clip_id=clip_id,
        expert="vad",
        backend="test",
        expert_version="1",
        segments=[],
        speech_s=speech_s,
        speech_ratio=0.0,
        max_prob=0.0,
    )


# ------------------------------------------------------------------------------- models directory
def test_missing_weights_fail_when_the_profile_is_built_naming_model_slot_path_and_fix(tmp_path):
    cfg = AnalyzeSection(profile="paper", models_dir=tmp_path)
    with pytest.raises(MissingWeights) as err:
        build_experts(cfg)
    msg = str(err.value)
    expected = tmp_path / "mispeech/ced-base"
    assert "tags expert" in msg and "'mispeech/ced-base'" in msg and f"{expected}/config.json" in msg
    assert f"huggingface-cli download mispeech/ced-base --local-dir {expected}" in msg
    assert "Nothing is downloaded at run time" in msg
    assert isinstance(err.value, ValueError)  # the CLI reports it as a configuration error (exit 2)


def test_models_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("EARMARK_MODELS_DIR", str(tmp_path / "env"))
    assert model_path("a/b") == tmp_path / "env/a/b"
    assert model_path("a/b", tmp_path / "cfg") == tmp_path / "cfg/a/b"
    assert model_path(str(tmp_path / "abs")) == tmp_path / "abs"
    (tmp_path / "one.tar").write_bytes(b"x")
    assert require_weights("nisqa", "one.tar", tmp_path, files=()) == tmp_path / "one.tar"
    with pytest.raises(MissingWeights, match="nisqa expert .*'two.tar'"):
        require_weights("nisqa", "two.tar", tmp_path, files=())


# ------------------------------------------------------------------------------- tagger and domain
def test_audioset_labels_route_by_ontology():
    assert len(SPEECH_LABELS) == 16 and len(MUSIC_LABELS) == 157  # AudioSet indices 0–15; 27–37 + 137–282
    assert {category(x) for x in ("Speech", "male speech, man speaking", "Whispering", "Shout")} == {"speech"}
    assert {category(x) for x in ("Singing", "Guitar", "Jazz", "Scary music", "Rapping")} == {"music"}
    assert {category(x) for x in ("Dog", "Laughter", "Car", "Rain", "Noise", "Not an AudioSet label")} == {"sound"}
    assert {category(x) for x in ("Silence", "Inside, small room", "Reverberation")} == {"none"}


def events(*windows: dict[str, float]) -> SoundEvents:
    wins = [
        WindowTags(start_s=2.0 * i, end_s=2.0 * i + 2, tags=[LabelProb(label=k, prob=v) for k, v in w.items()])
        for i, w in enumerate(windows)
    ]
    return SoundEvents(
        clip_id="c",
        expert="tags",
        backend="t",
        expert_version="1",
        label_set="audioset-527",
        window_s=2.0,
        windows=wins,
        clip_tags=[],
    )


@pytest.mark.parametrize(
    "windows, code, silent",
    [
        (({"Male speech, man speaking": 0.8, "Inside, small room": 0.6},), "S00", False),
        (({"Music": 0.2, "Guitar": 0.31}, {"Dog": 0.5}), "0MA", False),
        (({"Speech": 0.9}, {"Singing": 0.7}, {"Car": 0.29}), "SM0", False),
        (({"Silence": 0.9, "Inside, small room": 0.5},), "000", True),
        (({"Speech": 0.4, "Music": 0.4, "Bark": 0.4},), "SMA", False),
    ],
)
def test_domain_from_window_tags(windows, code, silent):
    d = TaggerDomainExpert("tagger", threshold=0.3).decide("c", events(*windows))
    assert (d.domain, d.silent) == (code, silent)
    assert d.backend == "audioset-tagger:tagger+routing-v1"
    shares = {f.name: f.value for f in d.features}
    assert shares["windows"] == len(windows)


def test_tagger_batches_windows_across_clips(models):
    clips = [noise_clip("a", 3.0), noise_clip("b", 10.0, 1), noise_clip("c", 1.0, 2), noise_clip("d", 0.3, 3)]
    batched = AudioSetTagsExpert(TAGGER, models, batch_size=64, keep_prob=0.0)
    single = AudioSetTagsExpert(TAGGER, models, batch_size=1, keep_prob=0.0)
    labels, probs = batched.window_probs(clips)
    _, probs1 = single.window_probs(clips)
    assert labels == tuple(AUDIOSET_SUBSET)
    assert [p.shape for p in probs] == [(2, 8), (5, 8), (1, 8), (1, 8)]  # 2 s windows; 1 s tail kept, 0.3 s clip kept
    for p, q in zip(probs, probs1):
        np.testing.assert_allclose(p, q, atol=1e-5)
    assert all(((p > 0) & (p < 1)).all() for p in probs)  # AST logits through a sigmoid
    recs = batched.analyze(clips, {})
    assert [r.clip_id for r in recs] == ["a", "b", "c", "d"]
    assert recs[0].label_set == "audioset-8" and recs[0].backend == f"audioset-tagger:{TAGGER}"
    assert [(w.start_s, w.end_s) for w in recs[0].windows] == [(0.0, 2.0), (2.0, 3.0)]
    top = recs[1].clip_tags
    assert [t.prob for t in top] == sorted((t.prob for t in top), reverse=True)
    assert top[0].prob == pytest.approx(float(probs[1].max()), abs=1e-4)  # clip tags = max over windows
    domains = TaggerDomainExpert(TAGGER).analyze(clips, {"tags": {r.clip_id: r for r in recs}})
    assert all(isinstance(d, DomainDecision) for d in domains)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_lower_precision_is_autocast_around_the_same_weights_and_a_new_shard_key(models, precision):
    import torch

    clips = [noise_clip("a", 4.0), noise_clip("b", 2.0, 1)]
    full = AudioSetTagsExpert(TAGGER, models, keep_prob=0.0)
    low = AudioSetTagsExpert(TAGGER, models, keep_prob=0.0, precision=precision)
    _, want = full.window_probs(clips)
    _, got = low.window_probs(clips)
    for p, q in zip(got, want):  # close to fp32 (bf16 keeps 8 bits of mantissa, fp16 11), and not identical
        np.testing.assert_allclose(p, q, atol=0.05)
    assert any(not np.array_equal(p, q) for p, q in zip(got, want))
    assert "precision" not in full.key_config()  # fp32: the keys shards already have are kept
    assert low.key_config() == {**full.key_config(), "precision": precision}
    from earmark.experts.paper.hf import load_classifier

    weights = load_classifier(full.path, "cpu").model.classifier.dense.weight
    assert weights.dtype == torch.float32  # autocast: the model itself is not converted


# ------------------------------------------------------------------------------- speakers
def test_speaker_attributes_per_diarized_speaker_batched(models):
    from earmark.experts.paper.speakers import HFSpeakerAttributesExpert

    clips = [noise_clip("a", 4.0), noise_clip("b", 3.0, 1), noise_clip("c", 2.0, 2)]
    turns = {
        "a": [("S1", 0.0, 1.5), ("S2", 1.5, 2.7), ("S1", 3.0, 4.0)],
        "b": [("S1", 0.2, 2.9)],
        "c": [("S1", 0.0, 0.3)],  # too little speech for a profile
    }
    diar = {
        cid: Diarization(
            clip_id=cid,
            expert="diarization",
            backend="t",
            expert_version="1",
            n_speakers=len({t[0] for t in ts}),
            skipped_reason=None,
            turns=[SpeakerTurn(speaker=s, start_s=a, end_s=b) for s, a, b in ts],
        )
        for cid, ts in turns.items()
    }
    cfg = {"gender": GENDER, "emotion": EMOTION, "age_band": None}
    recs = HFSpeakerAttributesExpert(cfg, models, batch_size=8).analyze(clips, {"diarization": diar})
    one = HFSpeakerAttributesExpert(cfg, models, batch_size=1).analyze(clips, {"diarization": diar})
    assert [[s.speaker for s in r.speakers] for r in recs] == [["S1", "S2"], ["S1"], []]
    assert recs[2].skipped_reason and "0.5 s" in recs[2].skipped_reason
    s1 = recs[0].speakers[0]
    assert s1.speech_s == pytest.approx(2.5)
    assert {p.label for p in s1.gender} == {"female", "male"}
    assert sum(p.prob for p in s1.gender) == pytest.approx(1, abs=1e-3)
    assert {p.label for p in s1.emotion} == {"neu", "hap", "ang", "sad"}
    assert s1.age_band == [] and s1.accent == []  # not configured: never invented
    assert s1.method == recs[0].backend == f"hf-audio-classification:emotion={EMOTION},gender={GENDER}"
    for r, q in zip(recs, one):  # batching (masked or equal-length only) gives the one-at-a-time result
        for a, b in zip(r.speakers, q.speakers):
            for attr in ("gender", "emotion"):
                got, want = {p.label: p.prob for p in getattr(a, attr)}, {p.label: p.prob for p in getattr(b, attr)}
                assert got == pytest.approx(want, abs=2e-4)


# ------------------------------------------------------------------------------- ASR
def test_whisper_batched_with_language_id_and_word_times(models):
    from earmark.experts.paper.asr import FasterWhisperPaperExpert

    clips = [noise_clip(f"c{i}", s, i) for i, s in enumerate([3.0, 10.0, 1.5, 0.5])]
    vad = {c.clip_id: activity(c.clip_id, 0.0 if c.clip_id == "c3" else 1.0) for c in clips}
    batched = FasterWhisperPaperExpert(WHISPER, models, batch_size=4, max_new_tokens=12).analyze(clips, {"vad": vad})
    single = FasterWhisperPaperExpert(WHISPER, models, batch_size=1, max_new_tokens=12).analyze(clips, {"vad": vad})
    assert [r.clip_id for r in batched] == ["c0", "c1", "c2", "c3"]
    assert batched[3].skipped_reason == "no speech detected by VAD" and batched[3].words == []
    vocab = json.loads((models / WHISPER / "tokenizer.json").read_text())
    langs = {a["content"][2:-2] for a in vocab["added_tokens"]}
    for r, c in zip(batched[:3], clips):
        assert r.skipped_reason is None and r.backend == f"faster-whisper:{WHISPER}"
        assert r.language in langs and 0 < r.language_prob <= 1
        assert all(0 <= w.start_s <= w.end_s <= c.duration_s for w in r.words)
    assert [r.model_dump() for r in batched] == [r.model_dump() for r in single]


def test_transformers_whisper_batched_with_language_id_and_word_times(models):
    from earmark.experts.paper.asr_hf import TransformersWhisperPaperExpert

    clips = [noise_clip(f"c{i}", s, i) for i, s in enumerate([3.0, 10.0, 1.5, 0.5])]
    vad = {c.clip_id: activity(c.clip_id, 0.0 if c.clip_id == "c3" else 1.0) for c in clips}
    expert = TransformersWhisperPaperExpert(HF_WHISPER, models, batch_size=4, max_new_tokens=12)
    batched = expert.analyze(clips, {"vad": vad})
    single = TransformersWhisperPaperExpert(HF_WHISPER, models, batch_size=1, max_new_tokens=12).analyze(
        clips, {"vad": vad}
    )
    assert [r.clip_id for r in batched] == ["c0", "c1", "c2", "c3"]
    assert batched[3].skipped_reason == "no speech detected by VAD" and batched[3].words == []
    vocab = json.loads((models / HF_WHISPER / "tokenizer.json").read_text())
    langs = {a["content"][2:-2] for a in vocab["added_tokens"]}
    for r, c in zip(batched[:3], clips):
        assert r.skipped_reason is None and r.backend == f"transformers:{HF_WHISPER}"
        assert r.language in langs and 0 < r.language_prob <= 1 and 0 <= r.no_speech_prob <= 1
        assert r.text and r.words and r.avg_logprob < 0
        assert all(0 <= w.start_s <= w.end_s <= c.duration_s and 0 <= w.prob <= 1 for w in r.words)
    assert [r.model_dump() for r in batched] == [r.model_dump() for r in single]
    # A set language is the one every clip is decoded in (the prompt carries it).
    forced = TransformersWhisperPaperExpert(HF_WHISPER, models, language="de", max_new_tokens=4)
    assert {r.language for r in forced.analyze(clips[:2], {"vad": vad})} == {"de"}
    assert forced.key_config()["language"] == "de" and expert.key_config()["precision"] == "fp32"


def test_transformers_whisper_on_tiny_en_agrees_with_faster_whisper(tmp_path):
    """The embedded tiny.en weights, written back as a transformers checkpoint, transcribe espeak speech as
    faster-whisper does on the same weights: the same language, ≥ 90 % of the words the same (CTranslate2 and
    torch round differently, so a near tie may go the other way), and on the words both wrote, the same times
    and probabilities up to alignment noise. The check on real weights that the backend decodes, times and
    scores right."""
    import difflib

    import soundfile as sf
    import soxr
    from faster_whisper import WhisperModel

    from earmark.experts.asr import whisper_model_dir
    from earmark.experts.paper.asr import transcribe_batch as ct2_batch
    from earmark.experts.paper.asr_hf import TransformersWhisperPaperExpert
    from support.whisper_export import ct2_to_transformers

    ct2_to_transformers(whisper_model_dir(), tmp_path / "models/openai/whisper-tiny.en")
    sentences = [
        "The train to the city leaves from platform four. Please water the plants while I am away.",
        "Hello, my name is Peter. I live in a small town near the river, and I like to read books.",
    ]
    clips = []
    for i, text in enumerate(sentences):
        wav = tmp_path / f"s{i}.wav"
        subprocess.run(["espeak-ng", "-w", str(wav), text], check=True, capture_output=True)
        x, sr = sf.read(wav, dtype="float32")
        clips.append(ClipAudio(f"s{i}", np.concatenate([np.zeros(SR // 2, np.float32), soxr.resample(x, sr, SR)])))
    vad = {c.clip_id: activity(c.clip_id, 3.0) for c in clips}
    ours = TransformersWhisperPaperExpert("openai/whisper-tiny.en", tmp_path / "models", batch_size=2).analyze(
        clips, {"vad": vad}
    )
    fw = WhisperModel(str(whisper_model_dir()), device="cpu", compute_type="float32")
    theirs = ct2_batch(fw, [c.samples for c in clips], language="en")
    for r, t, said in zip(ours, theirs, sentences):
        words = [w for s in t["segments"] for w in s["words"]]
        a, b = [w.word for w in r.words], [w["word"].strip() for w in words]
        match = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
        assert r.language == "en" and match.ratio() >= 0.9, (a, b)
        assert difflib.SequenceMatcher(a=r.text.lower().split(), b=said.lower().split()).ratio() >= 0.8, r.text
        pairs = [(r.words[m.a + k], words[m.b + k]) for m in match.get_matching_blocks() for k in range(m.size)]
        assert len(pairs) >= 0.9 * len(b)
        # Both time words by DTW through the alignment heads' attention; they differ where a word borders a
        # pause (the frame count each crops to, the kernels' rounding), so the median is the tight check.
        gaps = np.array([[w.start_s - x["start"], w.end_s - x["end"]] for w, x in pairs])
        assert np.median(np.abs(gaps)) <= 0.03 and np.abs(gaps).max() <= 0.5, gaps
        assert np.median([abs(w.prob - x["probability"]) for w, x in pairs]) <= 0.05
        assert r.avg_logprob == pytest.approx(t["segments"][0]["avg_logprob"], abs=0.1)
        # faster-whisper pads the log-mel frames with zeros, openai-whisper and transformers pad the audio
        # with silence first: the encoders see different padding, so no-speech is only roughly the same.
        assert r.no_speech_prob == pytest.approx(t["segments"][0]["no_speech_prob"], abs=0.15)
    # On the same features the two models' encoders agree: every weight was carried over.
    import ctranslate2
    import torch
    from transformers import WhisperForConditionalGeneration

    hf = WhisperForConditionalGeneration.from_pretrained(str(tmp_path / "models/openai/whisper-tiny.en")).eval()
    feats = fw.feature_extractor(clips[0].samples)[None, :, :3000]
    feats = np.pad(feats, ((0, 0), (0, 0), (0, 3000 - feats.shape[-1]))).astype(np.float32)
    ct2_enc = np.asarray(fw.model.encode(ctranslate2.StorageView.from_array(feats), to_cpu=True))
    with torch.inference_mode():
        hf_enc = hf.model.encoder(torch.from_numpy(feats)).last_hidden_state.numpy()
    assert np.abs(ct2_enc - hf_enc).max() < 2e-2 and np.abs(ct2_enc - hf_enc).mean() < 1e-3


def test_transformers_backend_is_chosen_by_config_and_refuses_a_ctranslate2_directory(models):
    cfg = AnalyzeSection(
        profile="paper",
        models_dir=models,
        tagger_model=TAGGER,
        asr_backend="transformers",
        asr_model=HF_WHISPER,
        diarization_model=None,
        gender_model=None,
        emotion_model=None,
        separation_model=None,
        nisqa_model=None,
    )
    assert build_experts(cfg)["asr"].backend == f"transformers:{HF_WHISPER}"
    with pytest.raises(
        ValueError, match=r"asr_model .*faster-whisper-large-v3.* no transformers weights.*openai/whisper"
    ):
        build_experts(cfg.model_copy(update={"asr_model": WHISPER}))


def test_configured_but_missing_packages_fail_clearly(models):
    from earmark.experts.paper.asr import FasterWhisperPaperExpert
    from earmark.experts.paper.music import DemucsSeparationExpert

    align = "facebook/wav2vec2-base-960h"
    checks = [
        (lambda: FasterWhisperPaperExpert(WHISPER, models, align_model=align), "whisperx"),
        (lambda: PyannoteDiarizationExpert("pyannote/speaker-diarization-3.1", models), "pyannote.audio"),
        (lambda: DemucsSeparationExpert("htdemucs", models), "demucs"),
    ]
    for make, package in checks:
        if importlib.util.find_spec(package.split(".")[0]) is not None:
            continue  # installed here (the paper image): nothing to check for this one
        with pytest.raises(MissingPackage, match=f"needs the Python package '{package}'.*paper.txt"):
            make()


# ------------------------------------------------------------------------------- diarization
class _Segment:
    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end


class _Annotation:
    """pyannote.core.Annotation's iteration protocol: (Segment, track, label)."""

    def __init__(self, tracks):
        self.tracks = tracks

    def itertracks(self, yield_label: bool = False):
        assert yield_label
        for i, (s, e, lab) in enumerate(self.tracks):
            yield _Segment(s, e), f"t{i}", lab


def test_pyannote_turns_become_a_diarization_record():
    ann = _Annotation(
        [(2.0, 3.5, "SPEAKER_01"), (0.1, 1.9, "SPEAKER_03"), (3.4, 11.0, "SPEAKER_03"), (5.0, 5.01, "SPEAKER_07")]
    )
    lineage = {"clip_id": "c", "expert": "diarization", "backend": "pyannote.audio:x", "expert_version": "1"}
    rec = turns_to_record(lineage, annotation_tracks(ann), duration_s=10.0)
    assert rec.n_speakers == 2 and rec.skipped_reason is None
    assert [(t.speaker, t.start_s, t.end_s) for t in rec.turns] == [
        ("S1", 0.1, 1.9),
        ("S2", 2.0, 3.5),
        ("S1", 3.4, 10.0),
    ]

    class Output:  # pyannote 4 wraps the annotation
        speaker_diarization = ann

    assert list(annotation_tracks(Output())) == list(annotation_tracks(ann))
    empty = turns_to_record(lineage, [], duration_s=10.0)
    assert empty.n_speakers == 0 and empty.skipped_reason


# ------------------------------------------------------------------------------- music, NISQA
def test_music_tagger_labels_only_clips_with_music(models):
    from earmark.experts.music import HPSSSeparationExpert
    from earmark.experts.paper.music import PaperMusicExpert, stem_levels

    t = np.arange(3 * SR) / SR
    tone = ClipAudio("m", (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))
    clips = [tone, noise_clip("n", 3.0)]
    dom = {
        c.clip_id: TaggerDomainExpert("t").decide(c.clip_id, events({"Music" if c.clip_id == "m" else "Dog": 0.9}))
        for c in clips
    }
    sep = {r.clip_id: r for r in HPSSSeparationExpert().analyze(clips, {"domain": dom})}
    from earmark.experts.base import gpu_sections

    entered: list[str] = []
    expert = PaperMusicExpert(TAGGER, models, top_k=3, min_prob=0.0)
    real_analysis = expert.analysis.analyze
    expert.analysis.analyze = lambda *a: (entered.append("librosa"), real_analysis(*a))[1]

    @contextmanager
    def slot():
        entered.append("slot")
        yield

    with gpu_sections(slot):
        recs = expert.analyze(clips, {"domain": dom, "separation": sep})
    assert entered == ["librosa", "slot"]  # the `gpu` slot only around the tagger, librosa's analysis outside it
    assert recs[0].analyzed and recs[0].tagger == TAGGER and len(recs[0].tags) == 3
    assert {x.label for x in recs[0].tags} <= set(AUDIOSET_SUBSET) and recs[0].key is not None
    assert not recs[1].analyzed and recs[1].tags == [] and recs[1].tagger is None
    assert recs[0].backend.endswith(f"+tagger:{TAGGER}")
    # no music tagger configured: the embedded profile's music tags (experts/learned/musictags) stay
    fallback = PaperMusicExpert(None, models).analyze(clips, {"domain": dom, "separation": sep})
    assert fallback[0].tagger.startswith("musictags:") and fallback[0].window_tags and fallback[0].candidate_tags
    assert fallback[1].tags == [] and fallback[1].tagger is None
    # the GPU slot only for the tagger: librosa's analysis alone is CPU work
    assert PaperMusicExpert(TAGGER, models, device="cuda").uses_gpu
    assert not PaperMusicExpert(None, models, device="cuda").uses_gpu
    levels = stem_levels({"vocals": np.ones(100, np.float32), "other": np.zeros(100, np.float32)})
    assert [(s.stem, s.energy_share, s.rms_dbfs) for s in levels] == [("vocals", 1.0, 0.0), ("other", 0.0, -120.0)]


def test_nisqa_scores_five_dimensions_batched(tmp_path):
    from earmark.experts.paper.nisqa import DIMENSIONS, NISQAExpert

    if importlib.util.find_spec("torchmetrics") is None:
        with pytest.raises(MissingPackage, match="'torchmetrics'"):
            NISQAExpert("nisqa.tar", tmp_path)
        return
    from support.nisqa_checkpoint import random_checkpoint

    random_checkpoint(tmp_path / "nisqa.tar")
    clips = [noise_clip("a", 3.0), noise_clip("b", 10.0, 1), noise_clip("c", 1.5, 2), noise_clip("d", 4.0, 3)]
    spans = {"a": [(0.0, 3.0)], "b": [(0.0, 10.0)], "c": [(0.0, 1.5)], "d": [(1.0, 1.4)]}  # d: 0.5 s of speech
    vad = {
        c.clip_id: activity(c.clip_id, 0.0).model_copy(
            update={"segments": [TimeSpan(start_s=a, end_s=b) for a, b in spans[c.clip_id]]}
        )
        for c in clips
    }
    recs = NISQAExpert("nisqa.tar", tmp_path, batch_size=8).analyze(clips, {"vad": vad})
    one = NISQAExpert("nisqa.tar", tmp_path, batch_size=1).analyze(clips, {"vad": vad})
    for r, q in zip(recs[:3], one[:3]):  # padded segments are masked: the batch gives the one-at-a-time scores
        assert [getattr(r, d) for d in DIMENSIONS] == pytest.approx([getattr(q, d) for d in DIMENSIONS], abs=2e-4)
        assert r.skipped_reason is None and r.speech_s > 1.0
    assert len({getattr(recs[0], d) for d in DIMENSIONS}) == 5  # five heads, five different outputs
    # too little speech: no score at all (not a "poor" one), and the reason
    assert all(getattr(recs[3], d) is None for d in DIMENSIONS) and "VAD speech" in recs[3].skipped_reason
    assert recs[3].speech_s == pytest.approx(0.5)
    # only the speech is scored: 2 s of speech inside 4 s of loud noise scores as that speech alone (with the
    # VAD's 0.05 s of padding on each side), not as the whole clip
    speech, pad = noise_clip("e", 2.0, 4).samples, int(0.05 * SR)
    loud = (0.8 * np.random.default_rng(5).standard_normal(SR)).astype(np.float32)
    alone = ClipAudio("e", np.concatenate([loud[SR - pad :], speech, loud[:pad]]))
    inside = ClipAudio("f", np.concatenate([loud, speech, loud]))
    around = {"e": [TimeSpan(start_s=0.0, end_s=alone.duration_s)], "f": [TimeSpan(start_s=1.0, end_s=3.0)]}
    vad2 = {k: activity(k, 2.0).model_copy(update={"segments": v}) for k, v in around.items()}
    e, f = NISQAExpert("nisqa.tar", tmp_path, batch_size=1).analyze([alone, inside], {"vad": vad2})
    assert [getattr(e, d) for d in DIMENSIONS] == pytest.approx([getattr(f, d) for d in DIMENSIONS], abs=1e-4)
    assert f.speech_s == pytest.approx(2.1)


def test_nisqa_forward_with_device_masks_is_torchmetrics_forward(tmp_path):
    """The expert's forward (masks built on the model's device, so it runs on CUDA) computes what torchmetrics'
    forward computes, padded batch included; and the configured device is kept, not forced to the CPU."""
    pytest.importorskip("torchmetrics")  # in the core venv (and the paper lock)
    import torch

    from earmark.experts.paper.nisqa import NISQAExpert, _load, forward
    from support.nisqa_checkpoint import random_checkpoint

    random_checkpoint(tmp_path / "nisqa.tar")
    model, args = _load(str(tmp_path / "nisqa.tar"), "cpu")
    torch.manual_seed(0)
    x = torch.randn(3, 40, args["ms_n_mels"], args["ms_seg_length"])
    n_wins = torch.tensor([40, 17, 5])
    with torch.inference_mode():
        assert torch.equal(forward(model, x, n_wins), model(x, n_wins))
    assert NISQAExpert("nisqa.tar", tmp_path, device="cuda").device == "cuda"


def test_nisqa_torch_mel_spectrogram_is_librosas(tmp_path):
    """The mel spectrogram a GPU worker computes in torch (`features="torch"`, the default off the CPU) is NISQA's
    librosa one within 1e-3 dB, and the scores within 1e-5; the segments without padding to ms_max_segments give
    torchmetrics' segments, so the librosa path's scores are bit for bit those of torchmetrics' helpers."""
    pytest.importorskip("torchmetrics")
    import soxr
    import torch
    from torchmetrics.functional.audio.nisqa import _get_librosa_melspec, _segment_specs

    from earmark.experts.paper.nisqa import NISQAExpert, _load, forward, melspec_db, segments
    from support.nisqa_checkpoint import random_checkpoint

    random_checkpoint(tmp_path / "nisqa.tar")
    model, args = _load(str(tmp_path / "nisqa.tar"), "cpu")
    audios = [noise_clip("a", 1.2).samples, espeakish(3.0), noise_clip("c", 10.0, 2).samples]
    padded, n_wins = [], []
    for a in audios:
        y = soxr.resample(a, SR, args["ms_sr"]).astype(np.float32)
        ref = _get_librosa_melspec(y[None], args["ms_sr"], args)
        ours = melspec_db(y, args["ms_sr"], args, "cpu").numpy()
        assert ours.shape == ref.shape[1:] and np.abs(ours - ref[0]).max() < 1e-3
        x, n = _segment_specs(torch.from_numpy(ref), args)
        mine, m = segments(torch.from_numpy(ref[0]), args)
        assert m == int(n) and torch.equal(mine, x[0, :m])
        padded.append(x[0])
        n_wins.append(int(n))
    with torch.inference_mode():
        upstream = forward(model, torch.stack(padded), torch.tensor(n_wins)).numpy()
    lib = NISQAExpert("nisqa.tar", tmp_path).score(audios)
    tor = NISQAExpert("nisqa.tar", tmp_path, features="torch").score(audios)
    assert np.array_equal(lib, upstream) and np.abs(tor - lib).max() < 1e-5
    assert NISQAExpert("nisqa.tar", tmp_path).features == "librosa"
    assert NISQAExpert("nisqa.tar", tmp_path, device="cuda").features == "torch"


def espeakish(seconds: float) -> np.ndarray:
    """A voiced-like signal: a gliding 150 Hz harmonic tone in 4 Hz syllables over faint noise."""
    t = np.arange(int(SR * seconds)) / SR
    voiced = np.sin(2 * np.pi * (150 + 50 * np.sin(3 * t)) * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t))
    return (0.3 * voiced + 0.01 * np.random.default_rng(7).standard_normal(t.size)).astype(np.float32)


# ------------------------------------------------------------------------------- description
class _ChatHandler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        parts = body["messages"][0]["content"]
        audio = next(p["input_audio"] for p in parts if p["type"] == "input_audio")
        n = len(audio["data"])
        status, payload = (
            (400, {"error": "nope"})
            if n < 1000
            else (200, {"choices": [{"message": {"content": f"{body['model']} heard {audio['format']} b64={n}"}}]})
        )
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_description_from_an_audio_chat_endpoint():
    from earmark.experts.paper.describe import AudioLMDescriptionExpert, DescriptionFailed

    srv = ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        expert = AudioLMDescriptionExpert(url, "omni-test")
        recs = expert.analyze([noise_clip("a", 1.0), noise_clip("b", 2.0)], {})
        assert [r.model for r in recs] == ["omni-test", "omni-test"]
        assert recs[0].text.startswith("omni-test heard wav b64=") and recs[0].backend == "audio-lm:omni-test"
        assert recs[0].text != recs[1].text  # each clip's own audio went over the wire
        with pytest.raises(DescriptionFailed, match="failed for 1 of 2 clip.*HTTP 400"):
            expert.analyze([noise_clip("a", 1.0), ClipAudio("tiny", np.zeros(10, np.float32))], {})
    finally:
        srv.shutdown()
        srv.server_close()


# ------------------------------------------------------------------------------- the profile
def test_paper_profile_runs_in_dependency_order(models, tmp_path):
    (models / "nisqa").mkdir(exist_ok=True)
    has_nisqa = importlib.util.find_spec("torchmetrics") is not None
    if has_nisqa:
        from support.nisqa_checkpoint import random_checkpoint

        random_checkpoint(models / "nisqa/nisqa.tar")
    cfg = AnalyzeSection(
        profile="paper",
        models_dir=models,
        tagger_model=TAGGER,
        asr_model=WHISPER,
        diarization_model=None,
        gender_model=GENDER,
        emotion_model=EMOTION,
        separation_model=None,
        music_tagger_model=TAGGER,
        nisqa_model="nisqa/nisqa.tar" if has_nisqa else None,
    )
    experts = build_experts(cfg)
    assert list(experts) == [
        "levels",
        "vad",
        "dnsmos",
        "tags",
        "domain",
        "asr",
        "asr_check",
        "diarization",
        "speakers",
        "separation",
        "music",
        "acoustics",
    ] + (["nisqa"] if has_nisqa else [])
    assert experts["tags"].backend == f"audioset-tagger:{TAGGER}"
    assert experts["diarization"].backend.startswith("resemblyzer:")  # None → the embedded default
    clips = [noise_clip("a", 2.5), noise_clip("b", 4.0, 1)]
    context: dict = {}
    for name, expert in experts.items():
        if isinstance(expert, type(experts["asr"])):
            expert.max_new_tokens = 8  # random weights never stop on their own
        recs = expert.analyze(clips, {n: context[n] for n in expert.needs})
        assert [r.clip_id for r in recs] == ["a", "b"] and all(isinstance(r, expert.record) for r in recs)
        context[name] = {r.clip_id: r for r in recs}
