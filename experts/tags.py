"""Coarse sound labels per 2 s window: a DSP heuristic (label set "heuristic-coarse"), not an AudioSet tagger.

No audio tagger ships inside a PyPI wheel, so the offline default only says what DSP can tell apart, with
a probability-like score per label (logistic of a feature around a documented midpoint):
- speech: share of the window inside Silero VAD segments (mid 20 %).
- music: the clip's music probability (domain decision) where the window has tonal energy.
- tonal sound: harmonic share of the non-speech energy after HPSS (mid 0.6), when the window is active.
- impulsive sound: onsets of the percussive part in non-speech frames (knocks, steps, drum hits).
- noise: flat (noise-like) spectrum in active non-speech frames (spectral flatness, mid −18 dB).
- silence: window level below −50 dBFS.
The CED/AST AudioSet taggers are the paper backends of this slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from earmark.experts.audio import logistic, samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert
from earmark.schemas.records import DomainDecision, LabelProb, SoundEvents, SpeechActivity, WindowTags

WINDOW_S = 2.0
N_FFT, HOP = 1024, 256
FRAME_S = HOP / SAMPLE_RATE
LABELS = ("speech", "music", "tonal sound", "impulsive sound", "noise", "silence")


def window_features(x: np.ndarray, activity: SpeechActivity) -> list[dict[str, float]]:
    """Per 2 s window: speech share, level, harmonic share, percussive onsets and flatness of non-speech frames."""
    import librosa
    from scipy import signal

    spec = np.abs(librosa.stft(x, n_fft=N_FFT, hop_length=HOP))
    harm, perc = librosa.decompose.hpss(spec)
    n = spec.shape[1]
    speech = np.zeros(n, bool)
    for seg in activity.segments:
        speech[int(seg.start_s / FRAME_S) : int(np.ceil(seg.end_s / FRAME_S)) + 1] = True
    frame_db = 20 * np.log10(np.maximum(librosa.feature.rms(y=x, frame_length=N_FFT, hop_length=HOP)[0, :n], 1e-6))
    flux = np.maximum(np.diff(np.log1p(100 * perc), axis=1), 0).sum(axis=0)
    flux = np.r_[0.0, flux]
    peaks, _ = signal.find_peaks(flux, height=max(4 * np.median(flux), 1e-6), distance=6)
    is_peak = np.zeros(n, bool)
    is_peak[peaks] = True
    flat = librosa.feature.spectral_flatness(S=spec)[0]
    per_win = int(round(WINDOW_S / FRAME_S))
    out = []
    for w0 in range(0, max(n - per_win // 4, 1), per_win):  # a last window shorter than 0.5 s is dropped
        sl = slice(w0, min(w0 + per_win, n))
        quiet = ~speech[sl]
        active = frame_db[sl] > -50
        use = quiet & active
        h, p = (harm[:, sl] ** 2)[:, use].sum(), (perc[:, sl] ** 2)[:, use].sum()
        out.append(
            {
                "start_s": w0 * FRAME_S,
                "end_s": min(w0 + per_win, n) * FRAME_S,
                "speech_share": float(speech[sl].mean()),
                "level_db": float(np.percentile(frame_db[sl], 90)),
                "harmonic_share": float(h / (h + p)) if h + p > 0 else 0.0,
                "active_nonspeech_share": float(use.mean()),
                "onsets": float((is_peak[sl] & use).sum()),
                "flatness_db": float(10 * np.log10(max(np.median(flat[sl][use]), 1e-6))) if use.any() else -60.0,
            }
        )
    return out


def window_tags(f: dict[str, float], music_prob: float) -> list[LabelProb]:
    other = logistic(f["active_nonspeech_share"], 0.15, 0.05)  # enough non-speech sound to judge it
    probs = {
        "speech": logistic(f["speech_share"], 0.2, 0.05),
        "music": music_prob * other * logistic(f["harmonic_share"], 0.5, 0.08),
        "tonal sound": other * logistic(f["harmonic_share"], 0.6, 0.08),
        "impulsive sound": other * logistic(f["onsets"], 0.5, 0.3),
        "noise": other * logistic(f["flatness_db"], -18.0, 3.0),
        "silence": logistic(-f["level_db"], 50.0, 2.0),
    }
    return [LabelProb(label=k, prob=round(v, 4)) for k, v in sorted(probs.items(), key=lambda kv: -kv[1])]


class CoarseTagsExpert(Expert):
    name, version, record, needs = "tags", "1", SoundEvents, ("vad", "domain")
    backend = "heuristic:coarse-dsp-v1"

    def key_config(self) -> dict[str, Any]:
        return {"window_s": WINDOW_S, "n_fft": N_FFT, "hop": HOP, "labels": list(LABELS)}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[SoundEvents]:
        self.needed(context, clips)
        return [self._tag(c, context["vad"][c.clip_id], context["domain"][c.clip_id]) for c in clips]  # type: ignore[arg-type]

    def _tag(self, clip: ClipAudio, vad: SpeechActivity, domain: DomainDecision) -> SoundEvents:
        x = samples_16k(clip)
        if x.size < N_FFT:
            x = np.pad(x, (0, N_FFT - x.size))
        windows = [
            WindowTags(
                start_s=round(f["start_s"], 3), end_s=round(f["end_s"], 3), tags=window_tags(f, domain.music_prob)
            )
            for f in window_features(x, vad)
        ]
        best: dict[str, float] = {}
        for w in windows:
            for t in w.tags:
                best[t.label] = max(best.get(t.label, 0.0), t.prob)
        clip_tags = [LabelProb(label=k, prob=v) for k, v in sorted(best.items(), key=lambda kv: -kv[1])]
        return SoundEvents(
            **self.lineage(clip.clip_id),
            label_set="heuristic-coarse",
            window_s=WINDOW_S,
            windows=windows,
            clip_tags=clip_tags,
        )
