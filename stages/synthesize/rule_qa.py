"""Open QA pairs and instruction triples written by rule from the clip's confident facts.

With `synthesize.qa_pairs = "rule"` and `synthesize.instruction_triples = "rule"` (the defaults) no model is
asked: read against the audio, the embedded 0.5B model's pairs were mostly generic ("What does a male voice
typically say?") or wrong (a guitar, a truck, a "low timbre" no expert heard). The pairs come from the
candidates of prompts/qa_rules.toml, one per MECAT category of the clip's plan (`qa.qa_plan`): the candidates
whose facts are known are tried in an order seeded by the clip's evidence, and the first whose answer is a
whole sentence that passes the claim audit is kept. The instruction triples keep the IFEval-Audio plan of
`instructions.instruction_plan`; their answer is one of the clip's rule-written captions (or three of them, or
two in JSON), put into the rule's form by the same code as the model's answers and checked by the rule and the
audit. Answers reuse the content captions of prompts/content_captions.toml, so a pair says exactly what a
caption of the same clip says.
"""

from __future__ import annotations

import random
from typing import Any

import jinja2

from earmark.schemas.evidence import ClipEvidence
from earmark.stages.facts import bands
from earmark.stages.facts.render import View
from earmark.stages.filter.claims import asserted, audit, claim_verdict
from earmark.stages.synthesize.captions import absent_rows, is_absent, only_silence
from earmark.stages.synthesize.common import Outcome, Synth
from earmark.stages.synthesize.instructions import expected_answer, instruction_plan, triple
from earmark.stages.synthesize.qa import INFERENCE, qa_plan, qa_row
from earmark.stages.synthesize.registry import ITEM_TYPES
from earmark.stages.synthesize.replies import InstructionReply, QAItem
from earmark.stages.synthesize.rule_captions import FACTS, combined_captions, rule_captions

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
    events = (FACTS["sound"](v, words, phrases) or {}).get("events") or []
    facts["event"] = events[0] if events else None
    facts["next_event"] = events[1] if len(events) > 1 else None
    facts["then_event"] = events[1] if len(events) > 1 and events[1]["then"] else None  # heard after the first
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
            questions = [q for q in c["question"] if q.lower() not in asked and _fair(s, ev, q)]
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


def _text_answers(ev: ClipEvidence, s: Synth, facts: dict[str, Any], variant: int) -> list[str]:
    """Candidate sentence answers, shortest kinds first: the short captions, the long ones, a short caption
    followed by the environment caption and a long one by the clip's absence sentences (for a word-count rule),
    and each content caption."""
    if facts["silent"]:
        silence = s.phrases("absent")["silence"]
        shorts, longs = list(silence["short"]), list(silence["long"])
    else:
        shorts = [c.text for c in combined_captions(ev, "short", s)]
        longs = [c.text for c in combined_captions(ev, "long", s)]
    rotate = lambda xs: xs[variant % len(xs) :] + xs[: variant % len(xs)] if xs else []  # noqa: E731
    absences = " ".join(facts[f"no_{k}"] for k in ("speech", "music", "sound") if facts[f"no_{k}"])
    env = facts["environment"]
    extended = [f"{t} {env}" for t in rotate(shorts)] if env and not facts["silent"] else []
    extended += [f"{t} {absences}" for t in rotate(longs or shorts)] if absences else []
    parts = [facts[k] for k in ("speech", "music", "sound", "environment") if facts[k]]
    return [*rotate(shorts), *rotate(longs), *extended, *parts]


def _list_items(facts: dict[str, Any]) -> list[str]:
    keys = ("speech", "music", "sound", "environment", "no_speech", "no_music", "no_sound")
    items = [facts[k].rstrip(".") for k in keys if facts[k]]
    if facts["silent"]:
        items.insert(0, facts["silent"].rstrip("."))
    return [t for t in items if 3 <= len(t) <= LIST_ITEM_CHARS]


def rule_instructions(ev: ClipEvidence, s: Synth, n: int = 3) -> Outcome:
    """The clip's instruction triples by rule: the plan's rule and form, a question of prompts/qa_rules.toml,
    an answer from the clip's rule-written captions that passes its rule and the audit."""
    questions = s.phrases("qa_rules")["instructions"]
    rule = s.prompt_like("qa_rules")
    rng = _rng(ev, s, 29)
    variant = rng.randrange(3)
    facts = qa_facts(ev, s, variant)
    lineage = {**s.lineage(ev, rule), "model": "rule", "writer": "rule"}
    out = Outcome()
    for i, plan in enumerate(instruction_plan(ev, s.prompt("ifeval"), n)):
        form = plan["form"] if plan["form"] in ("list", "json") else "text"
        fair = [q for q in questions[form] if _fair(s, ev, q)]
        question = rng.choice(fair) if fair else questions[form][0]
        if form == "list":
            items = _list_items(facts)
            replies = [{"items": items[:3]}] if len(items) >= 3 else []
        elif form == "json":
            main = facts["short"]
            # the recording slot: how it was recorded (main_sound says what), the shortest wording
            recordings = sorted((c.text for c in rule_captions(ev, "environment", s, subject=None)), key=len)
            recording = recordings[0] if recordings else None
            ok = main and recording and len(main) <= SLOT_CHARS and len(recording) <= SLOT_CHARS
            replies = [{"main_sound": main.rstrip("."), "recording": recording.rstrip(".")}] if ok else []
        else:
            replies = [{"answer": t} for t in _text_answers(ev, s, facts, variant)]
        row = None
        for content in replies:
            try:
                reply = InstructionReply(reasoning="rule", question=question, confidence=1.0, **content)
                made = triple(ev, lineage, i, plan, reply, expected_answer(reply, plan), 1.0)
            except ValueError:
                continue
            if ITEM_TYPES["instructions"].audit(made, ev, s.min_confidence)[0]:  # QC's own audit of the item
                row = made
                break
        if row is None:
            why = f"{plan['dimension']} rule {plan['rule']} by rule: no answer from the clip's captions meets it"
            out.rejections.append(s.rejection(ev, "instructions", rule, why))
            continue
        out.rows.append(row)
    return out
