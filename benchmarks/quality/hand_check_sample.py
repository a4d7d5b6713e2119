"""Draw random kept items of a build for a by-hand check, each beside its clip's ground truth and evidence.

    .venv/bin/python benchmarks/quality/hand_check_sample.py data/devbuild --truth dev.jsonl --n 50 --seed 0 > sheet.md
    .venv/bin/python benchmarks/quality/hand_check_sample.py data/devbuild --truth dev.jsonl --entailment 20 > sets.md
    .venv/bin/python benchmarks/quality/hand_check_sample.py data/devbench --truth data/devbench-input/truth.jsonl --blind

The truth file is the dev-set script's record of what it mixed into each clip: training/build_corpus.py's
(one JSON line per clip with its `id` = the file stem, its MECAT `domain`, and per-2 s-window speech / music /
sound labels) or benchmarks/quality/devset.py's (the voices with their gender and words, the music and its labels, the
events with their times). `--blind` leaves out the facts: a reviewer judges the items against the truth only. Items are drawn uniformly from every kept caption reference, QA pair, entailment hypothesis and
instruction triple (seeded), so the sheet is a fair sample, not a chosen one. Each entry prints the item, the
clip's true domain and windows, and the confident facts the prompt saw; the reader marks it faithful and
specific / generic / wrong.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from earmark.prompts import load_phrases
from earmark.schemas import ClipEvidence, from_table
from earmark.stages.publish import kept_items
from earmark.storage import Catalog

ITEMS = {
    "captions": "kind, text",
    "qa": "category, question || ' → ' || answer",
    "entailment": "label, hypothesis",
    "instructions": "dimension, instruction || ' → ' || answer",
}


def _truth(path: Path) -> dict[str, dict]:
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {r["id"]: r for r in rows}


def _bench_truth(row: dict) -> str:
    """What benchmarks/quality/devset.py mixed into a clip, in plain words (the dev benchmark's truth records)."""
    lines = [f"truth: domain {row['domain']}, {row['len_s']:g} s"]
    for i, s in enumerate(row["speakers"], 1):
        said = "; ".join(
            f"{t['start_s']:g}-{t['end_s']:g} s: " + (f'"{t["text"]}"' if t["text"] else "(words not known)")
            for t in s["turns"]
        )
        lines.append(f"  voice {i} ({s['gender'] or 'gender not known'}, {s['group']}): {said}")
    if m := row["music"]:
        tags = "; ".join(f"{g}: {', '.join(v)}" for g, v in m["tags"].items()) or "no labels"
        drums = {True: "drums", False: "no drums", None: "drums not known"}[m["drum_heavy"]]
        lines.append(f"  music throughout ({m['file'].rsplit('/', 1)[-1]}, {m['pkg']}): {tags}; {drums}")
    for e in row["events"]:
        lines.append(f"  event {e['class']} at {e['start_s']:g}-{e['end_s']:g} s ({e['file'].rsplit('/', 1)[-1]})")
    if not row["speakers"] and not row["music"] and not row["events"]:
        lines.append("  nothing but faint room tone")
    lines.append(f"  room tone at {row['room']['noise_dbfs']:g} dBFS")
    return "\n  ".join(lines)


def _truth_line(row: dict | None) -> str:
    if row is None:
        return "truth: (clip not in the truth file)"
    if "speakers" in row:
        return _bench_truth(row)
    wins = " ".join("".join(c if f else "·" for c, f in zip("SMA", w)) for w in row.get("windows", []))
    mix = ", ".join(
        f"{k}={row[k]}"
        for k in (
            "len_s",
            "music_db",
            "sound_db",
            "noise_db",
            "speech_continuous",
            "speech_phone",
            "phone",
            "rt60_s",
            "drr_db",
        )
        if k in row
    )
    return f"truth: domain {row['domain']}; 2 s windows (S speech, M music, A sound): {wins}; mix: {mix}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", type=Path)
    ap.add_argument("--truth", type=Path, required=True, help="the dev-set script's JSON lines (id, domain, windows)")
    ap.add_argument("--version")
    ap.add_argument("--n", type=int, default=50, help="random kept items")
    ap.add_argument("--entailment", type=int, default=0, help="instead: this many whole kept entailment sets")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--blind", action="store_true", help="items and truth only: no expert facts (for a reviewer)")
    args = ap.parse_args()
    cat = Catalog(args.dataset_dir.parent, args.dataset_dir.name)
    v = args.version or cat.latest_version()
    truth = _truth(args.truth)
    evidence = {e.clip_id: e for e in from_table(ClipEvidence, cat.read("evidence", cat.version_shards(v)["evidence"]))}
    source = dict(cat.query(f"SELECT clip_id, source_path FROM {v}.clips"))
    domain = dict(cat.query(f"SELECT clip_id, domain FROM {v}.domain"))
    phrases = load_phrases("evidence")
    from earmark.stages.facts.render import render

    rng = random.Random(args.seed)
    if args.entailment:
        sets = cat.query(
            f"SELECT clip_id, list(label || ': ' || hypothesis ORDER BY label), any_value(premise) FROM {v}.entailment "
            f"WHERE item_id IN {kept_items(v)} GROUP BY 1 HAVING count(*) = 3 ORDER BY 1"
        )
        picked = rng.sample(sets, min(args.entailment, len(sets)))
        entries = [
            (clip, "entailment set", f"premise: {premise}\n  " + "\n  ".join(hyps)) for clip, hyps, premise in picked
        ]
    else:
        pool = []
        for table, cols in ITEMS.items():
            pool += [
                (clip, f"{table}/{kind}", text)
                for clip, kind, text in cat.query(
                    f"SELECT clip_id, {cols} FROM {v}.{table} WHERE item_id IN {kept_items(v)} ORDER BY item_id"
                )
            ]
        entries = rng.sample(pool, min(args.n, len(pool)))
    print(f"# {args.dataset_dir.name} {v}: {len(entries)} random kept entries (seed {args.seed})\n")
    for i, (clip, what, text) in enumerate(entries, 1):
        stem = Path(source.get(clip, "")).stem
        print(f"## {i}. {stem} ({what}; tagged {domain.get(clip)})\n")
        print(f"  {text}\n\n  {_truth_line(truth.get(stem))}")
        if args.blind:
            print()
            continue
        notes = render(evidence[clip], "long", phrases) if clip in evidence else "(no evidence)"
        print("  facts:\n    " + notes.replace("\n", "\n    ") + "\n")


if __name__ == "__main__":
    main()
