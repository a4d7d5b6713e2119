"""Re-audit the items a published version kept with the claim audit as it is now, to measure what a change of
the audit (its vocabulary, a new claim type) would newly reject in a real build, without rebuilding it.

    .venv/bin/python benchmarks/quality/reaudit.py data/fresh5 [--version v0001] [--examples 20]

Prints, per item table, the kept items and how many the current audit rejects, the claim types that reject
them, and examples (clip, text, the failing claim and why). The evidence is the version's own evidence table.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from earmark.core.config import EvidenceSection
from earmark.schemas.evidence import ClipEvidence
from earmark.stages.filter.claims import CONTRADICTED, UNSUPPORTED
from earmark.stages.publish import kept_items
from earmark.stages.synthesize import ITEM_TYPES
from earmark.storage import Catalog


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", type=Path)
    ap.add_argument("--version")
    ap.add_argument("--examples", type=int, default=20)
    args = ap.parse_args()
    cat = Catalog(args.dataset_dir.parent, args.dataset_dir.name)
    v = args.version or cat.latest_version()
    thr = EvidenceSection().min_confidence
    evidence = {}
    for (row,) in cat.query(f"SELECT to_json(e) FROM {v}.evidence e"):
        ev = ClipEvidence.model_validate_json(row)
        evidence[ev.clip_id] = ev
    print(f"{args.dataset_dir.name} {v}: {len(evidence)} clips\n")
    print("| items | kept | rejected now | by contradicted claims | by unsupported claims |")
    print("|---|---|---|---|---|")
    why: Counter[str] = Counter()
    examples: list[str] = []
    for table, kind in ITEM_TYPES.items():
        rows = cat.query(f"SELECT to_json(t) FROM {v}.{table} t WHERE t.item_id IN {kept_items(v)}")
        kept = rejected = contradicted = 0
        for (row,) in rows:
            item = kind.record.model_validate_json(row)
            ev = evidence.get(item.clip_id)
            if ev is None:
                continue
            kept += 1
            keep, reason, _, found = kind.audit(item, ev, thr)
            if keep:
                continue
            rejected += 1
            bad = [c for c in found if c.verdict in (CONTRADICTED, UNSUPPORTED)]
            contradicted += any(c.verdict == CONTRADICTED for c in bad)
            for c in bad:
                why[f"{c.claim_type} {c.verdict}"] += 1
            if len(examples) < args.examples:
                text = " / ".join(str(getattr(item, f)) for f in kind.texts if getattr(item, f, None))
                examples.append(f"- {table} {item.clip_id}: {text!r} → {reason}")
        print(f"| {table} | {kept} | {rejected} | {contradicted} | {rejected - contradicted} |")
    print("\nFailing claims by type and verdict:")
    for k, n in why.most_common():
        print(f"- {k}: {n}")
    print("\nExamples:")
    print("\n".join(examples))


if __name__ == "__main__":
    main()
