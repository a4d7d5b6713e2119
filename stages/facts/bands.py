"""Where a measurement turns into a word: one table, read by the renderer (what the notes say) and by the
claim audit (what an item may say), so a word the notes use is always a word the audit supports.

Each band maps a value to a word, or to None in the gap between words, where neither is stated. The
audit's contradiction edges are wider than its support edges (`CONTRADICTS`): a value just past a band edge
makes the word unsupported, not wrong.
"""

from __future__ import annotations

from earmark.schemas.facts import banded

RECORDING = ("loudness", "noise", "reverb", "bandwidth")  # the bands that describe the recording, in the notes' order

# (word, low, high): the word when low <= value < high
BANDS: dict[str, list[tuple[str, float, float]]] = {
    "loudness": [("quiet", -200.0, -26.0), ("loud", -20.0, 100.0)],  # LUFS
    "noise": [("noisy", -100.0, 15.0), ("clean", 25.0, 200.0)],  # SNR dB
    "reverb": [("dry", 0.0, 0.35), ("reverberant", 0.6, 100.0)],  # RT60 s
    "bandwidth": [("narrow", 0.0, 5000.0), ("full", 7000.0, 1e9)],  # Hz
    "tempo": [("slow", 0.0, 85.0), ("moderate", 85.0, 125.0), ("fast", 125.0, 1000.0)],  # BPM
    "speech_quality": [("poor", 0.0, 2.7), ("good", 3.3, 6.0)],  # DNSMOS overall
}
# (word, low, high): the audit calls a claim of `word` contradicted when the value lies here
CONTRADICTS: dict[str, list[tuple[str, float, float]]] = {
    "loudness": [("quiet", -16.0, 100.0), ("loud", -200.0, -30.0)],
    "noise": [("noisy", 30.0, 200.0), ("clean", -100.0, 10.0)],
    "reverb": [("dry", 0.7, 100.0), ("reverberant", 0.0, 0.3)],
    "bandwidth": [("narrow", 7000.0, 1e9), ("full", 0.0, 4500.0)],
    "tempo": [("slow", 95.0, 1000.0), ("moderate", 0.0, 75.0), ("moderate", 135.0, 1000.0), ("fast", 0.0, 115.0)],
    "speech_quality": [("poor", 3.3, 6.0), ("good", 0.0, 2.7)],
}


def word(band: str, value: float | None) -> str | None:
    """The band's word for `value`, or None (no value, or between words)."""
    if value is None:
        return None
    return next((w for w, lo, hi in BANDS[band] if lo <= value < hi), None)


def contradicts(band: str, claimed: str, value: float | None) -> bool:
    return value is not None and any(w == claimed and lo <= value < hi for w, lo, hi in CONTRADICTS[band])


def fact_of(band: str) -> str:
    """The fact type read in `band` (the fact-type registry, earmark.schemas.facts)."""
    return banded()[band]


def recording() -> list[tuple[str, str]]:
    """(band, fact type) of the recording's bands, in the order the notes give them."""
    return [(band, fact_of(band)) for band in RECORDING]
