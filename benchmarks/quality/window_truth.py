"""How often the tagger's 2 s content windows are right, by their probability: the bar the timing words read at.

    .venv/bin/python benchmarks/quality/window_truth.py data/devq [data/fresh4 ...]

Every `content.window` fact of each build (the domain tagger's per-window speech / music / sound label, stored
from probability 0.5) against the mixes' truth (`DIR-input/truth.jsonl`): a window is right when the truth has
that content for more than a quarter second inside it (a voice's turn, the music bed, a sound event). The timing
words of every item ("near the start", "for most of the clip", "throughout") are read from the windows at or above
`render.WINDOW_BAR`.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from earmark.schemas import ClipEvidence, from_table
from earmark.storage import Catalog

BINS = (0.95, 0.9, 0.8, 0.5)
OVERLAP_S = 0.25


def spans(truth: dict, label: str) -> list[tuple[float, float]]:
    if label == "speech":
        return [(t["start_s"], t["end_s"]) for s in truth["speakers"] for t in s["turns"]]
    if label == "music":
        return [(truth["music"]["start_s"], truth["music"]["end_s"])] if truth["music"] else []
    return [(e["start_s"], e["end_s"]) for e in truth["events"]]


def evidence_with_truth(ds: Path) -> Iterator[tuple[ClipEvidence, dict]]:
    """Each clip's evidence in the build's latest version, with its mix's truth (`DIR-input/truth.jsonl`)."""
    cat = Catalog(ds.parent, ds.name)
    v = cat.latest_version()
    truth = {
        (r := json.loads(line))["id"]: r
        for line in (ds.parent / f"{ds.name}-input" / "truth.jsonl").read_text().splitlines()
    }
    name = {c: Path(p).stem for c, p in cat.query(f"SELECT clip_id, source_path FROM {v}.clips")}
    for ev in from_table(ClipEvidence, cat.read("evidence", cat.version_shards(v)["evidence"])):
        if (t := truth.get(name.get(ev.clip_id, ""))) is not None:
            yield ev, t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("datasets", type=Path, nargs="+")
    a = ap.parse_args()
    tally: dict[tuple[str, float], list[int]] = defaultdict(lambda: [0, 0])
    for ds in a.datasets:
        for ev, t in evidence_with_truth(ds):
            for f in ev.all("content.window"):
                if not f.subject or f.value not in ("speech", "music", "sound"):
                    continue
                lo, hi = (float(x) for x in f.subject.split("-"))
                ok = any(s < hi - OVERLAP_S and e > lo + OVERLAP_S for s, e in spans(t, f.value))
                k = next(b for b in BINS if (f.number or 0.0) >= b)
                tally[(f.value, k)][0] += 1
                tally[(f.value, k)][1] += ok
    print(f"builds: {', '.join(d.name for d in a.datasets)}\n")
    print("| window label | probability from | windows | right | share |\n|---|---|---|---|---|")
    for (label, k), (n, ok) in sorted(tally.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        print(f"| {label} | {k} | {n} | {ok} | {ok / n:.3f} |")


if __name__ == "__main__":
    main()
