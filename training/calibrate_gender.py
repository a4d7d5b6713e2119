"""Measure the gender rule of the evidence (earmark.stages.synthesize.evidence.calibrated_gender) on the DEV
speech groups with a known gender: per file, the pitch median (the speakers expert's pYIN) and EfficientAT mn04's
"Male speech, man speaking" / "Female speech, woman speaking" on the same 16 kHz audio the pipeline sees (the
expert's own `voice_gender_check`), then how often each rule states a gender and how often it is right.

    .venv/bin/python training/calibrate_gender.py [--corpus /work/data-cache/tagger-ev] [--per-group 40]

The DEV groups' genders come from their median F0 (tests/support/devset.py GENDER: only groups clearly on one
side of the adult ranges); a file's own pitch may lie elsewhere (a shout, a whisper). TRAIN groups carry no
gender; the check corpus is never used here. Figures: docs/benchmarks.md, "Gender second opinion".
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from earmark.experts.speakers import FMIN, pitch_track, voice_gender_check  # noqa: E402
from earmark.schemas.records import LabelProb  # noqa: E402
from earmark.stages.synthesize.evidence import calibrated_gender  # noqa: E402
from support.devset import GENDER  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=Path("/work/data-cache/tagger-ev"))
    ap.add_argument("--per-group", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    by: dict[str, list[dict]] = {}
    for line in (a.corpus / "sources.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["kind"] != "speech" or r["split"] != "dev":
            continue
        group = f"warzone-{r['path'].split('/')[1]}" if r["pkg"] == "warzone2100-data" else r["group"]
        if group in GENDER:
            by.setdefault(group, []).append(r)
    rng = random.Random(a.seed)
    rows = []
    for group, rs in sorted(by.items()):
        rng.shuffle(rs)
        for r in rs[: a.per_group]:
            x = np.load(a.corpus / "sources" / f"{r['uid']}.npy").astype(np.float32) / 32768.0
            if len(x) < 8000:  # under 0.5 s: the expert gives no second opinion either
                continue
            f0 = pitch_track(x.astype(np.float64))
            hz = f0[np.isfinite(f0) & (f0 > FMIN * 1.05)]
            if len(hz) < 5:
                continue
            rows.append((group, GENDER[group], float(np.median(hz)), voice_gender_check(x)))
    print(f"{len(rows)} files of {len(by)} DEV groups ({sum(g == 'male' for _, g, _, _ in rows)} male)\n")
    print("| rule | gender | stated | right | precision | of the files of that gender |")
    print("|---|---|---|---|---|---|")
    pitch_only = [LabelProb(label="male", prob=0.6), LabelProb(label="female", prob=0.4)]
    for name, second in (("pitch alone (before)", False), ("pitch + mn04 (now)", True)):
        said = []
        for _group, truth, pitch, check in rows:
            labels = pitch_only if pitch < 165 else pitch_only[::-1]
            out = calibrated_gender(labels, pitch, check if second else [])
            top = max(out, key=lambda lp: lp.prob)
            said.append((top.label if top.prob >= 0.9 else None, truth))
        for g in ("male", "female"):
            stated = [t for s, t in said if s == g]
            right = sum(t == g for t in stated)
            n = sum(t == g for _, t in said)
            prec = f"{right / len(stated):.3f}" if stated else "-"
            print(f"| {name} | {g} | {len(stated)} | {right} | {prec} | {n} |")


if __name__ == "__main__":
    main()
