"""Judging one claim against one clip's evidence (`judge`), with only the facts whose confidence reaches the
threshold (earmark.stages.facts.render.View, the renderer's own view):

- supported: a confident fact says the same;
- contradicted: a confident fact says otherwise (music claimed where the tagger is sure there is none, a
  woman where the voice is confidently male, a fast tempo on a confident 80 BPM, words not in a confident
  transcript);
- unsupported: no confident fact either way (every place, every named sound source offline, a genre, a pitch
  or loudness that rises or falls: experts give one number per clip, not a trajectory).

A denied claim holds where the claim it denies is contradicted. The verdict is computed here, never by a model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher

from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.facts import CONTENT, content_fact
from earmark.stages.facts import bands, events
from earmark.stages.facts.render import (
    QUOTE_CONFIDENCE,
    View,
    event_region,
    music_region,
    occurrences,
    order,
    sound_region,
    speech_region,
)
from earmark.stages.filter.extract import VOICE_MARK, ExtractedClaim

SUPPORTED, UNSUPPORTED, CONTRADICTED = "supported", "unsupported", "contradicted"


@dataclass(frozen=True)
class Judgement:
    verdict: str
    fact: str | None  # the fact that decided, e.g. "content.music=absent (0.93)"
    reason: str


def _j(verdict: str, fact: str | None = None, reason: str = "") -> Judgement:
    return Judgement(verdict, fact, reason)


def _presence(e: View, kind: str, claimed_present: bool) -> Judgement:
    state = e.content(kind)
    f = e.ev.get(content_fact(kind))
    desc = f"{content_fact(kind)}={f.value} ({f.confidence:.2f})" if f and f.confidence is not None else None
    if state is None:
        return _j(UNSUPPORTED, desc, f"the tagger is not sure whether {kind} is present")
    if (state == "present") == claimed_present:
        return _j(SUPPORTED, desc)
    return _j(CONTRADICTED, desc, f"the tagger is sure {kind} is {state}")


def _needs(e: View, kind: str) -> Judgement | None:
    """A claim about speakers / music / events contradicts evidence that its content is confidently absent."""
    if e.content(kind) == "absent":
        return _j(CONTRADICTED, f"{content_fact(kind)}=absent", f"the tagger is sure there is no {kind}")
    return None


def _band(value: float | None, fact: str, support: bool, contradict: bool, what: str) -> Judgement:
    if value is None:
        return _j(UNSUPPORTED, None, f"no confident {what} measurement")
    if support:
        return _j(SUPPORTED, f"{fact}={value:g}")
    if contradict:
        return _j(CONTRADICTED, f"{fact}={value:g}", f"the measured {what} says otherwise")
    return _j(UNSUPPORTED, f"{fact}={value:g}", f"the measured {what} is in between")


def _norm_words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _quote(e: View, quoted: str) -> Judgement:
    if (j := _needs(e, "speech")) is not None:
        return j
    f = e.ok("speech.transcript")
    if f is None or not f.value:
        return _j(UNSUPPORTED, None, "no confident transcript to quote from")
    said, heard = _norm_words(quoted), _norm_words(f.value)
    if not said:
        return _j(UNSUPPORTED, None, "empty quote")
    if not _contains(said, heard):
        if sum(w in set(heard) for w in said) / len(said) < 0.5:
            return _j(CONTRADICTED, "speech.transcript", "the confident transcript does not contain these words")
        return _j(UNSUPPORTED, "speech.transcript", "only some of the quoted words are in the transcript")
    phrases = list(e.ev.all("speech.quote"))
    if not phrases:  # evidence from before phrase facts: the confident transcript decides
        return _j(SUPPORTED, "speech.transcript")
    # the words must lie in phrases heard with confidence (a run of them), not merely somewhere in the transcript
    runs, run = [], []  # type: ignore[var-annotated]
    for p in phrases:
        if p.value and (p.confidence or 0.0) >= max(e.thr, QUOTE_CONFIDENCE):
            run += _norm_words(p.value)
        elif run:
            runs.append(run)
            run = []
    runs.append(run)
    if any(run and _contains(said, run) for run in runs):
        return _j(SUPPORTED, "speech.quote")
    return _j(UNSUPPORTED, "speech.quote", "these words were not all heard with confidence: quote only clear phrases")


def _contains(said: list[str], heard: list[str]) -> bool:
    """The quoted words are in `heard`: most of them in one run, or nearly all of them somewhere."""
    ratio = SequenceMatcher(None, said, heard).find_longest_match(0, len(said), 0, len(heard)).size / len(said)
    return ratio >= 0.8 or sum(w in set(heard) for w in said) / len(said) >= 0.9


def _topic(e: View, word: str) -> Judgement:
    """What the speech is about: the word (or its stem) must be in the confident transcript."""
    if (j := _needs(e, "speech")) is not None:
        return j
    f = e.ok("speech.transcript")
    if f is None or not f.value:
        return _j(UNSUPPORTED, None, "what the speech is about needs a confident transcript")
    stem = _norm_words(word)[0][:5] if _norm_words(word) else word
    if any(w.startswith(stem) or stem.startswith(w[:5]) and len(w) >= 4 for w in _norm_words(f.value)):
        return _j(SUPPORTED, "speech.transcript")
    return _j(UNSUPPORTED, "speech.transcript", f"'{word}' is not in the transcript")


def _speakers(e: View, value: str) -> Judgement:
    if (j := _needs(e, "speech")) is not None:
        return j
    n = e.num("speakers.count")
    if n is None:
        return _j(UNSUPPORTED, None, "no confident speaker count")
    ok = {"1": n == 1, "2": n == 2, "2+": n >= 2, "3+": n >= 3}[value]
    return _j(
        SUPPORTED if ok else CONTRADICTED, f"speakers.count={n:g}", "" if ok else "the diarization counts otherwise"
    )


def _person(e: View, type_: str, value: str) -> Judgement:
    if (j := _needs(e, "speech")) is not None:
        return j
    fact = {"gender": "speaker.gender", "age": "speaker.age_band"}[type_]
    probs: dict[str, float] = {}
    for who in e.ev.subjects(fact):
        for label, p in e.ev.labels(fact, who).items():
            probs[label] = max(probs.get(label, 0.0), p)
    want = {"female": "female", "male": "male", "child": "child", "senior": "senior"}[value]
    if probs.get(want, 0.0) >= e.thr:
        return _j(SUPPORTED, f"{fact}={want} ({probs[want]:.2f})")
    others = {k: p for k, p in probs.items() if k != want and p >= max(e.thr, 0.8)}
    if type_ == "gender" and others and len(e.ev.subjects(fact)) == 1:
        k, p = next(iter(others.items()))
        return _j(CONTRADICTED, f"{fact}={k} ({p:.2f})", f"the only voice is confidently {k}")
    return _j(UNSUPPORTED, None, f"no confident {type_} for any speaker")


VOCAL = ("Laughter", "breath", "laugh", "cough", "sneez", "cry")  # a voice can make these sounds


def event_spans(ev: ClipEvidence, thr: float, cls: str | None = None) -> list[tuple[str, float, float]]:
    """(class, start, end) of the confident `sound.event` facts (of one class)."""
    out = []
    for f in ev.all("sound.event"):
        if (f.confidence or 0.0) >= thr and f.value and (cls is None or f.value == cls) and f.subject:
            a, _, b = f.subject.partition("-")
            out.append((f.value, float(a), float(b)))
    return out


def _event(e: View, v: str) -> Judgement:
    if (j := _needs(e, "sound")) is not None and not (v.startswith(VOCAL) and e.content("speech") == "present"):
        return j
    under = events.under(v)  # "an animal" holds where a dog is heard, "a dog" does not where only an animal is
    if spans := [s for s in event_spans(e.ev, e.thr) if s[0] in under]:
        return _j(SUPPORTED, f"sound.event={spans[0][0]}@{spans[0][1]:g}-{spans[0][2]:g}")
    if _tag_support(e, "sound_tags.clip", v.split(",")[0].lower()):  # a paper tagger's own label for it
        return _j(SUPPORTED, f"sound_tags~{v}")
    return _j(UNSUPPORTED, None, f"no expert heard the sound source '{v}'")


def _heard(e: View, cls: str) -> list[tuple[float, float]]:
    """The windows where `cls` or a class under it is heard with confidence."""
    under = events.under(cls)
    return [(a, b) for c, a, b in event_spans(e.ev, e.thr) if c in under]


def _order(e: View, v: str) -> Judgement:
    """ "A, then B" (value "A>B"): A is first heard before B is (render.order); B heard wholly before A
    contradicts; starting together or overlapping, the windows cannot tell."""
    a, _, b = v.partition(">")
    first, second = _heard(e, a), _heard(e, b)
    if not first or not second:
        return _j(UNSUPPORTED, None, f"the order of '{a}' and '{b}' needs both heard with confidence")
    fact = f"{a}@{min(first)[0]:g}, {b}@{min(second)[0]:g}"
    got = order(first, second)
    if got == "before":
        return _j(SUPPORTED, fact)
    if got == "after":
        return _j(CONTRADICTED, fact, f"'{b}' is heard before '{a}'")
    return _j(UNSUPPORTED, fact, f"'{a}' and '{b}' start together: the windows cannot tell which came first")


def _count(e: View, v: str) -> Judgement:
    """How many separate times an event is heard ("2 moments@Dog", "2 times@Dog") against its runs of windows
    (render.occurrences): more runs than claimed contradicts; "at two separate moments" holds on exactly two;
    "twice" counts sounds, which one window may hold several of, so it is never supported by the windows."""
    said, _, cls = v.partition("@")
    n, _, unit = said.partition(" ")
    if not cls:
        return _j(UNSUPPORTED, None, "a count of no named sound event: no expert counts it")
    runs = occurrences(_heard(e, cls))
    if not runs:
        return _j(UNSUPPORTED, None, f"no expert heard the sound source '{cls}'")
    fact = f"{cls}: {runs} separate moment{'s' * (runs > 1)}"
    if runs > int(n):
        return _j(CONTRADICTED, fact, f"'{cls}' is heard at {runs} separate moments, more than {n}")
    if unit == "moments" and runs == int(n):
        return _j(SUPPORTED, fact)
    if unit == "moments":
        return _j(UNSUPPORTED, fact, f"heard at {runs} separate moments; moments closer than a window are one run")
    return _j(UNSUPPORTED, fact, f"the windows hold '{cls}' at {runs} moments; how many sounds each holds is unknown")


def _voices_are_the_speech(view: View, voices: list[str]) -> bool:
    """Whether the speech a timing phrase places is all of the named voices' (extract.VOICE_MARK): one speaker
    surely counted, or a surely counted pair named as a man and a woman. Otherwise a gendered voice may be one of
    several, and the speech's region is not its own (the rule writers give it no time then either)."""
    n = int(view.num("speakers.count") or 0)
    return n == 1 or (n >= 2 and len(voices) >= 2)


THIRDS = {"start": {0}, "middle": {1}, "end": {2}, "early": {0, 1}, "late": {1, 2}}  # the clip in thirds
WHOLE = ("throughout", "most")


def _when(e: View, v: str) -> Judgement:
    """A timing claim against the region the renderer computes from the same facts (render.when_region): the
    same region, or one inside the other, holds; a part of the clip for what is heard throughout (fresh5: "music
    through the first part" of music in every window), "throughout" or "at several moments" for what is heard
    in one part or one continuous run, and disjoint parts contradict; a region no expert gives is unsupported."""
    region, _, what = v.partition("@")
    what, _, voices = what.partition(VOICE_MARK)
    view = View(e.ev, e.thr)
    if voices and not _voices_are_the_speech(view, voices.split(",")):
        return _j(UNSUPPORTED, None, f"when the {voices} voice speaks is unknown: the speakers are not surely only it")
    if what in CONTENT:
        if e.content(what) != "present":
            return _j(UNSUPPORTED, None, f"{what} is not surely present, so not placed in time")
        heard = {"speech": speech_region, "music": music_region, "sound": sound_region}[what](view)
    else:
        heard = event_region(view, events.under(what))
    fact = f"when:{what}={heard}"
    if heard is None:
        return _j(UNSUPPORTED, None, f"no expert places the {what} {region} in the clip")
    if region == heard or (region == "most" and heard == "throughout"):
        return _j(SUPPORTED, fact)
    if region in THIRDS and heard in THIRDS:
        a, b = THIRDS[region], THIRDS[heard]
        if a <= b or b <= a:
            return _j(SUPPORTED, fact)
        return _j(CONTRADICTED if not a & b else UNSUPPORTED, fact, f"heard {heard}, not {region}")
    wrong = (
        (region == "several" and heard in WHOLE)
        or (region == "throughout" and heard in (*THIRDS, "several"))
        or (region in THIRDS and heard == "throughout")
        or (region == "most" and heard in ("start", "middle", "end"))
    )
    return _j(CONTRADICTED if wrong else UNSUPPORTED, fact, f"heard {heard}, not {region}")


MOMENT_TOLERANCE_S = 1.0  # events are found per 2 s window: "at about 2 s" holds for a span from 1 s to 3 s


def _moment(e: View, v: str) -> Judgement:
    """A moment ("at about 2 s", value "2"): inside the span of the event claimed just before it, else of any timed
    fact; a stretch ("between 2 and 4 s", value "2-4"): such a span overlaps it."""
    value, _, about = v.partition("@")
    lo, _, hi = value.partition("-")
    t, cls = float(lo), about or None
    end = float(hi) if hi else None
    spans = [(a, b) for _, a, b in event_spans(e.ev, e.thr, cls)]
    if cls is None:
        for f in (*e.ev.all("speech.segment"), *e.ev.all("speech.quote")):
            if f.subject and (f.confidence is None or f.confidence >= e.thr):
                a, _, b = f.subject.partition("-")
                spans.append((float(a), float(b)))
    if end is None:
        near = [(a, b) for a, b in spans if a - MOMENT_TOLERANCE_S <= t <= b + MOMENT_TOLERANCE_S]
    else:
        near = [(a, b) for a, b in spans if a < end and b > t]
    what = f"'{cls}'" if cls else "anything timed"
    if near:
        return _j(SUPPORTED, f"{cls or 'span'}@{near[0][0]:g}-{near[0][1]:g}")
    if spans and cls:
        return _j(CONTRADICTED, f"{cls}@{spans[0][0]:g}-{spans[0][1]:g}", f"{what} is heard at another time")
    return _j(UNSUPPORTED, None, f"no confident time for {what}")


def _tag_support(e: View, fact: str, word: str) -> bool:
    w = word.rstrip("s")
    return any(w in label.lower() and p >= e.thr for label, p in e.all_labels(fact))


def _tempo(e: View, value: str) -> Judgement:
    if (j := _needs(e, "music")) is not None:
        return j
    f = e.ok("music.tempo_bpm")
    bpm = None if f is None else f.number
    if bpm is None:
        if value in ("slow", "fast") and _tag_support(e, "music.tag", value):  # the music tagger's pace
            return _j(SUPPORTED, f"music.tag~{value}")
        return _j(UNSUPPORTED, None, "no confident tempo (octave check)")
    if value.isdigit():
        err = abs(float(value) - bpm) / bpm
        return _band(bpm, "music.tempo_bpm", err <= 0.05, err > 0.15, "tempo")
    return _band(
        bpm, "music.tempo_bpm", bands.word("tempo", bpm) == value, bands.contradicts("tempo", value, bpm), "tempo"
    )


def _flip(j: Judgement) -> Judgement:
    if j.verdict == SUPPORTED:
        return _j(CONTRADICTED, j.fact, "claimed absent, but the evidence confirms it")
    if j.verdict == CONTRADICTED:
        return _j(SUPPORTED, j.fact, j.reason)
    return j


def _silence(e: View, t: str, v: str) -> Judgement:
    present = [k for k in CONTENT if e.content(k) == "present"]
    if present:
        return _j(CONTRADICTED, f"{content_fact(present[0])}=present", f"the tagger hears {present[0]}")
    if e.ev.num("content.silent") or all(e.content(k) == "absent" for k in CONTENT):
        return _j(SUPPORTED, "content.silent")
    return _j(UNSUPPORTED, None, "the tagger is not sure the clip is silent")


def _emotion(e: View, t: str, v: str) -> Judgement:
    mood = {"calm": "calm", "animated": "energetic"}.get(v)  # "calm piano music": the music's mood
    if mood is not None and _tag_support(e, "music.tag", mood):
        return _j(SUPPORTED, f"music.tag~{mood}")
    if (j := _needs(e, "speech")) is not None:
        return j
    if v in ("calm", "animated") and any(
        p >= e.thr
        for s in e.ev.subjects("speaker.emotion")
        for k, p in e.ev.labels("speaker.emotion", s).items()
        if k == v
    ):
        return _j(SUPPORTED, f"speaker.emotion={v}")
    return _j(UNSUPPORTED, None, "no confident emotion for the speaker")


def _language(e: View, t: str, v: str) -> Judgement:
    if (j := _needs(e, "speech")) is not None:
        return j
    f = e.ok("speech.language")
    if f is None or not f.value:
        return _j(UNSUPPORTED, None, "no confident language identification")
    same = f.value.lower().startswith(v[:2].lower())
    return _j(SUPPORTED if same else CONTRADICTED, f"speech.language={f.value}", "" if same else "another language")


def _music_tag(e: View, t: str, v: str) -> Judgement:
    if (j := _needs(e, "music")) is not None:
        return j
    if _tag_support(e, "music.tag", v):
        return _j(SUPPORTED, f"music.tag~{v}")
    return _j(UNSUPPORTED, None, f"no music tagger confirms {t} '{v}'")


def _key(e: View, t: str, v: str) -> Judgement:
    if (j := _needs(e, "music")) is not None:
        return j
    f = e.ok("music.key")
    if f is None or not f.value:
        return _j(UNSUPPORTED, None, "no confident key")
    same = f.value.lower() == v.lower()
    strong = (f.confidence or 0.0) >= 0.8
    return _j(SUPPORTED if same else CONTRADICTED if strong else UNSUPPORTED, f"music.key={f.value}")


def _beat(e: View, t: str, v: str) -> Judgement:
    if (j := _needs(e, "music")) is not None:
        return j
    s = e.num("music.beat_strength")
    return _band(s, "music.beat_strength", s is not None and s >= 0.5, False, "beat")


def _descriptor(e: View, t: str, v: str) -> Judgement:
    # the coarse DSP tags were wrong on real mixes (render._sound_lines): they confirm nothing
    if (j := _needs(e, "sound")) is not None and e.content("music") != "present":
        return j
    return _j(UNSUPPORTED, None, f"no expert can confirm a sound is {v}-like (the coarse sound tags were wrong)")


def _measured(e: View, t: str, v: str) -> Judgement:
    fact = bands.fact_of(t)
    x = e.num(fact)
    return _band(x, fact, bands.word(t, x) == v, bands.contradicts(t, v, x), t)


def _clipping(e: View, t: str, v: str) -> Judgement:
    r = e.num("levels.clipping_ratio")
    return _band(r, "levels.clipping_ratio", (r or 0) > 0.001, r == 0.0, "clipping")


def _quality(e: View, t: str, v: str) -> Judgement:
    ovrl, snr = e.num("quality.dnsmos_ovrl"), e.num("acoustics.snr_db")
    if ovrl is None and snr is None:
        return _j(UNSUPPORTED, None, "no confident quality measurement")
    q, n = bands.word("speech_quality", ovrl), bands.word("noise", snr)
    poor = q == "poor" or n == "noisy"
    good = q in ("good", None) and n in ("clean", None) and (q, n) != (None, None)
    fact = f"quality.dnsmos_ovrl={ovrl}, acoustics.snr_db={snr}"
    if v == "poor":
        return _j(SUPPORTED if poor else CONTRADICTED if good else UNSUPPORTED, fact)
    return _j(SUPPORTED if good else CONTRADICTED if poor else UNSUPPORTED, fact)


def _unmeasured(reason: str) -> Callable[[View, str, str], Judgement]:
    return lambda e, t, v: _j(UNSUPPORTED, None, reason)


# claim type → its judge (e: the clip's confident facts, t: the claim type, v: its value)
_JUDGES: dict[str, Callable[[View, str, str], Judgement]] = {
    "presence": lambda e, t, v: _presence(e, v, True),
    "absence": lambda e, t, v: _presence(e, v, False),
    "silence": _silence,
    "quote": lambda e, t, v: _quote(e, v),
    "speakers": lambda e, t, v: _speakers(e, v),
    "topic": lambda e, t, v: _topic(e, v),  # a proper name is only safe when the speech says it
    "name": lambda e, t, v: _topic(e, v),
    "gender": lambda e, t, v: _person(e, t, v),
    "age": lambda e, t, v: _person(e, t, v),
    "emotion": _emotion,
    "language": _language,
    "instrument": _music_tag,
    "genre": _music_tag,
    "mood": _music_tag,
    "tempo": lambda e, t, v: _tempo(e, v),
    "key": _key,
    "beat": _beat,
    "event": lambda e, t, v: _event(e, v),
    "moment": lambda e, t, v: _moment(e, v),
    "when": lambda e, t, v: _when(e, v),
    "order": lambda e, t, v: _order(e, v),
    "count": lambda e, t, v: _count(e, v),
    "descriptor": _descriptor,
    **dict.fromkeys(bands.RECORDING, _measured),
    "clipping": _clipping,
    "quality": _quality,
    "number": _unmeasured("a number no expert measured"),
    "change": _unmeasured("no expert reports how pitch, loudness or tempo change over the clip"),
    "pitch": _unmeasured("no pitch measurement reaches the evidence"),
}


def judge(c: ExtractedClaim, ev: ClipEvidence, min_confidence: float = 0.6) -> Judgement:
    """The verdict on one claim against one clip's evidence."""
    if c.type == "absence" and ":" in c.value:  # a denied claim holds where the claim itself is contradicted
        inner, value = c.value.split(":", 1)
        return _flip(judge(ExtractedClaim(inner, value, c.span, c.start), ev, min_confidence))
    judge_type = _JUDGES.get(c.type)
    if judge_type is None:  # place, time
        return _j(UNSUPPORTED, None, f"no expert can confirm a {c.type}")
    return judge_type(View(ev, min_confidence), c.type, c.value)
