"""MECAT captions: 6 kinds × 3 references per clip (focused strategy), and the rule-written captions.

Short and long captions combine the clip's facts: each reference is an independent sample of the kind's
focused prompt (small models asked for 3 paraphrases at once mostly repeat themselves); a reference equal to
an earlier one is sent back for repair. Content captions (speech, music, sound, environment) are written by
rule from the confident facts when `content_captions = "rule"` (earmark.stages.synthesize.item_types.captions.rules), and
content the domain decision says is absent is stated as absent by rule (`absent_captions = "rule"`, the
sentences of prompts/absent.toml), as MECAT's references do. With rule content captions, a clip whose only fact
is its silence gets its short and long captions by rule too (absent.toml's `[silence]`): the facts fully
determine them, so no model call is made.
"""

from __future__ import annotations

from typing import Any

from earmark.prompts import file_sha
from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.facts import content_fact
from earmark.schemas.records import CAPTION_KINDS, Caption
from earmark.stages.synthesize.common import CONTENT_KINDS, Outcome, Synth, ask, grounded
from earmark.stages.synthesize.item_types.captions.rules import RULE_KINDS, combined_captions, rule_captions
from earmark.stages.synthesize.replies import MAX_CHARS, caption_reply, reply_schema

PROMPTS = tuple(f"caption_{k}" for k in CAPTION_KINDS)


def is_absent(ev: ClipEvidence, kind: str, s: Synth) -> bool:
    """The domain code says `kind` is absent; absence is *stated* only when the evidence is sure of it."""
    return kind in CONTENT_KINDS and ev.domain[CONTENT_KINDS[kind]] == "0" and s.cfg.absent_captions == "rule"


def absent_rows(ev: ClipEvidence, kind: str, s: Synth) -> list[Caption]:
    fact = ev.get(content_fact(kind))
    if fact is None or fact.value != "absent" or (fact.confidence is not None and fact.confidence < s.min_confidence):
        return []  # "uncertain", or unsure (sound under music): the tagger may have missed it; say nothing
    confidence = fact.confidence if fact.confidence is not None else 1.0 - (fact.number or 0.0)
    return _phrase_rows(ev, kind, s.phrases("absent")["captions"][kind], confidence, "absent_rule", s)


def only_silence(ev: ClipEvidence, kind: str, s: Synth) -> bool:
    """The clip's facts for this caption kind are the one line "essentially silent": they fully determine the
    caption, which is then written by rule (no model call)."""
    return s.notes(ev, kind) == s.phrases("evidence")["content"]["silent"]


def silence_rows(ev: ClipEvidence, kind: str, s: Synth) -> list[Caption]:
    return _phrase_rows(ev, kind, s.phrases("absent")["silence"][kind], 1.0, "silence_rule", s)


def _phrase_rows(
    ev: ClipEvidence, kind: str, texts: list[str], confidence: float, name: str, s: Synth
) -> list[Caption]:
    sha = file_sha("absent", s.cfg.prompt_dir)
    return [
        Caption(
            clip_id=ev.clip_id,
            domain=ev.domain,
            prompt_name=name,
            prompt_sha=sha,
            model="rule",
            writer="rule",
            confidence=round(confidence, 3),
            item_id=f"{ev.clip_id}:{kind}:{i}",
            kind=kind,
            ref_index=i,
            text=text,
        )
        for i, text in enumerate(texts)
    ]


def _fallback(ev: ClipEvidence, kind: str, s: Synth) -> list[Caption]:
    """What replaces a reference the model could not write truthfully: the rule-written captions of the kind
    (content kinds) or composed from them (short, long)."""
    if s.cfg.caption_fallback != "rule":
        return []
    return rule_captions(ev, kind, s) if kind in RULE_KINDS else combined_captions(ev, kind, s)


def validated(data: Any, kind: str, ev: ClipEvidence, s: Synth, seen: set[str]) -> Any:
    """One model-written caption reply of `kind`, checked as every strategy checks it (the item type's
    `validate`): the reply schema and its length, no repeat of an earlier reference (`seen`: their texts,
    lower-cased without the full stop), and the claim audit. A ValueError names what to fix."""
    reply = caption_reply(MAX_CHARS[kind]).model_validate(data, context={"max_chars": MAX_CHARS[kind], "kind": kind})
    if reply.caption.lower().rstrip(".") in seen:
        raise ValueError("this caption repeats an earlier one; write a different one")
    grounded(s, ev, reply.caption)
    return reply


def caption_clip(ev: ClipEvidence, s: Synth) -> Outcome:
    out = Outcome()
    for kind in CAPTION_KINDS:
        if is_absent(ev, kind, s):
            written = absent_rows(ev, kind, s)
            out.rows += written
            if not written:
                why = f"{kind} absent by the domain code, but not surely enough to state it"
                out.rejections.append(s.rejection(ev, "captions", s.prompt_like("absent"), why))
            continue
        if kind in RULE_KINDS and s.cfg.content_captions == "rule":
            written = rule_captions(ev, kind, s)
            out.rows += written
            if len(written) < 3:  # say why the kind has fewer references than MECAT's three
                rule = s.prompt_like("content_captions")
                why = "no confident fact" if not written else f"only {len(written)} distinct captions from the facts"
                out.rejections.append(s.rejection(ev, "captions", rule, f"{kind} by rule: {why}"))
            continue
        if only_silence(ev, kind, s):  # whoever writes the rest: the facts fully determine these
            out.rows += silence_rows(ev, kind, s)
            continue
        prompt = s.prompt(f"caption_{kind}")
        messages = prompt.render(evidence_text=s.notes(ev, kind))
        model = caption_reply(MAX_CHARS[kind])
        seen: set[str] = set()

        def parse(data: Any, kind: str = kind, seen: set[str] = seen) -> Any:
            return validated(data, kind, ev, s, seen)

        fallback = _fallback(ev, kind, s)
        for i in range(3):
            reply, raw, reason = ask(s, prompt, messages, reply_schema(model), parse, seed=s.seed_for(ev, i))
            if reply is None:
                out.rejections.append(s.rejection(ev, "captions", prompt, f"{kind} reference {i}: {reason}", raw))
                spare = next((c for c in fallback if c.text.lower().rstrip(".") not in seen), None)
                if spare is not None:  # the reference written by rule from the same facts instead
                    fallback.remove(spare)
                    seen.add(spare.text.lower().rstrip("."))
                    update = {"item_id": f"{ev.clip_id}:{kind}:{i}", "ref_index": i, "writer": "rule_fallback"}
                    out.rows.append(spare.model_copy(update=update))
                continue
            seen.add(reply.caption.lower().rstrip("."))
            out.rows.append(
                Caption(
                    **s.lineage(ev, prompt),
                    confidence=reply.confidence,
                    item_id=f"{ev.clip_id}:{kind}:{i}",
                    kind=kind,
                    ref_index=i,
                    text=reply.caption,
                )
            )
    return out
