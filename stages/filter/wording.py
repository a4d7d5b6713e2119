"""QC of an item's wording against what neither the audio nor the transcript can give: a word cut off or
misspelt, a claim only a picture could support, a person (a name or a relationship) the clip's transcript does
not say.

The claim audit (earmark.stages.filter.claims) judges claims against the evidence, but it lets an unsupported
claim through where a field is inference by design, reads no relationship, and is off with `claim_audit =
false`; these checks run on every text field of every item kind (`ItemType.texts`) whatever the settings, and
answer `(keep, reason, score)` like the other rule checks (earmark.stages.filter.qc). "…sounding lik. Recorded at
4K resolution." and "Marta's husband" (the transcript: "My brother, Marta") were exported before them.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from typing import Any

from earmark.experts.learned.events import load_classes
from earmark.experts.learned.musictags.model import load_tag_file
from earmark.stages.facts import claim_vocab
from earmark.stages.filter.claims import extract

Verdict = tuple[bool, str | None, float | None]
WordingCheck = Callable[[Sequence[str], Any, str], Verdict]  # (the item's text fields, item, transcript)

# A word right before sentence punctuation, a closing quote or bracket, a line end or the end of the text: where
# a reply cut by its token limit stops, and where a truncated word meets the next sentence ("…sounding lik.").
_END_WORD = re.compile(r"(?<![\w'’-])([^\W\d_]+)(?=[\"'”’)\]}]*(?:[.,;:!?…]|[ \t]*$))", re.M)
_AFTER_NUMBER = re.compile(r"\d[ \t]*$")  # "120 bpm." is a unit, not a word
_NOTE_BEFORE = re.compile(r"\b(?:key|note|chord|in|of|on|and|or|to)[ \t]*$", re.I)  # "in the key of c.", "a and e."
# Inflections read back to a word of the list ("whirrs" → whirr) and British spellings to the American ones the
# list holds ("colours" → colors, "recognised" → recognized, "centre" → center).
_SUFFIXES = (("ies", "y"), ("es", ""), ("s", ""), ("ed", ""), ("ed", "e"), ("ing", ""), ("ing", "e"), ("ly", ""))
_BRITISH = (
    (re.compile(r"our(?=s?$|ed$|ing$|ful$|less$|ist|ite|able)"), "or"),
    (re.compile(r"is(?=e[sd]?$|ing$|ations?$|able$|er?s?$)"), "iz"),
    (re.compile(r"ys(?=e[sd]?$|ing$)"), "yz"),
    (re.compile(r"tre(?=s?$)"), "ter"),
    (re.compile(r"ogue(?=s?$)"), "og"),
    (re.compile(r"^aero"), "air"),
)
_VISUAL = re.compile(rf"\b(?:{claim_vocab.VISUAL})\b", re.I)
_RELATION = re.compile(rf"\b(?:{claim_vocab.RELATIONS})\b", re.I)
# A capitalised possessive opening a sentence is a name ("Marta's husband"), unless it is a pronoun's or an
# adverb's ("It's", "Today's"); mid-sentence names are the claim audit's `name` claims.
_OPENING_POSSESSIVE = re.compile(r"(?:^|(?<=[.!?:;\"“(]\s)|(?<=\n))([A-Z][a-z]+)['’]s\b")
_NOT_POSSESSORS = frozenset(
    "it that there here what who where when how why which he she let this one everyone someone somebody "
    "everybody nobody anyone today tonight tomorrow yesterday".split()
)


def _fold(word: str) -> str:
    """Lower case without accents ("café" → "cafe"): item, word list and transcript are compared alike."""
    return "".join(c for c in unicodedata.normalize("NFD", word.lower()) if not unicodedata.combining(c))


@cache
def english_words() -> frozenset[str]:
    """pyspellchecker's English word list (~160,000 words with their inflections; a core dependency, read
    offline), the words of the event tagger's classes and the music tags the experts report, and the project's own words that
    list lacks (`claim_vocab.WORDS`: "narrowband", "untranscribed", "chiptune", …)."""
    from spellchecker import SpellChecker  # here: only this check needs its list

    words = {_fold(w) for w in SpellChecker(language="en", distance=1).word_frequency.dictionary}
    names = [c["name"] for c in load_classes()["classes"]] + [t["tag"] for t in load_tag_file()["tags"]]
    names += list(claim_vocab.WORDS)  # the registry's event class words are all in these (tests/test_fact_registry)
    words |= {w for n in names for w in re.findall(r"[a-z]+", _fold(n))}
    return frozenset(words)


def _base(word: str) -> str:
    """A word without its possessive or plural ending, so "brothers" and "brother's" are "brother"."""
    w = re.sub(r"['’]s?$", "", _fold(word))
    if len(w) > 4 and w.endswith("ves"):
        return w[:-3] + "fe"
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if w.endswith(("sses", "shes", "ches", "xes")):
        return w[:-2]
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


def heard_words(transcript: str) -> frozenset[str]:
    """The transcript's words, as they are and without possessive or plural endings."""
    words = re.findall(r"[^\W_]+(?:['’][^\W_]+)*", transcript)
    return frozenset({_fold(w) for w in words} | {_base(w) for w in words})


def _said(span: str, heard: frozenset[str]) -> bool:
    """Every word of `span` is a word of the transcript (plural and possessive endings aside)."""
    return all(_fold(w) in heard or _base(w) in heard for w in re.findall(r"[^\W_]+", span))


def _fields(item: Any, texts: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(field, text) of each text field; an answer in JSON (an instruction's format rule) as its values, each
    one text (its escaped quotes would read as quotes, its keys as words)."""
    for name in texts:
        text = getattr(item, name, "") or ""
        try:
            obj = json.loads(text) if text.lstrip().startswith("{") else None
        except ValueError:
            obj = None
        yield from ((name, str(v)) for v in obj.values()) if isinstance(obj, dict) else [(name, text)]


def _spellings(word: str) -> list[str]:
    """The word, its American spelling, and each of those without an inflection ending."""
    forms = [word] + [rx.sub(us, word) for rx, us in _BRITISH if rx.search(word)]
    stems = [f[: len(f) - len(end)] + repl for f in forms for end, repl in _SUFFIXES if f.endswith(end)]
    return forms + [s for s in stems if len(s) >= 2]


def _is_word(word: str, heard: frozenset[str]) -> bool:
    words = english_words()
    return any(w in words or w in heard for w in _spellings(_fold(word)))


def check_cut_word(texts: Sequence[str], item: Any, transcript: str) -> Verdict:
    """A lowercase word that ends a sentence, a clause or the text and is no word: neither English
    (`english_words`, an inflection or a British spelling of one) nor a word of the clip's transcript.
    Capitalised words (names), hyphenated ones and units after a number are left alone; an answer in capitals
    is read in lower case."""
    heard = heard_words(transcript)
    for name, text in _fields(item, texts):
        shouting = not any(c.islower() for c in text)
        for m in _END_WORD.finditer(text):
            word = m.group(1)
            if not (word.islower() or (shouting and word.isupper())):
                continue
            if _AFTER_NUMBER.search(text, 0, m.start()):
                continue
            if len(word) < 2:  # a lone letter ends nothing ("The sound events are d."), but a note does ("key of c")
                if _NOTE_BEFORE.search(text, 0, m.start()):
                    continue
                return False, f"{name}: {word!r} is no word (a lone letter: cut off)", None
            if _is_word(word, heard):
                continue
            return False, f"{name}: {word!r} is no word (cut off or misspelt; not in the transcript either)", None
    return True, None, None


def check_visual_claim(texts: Sequence[str], item: Any, transcript: str) -> Verdict:
    """A claim only a picture could support (`claim_vocab.VISUAL`: video resolution, colours, what is seen),
    unless the transcript says those words (then it is what the speech is about)."""
    heard = heard_words(transcript)
    for name, text in _fields(item, texts):
        for m in _VISUAL.finditer(text):
            if not _said(m.group(0), heard):
                return False, f"{name} claims what no audio can show: {m.group(0)!r}", None
    return True, None, None


def _names(text: str) -> list[str]:
    """The claim audit's names (capitalised mid-sentence, outside quotes; a unit after a number, "150 Hz", is
    none) and the names that open a sentence as a possessive."""
    found = [c.value for c in extract(text) if c.type == "name" and not _AFTER_NUMBER.search(text, 0, c.start)]
    found += [m.group(1) for m in _OPENING_POSSESSIVE.finditer(text) if m.group(1).lower() not in _NOT_POSSESSORS]
    return found


def check_unsaid_person(texts: Sequence[str], item: Any, transcript: str) -> Verdict:
    """A relationship (`claim_vocab.RELATIONS`: husband, brother, friend, boss…) or a person's name that the
    clip's transcript does not say, the same word: nothing else in a recording can tell who someone is."""
    heard = heard_words(transcript)
    for name, text in _fields(item, texts):
        for m in _RELATION.finditer(text):
            if not _said(m.group(0), heard):
                return False, f"{name} names a relationship the transcript does not say: {m.group(0)!r}", None
        for person in _names(text):
            if not _said(person, heard):
                return False, f"{name} names {person!r}, which the transcript does not say", None
    return True, None, None


# check name → check, run on every item of every kind (earmark.stages.filter.qc.run_item_checks)
WORDING_CHECKS: dict[str, WordingCheck] = {
    "cut_word": check_cut_word,
    "visual_claim": check_visual_claim,
    "unsaid_person": check_unsaid_person,
}
