"""Who spoke when: Resemblyzer speaker embeddings on VAD speech + agglomerative clustering (offline default).

Resemblyzer (PyPI `resemblyzer`) ships its GE2E encoder weights inside the wheel. Only the clip's VAD
speech frames are embedded (as Resemblyzer itself trims silence), in 1.2 s windows every 0.4 s; the
windows of every clip of a call go through the encoder as one batch. Windows are clustered with
average-linkage cosine clustering for k = 1…max_speakers, and the largest k is kept whose clusters are
each clearly apart: the mean similarity between two clusters is below `separation` times the mean
similarity inside them (0.85: same espeak voice 0.93–0.97, male vs female 0.73–0.86). A fixed distance threshold did not work: Resemblyzer's similarity between two
windows of one voice varies with the voice (0.78–0.90 on espeak voices), the ratio is steadier.
Each hop of speech gets the label of the windows covering it; runs of one label become turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version as _pkg_version
from typing import Any

import numpy as np

from earmark.experts.audio import samples_16k
from earmark.experts.base import ClipAudio, Context, Expert, load_once
from earmark.schemas.records import Diarization, SpeakerTurn, SpeechActivity

MEL_STEP_S = 0.01  # Resemblyzer's mel frame step
NO_SPEECH_REASON = "no speech detected by VAD"


def _load_encoder() -> Any:
    from resemblyzer import VoiceEncoder

    return VoiceEncoder("cpu", verbose=False)


def speech_mask(activity: SpeechActivity, n_frames: int, step_s: float = MEL_STEP_S) -> np.ndarray:
    mask = np.zeros(n_frames, bool)
    for seg in activity.segments:
        mask[int(seg.start_s / step_s) : int(np.ceil(seg.end_s / step_s))] = True
    return mask


def cluster_speakers(
    emb: np.ndarray, starts: np.ndarray, window: int, max_speakers: int, separation: float, min_windows: int = 2
) -> np.ndarray:
    """Cluster labels (0..k-1, by first appearance) for L2-normalised window embeddings.

    Windows that overlap in time look alike whoever speaks, so the similarity criterion only compares
    windows at least one window length apart.
    """
    from sklearn.cluster import AgglomerativeClustering

    n = len(emb)
    best = np.zeros(n, int)
    sim = emb @ emb.T
    apart_in_time = np.abs(starts[:, None] - starts[None, :]) >= window

    def mean_sim(a: np.ndarray, b: np.ndarray) -> float | None:
        pairs = apart_in_time[np.ix_(a, b)]
        return float(sim[np.ix_(a, b)][pairs].mean()) if pairs.any() else None

    for k in range(2, min(max_speakers, n // max(min_windows, 1)) + 1):
        labels = AgglomerativeClustering(n_clusters=k, metric="cosine", linkage="average").fit_predict(emb)
        groups = [np.flatnonzero(labels == c) for c in range(k)]
        if min(len(g) for g in groups) < min_windows:
            break
        within = [mean_sim(g, g) for g in groups]
        ok = True
        for i in range(k):
            for j in range(i + 1, k):
                between = mean_sim(groups[i], groups[j])
                wi, wj = within[i], within[j]
                # A cluster too short to compare with itself borrows the other's spread.
                ref = np.sqrt((wi or wj or 1.0) * (wj or wi or 1.0))
                ok &= between is not None and between < separation * ref
        if not ok:
            break
        best = labels
    _, first = np.unique(best, return_index=True)
    order = {old: new for new, old in enumerate(best[np.sort(first)])}
    return np.array([order[b] for b in best], int)


class ResemblyzerDiarizationExpert(Expert):
    name, version, record, needs = "diarization", "1", Diarization, ("vad",)
    backend = f"resemblyzer:{_pkg_version('resemblyzer')}+agglomerative"

    def __init__(
        self,
        window_s: float = 1.2,
        hop_s: float = 0.4,
        max_speakers: int = 4,
        separation: float = 0.85,
        min_speech_s: float = 0.3,
        batch_size: int = 256,
    ) -> None:
        self.window = int(round(window_s / MEL_STEP_S))
        self.hop = int(round(hop_s / MEL_STEP_S))
        self.max_speakers = max_speakers
        self.separation = separation
        self.min_speech_s = min_speech_s
        self.batch_size = batch_size

    def key_config(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "hop": self.hop,
            "max_speakers": self.max_speakers,
            "separation": self.separation,
            "min_speech_s": self.min_speech_s,
        }

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[Diarization]:
        (vad,) = self.needed(context, clips, "vad")
        # Pass 1: speech-only mel windows of every clip; pass 2: one batched encoder run; pass 3: cluster.
        plans = [self._windows(c, vad[c.clip_id]) for c in clips]  # type: ignore[arg-type]
        all_windows = [w for p in plans if p is not None for w in p[2]]
        embeddings = self._embed(all_windows)
        out, used = [], 0
        for clip, plan in zip(clips, plans):
            activity: SpeechActivity = vad[clip.clip_id]  # type: ignore[assignment]
            if plan is None:
                out.append(self._trivial(clip.clip_id, activity))
                continue
            frames, starts, _ = plan
            emb = embeddings[used : used + len(starts)]
            used += len(starts)
            out.append(self._turns(clip.clip_id, frames, starts, emb, clip.duration_s))
        return out

    def _windows(
        self, clip: ClipAudio, activity: SpeechActivity
    ) -> tuple[np.ndarray, list[int], list[np.ndarray]] | None:
        """(original frame index of each speech frame, window starts, mel windows) or None: too little speech."""
        if activity.speech_s < self.window * MEL_STEP_S:
            return None
        from resemblyzer.audio import normalize_volume, wav_to_mel_spectrogram

        x = samples_16k(clip)
        mel = wav_to_mel_spectrogram(normalize_volume(x, -30.0) if np.any(x) else x)
        frames = np.flatnonzero(speech_mask(activity, len(mel)))
        if len(frames) < self.window:
            return None
        speech = mel[frames]
        starts = list(range(0, len(frames) - self.window + 1, self.hop))
        if starts[-1] + self.window < len(frames):  # cover the tail
            starts.append(len(frames) - self.window)
        return frames, starts, [speech[s : s + self.window] for s in starts]

    def _embed(self, windows: list[np.ndarray]) -> np.ndarray:
        if not windows:
            return np.zeros((0, 256), np.float32)
        import torch

        encoder = load_once("resemblyzer:voice-encoder", _load_encoder)
        parts = []
        with torch.inference_mode():
            for i in range(0, len(windows), self.batch_size):
                batch = torch.from_numpy(np.stack(windows[i : i + self.batch_size]))
                parts.append(encoder(batch).numpy())  # L2-normalised by the encoder
        return np.concatenate(parts)

    def _trivial(self, clip_id: str, activity: SpeechActivity) -> Diarization:
        if activity.speech_s < self.min_speech_s:
            return Diarization(**self.lineage(clip_id), n_speakers=0, turns=[], skipped_reason=NO_SPEECH_REASON)
        # Shorter than one embedding window: one voice is the only estimate that can be made.
        turns = [SpeakerTurn(speaker="S1", start_s=s.start_s, end_s=s.end_s) for s in activity.segments]
        return Diarization(**self.lineage(clip_id), n_speakers=1, turns=turns, skipped_reason=None)

    def _turns(
        self, clip_id: str, frames: np.ndarray, starts: list[int], emb: np.ndarray, duration_s: float
    ) -> Diarization:
        labels = cluster_speakers(emb, np.asarray(starts), self.window, self.max_speakers, self.separation)
        k = int(labels.max()) + 1
        # Vote per speech frame: every window covering it adds one vote for its label.
        n = len(frames)
        votes = np.zeros((n, k))
        for s, lab in zip(starts, labels):
            votes[s : s + self.window, lab] += 1
        frame_label = votes.argmax(axis=1)
        turns: list[SpeakerTurn] = []
        run_start = 0
        for i in range(1, n + 1):
            # A turn ends where the label changes or the speech frames stop being contiguous (a pause).
            if i == n or frame_label[i] != frame_label[run_start] or frames[i] != frames[i - 1] + 1:
                turns.append(
                    SpeakerTurn(
                        speaker=f"S{frame_label[run_start] + 1}",
                        start_s=round(frames[run_start] * MEL_STEP_S, 2),
                        end_s=round(min((frames[i - 1] + 1) * MEL_STEP_S, duration_s), 3),
                    )
                )
                run_start = i
        merged: list[SpeakerTurn] = []
        for t in turns:  # join a speaker's turns split only by a short pause
            if merged and merged[-1].speaker == t.speaker and t.start_s - merged[-1].end_s < 0.5:
                merged[-1] = SpeakerTurn(speaker=t.speaker, start_s=merged[-1].start_s, end_s=t.end_s)
            else:
                merged.append(t)
        return Diarization(**self.lineage(clip_id), n_speakers=k, turns=merged, skipped_reason=None)
