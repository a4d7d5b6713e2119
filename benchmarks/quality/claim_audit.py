"""What the claim audit found in a build: per item type, how many items claim something contradicted or
unsupported, before QC (every generated item) and after QC (the items a version ships), and what kinds of
claim fail most.

    .venv/bin/python benchmarks/quality/claim_audit.py data/demo [--version v0002] [--examples 5]

Before QC counts every item the synthesis wrote (rule-written ones included); after QC counts the items every
check kept. Unsupported claims are allowed in inference-by-design items (inference and application-context
answers, neutral hypotheses, questions); they are counted separately so the table shows it. Entailment rows
count contradicted claims in entailed and neutral hypotheses only (a contradiction hypothesis must contradict).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from earmark.stages.publish import kept_items
from earmark.storage import Catalog

TABLES = ("captions", "qa", "entailment", "instructions")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", type=Path)
    ap.add_argument("--version")
    ap.add_argument("--examples", type=int, default=5)
    args = ap.parse_args()
    cat = Catalog(args.dataset_dir.parent, args.dataset_dir.name)
    v = args.version or cat.latest_version()
    kept = kept_items(v)
    print(f"{args.dataset_dir.name} {v}\n")
    print(
        "| items | generated | with a contradicted claim | with an unsupported claim (in gated fields) | "
        "kept | kept with a contradicted claim | kept with an unsupported gated claim |"
    )
    print("|---|---|---|---|---|---|---|")
    for table in TABLES:
        n = cat.query(f"SELECT count(DISTINCT item_id) FROM {v}.{table}")[0][0]
        if not n:
            continue
        gated = (
            "(c.field NOT IN ('question', 'instruction') AND NOT (c.item_table = 'qa' AND q.category IN "
            "('inference_judgement', 'application_context')) AND NOT (c.item_table = 'entailment'))"
        )
        base = (
            f"FROM {v}.claims c LEFT JOIN {v}.qa q ON c.item_table = 'qa' AND q.item_id = c.item_id "
            f"WHERE c.item_table = '{table}'"
        )
        if table == "entailment":  # a contradiction hypothesis is meant to contradict: count the other two labels
            base = (
                f"FROM {v}.claims c JOIN {v}.entailment e ON e.item_id = c.item_id LEFT JOIN {v}.qa q "
                "ON false WHERE c.item_table = 'entailment' AND e.label <> 'contradiction'"
            )
        contra = cat.query(f"SELECT count(DISTINCT c.item_id) {base} AND c.verdict = 'contradicted'")[0][0]
        unsup = cat.query(f"SELECT count(DISTINCT c.item_id) {base} AND c.verdict = 'unsupported' AND {gated}")[0][0]
        n_kept = cat.query(f"SELECT count(DISTINCT item_id) FROM {v}.{table} WHERE item_id IN {kept}")[0][0]
        k_contra = cat.query(
            f"SELECT count(DISTINCT c.item_id) {base} AND c.verdict = 'contradicted' AND c.item_id IN {kept}"
        )[0][0]
        k_unsup = cat.query(
            f"SELECT count(DISTINCT c.item_id) {base} AND c.verdict = 'unsupported' AND {gated} AND c.item_id IN {kept}"
        )[0][0]
        pct = lambda a, b: f"{a} ({100 * a / b:.0f}%)" if b else "0"  # noqa: E731
        print(f"| {table} | {n} | {pct(contra, n)} | {pct(unsup, n)} | {pct(n_kept, n)} | {k_contra} | {k_unsup} |")
    print("\nFailing claims by type (all items):\n\n| claim type | contradicted | unsupported |\n|---|---|---|")
    for t, c, u in cat.query(
        f"SELECT claim_type, count(*) FILTER (WHERE verdict = 'contradicted'), count(*) FILTER "
        f"(WHERE verdict = 'unsupported') FROM {v}.claims GROUP BY 1 ORDER BY 2 DESC, 3 DESC"
    ):
        if c or u:
            print(f"| {t} | {c} | {u} |")
    print("\nEntailment sets whose three labels pass the audit: ", end="")
    sets = cat.query(
        f"SELECT count(DISTINCT clip_id), count(DISTINCT clip_id) FILTER (WHERE keep) FROM "
        f"(SELECT clip_id, bool_and(keep) AS keep FROM {v}.qc WHERE item_table = 'entailment' "
        "AND \"check\" = 'claim_audit' GROUP BY 1)"
    )[0]
    print(f"{sets[1]} of {sets[0]}")
    print("\nExamples of rejected items and why:")
    for table, text, reason in cat.query(
        f"SELECT q.item_table, coalesce(c.text, a.answer, e.hypothesis, i.answer), q.reason FROM {v}.qc q "
        f"LEFT JOIN {v}.captions c ON c.item_id = q.item_id LEFT JOIN {v}.qa a ON a.item_id = q.item_id "
        f"LEFT JOIN {v}.entailment e ON e.item_id = q.item_id LEFT JOIN {v}.instructions i ON i.item_id = q.item_id "
        f"WHERE q.\"check\" = 'claim_audit' AND NOT q.keep ORDER BY hash(q.item_id) LIMIT {args.examples}"
    ):
        print(f"- {table}: {text!r} — {reason}")


if __name__ == "__main__":
    main()
