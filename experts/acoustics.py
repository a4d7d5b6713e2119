"""Room and channel acoustics of every clip: blind RT60, a DRR proxy, SNR, effective bandwidth (+ PLCMOS).

All but PLCMOS are DSP estimates (backend "heuristic:…"), without a reference signal:
- RT60: "free decays" — runs where the 16 ms energy envelope falls steadily from a local peak by ≥ 10 dB
  before meeting the noise floor — each give a slope; a room cannot make sound die away faster than its
  reverberation, while sources may fade slower, so the estimate is the 25th percentile of −60/slope over
  the decays (after Ratnam et al.'s observation that the room sets the fastest decay). None with < 3 decays.
- DRR: not measurable blind; `drr_db` is a proxy: at each free decay, the energy of its first 50 ms over
  the energy of the exponential tail after that (C50-like, median over decays). High = dry/close.
- SNR: VAD-aware: mean power of speech frames over the median power of non-speech frames; without
  speech (or without pauses), the loud 10 % of 20 ms frames over the quiet 10 %. Capped at 80 dB.
- bandwidth: the highest frequency whose smoothed long-term spectrum is within 50 dB of its peak (a
  telephone channel ends near 3.4–4 kHz, a 16 kHz file at 8 kHz).
- PLCMOS (Microsoft's packet-loss-concealment MOS, ONNX model inside the `speechmos` wheel, runs offline)
  on clips with ≥ 1 s of speech; None elsewhere. speechmos draws its 15 random rater embeddings from the
  global numpy RNG; we draw them from a fixed seed so the score is reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version as _pkg_version
from pathlib import Path
from typing import Any

import numpy as np

from earmark.core.threads import onnx_options
from earmark.experts.audio import samples_16k, speech_only
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert, gpu_section, load_once, torch_cuda
from earmark.schemas.records import RoomAcoustics, SpeechActivity

ENV_WIN, ENV_HOP = 256, 128  # 16 ms window, 8 ms hop for the decay envelope
ENV_STEP_S = ENV_HOP / SAMPLE_RATE
SNR_FRAME = 320  # 20 ms
SNR_CAP_DB = 80.0
BANDWIDTH_DROP_DB = 50.0
PLCMOS_ROUNDS = 15
PLCMOS_MIN_SPEECH_S = 1.0
METHOD = (
    "rt60: 25th pct of free-decay slopes; drr: early(50 ms)/late energy at free decays (C50-like proxy, "
    "not a true DRR); snr: VAD speech vs non-speech power; bandwidth: -50 dB re spectrum peak; "
    "plcmos: speechmos plcmos_v2 on clips with speech"
)


def _envelope_db(x: np.ndarray) -> np.ndarray:
    from scipy import signal

    x = signal.sosfilt(signal.butter(2, 100, "highpass", fs=SAMPLE_RATE, output="sos"), x)
    n = 1 + max(0, x.size - ENV_WIN) // ENV_HOP
    idx = np.arange(ENV_WIN)[None, :] + ENV_HOP * np.arange(n)[:, None]
    power = np.mean(x[np.minimum(idx, x.size - 1)] ** 2, axis=1)
    return 10 * np.log10(np.maximum(power, 1e-12))


def free_decays(env: np.ndarray, min_drop_db: float = 10.0, min_frames: int = 5) -> list[tuple[int, int]]:
    """(start, end) frame ranges where the envelope falls (±1 dB of ripple) by ≥ min_drop_db from a peak."""
    floor = np.percentile(env, 10) + 3.0
    out, i, n = [], 1, len(env)
    while i < n - 1:
        if not (env[i] >= env[i - 1] and env[i] > env[i + 1]) or env[i] < floor + min_drop_db:
            i += 1
            continue
        j, low = i, env[i]
        while j + 1 < n and env[j + 1] <= low + 1.0 and env[j + 1] > floor:
            j += 1
            low = min(low, env[j])
        if env[i] - low >= min_drop_db and j - i + 1 >= min_frames:
            out.append((i, j))
        i = j + 1
    return out


def reverb_estimates(x: np.ndarray) -> tuple[float | None, float | None, int]:
    """(rt60_s, drr_proxy_db, number of free decays) of 16 kHz audio."""
    if x.size < SAMPLE_RATE // 4 or not np.any(x):
        return None, None, 0
    env = _envelope_db(x.astype(np.float64))
    rts, ratios = [], []
    early = int(round(0.05 / ENV_STEP_S))
    for i, j in free_decays(env):
        # Fit from 2 dB below the peak: the first frame still holds part of the source's own offset.
        seg = np.arange(i, j + 1)
        start = seg[env[seg] <= env[i] - 2.0]
        if len(start) < 4:
            continue
        t = (start - i) * ENV_STEP_S
        slope = np.polyfit(t, env[start], 1)[0]  # dB/s
        if slope >= -1.0:
            continue
        rts.append(-60.0 / slope)
        lin = 10 ** (env[i : j + 1] / 10)
        if j - i > early:
            # Tail after 50 ms: what was measured plus the fitted exponential beyond the decay's end.
            a = -slope * np.log(10) / 10  # power decay rate, 1/s
            tail = lin[early:].sum() * ENV_STEP_S + lin[-1] / a
            ratios.append(10 * np.log10(lin[:early].sum() * ENV_STEP_S / tail))
    if len(rts) < 3:
        return None, None, len(rts)
    drr = round(float(np.median(ratios)), 2) if ratios else None
    return round(float(np.percentile(rts, 25)), 3), drr, len(rts)


def snr_db(x: np.ndarray, activity: SpeechActivity | None) -> float | None:
    n = x.size // SNR_FRAME
    if n < 5 or not np.any(x):
        return None
    power = np.mean(x[: n * SNR_FRAME].reshape(n, SNR_FRAME).astype(np.float64) ** 2, axis=1)
    speech = np.zeros(n, bool)
    for seg in activity.segments if activity else []:
        speech[int(seg.start_s * SAMPLE_RATE / SNR_FRAME) : int(np.ceil(seg.end_s * SAMPLE_RATE / SNR_FRAME))] = True
    # Frames next to speech carry its onsets and reverb tails: leave them out of the noise estimate.
    near = np.convolve(speech, np.ones(7), mode="same") > 0
    if speech.sum() >= 25 and (~near).sum() >= 10:
        active, noise = power[speech].mean(), np.median(power[~near])
    else:
        lo, hi = np.percentile(power, [10, 90])
        active, noise = power[power >= hi].mean(), power[power <= lo].mean()
    if noise <= 0:
        return SNR_CAP_DB
    return round(float(min(10 * np.log10(max(active - noise, 1e-12) / noise), SNR_CAP_DB)), 2)


def bandwidth_hz(x: np.ndarray, drop_db: float = BANDWIDTH_DROP_DB) -> float:
    from scipy import ndimage, signal

    if x.size < 512 or not np.any(x):
        return 0.0
    freqs, psd = signal.welch(x.astype(np.float64), fs=SAMPLE_RATE, nperseg=1024)
    smooth = 10 * np.log10(np.maximum(ndimage.uniform_filter1d(psd, 5), 1e-20))
    above = np.flatnonzero(smooth >= smooth[1:].max() - drop_db)  # bin 0 (DC) is not content
    return round(float(freqs[above.max()]), 1) if above.size else 0.0


def _load_plcmos() -> Any:
    """speechmos' PLCMOS v2, its ONNX Runtime session sized to this process' thread budget."""
    import onnxruntime
    import speechmos
    from speechmos.plcmos import PLCMOS

    model = PLCMOS.__new__(PLCMOS)  # speechmos' own constructor gives the session a thread per core
    model.model_name, model.onnx_name = "plcmos_v2", "plcmos_v2.onnx"
    model.embed_rounds, model.max_lens = PLCMOS_ROUNDS, 999999999999
    model.model_path = str(Path(speechmos.__file__).parent / "plcmos_models" / model.onnx_name)
    model.session = onnxruntime.InferenceSession(model.model_path, onnx_options())
    return model


def _raters() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(PLCMOS_ROUNDS, 64)).astype(np.float32)


def plcmos_features(x: np.ndarray) -> np.ndarray:
    """speechmos' PLCMOS input for one signal: its log-power STFT, [1, 1, frames, 257] float32 (numpy)."""
    model = load_once("speechmos:plcmos_v2", _load_plcmos)
    return np.float32(model.stft_transform(x.astype(np.float64)))[np.newaxis, np.newaxis, ...]


def plcmos(x: np.ndarray) -> float:
    """PLCMOS v2 of one signal on the CPU (ONNX Runtime): the mean over the fixed 15 rater embeddings."""
    model = load_once("speechmos:plcmos_v2", _load_plcmos)
    feats = plcmos_features(x)
    scores = [
        float(np.ravel(model.session.run(None, {"degraded_audio": feats, "rater_embed": r[None]})[0])[0])
        for r in _raters()
    ]
    return round(float(np.mean(scores)), 4)


def _load_plcmos_torch(device: str) -> Any:
    import speechmos
    import torch

    from earmark.experts.onnx_torch import OnnxModule

    path = Path(speechmos.__file__).parent / "plcmos_models" / "plcmos_v2.onnx"
    return OnnxModule(path).to(torch.device(device)).eval()


def plcmos_torch(features: Sequence[np.ndarray], device: str) -> list[float]:
    """PLCMOS v2 of many signals through the graph's torch port on `device` (experts/onnx_torch.py): each
    signal's features with the 15 rater embeddings as one batch. Within 1e-4 of `plcmos` (tests)."""
    import torch

    module = load_once(f"plcmos-torch:{device}", lambda: _load_plcmos_torch(device))
    raters = torch.as_tensor(_raters(), device=device)
    out = []
    with torch.inference_mode():
        for feats in features:
            x = torch.as_tensor(feats, device=device).expand(len(raters), -1, -1, -1)
            out.append(round(float(module(degraded_audio=x, rater_embed=raters).reshape(-1).mean()), 4))
    return out


class RoomAcousticsExpert(Expert):
    """The DSP estimates on the CPU; PLCMOS on the CPU (ONNX Runtime), or with `device` "cuda" through the
    graph's torch port on the GPU, inside a gpu_section (the DSP stays outside it)."""

    name, version, record, needs = "acoustics", "1", RoomAcoustics, ("vad",)
    backend = f"heuristic:decay-snr-bandwidth-v1+speechmos:{_pkg_version('speechmos')}:plcmos_v2"
    gpu_in_sections = True

    def __init__(self, with_plcmos: bool = True, device: str = "cpu") -> None:
        self.with_plcmos, self.device = with_plcmos, device

    @property
    def uses_gpu(self) -> bool:
        """PLCMOS on the GPU: with a CUDA device that torch sees (else PLCMOS scores on the CPU)."""
        return super().uses_gpu and self.with_plcmos and torch_cuda()

    def key_config(self) -> dict[str, Any]:
        return {
            "plcmos": self.with_plcmos,
            "plcmos_rounds": PLCMOS_ROUNDS,
            "bandwidth_drop_db": BANDWIDTH_DROP_DB,
            "plcmos_min_speech_s": PLCMOS_MIN_SPEECH_S,
        }

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[RoomAcoustics]:
        (vad,) = self.needed(context, clips, "vad")
        records = [self._measure(c, vad[c.clip_id]) for c in clips]  # type: ignore[arg-type]
        speechy = [
            i for i, c in enumerate(clips) if self.with_plcmos and vad[c.clip_id].speech_s >= PLCMOS_MIN_SPEECH_S
        ]
        speech = [speech_only(samples_16k(clips[i]), vad[clips[i].clip_id].segments) for i in speechy]
        if self.uses_gpu:
            features = [plcmos_features(x) for x in speech]
            with gpu_section():
                scores = plcmos_torch(features, self.device)
        else:
            scores = [plcmos(x) for x in speech]
        for i, score in zip(speechy, scores):
            records[i] = records[i].model_copy(update={"plcmos": score})
        return records

    def _measure(self, clip: ClipAudio, activity: SpeechActivity) -> RoomAcoustics:
        """Everything but PLCMOS (None here; `analyze` fills it in)."""
        x = samples_16k(clip)
        rt60, drr, _ = reverb_estimates(x)
        return RoomAcoustics(
            **self.lineage(clip.clip_id),
            rt60_s=rt60,
            drr_db=drr,
            snr_db=snr_db(x, activity),
            bandwidth_hz=bandwidth_hz(x),
            plcmos=None,
            method=METHOD,
        )
