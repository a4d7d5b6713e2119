"""The claim audit reads an item's timing words (issue [1/3] must-have 6): "in the first part of the clip",
"throughout", "at several moments", "near the end" are attached to the content or event they are about and
compared with the region the renderer computes from the same facts (earmark.stages.facts.render.when_region).

Cases from the blind checks: "Music is heard through the first part of the clip" for music in every window
(fresh5 item 43), "at several moments" for one continuous turn that the VAD split at its breaths, "throughout"
for an event heard in one part.
"""

from __future__ import annotations

import pytest

from earmark.prompts import load_phrases
from earmark.stages.filter.claims import audit, extract
from earmark.stages.synthesize.evidence import evidence_of


def _windows(label: str, starts: range | list[int], more: dict | None = None) -> dict:
    out: dict = {f"{a}-{a + 2}@content.window": {label: 0.99} for a in starts}
    for key, labels in (more or {}).items():
        out[key] = {**out.get(key, {}), **labels}
    return out


def _when(text: str, ev) -> list[tuple[str, str]]:
    return [(a.claim.value, a.judgement.verdict) for a in audit(text, ev) if a.claim.type == "when"]


MUSIC_THROUGHOUT = evidence_of(
    "m",
    "0MA",
    _windows("music", range(0, 10, 2), {"2-4@content.window": {"sound": 0.99}, "4-6@content.window": {"sound": 0.97}}),
    duration_s=10.0,
)


def test_every_rendered_timing_phrase_reads_back_as_its_region() -> None:
    """The words the renderer and rule writers use (evidence.toml [when]) are read as the region they render."""
    for region, phrase in load_phrases("evidence")["when"].items():
        claims = [(c.type, c.value) for c in extract(f"Music is heard {phrase}.")]
        assert ("when", f"{region}@music") in claims, (region, phrase, claims)


def test_a_part_of_the_clip_for_music_heard_throughout_is_contradicted() -> None:
    """fresh5 item 43: the sound events were in the first part; the music was in every window."""
    assert _when("Music is heard through the first part of the clip.", MUSIC_THROUGHOUT) == [
        ("early@music", "contradicted")
    ]
    assert _when("Music plays throughout.", MUSIC_THROUGHOUT) == [("throughout@music", "supported")]
    assert _when("Music for most of the clip.", MUSIC_THROUGHOUT) == [("most@music", "supported")]
    assert _when("Music, with sound effects in the first part of the clip.", MUSIC_THROUGHOUT) == [
        ("early@sound", "supported")
    ]
    assert _when("Sound effects near the end.", MUSIC_THROUGHOUT) == [("end@sound", "contradicted")]


def test_one_turn_split_at_its_breaths_is_not_several_moments() -> None:
    turn = {
        "0.4-3.0@speech.segment": 2.6,
        "3.6-6.1@speech.segment": 2.5,
        "6.7-9.4@speech.segment": 2.7,
        **_windows("speech", range(0, 10, 2)),
    }
    ev = evidence_of("s", "S00", turn, duration_s=10.0)
    assert _when("Someone speaks at several moments.", ev) == [("several@speech", "contradicted")]
    assert _when("Someone speaks throughout the clip.", ev) == [("throughout@speech", "supported")]
    two = evidence_of(
        "t",
        "S00",
        {"0.2-1.8@speech.segment": 1.6, "7.9-9.6@speech.segment": 1.7, **_windows("speech", [0, 8])},
        duration_s=10.0,
    )
    assert _when("Someone speaks at several moments.", two) == [("several@speech", "supported")]
    assert _when("Someone speaks throughout.", two) == [("throughout@speech", "contradicted")]


@pytest.mark.parametrize(
    ("span", "text", "verdict"),
    [
        ("8-10", "A dog barks near the end of the clip.", "supported"),
        ("8-10", "A dog barks towards the end.", "supported"),
        ("0-2", "A dog barks near the end.", "contradicted"),
        ("0-2", "A dog barks throughout.", "contradicted"),
        ("0-2", "An animal is heard near the start.", "supported"),  # a group, from the class under it
        ("4-6", "A dog barks in the later part of the clip.", "supported"),  # the middle lies inside it
        ("2-6", "A dog barks in the later part of the clip.", "unsupported"),  # the first part: they overlap
    ],
)
def test_an_events_timing_is_checked_against_its_windows(span: str, text: str, verdict: str) -> None:
    a, b = (int(x) for x in span.split("-"))
    facts = {f"{s}-{s + 2}@sound.event": ("Dog", 0.95) for s in range(a, b, 2)}
    ev = evidence_of("d", "00A", facts, duration_s=10.0)
    [(value, got)] = _when(text, ev)
    assert got == verdict, (value, got)


def test_timing_words_about_nothing_claimed_or_denied_are_not_claims() -> None:
    assert [c for c in extract("No music throughout.") if c.type == "when"] == []
    assert [c for c in extract("The recording is quiet throughout.") if c.type == "when"] == []
    ev = evidence_of("x", "0M0", _windows("music", [0, 2]), duration_s=10.0)  # music in two windows of five
    assert _when("Music plays throughout.", ev) == [("throughout@music", "unsupported")]  # no region is given


def test_timing_given_to_a_named_voice_is_that_voices_only_where_the_speakers_are_sure() -> None:
    """fresh18's blind check: "A short, male voice speaking for most of the clip" where a woman spoke for the first
    4.6 s and the man from 5.3 to 8.9 s. The speech is heard for most of the clip; the man is not."""
    speech = {"0.4-4.6@speech.segment": 4.2, "5.3-8.9@speech.segment": 3.6, **_windows("speech", range(0, 10, 2))}
    unsure = evidence_of("u", "S00", {**speech, "V1@speaker.gender": {"male": 0.9}}, duration_s=10.0)
    assert _when("A short, male voice speaking for most of the clip.", unsure) == [("most@speech#male", "unsupported")]
    assert _when("Speech for most of the clip. A male voice.", unsure) == [("most@speech", "supported")]
    assert _when("A male voice speaks, and music plays throughout.", unsure) == [("throughout@music", "unsupported")]
    one = evidence_of(
        "o", "S00", {**speech, "V1@speaker.gender": {"male": 0.9}, "speakers.count": (1.0, 0.9)}, duration_s=10.0
    )
    assert _when("A man speaks for most of the clip.", one) == [("most@speech#male", "supported")]
    pair = evidence_of(
        "p",
        "S00",
        {
            **speech,
            "V1@speaker.gender": {"female": 0.9},
            "V2@speaker.gender": {"male": 0.9},
            "speakers.count": (2.0, 0.9),
        },
        duration_s=10.0,
    )
    assert _when("A woman and a man speak for most of the clip.", pair) == [("most@speech", "supported")]  # a pair
    assert _when("A man speaks for most of the clip.", pair) == [("most@speech#male", "unsupported")]
