"""Reading an item's claims: `extract(text)` finds what a text claims, with the vocabulary of
earmark.stages.facts.claim_vocab and the event registry (presence and absence of speech / music / sound events /
silence, speaker count, gender and age, emotion, language, quoted words, instruments, genre, mood, tempo, key,
beat, named sound events with their moments, order and count, timing words, acoustic descriptors, loudness,
noise, reverberation, bandwidth, clipping, quality, place, time, changes over time, pitch levels, and every other
number). A negator ("no", "without", "neither … nor", "free of") denies every item of the list after it
(`negated_items`): a denied claim is an "absence" claim. The claim audit (earmark.stages.filter.claims) judges
them (earmark.stages.filter.judge).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from earmark.schemas.facts import CONTENT
from earmark.stages.facts import claim_vocab
from earmark.stages.facts.events import EventClass, registry

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
# "music is absent", and "music-free" / "speech free" (not "music free of noise", which says music is there; fresh13's
# blind check: "A music-free, sound event…" over music was read as music present)
_ABSENT_AFTER = re.compile(
    r"^\s*(?:is|are|was|were)?\s*(?:absent|missing|not (?:present|audible|heard)|inaudible|can(?:not|'t) be heard)\b"
    r"|^(?:-|\s)free\b(?!\s+(?:of|from)\b)"
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
    (re.compile(claim_vocab.SPAN), "moment", "span"),
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
            elif t == "moment" and value == "span":
                v = f"{m.group(1)}-{m.group(2)}"
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
    claims = _moments_of_events(text, sorted(out + _exclusive(low, out), key=lambda c: c.start))
    return _when_of_claims(text, _order_of_events(text, claims))


# "consists of sound events", "only music is heard", "nothing but speech": the contents named right after it are
# all the clip holds, so each content not named is claimed absent. An LLM's short caption said "The audio clip
# consists of sound events …" of a man speaking over music (fresh9's blind check, 2026-11-28).
_ONLY = re.compile(
    r"(?<!not )\b(?:consists? (?:only |solely |entirely |purely )?of|consisting (?:only |solely )?of|made up "
    r"(?:only |solely |entirely )?of|nothing but|only|solely|purely|exclusively|entirely)\b"
)
EXCLUSIVE_SCOPE_CHARS = 40  # the named contents must start this close after the word, in the same sentence
_CONTENTS = ("speech", "music", "sound")


def _exclusive(low: str, claims: list[ExtractedClaim]) -> list[ExtractedClaim]:
    out = []
    for m in _ONLY.finditer(low):
        if any(c.start <= m.start() < c.start + len(c.span) for c in claims):  # "only one speaker", a quote
            continue
        end = re.search(r"[.;!?]", low[m.end() :])
        stop = m.end() + (end.start() if end else len(low) - m.end())
        named = {
            c.value
            for c in claims
            if c.type == "presence" and m.end() <= c.start < min(stop, m.end() + EXCLUSIVE_SCOPE_CHARS)
        }
        if named:
            out += [ExtractedClaim("absence", v, m.group(0), m.start()) for v in _CONTENTS if v not in named]
    return out


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


# A timing phrase about speech in a sentence that names a voice's gender is about that voice: "most@speech#male"
# (fresh18's blind check: "A short, male voice speaking for most of the clip" where a woman spoke first and the
# man second). The judge holds it to the clip's speech only where the speakers are surely the ones named.
VOICE_MARK = "#"


def _when_of_claims(text: str, claims: list[ExtractedClaim]) -> list[ExtractedClaim]:
    """A timing phrase ("in the first part of the clip") is about the nearest content or named event claimed
    before it in its sentence, else the nearest after it: its value becomes "early@music", "most@Dog", and
    "most@speech#male" where the sentence names a voice's gender (VOICE_MARK). One that is about nothing claimed
    is dropped (it states nothing the audit can check)."""
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
        if about is None:
            continue
        voices = sorted({o.value for o in claims if o.type == "gender" and sentence[o.start] == sentence[c.start]})
        whose = f"{VOICE_MARK}{','.join(voices)}" if about.value == "speech" and voices else ""
        out.append(ExtractedClaim("when", f"{c.value}@{about.value}{whose}", c.span, c.start))
    return out
