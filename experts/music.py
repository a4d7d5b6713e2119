"""Music experts of the embedded profile: HPSS separation summary and librosa tempo / beats / key / loudness.

Both run only on clips whose domain decision has music (*M*) and skip the rest with a reason.
- separation: librosa's median-filter harmonic/percussive separation (HPSS) — the offline stand-in for
  demucs. It has no vocals stem, so nothing goes back through the speech path (`vocals_speech_s` None).
- music: tempo from librosa's beat tracker, refined as the slope of a line through the beat times (the
  tracker's own tempo is quantised to whole onset-envelope lags: ±4 % at 120 BPM); beat strength is the
  pulse clarity, the onset envelope's autocorrelation peak at the beat period (0–1); key by the
  Krumhansl–Schmuckler method: the clip's mean CQT chroma correlated with the 24 rotated Krumhansl–Kessler
  profiles, confidence = the best correlation's margin over the runner-up key of other mode/tonic, scaled to
  0–1; loudness contour as K-weighted (BS.1770) short-term level per 0.5 s; instrument / genre / mood tags per
  2 s window and per clip from the music-tag heads over musicnn's MTT + MSD features (experts/learned/musictags:
  calibrated probabilities; only the tags its tag file marks precise enough are written to `tags` /
  `window_tags`, the rest and musicnn's raw tags to `candidate_tags`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from earmark.experts.audio import DB_FLOOR, amplitude_db, samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert
from earmark.schemas.records import DomainDecision, LabelProb, MusicAnalysis, Separation, StemLevel, WindowTags

N_FFT, HOP = 1024, 256
BEAT_HOP = 128  # 8 ms onset envelope for the beat tracker
LOUDNESS_STEP_S = 0.5
NOTES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
# Krumhansl & Kessler (1982) probe-tone profiles, tonic first.
MAJOR = np.array([6.35, 2.23, 3.48, 2.33, 4.38, 4.09, 2.52, 5.19, 2.39, 3.66, 2.29, 2.88])
MINOR = np.array([6.33, 2.68, 3.52, 5.38, 2.60, 3.53, 2.54, 4.75, 3.98, 2.69, 3.34, 3.17])


def no_music_reason(domain: DomainDecision) -> str | None:
    if domain.domain[1] == "M":
        return None
    return f"no music in the domain decision (domain {domain.domain}, music prob {domain.music_prob:.2f})"


def hpss(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Harmonic and percussive waveforms (librosa HPSS on a 64 ms STFT)."""
    import librosa

    spec = librosa.stft(x, n_fft=N_FFT, hop_length=HOP)
    harm, perc = librosa.decompose.hpss(spec)
    return (librosa.istft(harm, hop_length=HOP, length=x.size), librosa.istft(perc, hop_length=HOP, length=x.size))


def estimate_key(chroma: np.ndarray) -> tuple[str | None, float | None]:
    """Krumhansl–Schmuckler key of a 12-bin chroma vector and a 0–1 confidence."""
    if not np.any(chroma) or np.std(chroma) < 1e-9:
        return None, None
    scores = []
    for mode, profile in (("major", MAJOR), ("minor", MINOR)):
        for tonic in range(12):
            scores.append((float(np.corrcoef(chroma, np.roll(profile, tonic))[0, 1]), f"{NOTES[tonic]} {mode}"))
    scores.sort(reverse=True)
    (best, key), (second, _) = scores[0], scores[1]
    # Relative keys share their notes, so the margin is small even when the call is right; a margin of
    # 0.15 or more in correlation is a clear call.
    confidence = max(0.0, best) * min(1.0, (best - second) / 0.15)
    return key, round(float(np.clip(confidence, 0.0, 1.0)), 4)


def octave_confidence(ac: np.ndarray, lag: int) -> float:
    """How clearly the beat period `lag` beats its octave neighbours (half and double tempo), 0–1.

    Beat trackers often lock onto twice or half the felt tempo (81 → 162 BPM). Each candidate period (the
    lag, twice it, half it) is scored by the onset envelope's autocorrelation there, weighted by a
    log-normal tempo prior centred at 110 BPM (as librosa's tempo estimator does); the confidence is the
    chosen period's share of the best two scores, rescaled so a tie gives 0 and a clear win gives 1.
    """

    def score(lg: float) -> float:
        i = int(round(lg))
        if i < 1 or i >= ac.size - 1:
            return 0.0
        bpm = 60.0 * SAMPLE_RATE / (BEAT_HOP * lg)
        prior = np.exp(-0.5 * (np.log2(bpm / 110.0) / 1.0) ** 2)
        return max(0.0, float(ac[i - 1 : i + 2].max())) * prior

    own, others = score(lag), sorted((score(lag * 2), score(lag / 2)), reverse=True)
    if own <= 0:
        return 0.0
    return float(np.clip((own / (own + others[0]) - 0.5) / 0.25, 0.0, 1.0))


def tempo_and_beats(x: np.ndarray) -> tuple[float | None, list[float], float | None, float | None]:
    """(tempo in BPM, beat times in s, pulse clarity 0–1, tempo confidence 0–1) of 16 kHz audio.

    The tempo confidence is the pulse clarity times the octave check (`octave_confidence`): a tempo whose
    half or double fits the onsets about as well is not stated."""
    import librosa

    env = librosa.onset.onset_strength(y=x, sr=SAMPLE_RATE, hop_length=BEAT_HOP)
    if env.size < 8 or not np.any(env):
        return None, [], None, None
    _, beats = librosa.beat.beat_track(onset_envelope=env, sr=SAMPLE_RATE, hop_length=BEAT_HOP)
    times = librosa.frames_to_time(beats, sr=SAMPLE_RATE, hop_length=BEAT_HOP)
    if len(times) < 3:
        return None, [round(float(t), 3) for t in times], None, None
    period = float(np.polyfit(np.arange(len(times)), times, 1)[0])
    # Pulse clarity: normalised autocorrelation of the (mean-removed) onset envelope at the beat period.
    e = env - env.mean()
    ac = np.correlate(e, e, mode="full")[e.size - 1 :]
    lag = int(round(period * SAMPLE_RATE / BEAT_HOP))
    clarity = float(ac[lag - 1 : lag + 2].max() / ac[0]) if 0 < lag < ac.size - 1 and ac[0] > 0 else 0.0
    clarity = float(np.clip(clarity, 0, 1))
    octave = octave_confidence(ac / ac[0], period * SAMPLE_RATE / BEAT_HOP) if ac[0] > 0 else 0.0
    beat_times = [round(float(t), 3) for t in times]
    return round(60.0 / period, 2), beat_times, round(clarity, 4), round(clarity * octave, 4)


def loudness_contour(x: np.ndarray, step_s: float = LOUDNESS_STEP_S) -> list[float]:
    """K-weighted level (LUFS-style, −0.691 + 10·log10 mean square) per `step_s` block."""
    import pyloudnorm

    meter = pyloudnorm.Meter(SAMPLE_RATE)
    y = x.astype(np.float64)
    for f in meter._filters.values():  # pyloudnorm's K-weighting stages (shelf + high-pass)
        y = f.apply_filter(y)
    n = int(step_s * SAMPLE_RATE)
    blocks = [y[i : i + n] for i in range(0, y.size - n // 2, n)] or [y]
    return [round(max(-0.691 + 10 * np.log10(max(np.mean(b**2), 1e-20)), DB_FLOOR), 2) for b in blocks]


def music_tags() -> tuple[str, dict]:
    """The music-tag heads' id ("musictags:<weights sha>") and their tag file."""
    from earmark.experts.learned import musictags

    return f"musictags:{musictags.weights_id()}", musictags.load_tag_file()


def evidence_tags(tag_file: dict) -> set[str]:
    """The tags that may state what is heard: precise enough on held-out renders (`in_evidence`) and not shown
    wrong on real recordings — calibrated on renders, a tag can fire on game music that has no such instrument
    (drums 0.70, organ 0.0, ambient 0.40, bass and electronic 0.83 precision on labelled recordings; a tag the
    recordings never made fire stays)."""
    bar = tag_file["bar"]
    out = set()
    for t in tag_file["tags"]:
        real = t.get("recording") or {}
        if t["in_evidence"] and (real.get("P") is None or real["P"] >= bar):
            out.add(t["tag"])
    return out


def tag_fields(x: np.ndarray) -> dict[str, Any]:
    """MusicAnalysis fields of the music-tag heads for one clip: the tag file's evidence tags (clip and windows,
    calibrated probabilities, most likely first) and the rest as candidates (heads' tags, then musicnn's raw
    MTT / MSD tags)."""
    from earmark.experts.learned import musictags

    tagger, tag_file = music_tags()
    evidence = evidence_tags(tag_file)
    out = musictags.tag_clip(x)

    def probs(d: dict[str, float], keep) -> list[LabelProb]:
        items = sorted(((k, v) for k, v in d.items() if keep(k)), key=lambda kv: -kv[1])
        return [LabelProb(label=k, prob=round(float(v), 4)) for k, v in items]

    candidates = probs(out["clip"], lambda k: k not in evidence)
    for model in ("mtt", "msd"):
        candidates += probs({f"{model}:{k}": v for k, v in out[model].items()}, lambda k: True)
    return {
        "tags": probs(out["clip"], lambda k: k in evidence),
        "window_tags": [
            WindowTags(
                start_s=round(w["start_s"], 3),
                end_s=round(w["end_s"], 3),
                tags=probs(w["tags"], lambda k: k in evidence),
            )
            for w in out["windows"]
        ],
        "candidate_tags": candidates,
        "tagger": tagger,
    }


class HPSSSeparationExpert(Expert):
    name, version, record, needs = "separation", "1", Separation, ("domain",)
    backend = "librosa:hpss"

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[Separation]:
        self.needed(context, clips)
        return [self._separate(c, context["domain"][c.clip_id]) for c in clips]  # type: ignore[arg-type]

    def _separate(self, clip: ClipAudio, domain: DomainDecision) -> Separation:
        reason = no_music_reason(domain)
        x = samples_16k(clip)
        if reason or x.size < N_FFT:
            return Separation(
                **self.lineage(clip.clip_id),
                method="hpss",
                stems=[],
                vocals_speech_s=None,
                skipped_reason=reason or "clip shorter than one analysis window",
            )
        harm, perc = hpss(x)
        energy = {
            "harmonic": float(np.sum(harm.astype(np.float64) ** 2)),
            "percussive": float(np.sum(perc.astype(np.float64) ** 2)),
        }
        total = sum(energy.values()) or 1.0
        stems = [
            StemLevel(stem=k, rms_dbfs=round(amplitude_db(np.sqrt(v / x.size)), 2), energy_share=round(v / total, 4))
            for k, v in energy.items()
        ]
        return Separation(
            **self.lineage(clip.clip_id), method="hpss", stems=stems, vocals_speech_s=None, skipped_reason=None
        )


class LibrosaMusicExpert(Expert):
    name, version, record, needs = "music", "4", MusicAnalysis, ("domain", "separation")

    def __init__(self) -> None:
        self.backend = f"librosa:beat+chroma-ks+bs1770+{music_tags()[0]}"

    def key_config(self) -> dict[str, Any]:
        tagger, tag_file = music_tags()
        evidence = sorted(evidence_tags(tag_file))
        return {
            "beat_hop": BEAT_HOP,
            "loudness_step_s": LOUDNESS_STEP_S,
            "key_profiles": "krumhansl-kessler",
            "tagger": tagger,
            "evidence_tags": evidence,
        }

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[MusicAnalysis]:
        self.needed(context, clips)
        return [
            self._analyze(c, context["domain"][c.clip_id], context["separation"][c.clip_id])  # type: ignore[arg-type]
            for c in clips
        ]

    def _analyze(self, clip: ClipAudio, domain: DomainDecision, sep: Separation) -> MusicAnalysis:
        reason = no_music_reason(domain)
        x = samples_16k(clip)
        if reason or x.size < N_FFT:
            return MusicAnalysis(
                **self.lineage(clip.clip_id),
                analyzed=False,
                skipped_reason=reason or "clip shorter than one analysis window",
                tempo_bpm=None,
                tempo_confidence=None,
                beat_times_s=[],
                beat_strength=None,
                key=None,
                key_confidence=None,
                harmonic_ratio=None,
                loudness_contour_db=[],
                tags=[],
                tagger=None,
            )
        import librosa

        tempo, beats, clarity, tempo_conf = tempo_and_beats(x)
        chroma = librosa.feature.chroma_cqt(y=x, sr=SAMPLE_RATE, hop_length=512).mean(axis=1)
        key, key_conf = estimate_key(chroma)
        shares = {s.stem: s.energy_share for s in sep.stems}
        return MusicAnalysis(
            **self.lineage(clip.clip_id),
            analyzed=True,
            skipped_reason=None,
            tempo_bpm=tempo,
            tempo_confidence=tempo_conf,
            beat_times_s=beats,
            beat_strength=clarity,
            key=key,
            key_confidence=key_conf,
            harmonic_ratio=shares.get("harmonic"),
            loudness_contour_db=loudness_contour(x),
            **tag_fields(x),
        )
