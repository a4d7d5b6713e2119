"""Open QA pairs written by rule from the clip's confident facts (the instruction triples' rule writer,
item_types/instructions/rules.py, reads the same facts).

With `synthesize.qa_pairs = "rule"` (the default) no model is asked: read against the audio, the embedded 0.5B
model's pairs were mostly generic ("What does a male voice typically say?") or wrong (a guitar, a truck, a "low
timbre" no expert heard). The pairs come from the candidates of prompts/qa_rules.toml, one per MECAT category of
the clip's plan (`qa_plan`): the candidates whose facts are known are tried in an order seeded by the clip's
evidence, and the first whose answer is a whole sentence that passes the claim audit is kept. Answers reuse the
content captions of prompts/content_captions.toml, so a pair says exactly what a caption of the same clip says.
"""

from __future__ import annotations

import random
from typing import Any

import jinja2

from earmark.schemas.evidence import ClipEvidence
from earmark.stages.facts import bands
from earmark.stages.facts.render import SOUND_LABELS, View
from earmark.stages.filter.claims import asserted, audit, claim_verdict
from earmark.stages.synthesize.common import Outcome, Synth
from earmark.stages.synthesize.item_types.captions.rules import FACTS, combined_captions, rule_captions
from earmark.stages.synthesize.item_types.captions.write import absent_rows, is_absent, only_silence
from earmark.stages.synthesize.item_types.qa.write import INFERENCE, qa_plan, qa_row
from earmark.stages.synthesize.replies import QAItem

PROMPTS = ("qa_rules",)
LIST_ITEM_CHARS, SLOT_CHARS = 60, 80  # the reply schema's limits (replies._ListItem, replies._Slot)
_env = jinja2.Environment(undefined=jinja2.ChainableUndefined, autoescape=False)
_env.filters["lc"] = lambda t: t[:1].lower() + t[1:] if t and not t.startswith(("I ", '"')) else t


def qa_facts(ev: ClipEvidence, s: Synth, variant: int) -> dict[str, Any]:
    """What the templates of prompts/qa_rules.toml see (see its header); captions are reference `variant`."""
    v = View(ev, s.min_confidence)
    words = s.phrases("content_captions")["words"]
    phrases = s.phrases("evidence")

    def pick(texts: list[str]) -> str | None:
        return texts[variant % len(texts)] if texts else None

    facts: dict[str, Any] = {}
    for kind in ("speech", "music", "sound", "environment"):
        facts[kind] = pick([c.text for c in rule_captions(ev, kind, s)])
    for kind in ("speech", "music", "sound"):
        rows = absent_rows(ev, kind, s) if is_absent(ev, kind, s) else []
        facts[f"no_{kind}"] = pick([r.text for r in rows])
    silent = only_silence(ev, "short", s)
    facts["silent"] = pick(list(s.phrases("absent")["silence"]["short"])) if silent else None
    short = combined_captions(ev, "short", s)
    facts["short"] = facts["silent"] or pick([c.text for c in short])
    sp = FACTS["speech"](v, words, phrases) or {}
    mu = FACTS["music"](v, words, phrases) or {}
    facts |= {"gender": sp.get("gender"), "quote": sp.get("quote"), "tempo": mu.get("tempo_word")}
    facts["own_quote"] = sp.get("quote") if not (sp.get("several") or sp.get("unowned")) else None
    # who speaks, where the voices are surely these ("A man", "A man and a woman"); a gendered voice among an
    # unknown number is one of them ("male"), not who speaks: "Who is speaking?" answered "Words spoken by a male
    # speaker" left out the woman heard first, and 'Speech: "I'm sorry"' named no one (fresh19's blind check)
    facts["speaker"] = sp.get("who") if sp.get("key") in ("male", "female", "man_woman") else None
    facts["speaker_plural"] = sp.get("plural")
    facts["voice_gender"] = sp.get("gender") if sp.get("key") in ("male_voice", "female_voice") else None
    events = (FACTS["sound"](v, words, phrases) or {}).get("events") or []
    facts["event"] = events[0] if events else None
    facts["next_event"] = events[1] if len(events) > 1 else None
    facts["then_event"] = events[1] if len(events) > 1 and events[1]["then"] else None  # heard after the first
    # the first named event is "the first sound event" only where no sound window, sure or in doubt, starts before
    before = events and any(a < events[0]["at"] - 0.5 for a, _ in v.stored_windows(SOUND_LABELS))
    facts["first_event"] = events[0] if events and not before else None
    facts["instruments"] = " and ".join(mu.get("instruments") or []) or None
    facts |= {"genre": mu.get("genre"), "mood": mu.get("mood")}
    facts["beat"] = mu.get("beat") or None
    for band, fact in bands.recording():
        facts[band] = bands.word(band, v.num(fact))
    facts["narrowband"] = facts["bandwidth"] == "narrow" or None
    return facts


def _true(s: Synth, ev: ClipEvidence, text: str, inference: bool = False) -> bool:
    """The audit keeps `text` (no contradicted claim; unsupported ones only in inference; one supported)."""
    keep, _, _ = claim_verdict(audit(text, ev, s.min_confidence), inference=inference, need_support=True)
    return keep


def _fair(s: Synth, ev: ClipEvidence, question: str) -> bool:
    """QC's rule for a question: it presupposes nothing the evidence contradicts (`claims.asserted`)."""
    claims = asserted(question, audit(question, ev, s.min_confidence))
    return claim_verdict(claims, inference=True, need_support=False)[0]


def _rng(ev: ClipEvidence, s: Synth, salt: int) -> random.Random:
    return random.Random(s.seed_for(ev, salt))


def rule_qa(ev: ClipEvidence, s: Synth, n: int = 5) -> Outcome:
    """The clip's QA pairs by rule: one per category of its plan, or a rejection saying why not."""
    spec = s.phrases("qa_rules")
    rule = s.prompt_like("qa_rules")
    rng = _rng(ev, s, 23)
    facts = qa_facts(ev, s, rng.randrange(3))
    lineage = {**s.lineage(ev, rule), "model": "rule", "writer": "rule"}
    out = Outcome()
    asked: set[str] = set()
    for i, p in enumerate(qa_plan(ev.clip_id, n)):
        category = p["category"]
        candidates = [c for c in spec[category] if all(facts.get(k) for k in c["needs"])]
        rng.shuffle(candidates)
        candidates.sort(key=lambda c: -len(c["needs"]))  # the more specific first; stable, so seeded among equals
        pair = None
        for c in candidates:
            answer = " ".join(_env.from_string(c["answer"]).render(**facts).split())
            if not _true(s, ev, answer, category in INFERENCE):
                continue
            phrasings = [" ".join(_env.from_string(q).render(**facts).split()) for q in c["question"]]
            questions = [q for q in phrasings if q.lower() not in asked and _fair(s, ev, q)]
            try:
                pair = QAItem(question=rng.choice(questions), answer=answer, confidence=1.0) if questions else None
            except ValueError:
                continue
            if pair is not None:
                break
        if pair is None:
            why = "no candidate's facts are known" if not candidates else "no candidate's answer passes the audit"
            out.rejections.append(s.rejection(ev, "qa", rule, f"{category} pair by rule: {why}"))
            continue
        asked.add(pair.question.lower())
        out.rows.append(qa_row(ev, lineage, i, p, pair.question, pair.answer, 1.0))
    return out
