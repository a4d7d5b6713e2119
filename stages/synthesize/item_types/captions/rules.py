"""Content captions written by rule from the clip's confident facts (`synthesize.content_captions = "rule"`).

A speech, music, sound or environment caption of a few words is fully determined by a handful of facts (who
speaks and what the confident transcript says; texture, tempo and key; the named events and when; the
recording's loudness, noise, echo and bandwidth). Writing it from templates (prompts/content_captions.toml)
costs no model call and says exactly what the facts say. A kind with no confident fact gets no caption.
"""

from __future__ import annotations

from typing import Any

import jinja2

from earmark.prompts import file_sha
from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.records import Caption
from earmark.stages.facts import bands
from earmark.stages.facts.claim_vocab import EDGE_WORDS
from earmark.stages.facts.render import (
    QUOTE_CONFIDENCE,
    SOUND_LABELS,
    View,
    heard_events,
    order,
    speech_when,
    when_phrase,
)
from earmark.stages.synthesize.common import Synth, check_sentence

RULE_KINDS = ("speech", "music", "sound", "environment")  # the content captions the rules write
QUOTE_WORDS = 10  # whole confident phrases, joined up to this many words
LEGACY_QUOTE_WORDS = 7  # evidence without phrase facts: the start of the transcript
_env = jinja2.Environment(undefined=jinja2.ChainableUndefined, autoescape=False)


def quote_of(v: View) -> str | None:
    """Words to quote: the first whole phrase heard with confidence (`speech.quote`), joined with the confident
    phrases right after it up to `QUOTE_WORDS`; never part of a phrase. Evidence without phrase facts (built
    before them) quotes the start of a confident transcript, as before."""
    if not any(True for _ in v.ev.all("speech.quote")):
        return _transcript_start(v)
    words: list[str] = []
    for f in v.ev.all("speech.quote"):
        confident = f.value and (f.confidence or 0.0) >= max(v.thr, QUOTE_CONFIDENCE)
        n = len(f.value.split()) if f.value else 0
        if confident and len(words) + n <= QUOTE_WORDS:
            words += f.value.replace('"', "").split()
        elif words:  # the run of confident phrases ends
            break
    return " ".join(words).rstrip(".,;:!?") or None


def _transcript_start(v: View) -> str | None:
    transcript = v.ok("speech.transcript")
    if transcript is None or not transcript.value:
        return None
    words = transcript.value.replace('"', "").split()[:LEGACY_QUOTE_WORDS]
    while len(words) > 3 and words[-1].lower().strip(".,;:!?") in EDGE_WORDS:  # "… leaves from" → "… leaves"
        words.pop()
    return " ".join(words).rstrip(".,;:!?")


def _speech(v: View, w: dict, when: Any) -> dict[str, Any] | None:
    if v.content("speech") != "present":
        return None
    n = int(v.num("speakers.count") or 0)
    unsure = n == 0 and v.ev.get("speakers.count") is not None  # a count the pitch check did not confirm
    genders = set()
    for who in v.ev.subjects("speaker.gender"):
        labels = v.ev.labels("speaker.gender", who)
        if labels:
            label, p = max(labels.items(), key=lambda kv: kv[1])
            if p >= v.thr:
                genders.add(label)
    gender = next(iter(genders)) if len(genders) == 1 and n <= 1 else None
    if n == 2:
        key = "man_woman" if genders == {"male", "female"} else "two"
    elif n >= 3:
        key = "many"
    elif unsure:  # the number is not stated; a voice's gender is ("a male voice": of at least one voice)
        key = f"{gender}_voice" if gender else "some"
    else:
        key = gender or "unknown"
    quote = quote_of(v)
    return {
        "key": key,
        "who": w["who"][key],
        "voice": w["voice"][key],
        "plural": key in ("two", "many", "some", "man_woman"),  # the verb's number
        "several": key in ("two", "many", "man_woman"),  # a quote is then one of them's
        "unowned": key in ("male_voice", "female_voice"),  # a gendered voice among an unknown number: not its quote
        "voices": "voices" if key in ("two", "many", "some") else "voice",
        "gender": gender,
        "quote": quote,
        # when speech is heard belongs to the voice a caption names only when the count is sure: "a male voice
        # speaks for most of the clip" was false where a woman took the second half (review v0006)
        "when": speech_when(when, v) if n >= 1 or key in ("some", "unknown") else None,
    }


def _music(v: View, w: dict, when: Any) -> dict[str, Any] | None:
    if v.content("music") != "present":
        return None
    harm = v.num("music.harmonic_ratio")
    texture = None if harm is None else "sustained" if harm >= 0.8 else "percussive" if harm < 0.4 else "mixed"
    tempo = bands.word("tempo", v.num("music.tempo_bpm"))
    key = v.ok("music.key")
    tags = music_tags(v)
    instruments = [t for t in tags.get("instrument", []) if t != "solo"][:MAX_INSTRUMENTS]
    moods = tags.get("mood", [])
    return {
        "instruments": instruments,
        "solo": "solo" in tags.get("instrument", []) and len(instruments) == 1,
        "genre": next(iter(tags.get("genre", [])), None),
        "mood": next((m for m in moods if m in ("calm", "energetic")), None),
        "pace": next((m for m in moods if m in ("slow", "fast")), None) if tempo is None else tempo,
        "texture": w["texture"].get(texture),
        "texture_noun": w["texture_noun"].get(texture),
        "tempo": w["tempo"].get(tempo),
        "tempo_word": tempo,
        "beat": (v.num("music.beat_strength") or 0) >= 0.6,
        "key": key.value if key is not None else None,
        "when": when_phrase(when, v.windows({"music"}), v.ev.duration_s, partial=False),
    }


MAX_EVENTS = 2  # named in one content caption (MECAT's sound captions are 5 words on average)
MAX_INSTRUMENTS = 2


def music_tags(v: View) -> dict[str | None, list[str]]:
    """The confident music tags by group (instrument, genre, mood; None: a paper tagger's label of no known
    group), most likely first."""
    out: dict[str | None, list[tuple[float, str]]] = {}
    for f in v.ev.all("music.tag"):
        if f.value and (f.confidence or 0.0) >= v.thr:
            out.setdefault(f.subject, []).append((-(f.number or 0.0), f.value))
    return {g: [t for _, t in sorted(xs)] for g, xs in out.items()}


def _events(v: View, when: Any) -> list[dict[str, Any]]:
    """The named events for the templates, first heard first: noun, clause, when, the second it starts, and
    `then`: whether it is heard after the one before it (render.order; events starting together are not)."""
    out = []
    heard = [e for e in heard_events(v) if e.cls in when["events"]]
    for i, e in enumerate(heard):
        then = i > 0 and order(list(heard[i - 1].spans), list(e.spans)) == "before"
        out.append(
            {
                **when["events"][e.cls],
                "when": e.when(when, v),
                "at": e.at,
                "between": e.between,
                "cls": e.cls,
                "then": then,
            }
        )
    return out


def _sound(v: View, w: dict, when: Any) -> dict[str, Any] | None:
    if v.content("sound_events") != "present":
        return None
    events = _events(v, when)[:MAX_EVENTS]
    if events:
        return {"events": events, "when": None}
    # no coarse descriptor (impulsive / tonal / noise-like: wrong on real mixes, see render._sound_lines), and
    # no timing from sound windows that are all lit
    return {"when": when_phrase(when, v.windows(SOUND_LABELS), v.ev.duration_s, whole=None)}


def _environment(v: View, w: dict, when: Any) -> dict[str, Any] | None:
    facts = {band: bands.word(band, v.num(fact)) for band, fact in bands.recording()}
    if not any(facts.values()):
        return None
    return {band: w[band].get(word) for band, word in facts.items()} | {"subject": _subject(v, w, when)}


def _subject(v: View, w: dict, when: Any, leave_out: str | None = None) -> str | None:
    """What the recording is of, in a few words (the contents present, an event by name): the environment
    caption says where and how something was recorded, and of what (MECAT's run 7.6 words). `leave_out`: a
    content not to name (the short caption's main one)."""
    present = [k for k in ("speech", "music", "sound_events") if v.content(k) == "present" and k != leave_out]
    events = _events(v, when)
    parts = {
        "speech": w["subject"]["speech"],
        "music": w["subject"]["music"],
        "sound_events": events[0]["noun"] if events else w["subject"]["sound_events"],
    }
    named = [parts[k] for k in present]
    if not named:
        return None
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} {w['subject']['and']} {named[-1]}"


FACTS = {"speech": _speech, "music": _music, "sound": _sound, "environment": _environment}


def _caption(ev: ClipEvidence, kind: str, i: int, text: str, sha: str) -> Caption:
    """Reference i of `kind`, written by rule (model "rule", lineage the content_captions file)."""
    return Caption(
        clip_id=ev.clip_id,
        domain=ev.domain,
        prompt_name="content_rule",
        prompt_sha=sha,
        model="rule",
        writer="rule",
        confidence=1.0,
        item_id=f"{ev.clip_id}:{kind}:{i}",
        kind=kind,
        ref_index=i,
        text=text,
    )


def rule_captions(ev: ClipEvidence, kind: str, s: Synth, **omit: None) -> list[Caption]:
    """Up to 3 references for `kind` from its templates (distinct, whole sentences), or none. `omit`: facts
    left out (`subject=None`: an environment caption that does not say what the recording is of)."""
    spec = s.phrases("content_captions")
    v = View(ev, s.min_confidence)
    facts = FACTS[kind](v, spec["words"], s.phrases("evidence"))
    if facts is None:
        return []
    facts |= omit
    sha = file_sha("content_captions", s.cfg.prompt_dir)
    out: list[Caption] = []
    seen: set[str] = set()
    for template in spec["templates"][kind]:
        text = " ".join(_env.from_string(template).render(**facts).split())
        text = text[:1].upper() + text[1:]
        try:
            text = check_sentence(text, 3, 25)
        except ValueError:
            continue
        if text.lower() in seen:
            continue
        seen.add(text.lower())
        out.append(_caption(ev, kind, len(out), text, sha))
    return out


def combined_captions(ev: ClipEvidence, kind: str, s: Synth) -> list[Caption]:
    """Short or long references by rule, for when the model's fail: short = the main content's caption
    (speech, else music, else sound events) with what else is surely heard ("…, with music"); long = every present content's caption and the recording's,
    joined. Variant i uses each kind's i-th template, so the three stay distinct."""
    parts = {k: rule_captions(ev, k, s) for k in RULE_KINDS}
    main_kind = next((k for k in ("speech", "music", "sound") if parts[k]), None)
    main = parts[main_kind] if main_kind else []
    spec = s.phrases("content_captions")
    content = {"speech": "speech", "music": "music", "sound": "sound_events"}.get(main_kind or "")
    others = _subject(View(ev, s.min_confidence), spec["words"], s.phrases("evidence"), leave_out=content)
    out: list[Caption] = []
    for i in range(3):
        if kind == "short":
            text = main[i].text if i < len(main) else None
            if text and others:
                text = spec["words"]["beside"].format(main=text.rstrip(".!?"), others=others)
        else:
            pieces = [parts[k][min(i, len(parts[k]) - 1)].text for k in RULE_KINDS if parts[k]]
            text = " ".join(pieces) if len(pieces) >= 2 else None
        if not text:
            continue
        try:
            text = check_sentence(text, 3, 40)
        except ValueError:
            continue
        out.append(_caption(ev, kind, i, text, file_sha("content_captions", s.cfg.prompt_dir)))
    return out
