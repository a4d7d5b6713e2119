"""The registry of fact types: every `Fact.type` the evidence may hold, what it states, the confidence of a
measurement (how far its number describes the clip) and the band that turns its number into a word.

One table, read by the evidence stage (which refuses to write an unknown type), by `ClipEvidence`'s read access
(which refuses to read one: a typo in a renderer or in the claim audit used to read nothing and so made every claim
of it "unsupported", silently), by the renderer and rule writers (which words a measurement may become) and by
the audit (which measurement a word is judged against). Adding a fact type is one row here plus the code that
produces it; the event *classes* a `sound.event` fact may name are data in `prompts/evidence.toml` `[events]`
(earmark.stages.facts.events).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class FactType:
    """One kind of fact."""

    name: str  # "<topic>.<attribute>"
    states: str  # what a fact of this type says, for a reader of the evidence table
    confidence: float | None = None  # a measurement's fixed confidence; None: each fact carries its own
    band: str | None = None  # earmark.stages.facts.bands band its number is read in


_ROWS: tuple[FactType, ...] = (
    # what is in the clip (the domain decision, its windows, the named events)
    FactType("content.speech", "speech present / absent / uncertain (the domain probe, calibrated)"),
    FactType("content.music", "music present / absent / uncertain"),
    FactType("content.sound_events", "sound events present / absent / uncertain"),
    FactType("content.silent", "the clip is essentially silent"),
    FactType("content.window", "a 2 s window's content label and probability (subject: start-end s)"),
    FactType("sound.event", "a named AudioSet event class heard over a run of windows (subject: start-end s)"),
    FactType("sound_tags.clip", "a paper sound tagger's clip-level label and probability"),
    FactType("sound_tags.window", "a paper sound tagger's window label and probability (subject: start-end s)"),
    # speech
    FactType("speech.seconds", "seconds of speech (VAD)", confidence=0.9),
    FactType("speech.ratio", "share of the clip that is speech (VAD)", confidence=0.9),
    FactType("speech.segments", "number of VAD speech segments", confidence=0.9),
    FactType("speech.segment", "one VAD speech segment's length (subject: start-end s)"),
    FactType("speech.transcript", "the whole transcript"),
    FactType("speech.quote", "one phrase of the transcript heard with its own confidence (subject: start-end s)"),
    FactType("speech.language", "the spoken language"),
    FactType("speech.words", "number of transcribed words"),
    FactType("speech.words_per_s", "speaking rate in words per second of speech"),
    FactType("speech.no_speech_prob", "the ASR model's probability that a segment holds no speech"),
    FactType("speech.hallucination", "the hallucination check's score of the transcript"),
    FactType("speakers.count", "number of distinct voices (diarization, checked against pitch)"),
    FactType("speaker.gender", "a voice's gender label and probability (subject: the voice)"),
    FactType("speaker.age_band", "a voice's age band (subject: the voice)"),
    FactType("speaker.emotion", "a voice's emotion (subject: the voice)"),
    FactType("speaker.accent", "a voice's accent (subject: the voice)"),
    FactType("speaker.pitch_median_hz", "a voice's median pitch in Hz (subject: the voice)", confidence=0.8),
    FactType("speaker.speech_s", "seconds a voice speaks (subject: the voice)", confidence=0.8),
    FactType("quality.dnsmos_ovrl", "DNSMOS overall speech quality", confidence=0.8, band="speech_quality"),
    FactType("quality.dnsmos_sig", "DNSMOS speech signal quality", confidence=0.8),
    FactType("quality.dnsmos_bak", "DNSMOS background quality", confidence=0.8),
    # music
    FactType("music.tempo_bpm", "tempo in BPM (octave-checked)", band="tempo"),
    FactType("music.beats", "number of beats tracked", confidence=0.8),
    FactType("music.beat_strength", "how steady and strong the beat is (0-1)", confidence=0.8),
    FactType("music.harmonic_ratio", "share of harmonic (sustained) energy", confidence=0.8),
    FactType("music.loudness_range_db", "loudness range in dB", confidence=0.9),
    FactType("music.key", "the musical key"),
    FactType("music.tag", "a music tag (instrument, genre, mood; subject: its group)"),
    FactType("separation.stem_share", "a separated stem's share of the energy (subject: the stem)", confidence=0.8),
    FactType("separation.vocals_speech_s", "seconds of speech in the vocal stem", confidence=0.8),
    # the recording
    FactType("levels.lufs", "integrated loudness in LUFS", confidence=1.0, band="loudness"),
    FactType("levels.peak_dbfs", "sample peak in dBFS", confidence=1.0),
    FactType("levels.rms_dbfs", "RMS level in dBFS", confidence=1.0),
    FactType("levels.clipping_ratio", "share of clipped samples", confidence=1.0),
    FactType("levels.silence_ratio", "share of the clip below the silence level", confidence=1.0),
    FactType("acoustics.snr_db", "blind signal-to-noise estimate in dB", confidence=0.8, band="noise"),
    FactType("acoustics.rt60_s", "blind reverberation time in s", confidence=0.7, band="reverb"),
    FactType("acoustics.drr_db", "blind direct-to-reverberant ratio in dB", confidence=0.5),
    FactType("acoustics.bandwidth_hz", "effective bandwidth in Hz", confidence=0.9, band="bandwidth"),
    FactType("acoustics.plcmos", "PLCMOS packet-loss quality", confidence=0.7),
)
# A content kind, as items name it ("sound" captions are about the sound events), and the content its presence
# fact is about: the one mapping the renderer, the rule writers, the audit and the margin filter read.
CONTENT = {"speech": "speech", "music": "music", "sound": "sound_events"}


def content_fact(kind: str) -> str:
    """The presence fact type of a content or item kind: "sound" and "sound_events" → content.sound_events."""
    return f"content.{CONTENT.get(kind, kind)}"


FACT_TYPES: dict[str, FactType] = {t.name: t for t in _ROWS}


class UnknownFactType(KeyError):
    """A fact type that is not in the registry (a typo, or a new type without its row)."""

    def __str__(self) -> str:
        return str(self.args[0])


def fact_type(name: str) -> FactType:
    """The registered type `name`. Raises UnknownFactType, naming the closest types, for anything else. (An expert
    table the evidence stage does not know is folded in field by field, `<table>.<field>`, unregistered: those
    facts are kept for the record, and no renderer or check reads them by name.)"""
    if (row := FACT_TYPES.get(name)) is not None:
        return row
    near = difflib.get_close_matches(name, FACT_TYPES, n=3)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    raise UnknownFactType(f"unknown fact type {name!r}{hint} (add it to earmark.schemas.facts.FACT_TYPES)")


def measured_confidence(name: str) -> float | None:
    """A measurement's fixed confidence (None: the fact carries the expert's own, or none)."""
    return fact_type(name).confidence


def banded() -> dict[str, str]:
    """{band: fact type} of every fact type read in a band (earmark.stages.facts.bands)."""
    return {t.band: t.name for t in _ROWS if t.band is not None}
