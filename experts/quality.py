"""Speech quality: Microsoft DNSMOS (P.835 SIG/BAK/OVRL + P.808 MOS) via the `speechmos` wheel's ONNX models.

speechmos exposes DNSMOS as `speechmos.dnsmos.run(audio, sr)` backed by a module-global `DNSMOS` object;
we build our own `DNSMOS` instance once per process instead (same models, same scoring) so the expert does
not depend on that global. DNSMOS scores 9.01 s windows and tiles a shorter clip by repetition (as
Microsoft's reference script does). We tile to exactly one window ourselves: speechmos' doubling would
otherwise score up to 7 near-identical windows of a short clip, and loop forever on an empty one (scored
here as one window of digital silence). The embedded profile scores clips one at a time through speechmos'
own object, as it always has (its shards keep their values). The paper profile
(`batch_size` > 1) scores the windows of a whole shard in batches through `BatchedDNSMOS`, the same two ONNX
graphs and the same features and polynomials, on ONNX Runtime's CUDA provider when `device = "cuda"` and the
worker has it (`onnxruntime-gpu`), else on the CPU (`tests/test_experts_speech.py` holds the two paths equal).

Only speech is scored: the VAD speech segments of the clip, joined (`experts.audio.speech_only`). A clip
with less than `min_speech_s` of speech gets no score (None, with the reason) — DNSMOS on music or on a
door slam says "poor speech quality", which is not a fact about the recording.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from importlib.metadata import version as _pkg_version
from pathlib import Path
from typing import Any

import numpy as np

from earmark.core.threads import onnx_options
from earmark.experts.audio import samples_16k, speech_only, speech_to_score
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert, gpu_section, load_once, torch_cuda
from earmark.schemas.records import SpeechActivity, SpeechQuality

log = logging.getLogger(__name__)


def _models() -> Path:
    import speechmos

    return Path(speechmos.__file__).parent / "dnsmos_models"


def _load_dnsmos() -> Any:
    """speechmos' DNSMOS, its two ONNX Runtime sessions sized to this process' thread budget (speechmos' own
    constructor gives each a thread per core)."""
    import onnxruntime
    from speechmos.dnsmos import DNSMOS

    model = DNSMOS.__new__(DNSMOS)
    model.primary_model_path = str(_models() / "sig_bak_ovr.onnx")
    model.onnx_sess = onnxruntime.InferenceSession(model.primary_model_path, onnx_options())
    model.p808_onnx_sess = onnxruntime.InferenceSession(str(_models() / "model_v8.onnx"), onnx_options())
    return model


# speechmos' polynomials from the raw P.835 outputs to MOS (the standard, not the personalized, model)
_P835 = {
    "sig_mos": np.poly1d([-0.08397278, 1.22083953, 0.0052439]),
    "bak_mos": np.poly1d([-0.13166888, 1.60915514, -0.39604546]),
    "ovrl_mos": np.poly1d([-0.06766283, 1.11546468, 0.04602535]),
}


def dnsmos_windows(audio: np.ndarray) -> list[np.ndarray]:
    """The windows DNSMOS scores in one clip's speech: 9.01 s each, 1 s apart (speechmos' hops); audio shorter
    than a window is repeated cyclically to exactly one window, nothing at all scores one window of silence."""
    from speechmos.dnsmos import INPUT_LENGTH

    window = int(INPUT_LENGTH * SAMPLE_RATE)
    if audio.size == 0:
        audio = np.zeros(window, dtype=np.float32)
    elif audio.size < window:
        audio = np.resize(audio, window)
    hops = int(np.floor(audio.size / SAMPLE_RATE) - INPUT_LENGTH) + 1
    out = [audio[i * SAMPLE_RATE : int((i + INPUT_LENGTH) * SAMPLE_RATE)] for i in range(hops)]
    return [w.astype(np.float32) for w in out if w.size == window]


def p808_features(window: np.ndarray) -> np.ndarray:
    """The P.808 model's input for one window: speechmos' `audio_melspec` (120 mel bands in dB, frames × bands)."""
    import librosa

    mel = librosa.feature.melspectrogram(y=window[:-160], sr=SAMPLE_RATE, n_fft=321, hop_length=160, n_mels=120)
    return ((librosa.power_to_db(mel, ref=np.max) + 40) / 40).T.astype(np.float32)


def _onnx_cuda() -> bool:
    import onnxruntime

    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


def gpu_runtime(device: str) -> str | None:
    """What scores DNSMOS on the GPU for `device`: ONNX Runtime's CUDA provider where the worker has
    onnxruntime-gpu, else the graphs' torch port (experts/onnx_torch.py) where torch sees CUDA; None: the CPU."""
    if not device.startswith("cuda"):
        return None
    if _onnx_cuda():
        return "onnxruntime"
    return "torch" if torch_cuda() else None


def _mel_p808(device: Any) -> Any:
    """`p808_features` for a batch of windows as a torch module on `device`: the same STFT (n_fft 321, hop 160,
    periodic Hann, zero padding at both ends), librosa's 120-band Slaney mel basis, dB against each window's own
    maximum with librosa's floor (1e-10) and 80 dB range; within 1e-4 of librosa's (tests/test_experts_speech.py).
    A module, so that profilers and benchmarks/experts/gpu_worker_cpu.py see it as device work."""
    import librosa
    import torch

    class MelP808(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            basis = librosa.filters.mel(sr=SAMPLE_RATE, n_fft=321, n_mels=120)
            self.register_buffer("basis", torch.as_tensor(basis, dtype=torch.float32))
            self.register_buffer("window", torch.hann_window(321, periodic=True, dtype=torch.float32))

        def forward(self, windows: torch.Tensor) -> torch.Tensor:
            spec = torch.stft(
                windows[:, :-160],
                321,
                hop_length=160,
                window=self.window,
                center=True,
                pad_mode="constant",
                return_complex=True,
            )
            power = torch.matmul(self.basis, spec.abs() ** 2)  # [N, 120, frames]
            db = 10.0 * torch.log10(power.clamp_min(1e-10))
            db = db - 10.0 * torch.log10(power.amax(dim=(1, 2), keepdim=True).clamp_min(1e-10))
            db = torch.maximum(db, db.amax(dim=(1, 2), keepdim=True) - 80.0)
            return ((db + 40.0) / 40.0).transpose(1, 2)

    return MelP808().to(device).eval()


class BatchedDNSMOS:
    """DNSMOS over many clips at once: every window of every clip, `batch_size` windows per call. On a CUDA
    worker it scores on the GPU: through ONNX Runtime's CUDA provider, or, where this onnxruntime has none,
    through the graphs' torch port with the P.808 mel spectrogram in torch (`gpu_runtime`); else on the CPU."""

    def __init__(self, device: str = "cpu", runtime: str | None = None) -> None:
        import onnxruntime

        available = onnxruntime.get_available_providers()
        runtime = runtime or gpu_runtime(device) or "onnxruntime"
        self.runtime = runtime
        if runtime == "torch":
            import torch

            from earmark.experts.onnx_torch import OnnxModule

            self.device = torch.device(device if device.startswith("cuda") and torch_cuda() else "cpu")
            self.primary = OnnxModule(_models() / "sig_bak_ovr.onnx").to(self.device).eval()
            self.p808 = OnnxModule(_models() / "model_v8.onnx").to(self.device).eval()
            self.mel = _mel_p808(self.device)
            self.provider = f"torch:{self.device}"
        else:
            cuda = device.startswith("cuda") and _onnx_cuda()
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if cuda else ["CPUExecutionProvider"]
            opts = onnx_options()
            self.primary = onnxruntime.InferenceSession(str(_models() / "sig_bak_ovr.onnx"), opts, providers=providers)
            self.p808 = onnxruntime.InferenceSession(str(_models() / "model_v8.onnx"), opts, providers=providers)
            self.provider = self.primary.get_providers()[0]
        log.info("dnsmos: scoring batched windows on %s", self.provider)
        if device.startswith("cuda") and not self.provider.startswith(("CUDA", "torch:cuda")):
            log.warning(
                "dnsmos: [analyze] device = %s, but this onnxruntime has no CUDA provider (%s) and torch sees no "
                "CUDA device: scoring on the CPU",
                device,
                ", ".join(available),
            )

    def _run(self, part: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(P.835 raw outputs [n, 3], P.808 MOS [n]) of a batch of windows."""
        if self.runtime == "torch":
            import torch

            with torch.inference_mode():
                x = torch.as_tensor(np.stack(part), dtype=torch.float32, device=self.device)
                raw = self.primary(x)
                p808 = self.p808(self.mel(x)).reshape(len(part), -1)[:, 0]
                return raw.double().cpu().numpy(), p808.double().cpu().numpy()
        raw = self.primary.run(None, {"input_1": np.stack(part)})[0]
        features = np.stack([p808_features(w) for w in part])
        return raw, self.p808.run(None, {"input_1": features})[0][:, 0]

    def __call__(self, audios: Sequence[np.ndarray], batch_size: int = 64) -> list[dict[str, float]]:
        """Per clip, the mean over its windows of SIG, BAK, OVRL (after speechmos' polynomials) and P.808 MOS."""
        owner, windows = [], []
        for i, audio in enumerate(audios):
            for window in dnsmos_windows(audio):
                owner.append(i)
                windows.append(window)
        raw = np.zeros((len(windows), 3), dtype=np.float64)
        p808 = np.zeros(len(windows), dtype=np.float64)
        for start in range(0, len(windows), max(1, batch_size)):
            part = windows[start : start + max(1, batch_size)]
            raw[start : start + len(part)], p808[start : start + len(part)] = self._run(part)
        scores = {name: poly(raw[:, col]) for col, (name, poly) in enumerate(_P835.items())}
        scores["p808_mos"] = p808
        index = np.asarray(owner)
        return [{name: float(np.mean(v[index == i])) for name, v in scores.items()} for i in range(len(audios))]


NO_SPEECH = "less than {s:g} s of VAD speech: speech quality is not defined"


class DNSMOSExpert(Expert):
    name, version, record, needs = "dnsmos", "2", SpeechQuality, ("vad",)
    backend = "speechmos:dnsmos"
    gpu_in_sections = True  # the speech cut-out runs outside the `gpu` slot, the scoring inside

    def __init__(self, min_speech_s: float = 1.0, device: str = "cpu", batch_size: int = 1) -> None:
        self.min_speech_s = min_speech_s
        self.device, self.batch_size = device, batch_size  # batch_size > 1: BatchedDNSMOS (not in the key)

    @property
    def uses_gpu(self) -> bool:
        """Only where the batched path scores on the GPU (`gpu_runtime`): a shard that scored on the CPU while
        holding the `gpu` slot would stall the GPU experts of other shards."""
        return super().uses_gpu and self.batch_size > 1 and gpu_runtime(self.device) is not None

    def key_config(self) -> dict[str, Any]:
        # Personalized DNSMOS (penalizes interfering talkers) is a different model; we use the standard one.
        return {
            "personalized": False,
            "speechmos": _pkg_version("speechmos"),
            "min_speech_s": self.min_speech_s,
            "speech_only": True,
        }

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[SpeechQuality]:
        (vad,) = self.needed(context, clips, "vad")
        if self.batch_size > 1:
            return self._batched(clips, vad)
        dnsmos = load_once("speechmos:dnsmos", _load_dnsmos)
        return [self._score(dnsmos, clip, vad[clip.clip_id]) for clip in clips]  # type: ignore[arg-type]

    def _skipped(self, clip: ClipAudio, speech_s: float) -> SpeechQuality:
        return SpeechQuality(
            **self.lineage(clip.clip_id),
            ovrl_mos=None,
            sig_mos=None,
            bak_mos=None,
            p808_mos=None,
            speech_s=speech_s,
            skipped_reason=NO_SPEECH.format(s=self.min_speech_s),
        )

    def _batched(self, clips: Sequence[ClipAudio], vad: Any) -> list[SpeechQuality]:
        speech, seconds, scored = speech_to_score(clips, vad, self.min_speech_s)
        with gpu_section():
            dnsmos = load_once(f"dnsmos-batched:{self.device}", lambda: BatchedDNSMOS(self.device))
            scores = dict(zip(scored, dnsmos([speech[i] for i in scored], self.batch_size)))
        return [
            SpeechQuality(
                **self.lineage(clip.clip_id),
                **{k: round(v, 4) for k, v in scores[i].items()},
                speech_s=seconds[i],
                skipped_reason=None,
            )
            if i in scores
            else self._skipped(clip, seconds[i])
            for i, clip in enumerate(clips)
        ]

    def _score(self, dnsmos: Any, clip: ClipAudio, activity: SpeechActivity) -> SpeechQuality:
        from speechmos.dnsmos import INPUT_LENGTH  # DNSMOS' fixed window, in seconds

        audio = speech_only(samples_16k(clip), activity.segments)
        speech_s = round(audio.size / SAMPLE_RATE, 3)
        if speech_s < self.min_speech_s:
            return self._skipped(clip, speech_s)
        window = int(INPUT_LENGTH * SAMPLE_RATE)
        if audio.size == 0:
            audio = np.zeros(window, dtype=np.float32)
        elif audio.size < window:
            audio = np.resize(audio, window)  # cyclic repetition: speechmos' first window, exactly
        scores = dnsmos(audio, SAMPLE_RATE, False)
        return SpeechQuality(
            **self.lineage(clip.clip_id),
            **{k: round(float(scores[k]), 4) for k in ("ovrl_mos", "sig_mos", "bak_mos", "p808_mos")},
            speech_s=speech_s,
            skipped_reason=None,
        )
