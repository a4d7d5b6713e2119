"""How clip-specific a build's captions are: DATE discrimination, caption lengths, duplicates across clips.

    .venv/bin/python benchmarks/quality/distinctiveness.py data/demo [--version v0003]

For the short and long captions of the version's kept items: per clip, candidate = its first kept reference,
references = its other kept references; DATE's discrimination (metrics.date, the group's δ) says how often
the candidate is closer to its own references than to any other clip's (1 = always). Clips whose confident
facts render to the same notes (identical evidence as far as a prompt can tell) are counted once. Beside it,
the same measure on the rendered facts themselves (candidate = the clip's notes for a long caption,
references = its notes for the speech, music, sound and environment captions, the same facts in other
words and subsets). Measured, it is lower than the captions' score on small builds: the stock phrases of the
rendered facts make different clips look alike, so it is a reference point, not a ceiling. Also: mean words per caption kind
(MECAT's reference means beside them) and texts that appear on more than one clip.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from earmark.metrics.date import GROUP_DELTA, date_scores
from earmark.prompts import load_phrases
from earmark.schemas import ClipEvidence, from_table
from earmark.stages.facts.render import render
from earmark.stages.publish import kept_items
from earmark.storage import Catalog

MECAT_WORDS = {"short": 8.8, "long": 17.4, "speech": 8.2, "music": 5.9, "sound": 5.0, "environment": 7.6}
DELTA = {"short": GROUP_DELTA["content_short"], "long": GROUP_DELTA["content_long"]}


def _flat(notes: str) -> str:
    return " ".join(line.lstrip("- ") for line in notes.splitlines())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", type=Path, help="data/<dataset>")
    ap.add_argument("--version")
    args = ap.parse_args()
    cat = Catalog(args.dataset_dir.parent, args.dataset_dir.name)
    v = args.version or cat.latest_version()
    evidence = {e.clip_id: e for e in from_table(ClipEvidence, cat.read("evidence", cat.version_shards(v)["evidence"]))}
    phrases = load_phrases("evidence")
    notes = {c: render(e, "long", phrases) for c, e in evidence.items()}
    caps = cat.query(
        f"SELECT clip_id, kind, text, model FROM {v}.captions WHERE item_id IN {kept_items(v)} "
        "ORDER BY clip_id, kind, ref_index"
    )
    by = defaultdict(list)
    for clip, kind, text, _ in caps:
        by[(clip, kind)].append(text)
    print(f"{args.dataset_dir.name} {v}: {len(evidence)} clips, {len(set(notes.values()))} distinct rendered facts\n")
    print("| kind | clips scored | DATE discrimination | similarity | the rendered facts themselves |")
    print("|---|---|---|---|---|")
    for kind in ("long", "short"):
        seen, cands, refs, fact_texts, fact_refs = set(), [], [], [], []
        for clip in sorted(evidence):
            texts = by.get((clip, kind), [])
            if len(texts) < 2 or notes[clip] in seen:
                continue
            seen.add(notes[clip])
            cands.append(texts[0])
            refs.append(texts[1:])
            fact_texts.append(_flat(notes[clip]))
            fact_refs.append(
                [_flat(render(evidence[clip], k, phrases)) for k in ("speech", "music", "sound", "environment")]
            )
        if not cands:
            print(f"| {kind} | 0 | – | – | – |")
            continue
        got = date_scores(cands, refs, delta=DELTA[kind])
        ceiling = date_scores(fact_texts, fact_refs, delta=DELTA[kind])
        print(
            f"| {kind} | {len(cands)} | {got.discrimination.mean():.3f} | {got.similarity.mean():.3f} | "
            f"{ceiling.discrimination.mean():.3f} |"
        )
    print("\n| caption kind | kept references | mean words | MECAT mean | LLM-written | rule-written |")
    print("|---|---|---|---|---|---|")
    for kind, mecat in MECAT_WORDS.items():
        rows = [(t, m) for c, k, t, m in caps if k == kind]
        n_rule = sum(m == "rule" for _, m in rows)
        mean = np.mean([len(t.split()) for t, _ in rows]) if rows else float("nan")
        print(f"| {kind} | {len(rows)} | {mean:.1f} | {mecat} | {len(rows) - n_rule} | {n_rule} |")
    dup = cat.query(
        f"SELECT kind, text, count(DISTINCT clip_id) AS n FROM {v}.captions WHERE item_id IN "
        f"{kept_items(v)} AND model <> 'rule' GROUP BY 1, 2 HAVING n > 1 ORDER BY n DESC"
    )
    llm = cat.query(f"SELECT count(*) FROM {v}.captions WHERE item_id IN {kept_items(v)} AND model <> 'rule'")[0][0]
    print(f"\nLLM-written kept captions that appear on more than one clip: {sum(n for _, _, n in dup)} of {llm}")
    for kind, text, n in dup[:10]:
        print(f"  {n} clips, {kind}: {text}")


if __name__ == "__main__":
    main()
