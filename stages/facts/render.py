"""Plain-language views of a clip's evidence, one per item type, in the words of prompts/evidence.toml.

Only confident facts are rendered (`[evidence] min_confidence`): a small model repeats what it reads, so
what it may not say is never in front of it. Measurements become words only inside their bands
(earmark.stages.facts.bands), the same bands the claim audit checks words against. What makes a clip itself is
kept: the confident transcript's words, when in the clip speech, music and events are heard, the voices.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from earmark.prompts import Phrases
from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.facts import CONTENT, content_fact
from earmark.stages.facts import bands

MAX_TRANSCRIPT_WORDS = 60
SOUND_LABELS = {"sound", "impulsive sound", "tonal sound", "noise"}  # window labels meaning "sound events"


class View:
    """A clip's evidence as the renderer and the claim audit read it: the facts that reach the confidence
    threshold (measurements, without a confidence, count as confident)."""

    def __init__(self, ev: ClipEvidence, min_confidence: float) -> None:
        self.ev, self.thr = ev, min_confidence

    def ok(self, type_: str, subject: str | None = None):
        f = self.ev.get(type_, subject)
        return f if f is not None and (f.confidence is None or f.confidence >= self.thr) else None

    def num(self, type_: str) -> float | None:
        f = self.ok(type_)
        return None if f is None else f.number

    def content(self, kind: str) -> str | None:
        """'present' / 'absent' when the evidence is sure of `kind` ("speech", "music", "sound" or
        "sound_events"), else None ("uncertain")."""
        f = self.ok(content_fact(kind))
        return f.value if f is not None and f.value in ("present", "absent") else None

    def labels(self, type_: str) -> dict[str, float]:
        """The confident labels of a labelled fact type, over its subjects."""
        return {
            k: v
            for s in self.ev.subjects(type_) or [None]
            for k, v in self.ev.labels(type_, s).items()
            if v >= self.thr
        }

    def all_labels(self, type_: str) -> list[tuple[str, float]]:
        """Every label of a fact type with its number, confident or not."""
        return [(f.value, f.number or 0.0) for f in self.ev.all(type_) if f.value]

    def windows(self, labels: set[str]) -> list[tuple[float, float]]:
        """(start, end) of the tagger's windows where one of `labels` is heard at its WINDOW_BAR or more; none at all
        where a window holds one of them below the bar (from 0.5, where windows are stored): what is in doubt
        there could be the sound a timing word leaves out ("near the start" of a splash at 1 s, with a gunshot at
        5 s in a window at 0.949)."""
        out, doubt = [], False
        windows = list(self.ev.all("content.window")) or list(self.ev.all("sound_tags.window"))
        for f in windows:
            if f.value in labels and f.subject and "-" in f.subject:
                if (f.number or 0) < WINDOW_BAR.get(f.value, WINDOW_BAR_DEFAULT):
                    doubt = doubt or (f.number or 0) >= WINDOW_STORED
                    continue
                a, b = (float(x) for x in f.subject.split("-"))
                out.append((a, b))
        return [] if doubt else sorted(set(out))

    def stored_windows(self, labels: set[str]) -> list[tuple[float, float]]:
        """Every window the evidence keeps for one of `labels` (from WINDOW_STORED), sure or in doubt: where
        something may be heard ("the first sound event" must have none before it)."""
        return [
            (float(a), float(b))
            for f in (list(self.ev.all("content.window")) or list(self.ev.all("sound_tags.window")))
            if f.value in labels and (f.number or 0) >= WINDOW_STORED and f.subject and "-" in f.subject
            for a, b in [f.subject.split("-")]
        ]


@dataclass(frozen=True)
class Heard:
    """One event class heard with confidence: its AudioSet name and time spans (s)."""

    cls: str
    spans: tuple[tuple[float, float], ...]

    @property
    def at(self) -> int:
        """The first span's start, in whole seconds (the order of events and "the first sound event")."""
        return int(round(self.spans[0][0]))

    @property
    def between(self) -> str:
        """The first span in whole seconds, "2 and 4": what "between 2 and 4 s" says. Events are found per 2 s
        window, so a moment is no finer than its window: fresh15's blind check found "an aircraft at about 2 s"
        (the window's start) of one heard at 3.2-5.7 s, with a gunshot at 2 s."""
        a, b = self.spans[0]
        return f"{math.floor(a + 1e-6)} and {math.ceil(b - 1e-6)}"

    def when(self, p: Phrases, v: View) -> str | None:
        return when_phrase(p, list(self.spans), v.ev.duration_s, whole="most")


def heard_events(v: View) -> list[Heard]:
    """The confident `sound.event` facts by class, in the order they are first heard."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for f in v.ev.all("sound.event"):
        if f.value and f.subject and (f.confidence or 0.0) >= v.thr:
            a, _, b = f.subject.partition("-")
            spans.setdefault(f.value, []).append((float(a), float(b)))
    heard = [Heard(c, tuple(sorted(s))) for c, s in spans.items()]
    return sorted(heard, key=lambda h: (h.spans[0][0], h.cls))


# A 2 s content window is read as holding its label only from WINDOW_BAR: against the mixes' truth, sound windows
# at 0.95 or more were right 196 of 206 times on the check builds fresh4-9 (55 of 61 on the DEV build devq), and
# those from 0.5 to 0.95 only 115 of 261 (30 of 61) (`benchmarks/quality/window_truth.py`, 2026-11-28). From 0.5
# they made "sound events for most of the clip" of one explosion at 1.5-4.0 s of 10 s (fresh9's blind check). A
# window below the bar (stored from WINDOW_STORED) leaves the content untimed: it may hold what the timing words
# would leave out. With no "most" from a run of windows either (below), the sounds placed in time were right 38 of
# 41 times, against 66 of 80 before (`benchmarks/quality/timing_truth.py` on devq and fresh4-9). Music keeps 0.5: its one timing word, "throughout"
# (every window), was right 173 of 173 times from 0.5; from 0.95 it was said 117 times.
WINDOW_BAR, WINDOW_STORED = {"music": 0.5}, 0.5  # WINDOW_STORED: the evidence's bar (below it: not heard there)
WINDOW_BAR_DEFAULT = 0.95
PAUSE_S = 1.5  # a pause shorter than this does not split one turn or one sound into "several moments"
THROUGHOUT = 0.85  # share of the clip a precisely timed span must cover to be "throughout"
MOST = 0.5  # ... to be "for most of the clip"
EDGE_S = 0.01


def merged(spans: list[tuple[float, float]], gap: float) -> list[tuple[float, float]]:
    """Spans with the pauses shorter than `gap` between them closed: one turn, not several moments."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a - out[-1][1] < gap:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def when_phrase(
    p: Phrases,
    spans: list[tuple[float, float]],
    duration: float,
    *,
    windowed: bool = True,
    whole: str | None = "throughout",
    partial: bool = True,
) -> str | None:
    """Where in the clip something is heard, in the words of evidence.toml's `[when]` (`when_region`)."""
    region = when_region(spans, duration, windowed=windowed, whole=whole, partial=partial)
    return None if region is None else p["when"][region]


def when_region(
    spans: list[tuple[float, float]],
    duration: float,
    *,
    windowed: bool = True,
    whole: str | None = "throughout",
    partial: bool = True,
) -> str | None:
    """Where in the clip something is heard, as a `[when]` key a listener can check (REGIONS); the claim audit
    compares an item's timing words with the same keys.

    `windowed` spans are the tagger's 2 s windows: a window says the thing is audible somewhere inside it, not
    for how long, so "throughout" needs every window, a run of windows is shrunk by half a window at each edge
    inside the clip (a jet at 2.55-6.51 s of 8 s lights windows 2-8, which is "the later part", not
    "throughout"), and no share of the clip is claimed from them. Precise spans (the VAD's) are first joined
    across pauses under PAUSE_S: Silero splits one turn at its breaths, and one turn is not "several moments".
    `whole`: the phrase for windows that all hold it ("most" for a named event; None, no timing, for "sounds" in
    general: the presence head's sound windows were all lit on clips where splashes and a gunshot took 1.3 s of
    8, and a plane from 1.75 s then a gunshot lit every window). `partial` False: say nothing unless every
    window holds it (music: a bed under rain loses windows to the rain, and "in the first part" would be false).
    """
    if not spans or duration <= 0:
        return None
    runs = merged(spans, EDGE_S if windowed else PAUSE_S)
    if windowed:
        if len(runs) == 1 and runs[0][0] <= EDGE_S and runs[0][1] >= duration - EDGE_S:
            return whole
        if not partial:
            return None
        half = min(b - a for a, b in spans) / 2
        runs = [(a + half if a > EDGE_S else a, b - half if b < duration - EDGE_S else b) for a, b in runs]
    else:
        covered = sum(b - a for a, b in runs)
        if covered >= THROUGHOUT * duration:
            return "throughout"
    if len(runs) > 1:
        return "several"
    a, b = runs[0]
    if not windowed and b - a >= MOST * duration:
        return "most"
    first, last = (min(2, int(3 * t / duration)) for t in (a, max(a, b - EDGE_S)))
    if (first, last) == (0, 2):  # from the first third into the last, not all of it
        # windows say where, not how long: "for most of the clip" of windows 0-8 of 10 s was wrong of wind, a beep
        # and a gunshot filling 4.9 s (fresh10's blind check), so such a run says nothing
        return None if windowed else ("start", "middle", "end")[min(2, int(1.5 * (a + b) / duration))]
    return {(0, 0): "start", (1, 1): "middle", (2, 2): "end", (0, 1): "early", (1, 2): "late"}[(first, last)]


def _agree(vad: list[tuple[float, float]], windows: list[tuple[float, float]], tol: float = 0.5) -> bool:
    """The VAD's turns and the tagger's speech windows put speech in the same places: every speech window
    holds some VAD speech, and every VAD turn lies inside speech windows (within `tol` s)."""
    turns = merged(vad, PAUSE_S)
    runs = merged(windows, EDGE_S)
    holds = all(any(a < tb and ta < b for ta, tb in turns) for a, b in windows)
    inside = all(any(a - tol <= ta and tb <= b + tol for a, b in runs) for ta, tb in turns)
    return holds and inside


def speech_when(p: Phrases, v: View) -> str | None:
    """When speech is heard, in words (`speech_region`)."""
    region = speech_region(v)
    return None if region is None else p["when"][region]


def speech_region(v: View) -> str | None:
    """When speech is heard, from the VAD's segments, said only when the tagger's speech windows (a second,
    independent view of the same clip) put it in the same places: Silero misses quiet or distant speech and
    then says "near the start" of a clip spoken throughout. Without tagger windows (a heuristic domain
    backend) the VAD's phrase stands alone. "At several moments" also needs a window without speech between
    two with it: under a helicopter or a gunshot Silero drops parts of one long turn (a fresh build's clip
    spoken from 0.5 s to 9.1 s with pauses under 0.7 s got four VAD segments 1-2 s apart)."""
    spans = [tuple(float(x) for x in f.subject.split("-")) for f in v.ev.all("speech.segment") if f.subject]
    vad = when_region(spans, v.ev.duration_s, windowed=False)
    if vad is None or not any(True for _ in v.ev.all("content.window")):
        return vad
    windows = v.windows({"speech"})
    if vad == "several" and len(merged(windows, EDGE_S)) < 2:
        return None
    return vad if _agree(spans, windows) else None


def music_region(v: View) -> str | None:
    """When music is heard: "throughout" where every window holds it, else nothing (a bed under rain loses
    windows to the rain, and "in the first part" would be false)."""
    return when_region(v.windows({"music"}), v.ev.duration_s, partial=False)


def sound_region(v: View) -> str | None:
    """When other sounds are heard, from the presence head's sound windows; nothing where all are lit."""
    return when_region(v.windows(SOUND_LABELS), v.ev.duration_s, whole=None)


ORDER_GAP_S = 1.0  # "A, then B": A is first heard at least this long before B is (events are timed per 2 s window)


def occurrences(spans: list[tuple[float, float]]) -> int:
    """How many separate times something is heard in the tagger's windows: runs of windows with a window
    without it between them (two barks inside one 2 s window are one run, so a run count is a lower bound of
    the barks and an exact count of the separate moments)."""
    return len(merged(spans, EDGE_S))


def order(first: list[tuple[float, float]], second: list[tuple[float, float]]) -> str | None:
    """Whether `first` is heard before `second`: "before" where it is first heard ORDER_GAP_S or more before
    `second` is, "after" where all of `second` is heard before `first` begins, else None (they start
    together, or overlap: the windows cannot tell which came first)."""
    if not first or not second:
        return None
    a0, b0 = min(a for a, _ in first), min(a for a, _ in second)
    if a0 + ORDER_GAP_S <= b0:
        return "before"
    if max(b for _, b in second) <= a0:
        return "after"
    return None


def in_turn(first: list[tuple[float, float]], second: list[tuple[float, float]]) -> bool:
    """`first` is over before `second` begins: "A, then B" holds and "B, then A" is contradicted."""
    return order(first, second) == "before" and order(second, first) == "after"


def event_region(v: View, classes: set[str]) -> str | None:
    """When the confident named events of `classes` are heard (a run over the whole clip is "most")."""
    spans = [s for h in heard_events(v) if h.cls in classes for s in h.spans]
    return when_region(spans, v.ev.duration_s, whole="most")


# A quote states exact words: only phrases this sure (evidence.QUOTE_CALIBRATION) are quoted, by the rules and to
# the model, and the claim audit supports a quote only inside them.
QUOTE_CONFIDENCE = 0.9


def quotable(v: View) -> str | None:
    """The words the model may see and quote: the phrases heard with confidence (`speech.quote` at
    QUOTE_CONFIDENCE), in order, with "…" where unsure ones lie between; "" when none is sure; None for evidence
    without phrase facts (the confident transcript, as before). A whole transcript at a confident mean let the
    model quote phrases heard at 0.08 ("a straw-skilab-a-jim", fresh5)."""
    phrases = [f for f in v.ev.all("speech.quote") if f.value]
    if not phrases:
        return None
    out: list[str] = []
    for f in phrases:
        if (f.confidence or 0.0) >= max(v.thr, QUOTE_CONFIDENCE):
            out.append(f.value.strip())
        elif out and out[-1] != "…":
            out.append("…")
    return " ".join(out).strip(" …")


def _clean_transcript(p: Phrases, text: str) -> str:
    # Angle brackets would let speech close the <transcript> tag; the words themselves are kept.
    words = re.sub(r"[<>{}]", " ", text).split()
    out = " ".join(words[:MAX_TRANSCRIPT_WORDS])
    return out + (p["transcript_more"] if len(words) > MAX_TRANSCRIPT_WORDS else "")


def _content_lines(p: Phrases, v: View) -> list[str]:
    c = p["content"]
    if v.ev.num("content.silent") and all(v.content(k) != "present" for k in ("speech", "music", "sound_events")):
        return [c["silent"]]
    lines = []
    for kind in ("speech", "music", "sound_events"):
        state = v.content(kind)
        if state is not None:
            lines.append(c[state][kind])
    return lines


def _speech_lines(p: Phrases, v: View) -> list[str]:
    s = p["speech"]
    if v.content("speech") != "present":
        return []
    lines = []
    n = v.num("speakers.count")
    if n:
        n = int(n)
        lines.append(
            s["one_speaker"]
            if n == 1
            else s["n_speakers"].format(n=({2: s["counts"][0], 3: s["counts"][1]}).get(n, s["several"]))
        )
    elif v.ev.get("speakers.count") is not None:  # counted, but the pitch check did not confirm the number
        lines.append(s["unsure_speakers"])
    for who in v.ev.subjects("speaker.gender")[:3]:
        genders = v.ev.labels("speaker.gender", who)
        if genders:
            label, prob = max(genders.items(), key=lambda kv: kv[1])
            if prob >= v.thr and label in s["genders"]:
                line = s["voice"].format(gender=s["genders"][label])
                if line not in lines:
                    lines.append(line)
    if (when := speech_when(p, v)) is not None:
        lines.append(s["heard"].format(when=when))
    transcript = v.ok("speech.transcript")
    if transcript is not None and transcript.value and (phrases := quotable(v)) is not None:
        transcript = transcript.model_copy(update={"value": phrases})
    if transcript is not None and transcript.value:
        wps = v.num("speech.words_per_s")
        pace = "slow" if wps is not None and wps < 1.8 else "fast" if wps is not None and wps >= 3.2 else None
        if pace:
            lines.append(s["pace"][pace])
        quoted = p["transcript_open"] + _clean_transcript(p, transcript.value) + p["transcript_close"]
        lines.append(s["words"].format(transcript=quoted))
    quality = bands.word("speech_quality", v.num("quality.dnsmos_ovrl"))
    if quality:
        lines.append(s["quality"][quality])
    return lines


def _music_lines(p: Phrases, v: View) -> list[str]:
    m = p["music"]
    if v.content("music") != "present":
        return []
    lines = []
    if (region := music_region(v)) is not None:
        lines.append(m["heard"].format(when=p["when"][region]))
    harm = v.num("music.harmonic_ratio")
    if harm is not None:
        lines.append(m["texture"]["sustained" if harm >= 0.8 else "percussive" if harm < 0.4 else "mixed"])
    if (tempo := bands.word("tempo", v.num("music.tempo_bpm"))) is not None:
        lines.append(m["tempo"][tempo])
    if (v.num("music.beat_strength") or 0) >= 0.6:
        lines.append(m["beat"])
    key = v.ok("music.key")
    if key is not None and key.value:
        lines.append(m["key"].format(key=key.value))
    tags: dict[str | None, list[str]] = {}
    for f in v.ev.all("music.tag"):
        if f.value and (f.confidence or 0) >= v.thr:
            tags.setdefault(f.subject, []).append(f.value)
    for group, labels in tags.items():  # "- instruments: piano, strings"; a tag of no known group on its own
        if group in m["tags"]:
            lines.append(m["tags"][group].format(labels=", ".join(labels)))
        else:
            lines += [m["tag"].format(label=label) for label in labels]
    if (v.num("music.loudness_range_db") or 0) > 12:
        lines.append(m["dynamic"])
    return lines


def _sound_lines(p: Phrases, v: View) -> list[str]:
    s = p["sound"]
    if v.content("sound_events") != "present":
        return []
    lines = []
    if (region := sound_region(v)) is not None:
        lines.append(s["heard"].format(when=p["when"][region]))
    named = [e for e in heard_events(v) if e.cls in p["events"]]
    for e in named:
        at = s["between"].format(span=e.between) if len(e.spans) == 1 and e.spans[0][1] - e.spans[0][0] <= 4 else None
        lines.append(s["event"].format(noun=p["events"][e.cls]["noun"], when=at or e.when(p, v) or "").rstrip())
    if named:  # the tagger's own labels are the classes just named
        return lines
    # The coarse DSP labels (impulsive / tonal / noise-like) are not rendered: on two blind checks of real mixes
    # they made 6 of 11 wrong items ("impulsive" for a 2 s alarm, water and a helicopter; "tonal" for water and
    # an explosion). A named label from an event tagger (paper profile) is.
    for f in v.ev.all("sound_tags.clip"):
        if f.value not in SOUND_LABELS | {"speech", "music", "silence"} and (f.number or 0) >= v.thr:
            lines.append(s["tag"].format(label=f.value))
    return lines


def _recording_lines(p: Phrases, v: View) -> list[str]:
    r = p["recording"]
    lines = []
    for band, fact in bands.recording():
        if (word := bands.word(band, v.num(fact))) is not None:
            lines.append(r[band][word])
    if (v.num("levels.clipping_ratio") or 0) > 0.001:
        lines.append(r["clipping"])
    return lines


def render(ev: ClipEvidence, kind: str, phrases: Phrases, min_confidence: float = 0.6) -> str:
    """Plain-language evidence for one view: 'short', 'long', 'speech', 'music', 'sound', 'environment'."""
    p, v = phrases, View(ev, min_confidence)
    if kind in ("speech", "music", "sound"):  # the content's own view, headed by whether it is there
        content = CONTENT[kind]
        state = v.content(content)
        head = [p["content"][state][content]] if state else []
        body = {"speech": _speech_lines, "music": _music_lines, "sound": _sound_lines}[kind](p, v)
        lines = head + body
    elif kind == "environment":
        lines = _recording_lines(p, v)
    else:  # short, long: what is there, each part only when its content is confidently there
        lines = _content_lines(p, v) + _speech_lines(p, v) + _music_lines(p, v) + _sound_lines(p, v)
        lines += _recording_lines(p, v) if kind != "short" else []
    return "\n".join(lines)


def render_all(ev: ClipEvidence, phrases: Phrases, min_confidence: float = 0.6) -> str:
    """All views of the evidence, each line once (the joint strategy's notes)."""
    seen: list[str] = []
    for kind in ("long", "speech", "music", "sound", "environment"):
        for line in render(ev, kind, phrases, min_confidence).splitlines():
            if line not in seen:
                seen.append(line)
    return "\n".join(seen)
