"""Are the timing words right? The region each content is placed in, against the mixes' truth.

    .venv/bin/python benchmarks/quality/timing_truth.py data/fresh9 [data/fresh10 ...] [--bar 0.5] [--wrong]

For every clip of each build and each content (speech, music, sound events) that the evidence places in time
(`render.speech_region`, `music_region`, `sound_region`: the regions every timing word of the items comes from),
the region the truth gives the same content (`render.when_region` over the truth's exact spans: a voice's turns,
the music bed, the events) is compared as the claim audit compares a timing claim with the evidence
(`judge._when`): the same region or one inside the other is right; anything else is wrong. A region that leaves
out part of where the content is heard ("near the start" of sounds at 1 s and at 5 s) is counted right but also
as incomplete. `--bar` reads every window from another probability (0.5: the rule before 2026-11-28).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from window_truth import evidence_with_truth, spans  # noqa: E402

from earmark.stages.facts import render  # noqa: E402
from earmark.stages.facts.render import View, music_region, sound_region, speech_region, when_region  # noqa: E402
from earmark.stages.filter.judge import THIRDS  # noqa: E402

REGIONS = {"speech": speech_region, "music": music_region, "sound": sound_region}


def compare(said: str, heard: str | None) -> tuple[bool, bool]:
    """(right, complete) of a stated region against the truth's."""
    if heard is None:
        return False, False
    if said == heard or (said == "most" and heard == "throughout"):
        return True, True
    if said in THIRDS and heard in THIRDS:
        a, b = THIRDS[said], THIRDS[heard]
        return (a <= b or b <= a), b <= a
    if said in THIRDS and heard == "several":
        return True, False  # one of the moments placed; the others left out
    return False, False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("datasets", type=Path, nargs="+")
    ap.add_argument("--bar", type=float, help="read the windows from this probability instead of WINDOW_BAR")
    ap.add_argument("--thr", type=float, default=0.6, help="the evidence's min_confidence")
    ap.add_argument("--wrong", action="store_true")
    a = ap.parse_args()
    if a.bar is not None:
        render.WINDOW_BAR, render.WINDOW_BAR_DEFAULT = {}, a.bar
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # placed, right, complete, clips with it
    wrong = []
    for ds in a.datasets:
        for ev, t in evidence_with_truth(ds):
            view = View(ev, a.thr)
            for what, region in REGIONS.items():
                truth_spans = spans(t, what)
                if not truth_spans:
                    continue
                tally[what][3] += 1
                said = region(view) if view.content("sound_events" if what == "sound" else what) == "present" else None
                if said is None:
                    continue
                heard = when_region(truth_spans, t["len_s"], windowed=False)
                ok, complete = compare(said, heard)
                tally[what][0] += 1
                tally[what][1] += ok
                tally[what][2] += ok and complete
                if a.wrong and not (ok and complete):
                    wrong.append(f"{ds.name}/{t['id']} {what}: said {said}, truth {heard} {truth_spans}")
    bars = f"{render.WINDOW_BAR_DEFAULT}" + "".join(f", {k} {b}" for k, b in render.WINDOW_BAR.items())
    print(f"builds: {', '.join(d.name for d in a.datasets)}; windows read from {bars}\n")
    print("| content | clips with it | placed in time | right | right and complete |\n|---|---|---|---|---|")
    for what, (n, ok, complete, clips) in tally.items():
        print(f"| {what} | {clips} | {n} | {ok} | {complete} |")
    for line in wrong:
        print(line)


if __name__ == "__main__":
    main()
