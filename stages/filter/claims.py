"""The claim audit: what an item says, checked fact by fact against what the experts found.

`extract(text)` reads an item's claims with the vocabulary of earmark.stages.facts.claim_vocab (presence and
absence of speech / music / sound events / silence, speaker count, gender and age, emotion, language, quoted
words, instruments, genre, mood, tempo, key, beat, named sound events, acoustic descriptors, loudness,
noise, reverberation, bandwidth, clipping, quality, place, time, changes over time, pitch levels, and every
other number). A negator ("no", "without", "neither … nor", "free of") denies every item of the list after it
(`negated_items`): a denied claim is an "absence" claim, judged as the opposite of the claim it denies.
`judge(claim, ev)`
labels each one against the clip's `ClipEvidence`, using only facts whose confidence reaches the threshold:

- supported: a confident fact says the same;
- contradicted: a confident fact says otherwise (music claimed where the tagger is sure there is none, a
  woman where the voice is confidently male, a fast tempo on a confident 80 BPM, words not in a confident
  transcript);
- unsupported: no confident fact either way (every place, every named sound source offline, a genre, a pitch
  or loudness that rises or falls: experts give one number per clip, not a trajectory).

The verdict is computed here, never by a model. QC (`claim_verdict`) rejects an item with a contradicted
claim, or with an unsupported one unless the item is inference by design, or that claims nothing the
evidence supports.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cache

from earmark.schemas.evidence import ClipEvidence
from earmark.stages.facts import bands, claim_vocab, events
from earmark.stages.facts.events import EventClass, registry
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

SUPPORTED, UNSUPPORTED, CONTRADICTED = "supported", "unsupported", "contradicted"
CONTENT = {"speech": "speech", "music": "music", "sound": "sound_events"}
# The claim types the issue calls specific (numbers, named things, quoted words); the others are general.
SPECIFIC = {
    "speakers",
    "emotion",
    "language",
    "quote",
    "instrument",
    "genre",
    "mood",
    "tempo",
    "key",
    "event",
    "moment",
    "order",
    "count",
    "place",
    "time",
    "number",
    "age",
    "change",
    "pitch",
}
_QUOTE = re.compile(r"[\"“”]([^\"“”]{2,300})[\"“”]|(?<![a-z])'([^']{3,300})'(?![a-z])")
_NAME = re.compile(r"(?<!\()(?<![.!?:\"'“(]\s)(?<!^)\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*\b")
NOT_NAMES = {"I", "Audio", "Music", "Speech", "Sound", "English"}
_NEGATOR, _SCOPE_END = re.compile(claim_vocab.NEGATORS), re.compile(claim_vocab.SCOPE_END)
_VERB, _OPENER = re.compile(claim_vocab.SCOPE_VERBS), re.compile(claim_vocab.CLAUSE_OPENERS)
_JOIN = re.compile(r"\s*,\s*(?:(?:and/or|or|nor|and)\s+)?|\s+(?:and/or|or|nor|and)\s+|\s*/\s*")
_ABSENT_AFTER = re.compile(
    r"^\s*(?:is|are|was|were)?\s*(?:absent|missing|not (?:present|audible|heard)|inaudible|can(?:not|'t) be heard)\b"
)
# Properties of a denied thing ("no loud music") deny nothing themselves; alone they do ("it is not loud").
ATTRIBUTES = {"loudness", "tempo", "mood", "emotion", "gender", "age", "bandwidth", "key", "language"}
_PEOPLE_WORD = re.compile(
    r"\b(?:people|persons|crowd|group|others|adults|children|kids|men|women|they|speakers|voices|narrators)\b"
)
# A named thing right after a speech verb is what the speech is about, not a sound in the scene: "talks about
# the train" is checked against the transcript, "a train passes" against the sound experts.
_TOPIC_BEFORE = re.compile(
    r"\b(?:about|says?|said|saying|mention\w*|discuss\w*|describ\w*|asks?|asking|tells?|"
    r"telling|announc\w*|explain\w*|reads?|reading|recit\w*|topic of|words?)\b"
    r"(?:\s+[a-z'-]+){0,4}\s+$"
)
TOPICAL = {"event", "place", "time", "number", "instrument", "genre", "mood", "descriptor", "language"}
_ENUMERATOR = re.compile(r"(?m)^[ \t]*\(?\d{1,2}[.)](?=\s)")  # a numbered list's "1." / "2)" / "(3)"
_NO_ONE = re.compile(r"\b(?:no one|nobody|no-one)\s+(?:is\s+)?(?:speak|talk|say|sing)\w*")


@dataclass(frozen=True)
class ExtractedClaim:
    type: str  # presence, absence, silence, speakers, gender, age, emotion, language, quote, instrument, …
    value: str
    span: str
    start: int

    @property
    def specific(self) -> bool:  # a denied claim is as specific as the claim it denies
        return (self.value.split(":")[0] if self.type == "absence" else self.type) in SPECIFIC


@dataclass(frozen=True)
class Judgement:
    verdict: str
    fact: str | None  # the fact that decided, e.g. "content.music=absent (0.93)"
    reason: str


def _words(rx: str) -> re.Pattern[str]:
    return re.compile(rf"\b(?:{rx})\b")


_TABLES: list[tuple[re.Pattern[str], str, str]] = [
    (_words(rx), t, v)
    for table in (
        claim_vocab.COUNT,
        claim_vocab.WHEN,
        claim_vocab.CHANGES,
        claim_vocab.PITCH,
        claim_vocab.PRESENCE[:1],
        claim_vocab.PEOPLE,
        claim_vocab.TEMPO,
        claim_vocab.RECORDING,
        claim_vocab.LOUDNESS,
        claim_vocab.EMOTION,
    )
    for rx, t, v in table
]
_BEFORE_EVENTS: list[tuple[re.Pattern[str], str, str]] = [
    (_words(claim_vocab.LANGUAGE), "language", ""),
    (re.compile(claim_vocab.KEY), "key", ""),
]
# The named event classes come next, from the registry (evidence.toml [events], earmark.stages.facts.events): read
# before instruments and genres ("a car horn" is no brass, "a pop" no genre) and before the coarse descriptors. A
# coarse descriptor never supports a class: "tonal" stood for "beeps" once, and a check build's "beep" items were
# about a bird, a sawmill and a blizzard.
_AFTER_EVENTS: list[tuple[re.Pattern[str], str, str]] = [
    (_words(claim_vocab.GENRES), "genre", ""),
    (_words(claim_vocab.INSTRUMENTS), "instrument", ""),
    (_words(claim_vocab.MOODS), "mood", ""),
    *[(_words(rx), t, v) for rx, t, v in claim_vocab.DESCRIPTORS],
    (_words(claim_vocab.EVENTS), "event", ""),
    (_words(claim_vocab.PLACES), "place", ""),
    (_words(claim_vocab.TIMES), "time", ""),
    *[(_words(rx), t, v) for rx, t, v in claim_vocab.PRESENCE[1:]],
    (_words(claim_vocab.BEAT), "beat", "beat"),
    (re.compile(claim_vocab.MOMENT), "moment", ""),
    (re.compile(claim_vocab.NUMBER), "number", ""),
]


def _reading_order(classes: Mapping[str, EventClass] | None) -> list[tuple[re.Pattern[str], str, str]]:
    """Every claim pattern in reading order, the registry's event classes in theirs (`classes`: a registry
    already read; None: the one of the prompt directory in use)."""
    rows = registry() if classes is None else classes
    return _with_events(tuple((c.name, c.claim) for c in rows.values()))


@cache
def _with_events(rows: tuple[tuple[str, str], ...]) -> list[tuple[re.Pattern[str], str, str]]:
    return [*_TABLES, *_BEFORE_EVENTS, *[(_words(rx), "event", cls) for cls, rx in rows], *_AFTER_EVENTS]


def negated_items(low: str) -> list[tuple[int, int]]:
    """The spans a negator denies, one per item of the coordinated list after it: "no speech, no music,
    impulsive sounds, or background noise" denies speech | music | impulsive sounds | background noise. The
    scope ends at a clause boundary (`claim_vocab.SCOPE_END`), and items joined by bare commas count only
    once "or"/"nor"/"and" closes the list ("no speech, music plays throughout" denies speech alone)."""
    negs = list(_NEGATOR.finditer(low))
    out: list[tuple[int, int]] = []
    for i, n in enumerate(negs):
        stop = negs[i + 1].start() if i + 1 < len(negs) else len(low)
        end = _SCOPE_END.search(low, n.end(), stop)
        out += _list_items(low[n.end() : end.start() if end else stop], n.end(), end is None and i + 1 < len(negs))
    return out


def _list_items(seg: str, offset: int, continued: bool) -> list[tuple[int, int]]:
    joins = list(_JOIN.finditer(seg))
    starts = [0] + [m.end() for m in joins]
    ends = [m.start() for m in joins] + [len(seg)]
    kinds = [None] + [m.group(0).strip(" ,") or "," for m in joins]
    items: list[tuple[int, int]] = []
    pending: list[tuple[int, int]] = []  # comma-joined items, waiting for the conjunction that closes the list
    for a, b, join in zip(starts, ends, kinds, strict=True):
        text = seg[a:b]
        if not text.strip():
            continue
        verb = _VERB.search(text)
        head = text[: verb.start()] if verb else text
        if join is None:  # the first item: at most six words after the negator
            items.append((a, a + len(re.match(r"\s*(?:\S+\s*){0,6}", head).group(0).rstrip())))
            if verb:
                return [(offset + x, offset + y) for x, y in items]
            continue
        if (join in (",", "and") and (verb or _OPENER.match(text))) or len(head.split()) > 5:
            break
        if join == ",":
            pending.append((a, b))
            continue
        items += [*pending, (a, a + len(head))]
        pending = []
        if verb:
            break
    else:
        if continued:  # "no speech, music, no noise": another negator carries the list on
            items += pending
    return [(offset + x, offset + y) for x, y in items]


def _denied(type_: str, value: str, span: str) -> tuple[str, str]:
    """The absence claim a negated claim makes: absence of speech / music / sound events as before, otherwise
    "absence" of the inner claim ("descriptor:impulsive sound"), judged as its opposite."""
    if type_ == "presence":
        return "absence", value
    if type_ == "speakers" and (value == "1" or _PEOPLE_WORD.search(span)):  # "no people talking", "not a single voice"
        return "absence", "speech"
    return "absence", f"{type_}:{value}"


def _topic_here(text: str, start: int) -> bool:
    before = text[:start]
    cut = max((m.end() for m in re.finditer(r"[.;!?]", before)), default=0)
    return bool(_TOPIC_BEFORE.search(before[cut:]))


def extract(text: str, classes: Mapping[str, EventClass] | None = None) -> list[ExtractedClaim]:
    """Every claim in `text`, in order; a span is read by the first table that matches it (`classes`: the event
    registry, default the prompt directory's)."""
    low = text.lower()
    taken = [False] * len(low)
    out: list[ExtractedClaim] = []

    def free(a: int, b: int) -> bool:
        return not any(taken[a:b])

    def take(a: int, b: int, type_: str, value: str) -> None:
        taken[a:b] = [True] * (b - a)
        out.append(ExtractedClaim(type_, value, text[a:b], a))

    for m in _ENUMERATOR.finditer(text):  # "1. music\n2. a melody": list numbering claims nothing
        taken[m.start() : m.end()] = [True] * (m.end() - m.start())
    for m in _QUOTE.finditer(text):
        take(m.start(), m.end(), "quote", (m.group(1) or m.group(2)).strip())
    for m in _NO_ONE.finditer(low):
        take(m.start(), m.end(), "absence", "speech")
    items = negated_items("".join(" " if t else ch for ch, t in zip(low, taken, strict=True)))  # not in quotes
    scoped: dict[int, int] = {}  # claim start → the negated list item it is in
    for rx, type_, value in _reading_order(classes):
        for m in rx.finditer(low):
            a, b = m.start(), m.end()
            if not free(a, b):
                continue
            item = next((k for k, (s, e) in enumerate(items) if s <= a < e), None)
            negated = item is not None or bool(_ABSENT_AFTER.match(low[b:]))
            t, v = type_, value or m.group(0)
            if t in ("silence", "when") and negated:
                continue
            if t in ("tempo", "moment") and value in ("bpm", ""):
                v = m.group(1)
            elif t == "count":
                n = next(claim_vocab.COUNT_WORDS[w] for w in m.group(0).split() if w in claim_vocab.COUNT_WORDS)
                v = f"{n} {value}"
            elif t == "key":
                v = f"{m.group(1).replace(' sharp', '#').replace(' flat', 'b').upper()} {m.group(2)}"
            elif t in TOPICAL and _topic_here(low, a):
                t, v = "topic", m.group(0)
            if negated:
                t, v = _denied(t, v, m.group(0))
                if item is not None:
                    scoped[a] = item
            take(a, b, t, v)
    # "no loud music": the loudness describes the music denied, it is no claim of its own
    out = [
        c
        for c in out
        if c.start not in scoped
        or c.value.split(":")[0] not in ATTRIBUTES
        or not any(scoped.get(o.start) == scoped[c.start] and o.start > c.start for o in out)
    ]
    words = re.findall(r"[A-Za-z]+", text)
    if sum(w[0].isupper() for w in words) <= max(1, len(words) // 2):  # not Title Case or CAPITALS: names stand out
        for m in _NAME.finditer(text):
            a, b = m.start(), m.end()
            if a > 0 and free(a, b) and m.group(0) not in NOT_NAMES:
                take(a, b, "name", m.group(0))
    claims = _moments_of_events(text, sorted(out, key=lambda c: c.start))
    return _when_of_claims(text, _order_of_events(text, claims))


def _moments_of_events(text: str, claims: list[ExtractedClaim]) -> list[ExtractedClaim]:
    """A moment or a count right after an event in the same clause ("a dog barks at about 2 s", "a dog barks
    twice") is that event's: its value becomes "2@Dog", "2 times@Dog"."""
    out = list(claims)
    for i, c in enumerate(out):
        if c.type not in ("moment", "count") or i == 0 or out[i - 1].type != "event":
            continue
        prev = out[i - 1]
        between = text[prev.start + len(prev.span) : c.start]
        if len(between) <= 40 and not re.search(r"[.;!?]|\bthen\b|\band\b", between):
            out[i] = ExtractedClaim(c.type, f"{c.value}@{prev.value}", c.span, c.start)
    return out


_THEN = re.compile(rf"\b(?:{claim_vocab.ORDER_THEN})\b", re.I)
_AFTER = re.compile(rf"\b(?:{claim_vocab.ORDER_AFTER})\b", re.I)
_LEAD_AFTER = re.compile(rf"(?:^|[.;!?]\s*)(?:{claim_vocab.ORDER_AFTER})\s+(?:(?:the|an?|some)\s+)?$", re.I)


def _order_of_events(text: str, claims: list[ExtractedClaim]) -> list[ExtractedClaim]:
    """An order claim for two named events next to each other in one sentence, from the words between them
    ("then", "followed by", "before": the first is first; "after": the second is) or before the first ("After a
    dog barks, a car passes"): value "Dog>Car", the first heard first."""
    named: list[list[ExtractedClaim]] = []  # "a dog barks": "dog" and "barks" are one mention of Dog
    for c in claims:
        if c.type == "event" and c.value:
            if (
                named
                and named[-1][-1].value == c.value
                and not re.search(r"[.;!?,]", text[named[-1][-1].start : c.start])
            ):
                named[-1].append(c)
            else:
                named.append([c])
    out = list(claims)
    for (a, *_), (*_, z), (b, *_) in zip(named, named, named[1:], strict=False):
        lo, hi = z.start + len(z.span), b.start
        if re.search(r"[.;!?]", text[lo:hi]):
            continue
        if m := _THEN.search(text, lo, hi) or _LEAD_AFTER.search(text, 0, a.start):
            first, second = a, b
        elif m := _AFTER.search(text, lo, hi):
            first, second = b, a
        else:
            continue
        out.append(ExtractedClaim("order", f"{first.value}>{second.value}", m.group(0), m.start()))
    return sorted(out, key=lambda c: c.start)


def _when_of_claims(text: str, claims: list[ExtractedClaim]) -> list[ExtractedClaim]:
    """A timing phrase ("in the first part of the clip") is about the nearest content or named event claimed
    before it in its sentence, else the nearest after it: its value becomes "early@music", "most@Dog". One that
    is about nothing claimed is dropped (it states nothing the audit can check)."""
    sentence = [0] * len(text)
    k = 0
    for i, ch in enumerate(text):
        sentence[i] = k
        k += ch in ".;!?"
    out: list[ExtractedClaim] = []
    for c in claims:
        if c.type != "when":
            out.append(c)
            continue
        same = [
            o
            for o in claims
            if sentence[o.start] == sentence[c.start]
            and ((o.type == "presence" and o.value in CONTENT) or (o.type == "event" and o.value))
        ]
        before = [o for o in same if o.start < c.start]
        after = [o for o in same if o.start > c.start]
        about = before[-1] if before else (after[0] if after else None)
        if about is not None:
            out.append(ExtractedClaim("when", f"{c.value}@{about.value}", c.span, c.start))
    return out


# ------------------------------------------------------------------------------------------- judging
class _Evidence:
    """The facts of one clip that reach the confidence threshold (measurements count as confident)."""

    def __init__(self, ev: ClipEvidence, min_confidence: float) -> None:
        self.ev, self.thr = ev, min_confidence

    def ok(self, type_: str, subject: str | None = None):
        f = self.ev.get(type_, subject)
        if f is None or (f.confidence is not None and f.confidence < self.thr):
            return None
        return f

    def num(self, type_: str) -> float | None:
        f = self.ok(type_)
        return None if f is None else f.number

    def content(self, kind: str) -> str | None:
        """'present' / 'absent' when the domain decision is confident about `kind`, else None."""
        f = self.ok(f"content.{CONTENT[kind]}")
        return f.value if f is not None and f.value in ("present", "absent") else None

    def labels(self, type_: str) -> dict[str, float]:
        return {
            k: v
            for s in self.ev.subjects(type_) or [None]
            for k, v in self.ev.labels(type_, s).items()
            if v >= self.thr
        }

    def all_labels(self, type_: str) -> list[tuple[str, float]]:
        return [(f.value, f.number or 0.0) for f in self.ev.all(type_) if f.value]


def _j(verdict: str, fact: str | None = None, reason: str = "") -> Judgement:
    return Judgement(verdict, fact, reason)


def _presence(e: _Evidence, kind: str, claimed_present: bool) -> Judgement:
    state = e.content(kind)
    f = e.ev.get(f"content.{CONTENT[kind]}")
    desc = f"content.{CONTENT[kind]}={f.value} ({f.confidence:.2f})" if f and f.confidence is not None else None
    if state is None:
        return _j(UNSUPPORTED, desc, f"the tagger is not sure whether {kind} is present")
    if (state == "present") == claimed_present:
        return _j(SUPPORTED, desc)
    return _j(CONTRADICTED, desc, f"the tagger is sure {kind} is {state}")


def _needs(e: _Evidence, kind: str) -> Judgement | None:
    """A claim about speakers / music / events contradicts evidence that its content is confidently absent."""
    if e.content(kind) == "absent":
        return _j(CONTRADICTED, f"content.{CONTENT[kind]}=absent", f"the tagger is sure there is no {kind}")
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


def _quote(e: _Evidence, quoted: str) -> Judgement:
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


def _topic(e: _Evidence, word: str) -> Judgement:
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


def _speakers(e: _Evidence, value: str) -> Judgement:
    if (j := _needs(e, "speech")) is not None:
        return j
    n = e.num("speakers.count")
    if n is None:
        return _j(UNSUPPORTED, None, "no confident speaker count")
    ok = {"1": n == 1, "2": n == 2, "2+": n >= 2, "3+": n >= 3}[value]
    return _j(
        SUPPORTED if ok else CONTRADICTED, f"speakers.count={n:g}", "" if ok else "the diarization counts otherwise"
    )


def _person(e: _Evidence, type_: str, value: str) -> Judgement:
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


def _event(e: _Evidence, v: str) -> Judgement:
    if (j := _needs(e, "sound")) is not None and not (v.startswith(VOCAL) and e.content("speech") == "present"):
        return j
    under = events.under(v)  # "an animal" holds where a dog is heard, "a dog" does not where only an animal is
    if spans := [s for s in event_spans(e.ev, e.thr) if s[0] in under]:
        return _j(SUPPORTED, f"sound.event={spans[0][0]}@{spans[0][1]:g}-{spans[0][2]:g}")
    if _tag_support(e, "sound_tags.clip", v.split(",")[0].lower()):  # a paper tagger's own label for it
        return _j(SUPPORTED, f"sound_tags~{v}")
    return _j(UNSUPPORTED, None, f"no expert heard the sound source '{v}'")


def _heard(e: _Evidence, cls: str) -> list[tuple[float, float]]:
    """The windows where `cls` or a class under it is heard with confidence."""
    under = events.under(cls)
    return [(a, b) for c, a, b in event_spans(e.ev, e.thr) if c in under]


def _order(e: _Evidence, v: str) -> Judgement:
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


def _count(e: _Evidence, v: str) -> Judgement:
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


THIRDS = {"start": {0}, "middle": {1}, "end": {2}, "early": {0, 1}, "late": {1, 2}}  # the clip in thirds
WHOLE = ("throughout", "most")


def _when(e: _Evidence, v: str) -> Judgement:
    """A timing claim against the region the renderer computes from the same facts (render.when_region): the
    same region, or one inside the other, holds; a part of the clip for what is heard throughout (fresh5: "music
    through the first part" of music in every window), "throughout" or "at several moments" for what is heard
    in one part or one continuous run, and disjoint parts contradict; a region no expert gives is unsupported."""
    region, _, what = v.partition("@")
    view = View(e.ev, e.thr)
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


def _moment(e: _Evidence, v: str) -> Judgement:
    """A moment ("at about 2 s"): inside the span of the event claimed just before it, else of any timed fact."""
    value, _, about = v.partition("@")
    t, cls = float(value), about or None
    spans = [(a, b) for _, a, b in event_spans(e.ev, e.thr, cls)]
    if cls is None:
        for f in (*e.ev.all("speech.segment"), *e.ev.all("speech.quote")):
            if f.subject and (f.confidence is None or f.confidence >= e.thr):
                a, _, b = f.subject.partition("-")
                spans.append((float(a), float(b)))
    near = [(a, b) for a, b in spans if a - MOMENT_TOLERANCE_S <= t <= b + MOMENT_TOLERANCE_S]
    what = f"'{cls}'" if cls else "anything timed"
    if near:
        return _j(SUPPORTED, f"{cls or 'span'}@{near[0][0]:g}-{near[0][1]:g}")
    if spans and cls:
        return _j(CONTRADICTED, f"{cls}@{spans[0][0]:g}-{spans[0][1]:g}", f"{what} is heard at another time")
    return _j(UNSUPPORTED, None, f"no confident time for {what}")


def _tag_support(e: _Evidence, fact: str, word: str) -> bool:
    w = word.rstrip("s")
    return any(w in label.lower() and p >= e.thr for label, p in e.all_labels(fact))


def _tempo(e: _Evidence, value: str) -> Judgement:
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


def _silence(e: _Evidence, t: str, v: str) -> Judgement:
    present = [k for k in CONTENT if e.content(k) == "present"]
    if present:
        return _j(CONTRADICTED, f"content.{CONTENT[present[0]]}=present", f"the tagger hears {present[0]}")
    if e.ev.num("content.silent") or all(e.content(k) == "absent" for k in CONTENT):
        return _j(SUPPORTED, "content.silent")
    return _j(UNSUPPORTED, None, "the tagger is not sure the clip is silent")


def _emotion(e: _Evidence, t: str, v: str) -> Judgement:
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


def _language(e: _Evidence, t: str, v: str) -> Judgement:
    if (j := _needs(e, "speech")) is not None:
        return j
    f = e.ok("speech.language")
    if f is None or not f.value:
        return _j(UNSUPPORTED, None, "no confident language identification")
    same = f.value.lower().startswith(v[:2].lower())
    return _j(SUPPORTED if same else CONTRADICTED, f"speech.language={f.value}", "" if same else "another language")


def _music_tag(e: _Evidence, t: str, v: str) -> Judgement:
    if (j := _needs(e, "music")) is not None:
        return j
    if _tag_support(e, "music.tag", v):
        return _j(SUPPORTED, f"music.tag~{v}")
    return _j(UNSUPPORTED, None, f"no music tagger confirms {t} '{v}'")


def _key(e: _Evidence, t: str, v: str) -> Judgement:
    if (j := _needs(e, "music")) is not None:
        return j
    f = e.ok("music.key")
    if f is None or not f.value:
        return _j(UNSUPPORTED, None, "no confident key")
    same = f.value.lower() == v.lower()
    strong = (f.confidence or 0.0) >= 0.8
    return _j(SUPPORTED if same else CONTRADICTED if strong else UNSUPPORTED, f"music.key={f.value}")


def _beat(e: _Evidence, t: str, v: str) -> Judgement:
    if (j := _needs(e, "music")) is not None:
        return j
    s = e.num("music.beat_strength")
    return _band(s, "music.beat_strength", s is not None and s >= 0.5, False, "beat")


def _descriptor(e: _Evidence, t: str, v: str) -> Judgement:
    # the coarse DSP tags were wrong on real mixes (render._sound_lines): they confirm nothing
    if (j := _needs(e, "sound")) is not None and e.content("music") != "present":
        return j
    return _j(UNSUPPORTED, None, f"no expert can confirm a sound is {v}-like (the coarse sound tags were wrong)")


def _measured(e: _Evidence, t: str, v: str) -> Judgement:
    fact = bands.fact_of(t)
    x = e.num(fact)
    return _band(x, fact, bands.word(t, x) == v, bands.contradicts(t, v, x), t)


def _clipping(e: _Evidence, t: str, v: str) -> Judgement:
    r = e.num("levels.clipping_ratio")
    return _band(r, "levels.clipping_ratio", (r or 0) > 0.001, r == 0.0, "clipping")


def _quality(e: _Evidence, t: str, v: str) -> Judgement:
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


def _unmeasured(reason: str) -> Callable[[_Evidence, str, str], Judgement]:
    return lambda e, t, v: _j(UNSUPPORTED, None, reason)


# claim type → its judge (e: the clip's confident facts, t: the claim type, v: its value)
_JUDGES: dict[str, Callable[[_Evidence, str, str], Judgement]] = {
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
    return judge_type(_Evidence(ev, min_confidence), c.type, c.value)


_ABOUT_AUDIO = re.compile(
    r"\b(?:hear\w*|heard|audio|sound\w*|listen\w*|clip|recording|record\w*|speak\w*|"
    r"speech|spoken|voices?|says?|said|talk\w*|words?|music\w*|song|melod\w*|beat|tempo|"
    r"noise\w*|loud\w*|quiet|echo|background|silen\w*|tone|pitch|instrument\w*)\b",
    re.I,
)


def about_audio(question: str) -> bool:
    """Whether a question asks about what is heard (an instruction item must; "What is 2 + 2?" does not)."""
    return bool(_ABOUT_AUDIO.search(question)) or any(c.type != "number" for c in extract(question))


# A yes/no question ("Is there any music?", "Does anyone speak?") or a degree question ("How loud is it?") asks
# whether content is there or how much of it: those claim types are asked, not asserted. Other claims of a
# question still presuppose ("Is the guitar out of tune?" presupposes a guitar).
_ASKING = re.compile(
    r"^\s*(?:(?:is|are|was|were|does|do|did|can|could|would|will|has|have)\b|"
    r"how\s+(?:loud|quiet|much|many|noisy|clean|clear|fast|slow)\b)",
    re.I,
)
ASKED_TYPES = {"presence", "absence", "silence", "loudness", "noise", "bandwidth", "reverb"}


def asserted(question: str, claims: list[AuditedClaim]) -> list[AuditedClaim]:
    """The claims a question asserts or presupposes: in a yes/no or degree question, presence, loudness, noise,
    bandwidth and echo are what it asks about, so they are left out."""
    if not _ASKING.match(question):
        return claims
    return [c for c in claims if c.claim.type not in ASKED_TYPES]


@dataclass(frozen=True)
class AuditedClaim:
    claim: ExtractedClaim
    judgement: Judgement


def audit(text: str, ev: ClipEvidence, min_confidence: float = 0.6) -> list[AuditedClaim]:
    return [AuditedClaim(c, judge(c, ev, min_confidence)) for c in extract(text)]


def claim_verdict(
    audited: list[AuditedClaim], *, inference: bool = False, need_support: bool = True
) -> tuple[bool, str | None, float]:
    """QC verdict from an item's audited claims: (keep, reason, share of claims supported).

    Rejected: any contradicted claim; any unsupported claim unless `inference` (items that are inference by
    design: inference and application-context answers, neutral hypotheses); no supported claim at all when
    `need_support` (a generic item)."""
    n = len(audited)
    share = sum(a.judgement.verdict == SUPPORTED for a in audited) / n if n else 0.0
    for a in audited:
        if a.judgement.verdict == CONTRADICTED:
            return (
                False,
                f"contradicts the evidence: {a.claim.span!r} ({a.judgement.reason or a.judgement.fact})",
                share,
            )
    if not inference:
        for a in audited:
            if a.judgement.verdict == UNSUPPORTED:
                return False, f"unsupported {a.claim.type} claim {a.claim.span!r}: {a.judgement.reason}", share
    if need_support and not any(a.judgement.verdict == SUPPORTED for a in audited):
        return False, "generic: claims nothing the evidence supports", share
    return True, None, round(share, 4)


def entailment_label_check(label: str, audited: list[AuditedClaim]) -> tuple[bool, str | None]:
    """Does a hypothesis stand in the relation its label claims, by the evidence? Entailment: every claim
    supported (at least one); contradiction: at least one claim contradicted; neutral: nothing contradicted
    and at least one claim the evidence cannot decide."""
    verdicts = [a.judgement.verdict for a in audited]
    spans = ", ".join(f"{a.claim.span!r}={a.judgement.verdict}" for a in audited) or "no claim found"
    if label == "entailment":
        ok = bool(verdicts) and all(v == SUPPORTED for v in verdicts)
        return ok, None if ok else f"the entailed hypothesis must be supported by the evidence ({spans})"
    if label == "contradiction":
        ok = CONTRADICTED in verdicts
        return ok, None if ok else f"the contradiction must contradict a confident fact ({spans})"
    ok = CONTRADICTED not in verdicts and UNSUPPORTED in verdicts
    return ok, None if ok else f"the neutral hypothesis must be undecidable from the evidence ({spans})"
