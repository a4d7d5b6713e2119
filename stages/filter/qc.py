"""filter: every check answers `(keep, reason, score)` for one item; nothing is dropped silently.

After datatrove's filters: a check is a small function, and its verdict on *every* item is written to the
`qc` table, kept or not, so a threshold can be re-examined with a query instead of a re-run. An item is
published when all of its checks keep it. The rule checks here follow MECAT's rule-based filtering (LLM
confidence, Whisper hallucination removal) and add what the entailment and IFEval items need (expected
answers that pass their own rule, hypotheses that are not duplicates). Whether an item is *true* — every
claim checked against its clip's evidence — is the claim audit (stages/filter/audit.py); the model-based
audio–text margin filter is stages/filter/margin.py.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from earmark.core.config import FilterSection
from earmark.core.text import normalise
from earmark.metrics.ifeval import check_rule
from earmark.schemas.outcomes import QCResult
from earmark.schemas.records import Caption, EntailmentHypothesis, InstructionTriple, QAPair, Rejection
from earmark.stages.base import ItemType
from earmark.stages.filter.wording import WORDING_CHECKS

# 5: negation over lists, implied second speakers, denied pitch; 6: uncertain presence; 7: list numbering;
# 8: an instruction's format rule and an answer's brackets are not claims; 9: unfilled template slots, quality;
# 10: a timbre level; 11: a yes/no or degree question asks about presence, loudness, noise, band and echo;
# 12: rule-written items that could not be written are `from_facts` rejections, not `schema`; 13: same_source,
# source_spread and premise (stages/filter/sources.py, stages/filter/audit.py); 14: fact_budget (stages/filter/budget.py); 15: "one or more
# people speak" is no speaker count; 16: a coarse descriptor ("tonal") supports no event class ("beeps"); 17: non-speech
# vocal sounds ("sighing") are named sources; 18: "no recorded sounds" denies sound events, "symphony" is a genre,
# "joy" a mood; 19: the coarse DSP descriptors (impulsive / tonal / noise-like) confirm nothing; 20: cut-off words,
# visual claims and persons the transcript does not say (stages/filter/wording.py); 21: "music-free" denies music, and
# an answer to a question for everything heard names every content the evidence is sure of; 22: "between 2 and 4 s"
# is a stretch of the clip some span of the event must overlap, "no sounds" claims silence, a lone letter ending a
# sentence is cut off, a silent clip's answer to a question for everything heard says it is silent
STAGE_VERSION = "22"
Verdict = tuple[bool, str | None, float | None]
Item = Caption | QAPair | EntailmentHypothesis | InstructionTriple
Embedder = Callable[[Sequence[str]], np.ndarray]  # texts → L2-normalised rows

# The text fields of each item table that a generator wrote (what hallucination and review look at); its
# keys are the item tables.

# talking"), so only an absence word right before the content word counts there.
_QUOTED = re.compile(r"[\"“”']([^\"“”']{1,200})[\"“”']")


@dataclass(frozen=True)
class ClipContext:
    """What the checks know about one clip beyond its items: the transcript and its asr_check verdict."""

    transcript: str = ""
    hallucination_score: float = 0.0
    flags: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------- per-item rules
def check_confidence(item: Item, s: FilterSection) -> Verdict:
    ok = item.confidence >= s.min_confidence
    return ok, None if ok else f"confidence {item.confidence:.2f} < {s.min_confidence}", item.confidence


def check_length(item: Caption, s: FilterSection) -> Verdict:
    n = len(item.text.split())
    if item.kind == "short" and n > s.max_short_words:
        return False, f"short caption has {n} words > {s.max_short_words}", float(n)
    if item.kind == "long" and n < s.min_long_words:
        return False, f"long caption has {n} words < {s.min_long_words}", float(n)
    return True, None, float(n)


def check_answer_not_question(item: QAPair, s: FilterSection) -> Verdict:
    same = item.answer.strip().lower().rstrip("?.") == item.question.strip().lower().rstrip("?.")
    return (not same), ("answer repeats the question" if same else None), None


def check_ifeval_answer(item: InstructionTriple, s: FilterSection) -> Verdict:
    """The expected answer of an IFEval triple must satisfy its own rule (AudioBench's checker)."""
    try:
        ok = check_rule(item.answer, item.rule, item.rule_content)
    except ValueError as exc:
        return False, f"invalid rule: {exc}", 0.0
    return ok, None if ok else f"expected answer fails its own rule {item.rule} ({item.rule_content!r})", float(ok)


def transcript_overlap(text: str, transcript: str) -> str | None:
    """The transcript words an item repeats: a shared 3-word sequence, or (for transcripts shorter than
    that) the whole transcript quoted. None when the item does not use the transcript."""
    t = normalise(transcript).split()
    if not t:
        return None
    if len(t) < 3:
        whole = " ".join(t)
        return whole if any(normalise(q) == whole for q in _QUOTED.findall(text)) else None
    grams = {tuple(t[i : i + 3]) for i in range(len(t) - 2)}
    words = normalise(text).split()
    for i in range(len(words) - 2):
        if tuple(words[i : i + 3]) in grams:
            return " ".join(words[i : i + 3])
    return None


def check_hallucination(texts: Sequence[str], item: Item, ctx: ClipContext | None, s: FilterSection) -> Verdict:
    """Reject items whose content comes from a transcript the asr_check expert flags as a Whisper
    hallucination (known subtitle phrases, loops, words without VAD speech)."""
    if ctx is None or not ctx.transcript:
        return True, None, None
    score = ctx.hallucination_score
    if score < s.max_hallucination:
        return True, None, score
    for name in texts:
        phrase = transcript_overlap(getattr(item, name), ctx.transcript)
        if phrase is not None:
            flags = ", ".join(ctx.flags) or "flagged"
            return (
                False,
                (f"{name} relies on a hallucinated transcript ({flags}, score {score:.2f}): repeats {phrase!r}"),
                score,
            )
    return True, None, score


_UNFILLED = re.compile(r"<[a-z_][a-z_ ]{1,30}>|\[[a-z_][a-z_ ]{1,30}\]|\{\{?\s*[a-z_]{2,30}\s*\}\}?")


def check_unfilled(item: Item, s: FilterSection) -> Verdict:
    """A template slot the model copied instead of filling ("recording": "<transcript>") is no content."""
    texts = [getattr(item, f, "") or "" for f in ("text", "question", "answer", "hypothesis", "instruction")]
    hit = next((m.group(0) for t in texts if (m := _UNFILLED.search(t.lower()))), None)
    return hit is None, None if hit is None else f"unfilled template slot {hit!r}", None


# --------------------------------------------------------------------------------- entailment groups
def duplicate_hypotheses(
    hyps: Sequence[EntailmentHypothesis], captions: Sequence[Caption], s: FilterSection, embed: Embedder | None
) -> list[Verdict]:
    """Per hypothesis: is it a duplicate of another hypothesis of its clip, of its premise, or of one of
    the clip's captions? Equal after normalisation, or cosine ≥ `duplicate_similarity` with `embed`.
    Both members of a duplicate pair are rejected: at most one of them can carry its label."""
    out: list[Verdict] = []
    by_clip: dict[str, list[int]] = defaultdict(list)
    for i, h in enumerate(hyps):
        by_clip[h.clip_id].append(i)
    caps_by_clip: dict[str, list[str]] = defaultdict(list)
    for c in captions:
        caps_by_clip[c.clip_id].append(c.text)
    verdicts: dict[int, Verdict] = {}
    refs_of = {
        clip: sorted({hyps[i].premise for i in idx} | set(caps_by_clip.get(clip, []))) for clip, idx in by_clip.items()
    }
    unique = sorted({h.hypothesis for h in hyps} | {r for refs in refs_of.values() for r in refs})
    vec = dict(zip(unique, embed(unique))) if embed is not None and unique else {}  # one batch for the shard
    for clip, idx in by_clip.items():
        texts = [hyps[i].hypothesis for i in idx]
        refs = refs_of[clip]
        norm_t, norm_r = [normalise(t) for t in texts], [normalise(r) for r in refs]
        if vec:
            et, er = np.stack([vec[t] for t in texts]), np.stack([vec[r] for r in refs])
            sim_h, sim_r = et @ et.T, et @ er.T
        else:
            sim_h = np.zeros((len(texts), len(texts)))
            sim_r = np.zeros((len(texts), len(refs)))
        for a, i in enumerate(idx):
            best, reason = 0.0, None
            for b, j in enumerate(idx):
                if a == b:
                    continue
                sim = 1.0 if norm_t[a] == norm_t[b] else float(sim_h[a, b])
                if sim >= s.duplicate_similarity and sim > best:
                    best, reason = (
                        sim,
                        f"duplicates hypothesis {hyps[j].item_id} ({hyps[j].label}), similarity {sim:.2f}",
                    )
            for r, ref in enumerate(refs):
                sim = 1.0 if norm_t[a] == norm_r[r] else float(sim_r[a, r])
                if sim >= s.duplicate_similarity and sim > best:
                    best, reason = sim, f"duplicates the caption {ref!r}, similarity {sim:.2f}"
            top = max([float(sim_h[a, b]) for b in range(len(idx)) if b != a] + [float(x) for x in sim_r[a]] + [0.0])
            verdicts[i] = (reason is None, reason, round(max(best, top), 4))
    for i in range(len(hyps)):
        out.append(verdicts[i])
    return out


# ------------------------------------------------------------------------------------------- running
def _row(table: str, item: Item, check: str, v: Verdict) -> QCResult:
    keep, reason, score = v
    return QCResult(
        item_table=table,
        item_id=item.item_id,
        clip_id=item.clip_id,
        check=check,
        keep=keep,
        reason=reason,
        score=None if score is None else float(score),
    )


def run_item_checks(
    items: Mapping[str, Sequence[Item]],
    s: FilterSection,
    kinds: Mapping[str, ItemType],
    context: Mapping[str, ClipContext] | None = None,
    embed: Embedder | None = None,
) -> list[QCResult]:
    """Every rule check's verdict on every item: its item type's checks (`kinds[table].checks`), whether it
    leans on a hallucinated transcript, its wording (`wording.WORDING_CHECKS`, over its text fields: cut-off
    words, visual claims, persons the transcript does not say) and the entailment sets' duplicate hypotheses."""
    context = context or {}
    out: list[QCResult] = []
    for table, rows in items.items():
        kind = kinds[table]
        for item in rows:
            for name, check in kind.checks.items():
                out.append(_row(table, item, name, check(item, s)))
            ctx = context.get(item.clip_id)
            out.append(_row(table, item, "hallucination", check_hallucination(kind.texts, item, ctx, s)))
            transcript = ctx.transcript if ctx is not None else ""  # no transcript: no name or relation is said
            for name, wording in WORDING_CHECKS.items():
                out.append(_row(table, item, name, wording(kind.texts, item, transcript)))
    if items.get("entailment"):
        dup = duplicate_hypotheses(items["entailment"], items.get("captions", ()), s, embed)
        check = "duplicate_hypothesis" if embed is not None else "duplicate_hypothesis:text-only"
        out += [_row("entailment", h, check, v) for h, v in zip(items["entailment"], dup)]
    return out


# the phrase files of rule-written items: a rejection with one of these names says no item follows from the facts
RULE_FILES = ("absent", "content_captions", "entailment_rules", "qa_rules")


def rejection_rows(rejections: Iterable[Rejection]) -> list[QCResult]:
    """Generations rejected at synthesis appear as failed `schema` checks (the model's reply failed validation or
    the audit after its repair); an item the rules could not write from the clip's facts as a failed `from_facts`."""
    return [
        QCResult(
            item_table=r.table,
            item_id=f"{r.clip_id}:{r.prompt_name}:rejected:{i}",
            clip_id=r.clip_id,
            check="from_facts" if r.prompt_name in RULE_FILES else "schema",
            keep=False,
            reason=r.reason,
            score=None,
        )
        for i, r in enumerate(rejections)
    ]


def run_checks(
    items: Mapping[str, Sequence[Item]],
    rejections: Sequence[Rejection],
    s: FilterSection,
    kinds: Mapping[str, ItemType],
    *,
    context: Mapping[str, ClipContext] | None = None,
    embed: Embedder | None = None,
) -> list[QCResult]:
    """All rule verdicts for a shard's items (table → items; `kinds`: the item types, table → ItemType),
    plus the synthesis rejections."""
    return run_item_checks(items, s, kinds, context, embed) + rejection_rows(rejections)


def kept_ids(results: Iterable[QCResult]) -> set[str]:
    """Items every check kept."""
    verdicts: dict[str, bool] = {}
    for r in results:
        verdicts[r.item_id] = verdicts.get(r.item_id, True) and r.keep
    return {k for k, v in verdicts.items() if v}


def summary(results: Iterable[QCResult]) -> list[dict]:
    """Kept/rejected counts and the score range per (table, check): the Prefect table artifact."""
    acc: dict[tuple[str, str], dict] = {}
    for r in results:
        row = acc.setdefault((r.item_table, r.check), {"kept": 0, "rejected": 0, "scores": []})
        row["kept" if r.keep else "rejected"] += 1
        if r.score is not None:
            row["scores"].append(r.score)
    out = []
    for (table, check), row in sorted(acc.items()):
        sc = row["scores"]
        out.append(
            {
                "table": table,
                "check": check,
                "kept": row["kept"],
                "rejected": row["rejected"],
                "score_min": round(min(sc), 3) if sc else None,
                "score_median": round(float(np.median(sc)), 3) if sc else None,
                "score_max": round(max(sc), 3) if sc else None,
            }
        )
    return out
