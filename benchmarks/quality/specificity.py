"""How specific a build's kept captions are: the share that names what a tagger heard, and texts shared by clips.

    .venv/bin/python benchmarks/quality/specificity.py data/devbench [--version v0001] [--json out.json]

- **Named**: of the kept sound and music captions, and the long captions of clips with sound events or music,
  the share whose claims (table `claims`, supported ones) include a tagger class: an event, an instrument, a
  genre or a mood. Quoted words are claims of another type and do not count.
- **Shared texts**: kept caption texts (digits masked: "at about 2 s" and "at about 6 s" are one text) that
  appear on clips whose facts of that caption kind differ — a text that fits two different clips describes
  neither. The facts of a kind are those the rule-written captions of the kind are made from (render.py's view
  of the kind); absence sentences are left out (MECAT states absence in the same words for every clip).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

from earmark.prompts import load_phrases
from earmark.schemas import ClipEvidence, from_table
from earmark.stages.facts.render import render
from earmark.stages.publish import kept_items
from earmark.storage import Catalog

NAMED = ("event", "instrument", "genre", "mood")


def masked(text: str) -> str:
    return re.sub(r"\d+(?:\.\d+)?", "#", text.lower()).strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", type=Path)
    ap.add_argument("--version")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    cat = Catalog(a.dataset_dir.parent, a.dataset_dir.name)
    v = a.version or cat.latest_version()
    kept = kept_items(v)
    caps = cat.query(
        f"SELECT item_id, clip_id, kind, text, prompt_name FROM {v}.captions WHERE item_id IN {kept} ORDER BY item_id"
    )
    named_ids = {
        r[0]
        for r in cat.query(
            f"SELECT DISTINCT item_id FROM {v}.claims WHERE item_table = 'captions' AND verdict = 'supported' "
            f"AND claim_type IN {NAMED}"
        )
    }
    evidence = {e.clip_id: e for e in from_table(ClipEvidence, cat.read("evidence", cat.version_shards(v)["evidence"]))}
    phrases = load_phrases("evidence")
    has = {c: (ev.present("sound_events"), ev.present("music")) for c, ev in evidence.items()}
    pool = [
        (i, k)
        for i, c, k, _, p in caps
        if p not in ("absent_rule", "silence_rule")
        and (k in ("sound", "music") or (k == "long" and any(has.get(c, ()))))
    ]
    by_kind: dict[str, list[bool]] = defaultdict(list)
    for item, kind in pool:
        by_kind[kind].append(item in named_ids)
    n_named = sum(sum(x) for x in by_kind.values())
    n_pool = sum(len(x) for x in by_kind.values())
    print(f"{a.dataset_dir.name} {v}: {len(caps)} kept captions\n")
    print("| captions | kept | naming a tagger class | share |\n|---|---|---|---|")
    for kind, xs in sorted(by_kind.items()):
        print(f"| {kind} | {len(xs)} | {sum(xs)} | {sum(xs) / len(xs):.2f} |")
    print(f"| **all** | {n_pool} | {n_named} | {n_named / max(n_pool, 1):.2f} |\n")
    texts: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for _, clip, kind, text, prompt in caps:
        if prompt not in ("absent_rule", "silence_rule") and clip in evidence:
            texts[(kind, masked(text))][clip] = render(evidence[clip], kind, phrases)
    shared = {key: clips for key, clips in texts.items() if len(clips) > 1 and len(set(clips.values())) > 1}
    print(f"caption texts shared by clips whose facts differ (digits masked): {len(shared)}")
    for (kind, text), clips in sorted(shared.items()):
        print(f"  {kind}: {text!r} on {len(clips)} clips")
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "version": v,
                    "named": {k: [len(x), sum(x)] for k, x in by_kind.items()},
                    "named_share": round(n_named / max(n_pool, 1), 4),
                    "shared_texts": [[k, t, len(c)] for (k, t), c in sorted(shared.items())],
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
