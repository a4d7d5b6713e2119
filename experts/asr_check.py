"""Is the transcript a Whisper hallucination? Rule checks on the asr and vad records (no model).

Whisper writes fluent text where there is no speech: phrases from its subtitle training data ("thank you
for watching", "subtitles by …", a lone "you"), loops of one phrase, words where VAD heard nothing, and
low-confidence guesses. Each sign is a flag with a weight; the score is 1 − Π(1 − weight) over the raised
flags, so one strong sign is enough and weak signs add up.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Any

from earmark.core.text import normalise
from earmark.experts.base import ClipAudio, Context, Expert
from earmark.schemas.records import SpeechActivity, Transcript, TranscriptCheck

# Phrases Whisper is known to produce on silence, music and noise (subtitle credits, outros).
KNOWN_PHRASES = (
    "thank you for watching",
    "thanks for watching",
    "thank you for listening",
    "thanks for listening",
    "please subscribe",
    "like and subscribe",
    "subscribe to my channel",
    "see you in the next video",
    "subtitles by",
    "subtitled by",
    "captions by",
    "transcribed by",
    "translated by",
    "amara.org",
    "www.",
    ".com",
    "copyright",
    "all rights reserved",
)
# Whole transcripts that are hallucinations when they are all there is (normalised, no punctuation).
KNOWN_WHOLE = {
    "you",
    "thank you",
    "thanks",
    "bye",
    "okay",
    "so",
    "oh",
    "hmm",
    "music",
    "applause",
    "laughter",
    "silence",
    "foreign",
    "the end",
    "thank you very much",
}
BRACKETED = re.compile(r"[\[(♪*][^\])♪*]*[\])♪*]|♪")  # [Music], (applause), ♪ … ♪, *laughs*
WEIGHTS = {
    "known_phrase": 0.8,
    "repetition": 0.6,
    "no_vad_support": 0.7,
    "low_confidence": 0.35,
    "whisper_no_speech": 0.4,
}


def vad_support(transcript: Transcript, activity: SpeechActivity, pad_s: float = 0.2) -> float:
    """Share of word time inside VAD speech segments (widened by `pad_s`); 1.0 when there are no words."""
    total = inside = 0.0
    for w in transcript.words:
        dur = max(w.end_s - w.start_s, 0.02)
        total += dur
        for seg in activity.segments:
            lo, hi = max(w.start_s, seg.start_s - pad_s), min(w.start_s + dur, seg.end_s + pad_s)
            inside += max(0.0, hi - lo)
    return round(min(inside / total, 1.0), 4) if total else 1.0


def is_repetitive(text: str, min_repeats: int = 3) -> bool:
    """An n-gram (n ≤ 6) repeated back to back `min_repeats` times, or text that gzips like a loop."""
    words = normalise(text).split()
    for n in range(1, 7):
        for i in range(0, max(0, len(words) - n * min_repeats + 1)):
            gram = words[i : i + n]
            if all(words[i + r * n : i + (r + 1) * n] == gram for r in range(1, min_repeats)):
                return True
    raw = text.strip().encode()
    # Whisper's own loop test: compression ratio above 2.4 on text long enough for the ratio to mean something.
    return len(raw) > 60 and len(raw) / len(zlib.compress(raw)) > 2.4


def flags_for(
    transcript: Transcript, activity: SpeechActivity, min_word_prob: float = 0.45, min_support: float = 0.5
) -> tuple[list[str], float]:
    text = transcript.text.strip()
    norm = normalise(text)
    flags = []
    if (
        norm in KNOWN_WHOLE
        or any(p in text.lower() for p in KNOWN_PHRASES)
        or (BRACKETED.search(text) and not normalise(BRACKETED.sub(" ", text)))
    ):
        flags.append("known_phrase")
    if is_repetitive(text):
        flags.append("repetition")
    support = vad_support(transcript, activity)
    if transcript.words and support < min_support:
        flags.append("no_vad_support")
    probs = [w.prob for w in transcript.words]
    if (probs and sum(probs) / len(probs) < min_word_prob) or transcript.avg_logprob < -1.0:
        flags.append("low_confidence")
    if transcript.no_speech_prob > 0.6 and transcript.avg_logprob < -0.5:  # Whisper's own no-speech rule, softened
        flags.append("whisper_no_speech")
    keep = 1.0
    for f in flags:
        keep *= 1.0 - WEIGHTS[f]
    return flags, round(1.0 - keep, 4)


class HallucinationCheckExpert(Expert):
    name, version, record, needs = "asr_check", "1", TranscriptCheck, ("vad", "asr")
    backend = "heuristic:whisper-hallucination-rules-v1"

    def __init__(self, min_word_prob: float = 0.45, min_support: float = 0.5) -> None:
        self.min_word_prob = min_word_prob
        self.min_support = min_support

    def key_config(self) -> dict[str, Any]:
        return {
            "min_word_prob": self.min_word_prob,
            "min_support": self.min_support,
            "weights": WEIGHTS,
            "phrases": sorted(KNOWN_PHRASES),
            "whole": sorted(KNOWN_WHOLE),
        }

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[TranscriptCheck]:
        self.needed(context, clips)
        out = []
        for c in clips:
            asr, vad = context["asr"][c.clip_id], context["vad"][c.clip_id]
            flags, score = flags_for(asr, vad, self.min_word_prob, self.min_support)  # type: ignore[arg-type]
            out.append(
                TranscriptCheck(
                    **self.lineage(c.clip_id), flags=flags, hallucination_score=score, vad_support=vad_support(asr, vad)
                )
            )  # type: ignore[arg-type]
        return out
