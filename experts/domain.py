"""MECAT domain (000/S00/0M0/00A/SM0/S0A/0MA/SMA) from Silero VAD, levels and DSP features: a heuristic.

No audio-event tagger ships inside a PyPI wheel, so the offline default decides speech / music / sound
presence with hand-made features and documented thresholds (backend "heuristic:dsp-v1"); a CED/AST
tagger is the paper backend. Thresholds were set on the synthetic demo corpus (earmark.corpus, seed 0);
benchmarks/quality/domain_accuracy.py measures it (seed 0: 95%, held-out seeds 1 and 2: 91% and 95%, with sound
events under speech + music the weak spot). Expect less on real recordings.

- speech: Silero's speech seconds (context["vad"]).
- music: *sustained tonal* power — spectral peaks that survive a 0.5 s median along time. Notes hold
  their pitch for hundreds of ms; speech harmonics glide with intonation and die in that filter (espeak
  is very harmonic, and this is what keeps it from being called music). Measured on non-speech frames,
  relative to the clip's reference level, so music under speech shows up in the pauses.
- sound events: what music and speech do not explain, in non-speech frames — onsets off the clip's
  best-fitting metrical grid (music onsets sit on one, events do not; without music every onset counts),
  noise that lasts > 0.25 s above each band's stationary floor (cars, wind, barks; not drum hits, not
  room tone), with music a low share of tonal power, and alone a loud steady noise bed (rain, traffic).
- silence: the levels expert says (almost) every 50 ms frame is below its silence threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from earmark.experts.audio import logistic, samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert
from earmark.schemas.records import AcousticProfile, DomainDecision, NamedValue, SpeechActivity, domain_code

N_FFT, HOP = 1024, 256  # 64 ms window, 16 ms hop at 16 kHz
FRAME_S = HOP / SAMPLE_RATE
# STFT bin ranges (15.6 Hz bins) whose noise power is summed: wide enough to be steady for steady noise.
NOISE_BANDS = ((1, 10), (10, 26), (26, 64), (64, 160), (160, 320), (320, 513))

# Decision thresholds: each probability is logistic((feature - mid) / scale); see the module docstring.
THRESHOLDS: dict[str, float] = {
    "silent_ratio": 0.995,  # levels.silence_ratio at or above this → silent clip, domain 000
    "speech_s_mid": 0.6,
    "speech_s_scale": 0.1,  # seconds of Silero speech: a word or two
    "tonal_db_mid": -22.0,
    "tonal_db_scale": 3.0,  # sustained tonal power re reference level, dB
    "onsets_mid": 1.5,
    "onsets_music_mid": 2.5,
    "onsets_scale": 0.3,  # unexplained onsets (count)
    "noise_db_mid": -40.0,
    "noise_music_db_mid": -6.0,
    "noise_db_scale": 2.0,  # lasting noise, dB
    "floor_dbfs_mid": -40.0,
    "floor_dbfs_scale": 3.0,  # alone (no speech, no music): a steady noise bed
    "tonal_share_mid": 0.6,
    "tonal_share_scale": 0.04,  # with music: a low tonal share means noise
}


def _db(x: np.ndarray | float) -> np.ndarray | float:
    return 10.0 * np.log10(np.maximum(x, 1e-12))


def _speech_frames(activity: SpeechActivity, n_frames: int, margin: int = 2) -> np.ndarray:
    """Frames inside Silero's speech segments, widened by `margin` frames against leakage."""
    mask = np.zeros(n_frames, bool)
    for seg in activity.segments:
        mask[max(0, int(seg.start_s / FRAME_S) - margin) : int(np.ceil(seg.end_s / FRAME_S)) + margin + 1] = True
    return mask


def _grid_share(times: np.ndarray, heights: np.ndarray, tol: float = 1.5) -> tuple[float, float, np.ndarray]:
    """Best isochronous grid (period 0.18–0.85 s) for onset peaks, scored as share on grid − chance.

    Returns (period_s, score, on_grid mask of the peaks). Chance is the grid's density (share of time
    within `tol` frames of a grid point), so dense grids do not win by covering everything. Periods are
    searched finely (0.02 frame) because a small period error adds up over the clip's 20–50 beats.
    """
    best = (0.5, -1.0, np.zeros(len(times), bool))
    if len(times) < 3:
        return best
    share_of = heights / heights.sum()
    for period in np.arange(0.18 / FRAME_S, 0.85 / FRAME_S, 0.02):
        phases = np.arange(0.0, period, 0.5)[:, None]
        dist = np.abs((times[None, :] - phases + period / 2) % period - period / 2)
        on = dist <= tol
        scores = on @ share_of - min(1.0, (2 * tol) / period)
        k = int(np.argmax(scores))
        if scores[k] > best[1]:
            best = (period * FRAME_S, float(scores[k]), on[k])
    return best


def domain_features(x: np.ndarray, activity: SpeechActivity) -> dict[str, float]:
    """The raw DSP features the decision uses (plus a few descriptive ones), from 16 kHz mono audio."""
    import librosa
    from scipy import ndimage, signal

    spec = np.abs(librosa.stft(x.astype(np.float32), n_fft=N_FFT, hop_length=HOP))
    power = spec**2
    n = spec.shape[1]
    speech = _speech_frames(activity, n)
    quiet = ~speech
    has_quiet = quiet.sum() * FRAME_S >= 0.3
    frame_power = power.sum(axis=0)
    # Reference level: typical speech frame when there is speech, else the loud end of the clip.
    ref = float(np.median(frame_power[speech]) if speech.sum() * FRAME_S >= 0.5 else np.percentile(frame_power, 95))
    ref = max(ref, 1e-10)
    feats: dict[str, float] = {"ref_db": float(_db(ref)), "nonspeech_s": float(quiet.sum() * FRAME_S)}
    where = quiet if has_quiet else np.ones(n, bool)

    # Music: peaks that survive a 0.5 s median along time are held notes.
    held = ndimage.median_filter(spec, size=(1, 31), mode="nearest")
    peaks = (held > 3.0 * ndimage.median_filter(held, size=(9, 1), mode="nearest")) & (held**2 > ref * 1e-6)
    tonal = (np.minimum(spec, held) ** 2 * peaks)[:, where].sum(axis=0)
    feats["sustained_tonal_db"] = float(_db(tonal.mean() / ref))
    feats["sustained_tonal_share"] = float(tonal.sum() / max(power[:, where].sum(), 1e-12))

    # Short-time tonal mask (80 ms): what is left is noise — drums, events, breath.
    short = ndimage.median_filter(spec, size=(1, 5), mode="nearest")
    tonal_bins = short > 2.5 * ndimage.median_filter(short, size=(11, 1), mode="nearest")
    tonal_bins = ndimage.binary_dilation(tonal_bins, structure=np.ones((3, 1), bool))
    noise = power * ~tonal_bins
    feats["tonal_share"] = float((power * tonal_bins)[:, where].sum() / max(power[:, where].sum(), 1e-12))
    # Lasting noise above each band's stationary floor: cars, wind gusts, barks — not room tone or hiss
    # (band sums over many bins are steady for stationary noise) and not drum hits (< 0.25 s).
    bands = np.stack([noise[lo:hi].sum(axis=0) for lo, hi in NOISE_BANDS])
    floor = np.percentile(bands, 20, axis=1, keepdims=True)
    excess = np.maximum(bands - 2.0 * floor, 0.0).sum(axis=0) / ref
    lasting = ndimage.minimum_filter1d(excess, 15)
    feats["sustained_noise_db"] = float(_db(np.percentile(lasting[where], 95)))
    frame_rms = np.sqrt(np.mean(x[: x.size // HOP * HOP].reshape(-1, HOP) ** 2, axis=1))
    feats["floor_dbfs"] = float(20 * np.log10(max(np.percentile(frame_rms, 10), 1e-6)))

    # Onsets: log-mel spectral flux; peaks on the best metrical grid are music, the rest events.
    mel = librosa.feature.melspectrogram(S=power, sr=SAMPLE_RATE, n_mels=64, fmin=30, fmax=8000)
    flux = np.maximum(np.diff(_db(mel / ref + 1e-6), axis=1), 0).mean(axis=0)
    flux = np.maximum(np.r_[0.0, flux] - ndimage.median_filter(np.r_[0.0, flux], 15), 0)
    flux[:3] = flux[-3:] = 0.0  # the zero-padded edges are not onsets
    idx, props = signal.find_peaks(flux, height=max(0.25 * flux.max(), 1.0), distance=4)
    heights = props["peak_heights"]
    period, grid_score, on_grid = _grid_share(idx.astype(float), heights)
    off = ~on_grid & quiet[idx]
    feats["onset_peaks"] = float(quiet[idx].sum())
    feats["offgrid_peaks"] = float(off.sum())
    feats["offgrid_share"] = float(heights[off].sum() / max(heights[quiet[idx]].sum(), 1e-12)) if len(idx) else 0.0
    feats["grid_score"] = float(grid_score)
    feats["grid_period_s"] = float(period)
    return feats


def decide(feats: dict[str, float], speech_s: float, t: dict[str, float] = THRESHOLDS) -> tuple[float, float, float]:
    """(speech_prob, music_prob, sound_prob) from the features; sound evidence depends on the music call."""
    speech = logistic(speech_s, t["speech_s_mid"], t["speech_s_scale"])
    music = logistic(feats["sustained_tonal_db"], t["tonal_db_mid"], t["tonal_db_scale"])
    with_music = music >= 0.5
    # Onsets music does not explain: off its grid when there is music, any onset in the pauses otherwise.
    onsets = feats["offgrid_peaks"] if with_music else feats["onset_peaks"]
    evidence = [
        logistic(onsets, t["onsets_music_mid"] if with_music else t["onsets_mid"], t["onsets_scale"]),
        logistic(
            feats["sustained_noise_db"],
            t["noise_music_db_mid"] if with_music else t["noise_db_mid"],
            t["noise_db_scale"],
        ),
    ]
    if with_music:
        evidence.append(logistic(-feats["tonal_share"], -t["tonal_share_mid"], t["tonal_share_scale"]))
    elif speech < 0.5:  # rain, wind or traffic on their own are a sound scene, not silence
        evidence.append(logistic(feats["floor_dbfs"], t["floor_dbfs_mid"], t["floor_dbfs_scale"]))
    return speech, music, max(evidence)


class HeuristicDomainExpert(Expert):
    """Domain code per clip from VAD + levels context and the DSP features above (no model weights)."""

    name, version, record, needs = "domain", "1", DomainDecision, ("vad", "levels")
    backend = "heuristic:dsp-v1"

    def __init__(self, thresholds: dict[str, float] | None = None) -> None:
        unknown = set(thresholds or {}) - set(THRESHOLDS)
        if unknown:
            raise ValueError(f"unknown domain thresholds {sorted(unknown)}; known: {sorted(THRESHOLDS)}")
        self.thresholds = {**THRESHOLDS, **(thresholds or {})}

    def key_config(self) -> dict[str, Any]:
        return {"thresholds": dict(sorted(self.thresholds.items())), "n_fft": N_FFT, "hop": HOP}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[DomainDecision]:
        self.needed(context, clips)
        return [self._decide(c, context["vad"][c.clip_id], context["levels"][c.clip_id]) for c in clips]

    def _decide(self, clip: ClipAudio, vad: SpeechActivity, levels: AcousticProfile) -> DomainDecision:
        context_values = {
            "speech_s": vad.speech_s,
            "speech_ratio": vad.speech_ratio,
            "vad_max_prob": vad.max_prob,
            "rms_dbfs": levels.rms_dbfs,
            "silence_ratio": levels.silence_ratio,
        }
        if levels.silence_ratio >= self.thresholds["silent_ratio"]:
            return DomainDecision(
                **self.lineage(clip.clip_id),
                domain="000",
                speech_prob=0.0,
                music_prob=0.0,
                sound_prob=0.0,
                silent=True,
                features=_named(context_values),
            )
        x = samples_16k(clip)
        if x.size < N_FFT:  # shorter than one analysis window: pad rather than fail
            x = np.pad(x, (0, N_FFT - x.size))
        feats = domain_features(x, vad)
        speech, music, sound = decide(feats, vad.speech_s, self.thresholds)
        return DomainDecision(
            **self.lineage(clip.clip_id),
            domain=domain_code(speech >= 0.5, music >= 0.5, sound >= 0.5),  # type: ignore[arg-type]
            speech_prob=round(speech, 4),
            music_prob=round(music, 4),
            sound_prob=round(sound, 4),
            silent=False,
            features=_named({**context_values, **feats}),
        )


def _named(values: dict[str, float]) -> list[NamedValue]:
    return [NamedValue(name=k, value=round(float(v), 5)) for k, v in values.items()]
