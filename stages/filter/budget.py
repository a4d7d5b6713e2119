"""QC check `fact_budget`: one fact of a clip feeds a bounded number of its items.

The rule-written items of a clip (content captions, short and long captions composed from them, QA pairs and
instruction triples answered from them) restate the same few facts. When an expert gets one of them wrong (a
second voice that is not there, a misheard phrase), the templates copy the error into every item that uses it:
a held-out build had single faults in 11–22 kept items each. So each specific fact a clip's items rest on (what
the claim audit found supporting their claims; presence of speech / music / events, calibrated at
`[evidence] presence_confidence`, is not counted) may support at most `[filter] fact_budget` *groups* of items:
the three references of one caption kind are one group (paraphrases, scored together), an entailment set is one,
each QA pair and each instruction triple is one. Groups are served in a fixed order — the short, long and
content captions, the entailment set, then QA pairs and instructions by index — and a group that would take a
fact past its budget is rejected with the fact named. Items another check already rejects take no budget.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from earmark.schemas.outcomes import ItemClaim, QCResult
from earmark.stages.base import ItemType

CHECK = "fact_budget"
CAPTION_ORDER = ("short", "long", "speech", "music", "sound", "environment")
UNCOUNTED = ("content.",)  # presence facts: calibrated, and what nearly every item of a clip mentions


def _group(kind: Any, item: Any) -> tuple[int, int, str]:
    """(the item type's rank, rank inside it, group name) of an item."""
    return (kind.budget_rank, *kind.budget_group(item))


def _fact(claim: ItemClaim) -> str | None:
    if claim.verdict != "supported" or not claim.fact:
        return None
    fact = claim.fact.split("=", 1)[0]  # a measurement's verdict names its value: "acoustics.snr_db=31"
    return None if fact.startswith(UNCOUNTED) else fact


def fact_budget(
    items: Mapping[str, Sequence[Any]],
    claims: Sequence[ItemClaim],
    verdicts: Sequence[QCResult],
    budget: int,
    kinds: Mapping[str, ItemType],
) -> list[QCResult]:
    """One `fact_budget` verdict per item of the shard (none when `budget` is 0: the check is off)."""
    if budget <= 0:
        return []
    rejected = {(r.item_table, r.item_id) for r in verdicts if not r.keep}
    facts: dict[tuple[str, str], set[str]] = defaultdict(set)
    for c in claims:
        if (fact := _fact(c)) is not None:
            facts[(c.item_table, c.item_id)].add(fact)
    groups: dict[tuple[str, tuple[int, int, str]], list[tuple[str, Any]]] = defaultdict(list)
    for table, rows in items.items():
        for item in rows:
            groups[(item.clip_id, _group(kinds[table], item))].append((table, item))
    used: dict[tuple[str, str], int] = defaultdict(int)
    out: list[QCResult] = []
    for (clip, (_, _, name)), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1][:2])):
        live = [(t, i) for t, i in members if (t, i.item_id) not in rejected]
        needs = set().union(*(facts[(t, i.item_id)] for t, i in live)) if live else set()
        over = sorted(f for f in needs if used[(clip, f)] >= budget)
        if not over:
            for f in needs:
                used[(clip, f)] += 1
        for table, item in members:
            why = None
            if over and (table, item.item_id) not in rejected:
                why = f"{name}: the fact {over[0]} already supports {budget} item groups of this clip"
            out.append(
                QCResult(
                    item_table=table,
                    item_id=item.item_id,
                    clip_id=clip,
                    check=CHECK,
                    keep=why is None,
                    reason=why,
                    score=float(len(needs)),
                )
            )
    return out
