"""Embedded speech/acoustics experts on tiny real audio: numpy-synthesised signals and espeak-ng speech."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

from earmark.experts.asr import NO_SPEECH_REASON, WhisperASRExpert
from earmark.experts.base import SAMPLE_RATE, ClipAudio
from earmark.experts.levels import LevelsExpert
from earmark.experts.quality import DNSMOSExpert
from earmark.experts.vad import SileroVADExpert

SR = SAMPLE_RATE
FOX = "the quick brown fox jumps over the lazy dog"
LEAD_S = 0.5  # silence before the speech in the speech clip


def _sine(seconds: float, amplitude: float, freq: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32)


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    """espeak-ng saying FOX at 16 kHz, with LEAD_S of silence before and 0.5 s after."""
    wav = Path(tmp_path_factory.mktemp("espeak")) / "fox.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), FOX], check=True, capture_output=True)
    audio, sr = sf.read(wav, dtype="float32")
    audio = soxr.resample(audio, sr, SR).astype(np.float32)
    pad = np.zeros(int(LEAD_S * SR), dtype=np.float32)
    return np.concatenate([pad, audio, pad])


@pytest.fixture(scope="module")
def clips(speech: np.ndarray) -> dict[str, ClipAudio]:
    rng = np.random.default_rng(0)
    noise = rng.standard_normal(speech.size).astype(np.float32)
    loud_noise = 3.0 * float(np.sqrt(np.mean(speech**2))) * noise  # about -10 dB SNR
    audio = {
        "speech": speech,
        "noisy_speech": np.clip(speech + loud_noise, -1.0, 1.0),
        "sine": _sine(3.0, 0.5),  # peak -6 dBFS
        "clipped": np.clip(_sine(2.0, 2.0), -1.0, 1.0),
        "noise": (0.1 * noise[: 3 * SR]).astype(np.float32),
        "zeros": np.zeros(2 * SR, dtype=np.float32),
        "short": speech[int(LEAD_S * SR) : int((LEAD_S + 0.2) * SR)].copy(),  # 0.2 s
        "empty": np.zeros(0, dtype=np.float32),
    }
    return {name: ClipAudio(clip_id=name, samples=samples) for name, samples in audio.items()}


@pytest.fixture(scope="module")
def vad_records(clips: dict[str, ClipAudio]) -> dict:
    return {r.clip_id: r for r in SileroVADExpert().analyze(list(clips.values()), {})}


@pytest.fixture(scope="module")
def levels(clips: dict[str, ClipAudio]) -> dict:
    return {r.clip_id: r for r in LevelsExpert().analyze(list(clips.values()), {})}


# ------------------------------------------------------------------------------------------- levels
def test_levels_of_a_sine_match_theory(levels: dict) -> None:
    sine = levels["sine"]
    assert sine.peak_dbfs == pytest.approx(-6.02, abs=0.05)
    assert sine.rms_dbfs == pytest.approx(-9.03, abs=0.05)  # peak / sqrt(2)
    assert sine.crest_db == pytest.approx(3.01, abs=0.05)
    assert sine.lufs is not None and -12 < sine.lufs < -6  # K-weighting barely touches 440 Hz
    assert sine.clipping_ratio == 0.0 and sine.silence_ratio == 0.0


def test_levels_of_silence_and_clipping(levels: dict) -> None:
    zeros = levels["zeros"]
    assert zeros.rms_dbfs == zeros.peak_dbfs == -120.0
    assert zeros.silence_ratio == 1.0 and zeros.lufs is None  # gated out, not -inf
    assert levels["clipped"].clipping_ratio > 0.5
    assert levels["clipped"].peak_dbfs == pytest.approx(0.0, abs=0.01)
    speech = levels["speech"]
    assert 0.2 < speech.silence_ratio < 0.6  # 1 s of padding in ~3.8 s
    assert speech.lufs is not None and speech.crest_db > 10  # speech is peaky
    assert levels["short"].lufs is None  # shorter than the 400 ms loudness block


def test_clips_at_another_rate_are_resampled_to_16k() -> None:
    t = np.arange(48_000) / 48_000
    clip = ClipAudio(clip_id="48k", samples=(0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32), sample_rate=48_000)
    (profile,) = LevelsExpert().analyze([clip], {})
    assert profile.rms_dbfs == pytest.approx(-9.03, abs=0.1) and profile.silence_ratio == 0.0


# ---------------------------------------------------------------------------------------------- vad
def test_vad_finds_the_spoken_part(vad_records: dict, clips: dict[str, ClipAudio]) -> None:
    speech = vad_records["speech"]
    duration = clips["speech"].duration_s
    assert speech.speech_s > 1.8 and speech.max_prob > 0.9
    assert speech.segments[0].start_s == pytest.approx(LEAD_S, abs=0.25)
    assert all(0 <= s.start_s < s.end_s <= duration for s in speech.segments)
    assert speech.speech_ratio == pytest.approx(speech.speech_s / duration, abs=1e-3)
    for name in ("sine", "noise", "zeros"):
        assert vad_records[name].speech_s == 0.0 and vad_records[name].max_prob < 0.5, name


def test_vad_batch_equals_silero_reference(vad_records: dict, clips: dict[str, ClipAudio]) -> None:
    """Batching padded clips must give silero's own single-clip get_speech_timestamps result."""
    import torch
    from silero_vad import get_speech_timestamps, load_silero_vad

    reference = get_speech_timestamps(torch.from_numpy(clips["speech"].samples), load_silero_vad())
    ours = vad_records["speech"].segments
    assert [(round(s.start_s * SR), round(s.end_s * SR)) for s in ours] == [(r["start"], r["end"]) for r in reference]


# ---------------------------------------------------------------------------------------------- asr
def test_asr_transcribes_speech_and_skips_tone(clips: dict[str, ClipAudio], vad_records: dict) -> None:
    picked = [clips["speech"], clips["sine"]]
    speech, tone = WhisperASRExpert().analyze(picked, {"vad": vad_records})
    assert speech.clip_id == "speech" and tone.clip_id == "sine"
    heard = {w.strip(".,!?").lower() for w in speech.text.split()}
    assert len(heard & set(FOX.split())) >= 4, speech.text  # tiny.en mishears espeak a little
    assert speech.language == "en" and speech.skipped_reason is None
    duration = clips["speech"].duration_s
    assert len(speech.words) >= 6
    assert all(0 <= w.start_s <= w.end_s <= duration and 0 <= w.prob <= 1 for w in speech.words)
    assert speech.vad_speech_s == vad_records["speech"].speech_s
    assert tone.text == "" and tone.words == [] and tone.skipped_reason == NO_SPEECH_REASON


def test_asr_without_vad_context_names_the_fix(clips: dict[str, ClipAudio]) -> None:
    with pytest.raises(ValueError, match="run the vad expert"):
        WhisperASRExpert().analyze([clips["speech"]], {})


# ------------------------------------------------------------------------------------------- dnsmos
def test_dnsmos_prefers_clean_speech_and_scores_only_speech(clips: dict[str, ClipAudio], vad_records) -> None:
    # the noisy clip holds the same speech at the same times: score it where the clean clip's VAD found speech
    vad = {**vad_records, "noisy_speech": vad_records["speech"].model_copy(update={"clip_id": "noisy_speech"})}
    clean, noisy, tone = DNSMOSExpert().analyze([clips["speech"], clips["noisy_speech"], clips["sine"]], {"vad": vad})
    for r in (clean, noisy):
        assert all(1.0 <= v <= 5.0 for v in (r.ovrl_mos, r.sig_mos, r.bak_mos, r.p808_mos)), r
        assert r.skipped_reason is None and 0 < r.speech_s <= 10
    assert clean.ovrl_mos > noisy.ovrl_mos + 0.5
    assert clean.bak_mos > noisy.bak_mos  # the noise is in the background score
    # no speech: no speech-quality score at all (not a "poor" one)
    assert tone.ovrl_mos is None and tone.bak_mos is None and "VAD speech" in tone.skipped_reason


def test_dnsmos_batched_matches_one_clip_at_a_time(clips: dict[str, ClipAudio], vad_records, caplog) -> None:
    """The paper profile's path (windows of many clips per ONNX call; the CUDA provider where a worker has
    it) gives speechmos' scores: same graphs, features and polynomials, only batched. A clip longer than one
    window has several (speechmos' 1 s hops), and they are averaged per clip as speechmos does."""
    from earmark.experts.quality import BatchedDNSMOS, _load_dnsmos

    vad = {**vad_records, "noisy_speech": vad_records["speech"].model_copy(update={"clip_id": "noisy_speech"})}
    picked = [clips["speech"], clips["noisy_speech"], clips["sine"], clips["short"]]
    one = DNSMOSExpert().analyze(picked, {"vad": vad})
    with caplog.at_level("WARNING"):
        batched = DNSMOSExpert(device="cuda", batch_size=3).analyze(picked, {"vad": vad})
    if "CUDAExecutionProvider" not in __import__("onnxruntime").get_available_providers():
        assert "no CUDA provider" in caplog.text  # asked for the GPU, told why it scores on the CPU
    for a, b in zip(one, batched, strict=True):
        assert (a.clip_id, a.speech_s, a.skipped_reason) == (b.clip_id, b.speech_s, b.skipped_reason)
        for k in ("ovrl_mos", "sig_mos", "bak_mos", "p808_mos"):
            x, y = getattr(a, k), getattr(b, k)
            assert (x is None and y is None) or abs(x - y) <= 1.5e-4, (a.clip_id, k, x, y)  # 4 decimals kept
    assert one[0].ovrl_mos is not None and one[2].ovrl_mos is None  # speech scored, the tone not
    # 12.5 s of audio: 4 windows, scored in batches of 3 (across the clip boundary) against speechmos' own loop
    joined = np.concatenate([clips["speech"].samples, clips["noisy_speech"].samples])
    long = np.clip(np.resize(joined, int(12.5 * SAMPLE_RATE)), -1, 1)
    reference = _load_dnsmos()(long.astype(np.float32), SAMPLE_RATE, False)
    (got,) = BatchedDNSMOS("cpu")([long], batch_size=3)
    for k in ("ovrl_mos", "sig_mos", "bak_mos", "p808_mos"):
        assert abs(float(reference[k]) - got[k]) <= 1e-5, (k, reference[k], got[k])


def test_dnsmos_holds_the_gpu_slot_only_where_it_scores_on_the_gpu(monkeypatch) -> None:
    """A CUDA worker without onnxruntime-gpu scores DNSMOS on the CPU: its shards must not hold the `gpu` slot
    meanwhile (the GPU experts of other shards would wait on CPU work)."""
    from earmark.experts import quality

    monkeypatch.setattr(quality, "_onnx_cuda", lambda: False)
    monkeypatch.setattr(quality, "torch_cuda", lambda: False)
    assert not DNSMOSExpert(device="cuda", batch_size=16).uses_gpu
    monkeypatch.setattr(quality, "torch_cuda", lambda: True)  # no onnxruntime-gpu: the torch port on the GPU
    assert DNSMOSExpert(device="cuda", batch_size=16).uses_gpu and quality.gpu_runtime("cuda") == "torch"
    monkeypatch.setattr(quality, "_onnx_cuda", lambda: True)
    assert DNSMOSExpert(device="cuda", batch_size=16).uses_gpu
    assert not DNSMOSExpert(device="cuda", batch_size=1).uses_gpu  # speechmos' own loop: the CPU
    assert not DNSMOSExpert(device="cpu", batch_size=16).uses_gpu


def test_dnsmos_torch_port_scores_as_onnxruntime(clips: dict[str, ClipAudio]) -> None:
    """The GPU path without onnxruntime-gpu: both graphs through their torch port and the P.808 mel spectrogram
    in torch give ONNX Runtime's scores (run here on the CPU in float32; on CUDA it is the same code)."""
    from earmark.experts.quality import BatchedDNSMOS, _mel_p808, dnsmos_windows, p808_features

    joined = np.concatenate([clips["speech"].samples, clips["noisy_speech"].samples, clips["sine"].samples])
    audios = [np.clip(np.resize(joined, int(s * SAMPLE_RATE)), -1, 1).astype(np.float32) for s in (9.5, 12.0)]
    windows = [w for a in audios for w in dnsmos_windows(a)] + [np.zeros(int(9.01 * SAMPLE_RATE), np.float32)]
    import torch

    mel = _mel_p808("cpu")(torch.as_tensor(np.stack(windows))).numpy()
    reference = np.stack([p808_features(w) for w in windows])
    assert mel.shape == reference.shape and np.abs(mel - reference).max() < 1e-4  # silence included
    onnx = BatchedDNSMOS("cpu")(audios, batch_size=3)
    port = BatchedDNSMOS("cpu", runtime="torch")(audios, batch_size=3)
    for a, b in zip(onnx, port, strict=True):
        for k in ("ovrl_mos", "sig_mos", "bak_mos", "p808_mos"):
            assert abs(a[k] - b[k]) <= 1e-4, (k, a[k], b[k])


# ----------------------------------------------------------------------------------------- robustness
def test_short_silent_and_empty_clips_do_not_crash(clips: dict[str, ClipAudio], vad_records: dict) -> None:
    edge = [clips["short"], clips["zeros"], clips["empty"]]
    for expert in (LevelsExpert(), SileroVADExpert(), WhisperASRExpert(), DNSMOSExpert()):
        records = expert.analyze(edge, {"vad": vad_records})
        assert [r.clip_id for r in records] == ["short", "zeros", "empty"]
        for r in records:
            assert r.expert == expert.name and isinstance(r, expert.record)
            numbers = [v for v in r.model_dump().values() if isinstance(v, float)]
            assert all(math.isfinite(v) for v in numbers), r  # Parquet/JSON safe
    assert vad_records["empty"].speech_s == 0.0 and vad_records["empty"].segments == []
