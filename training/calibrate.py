#!/usr/bin/env python3
"""Calibrate the domain tagger's clip probabilities: P(content present | clip probability), per head.

The MLP's clip probability (max over windows) is a score, not a probability: on the dev-like holdout a
sound probability of 0.7 is right far less often than 7 times in 10. The evidence states a content's
presence or absence only when the *calibrated* probability of what the domain code says reaches
`[evidence] presence_confidence`, so this file decides which tagger decisions reach a prompt.

Fitted on the `hold` split only (dev-like, realistic-level mixes of TRAIN sources, 40 clips per domain;
never the DEV split): isotonic regression of the true presence on the clip probability, per head, stored as
breakpoints that inference interpolates (`earmark.experts.learned.model.calibrated`).

  python training/eval_dev.py --split hold --json /tmp/eval_hold.json   # the shipped model's hold scores
  python training/calibrate.py /tmp/eval_hold.json                       # -> experts/learned/calibration.json
  python training/calibrate.py /tmp/eval_hold.json --report /tmp/eval_dev.json   # + DEV precision / coverage
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from earmark.experts.learned.model import CALIBRATION, HEADS, WEIGHTS, calibrate

CODE = "SMA"  # the domain code's letter of each head when present


def _load(path: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    d = json.loads(path.read_text())
    p = np.array([c["clip_p"] for c in d["clips"]], dtype=np.float64)
    t = np.array([[c["truth"][j] == CODE[j] for j in range(3)] for c in d["clips"]])
    return p, t, d


def fit(p: np.ndarray, t: np.ndarray) -> dict[str, dict[str, list[float]]]:
    """Per head: the isotonic fit's breakpoints (x increasing, y non-decreasing), clipped to [0.001, 0.999]."""
    from sklearn.isotonic import IsotonicRegression

    out = {}
    for j, h in enumerate(HEADS):
        iso = IsotonicRegression(out_of_bounds="clip", y_min=0.001, y_max=0.999).fit(p[:, j], t[:, j].astype(float))
        out[h] = {
            "x": [round(float(v), 6) for v in iso.X_thresholds_],
            "y": [round(float(v), 6) for v in iso.y_thresholds_],
        }
    return out


def report(cal: dict, thresholds: dict, p: np.ndarray, t: np.ndarray, bars=(0.6, 0.8, 0.9, 0.95)) -> str:
    """Precision and coverage of the presence / absence statements the evidence would make, per bar."""
    lines = ["| head | bar | clips with a statement | statements right | wrong |", "|---|---|---|---|---|"]
    for j, h in enumerate(HEADS):
        present = p[:, j] >= thresholds[h]
        post = np.array([calibrate(cal, h, v) for v in p[:, j]])
        conf = np.where(present, post, 1 - post)
        right = present == t[:, j]
        for bar in bars:
            said = conf >= bar
            prec = right[said].mean() if said.any() else float("nan")
            lines.append(
                f"| {h} | {bar} | {said.sum()} of {len(said)} ({said.mean():.0%}) | {prec:.1%} | {int((said & ~right).sum())} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("hold", type=Path, help="eval_dev.py --split hold --json output")
    ap.add_argument("--out", type=Path, default=CALIBRATION)
    ap.add_argument("--report", type=Path, help="an eval_dev.py --json output to report precision / coverage on")
    a = ap.parse_args()
    p, t, d = _load(a.hold)
    if len(p) < 100:
        print(f"warning: {a.hold} has only {len(p)} clips; calibrate on the hold split", file=sys.stderr)
    cal = {
        "fitted_on": f"hold split, {len(p)} clips",
        # the weights it was fitted for: tests/test_domain_probe.py checks the shipped pair matches
        "probe_weights_sha256": hashlib.sha256(WEIGHTS.read_bytes()).hexdigest(),
        "heads": fit(p, t),
    }
    a.out.write_text(json.dumps(cal, indent=1) + "\n")
    print(f"wrote {a.out}")
    print("\nhold (in-sample):\n" + report(cal, d["thresholds"], p, t))
    if a.report:
        pr, tr, dr = _load(a.report)
        print(f"\n{a.report} ({len(pr)} clips):\n" + report(cal, dr["thresholds"], pr, tr))


if __name__ == "__main__":
    main()
