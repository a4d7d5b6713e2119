"""An experiment, not shipped: a head beside the domain probe from the probe's three clip probabilities and YAMNet's
AudioSet scores, per content one logistic regression (-> /tmp/domain_head.json).

Result (2026-11-27, docs/benchmarks.md): on the DEV mixes it left the accuracy where the probe alone has it,
78.1 % (S0A 56 %, SMA 56 -> 62 %, 0M0 75 -> 62 %), although it fits the TRAIN holdout to 88.8 %: YAMNet's clip
scores do not separate the game effects under speech that the probe misses. The evidence does not use it;
YAMNet's named events make sound present where they are stated (stages/synthesize/evidence.py).

    python training/build_corpus.py mix --tag tagger-ev --splits hold,dev     # the domain mixes (after scan, espeak)
    python training/train_domain_head.py --tag tagger-ev                      # fits on `hold`, reports `dev`

Data: `hold` (40 clips per domain, TRAIN sources; realistic, unambiguous labels) fits; `dev` (16 per domain, DEV
packages only) is only scored. Features per clip (`earmark.experts.yamnet.domain_head.features`): the logits of
the probe's calibrated speech / music / sound probabilities, and from YAMNet the best frame score and the mean
frame score of the speech classes, of the music classes and of the sound-event classes (by the AudioSet routing of
experts/paper/audioset.py), and the mean of the three best event classes' clip scores. Each content's head is a
logistic regression (L2, C = 1, standardised features): a calibrated P(present) in the same place as the probe's.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import soundfile as sf

from earmark.experts.yamnet.model import MODEL_SHA256, yamnet

HEADS = ("speech", "music", "sound")


@functools.cache
def _routes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices of YAMNet's speech, music and sound-event classes (the AudioSet routing of experts/paper)."""
    from earmark.experts.paper.audioset import category
    from earmark.experts.yamnet.events import class_names

    cats = [category(n) for n in class_names()]
    return tuple(np.array([i for i, c in enumerate(cats) if c == k]) for k in ("speech", "music", "sound"))  # type: ignore[return-value]


def _logit(p: float) -> float:
    p = min(max(float(p), 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def features(probe: Mapping[str, float], frame_scores: np.ndarray) -> np.ndarray:
    """The head's inputs for one clip: 3 probe logits, then per route (speech, music, sound) YAMNet's best and mean
    frame score, then the mean of the three best sound-event classes' clip scores."""
    fs = np.asarray(frame_scores, np.float32)
    out = [_logit(probe[h]) for h in HEADS]
    for idx in _routes():
        per_frame = fs[:, idx].max(axis=1)
        out += [float(per_frame.max()), float(per_frame.mean())]
    top = np.sort(fs[:, _routes()[2]].max(axis=0))[-3:]
    out.append(float(top.mean()))
    return np.array(out, np.float64)


def predict(meta: Mapping, x: np.ndarray) -> np.ndarray:
    """P(present) of speech, music and sound events for one clip's `features`."""
    z = (np.asarray(x) - np.asarray(meta["mean"])) / np.asarray(meta["std"])
    out = []
    for h in HEADS:
        w = meta["heads"][h]
        out.append(1.0 / (1.0 + math.exp(-(float(np.dot(w["coef"], z)) + w["intercept"]))))
    return np.array(out)


DOMAINS = ["000", "S00", "0M0", "00A", "SM0", "S0A", "0MA", "SMA"]


def _clip(path: str) -> dict:
    from earmark.experts.learned.model import tag_clip

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    x, sr = sf.read(path, dtype="float32")
    assert sr == 16000, path
    probe = tag_clip(x)
    fs = yamnet().score(x, threads=1).scores
    return {"probe": probe["calibrated"], "probe_domain": probe["domain"], "yamnet": fs.astype(np.float16)}


def load(cache: Path, tag: str, split: str, jobs: int) -> tuple[list[dict], list[dict]]:
    recs = [json.loads(line) for line in open(cache / tag / "mixes" / f"{split}.jsonl")]
    out = cache / tag / f"domain_head_{split}_{MODEL_SHA256[:12]}.npz"
    if out.exists():
        z = np.load(out, allow_pickle=True)
        return recs, list(z["rows"])
    paths = [str(cache / tag / "mixes" / split / f"{r['id']}.wav") for r in recs]
    with ProcessPoolExecutor(jobs) as ex:
        rows = list(ex.map(_clip, paths, chunksize=4))
    np.savez(out, rows=np.array(rows, dtype=object))
    return recs, rows


def code(p: np.ndarray) -> str:
    return "".join(c if v >= 0.5 else "0" for c, v in zip("SMA", p))


def report(name: str, recs: list[dict], pred: list[str]) -> dict:
    true = [r["domain"] for r in recs]
    acc = float(np.mean([a == b for a, b in zip(true, pred)]))
    per = {d: float(np.mean([p == d for t, p in zip(true, pred) if t == d])) for d in DOMAINS if d in true}
    print(f"{name}: accuracy {acc * 100:.1f} % | " + " ".join(f"{d} {v * 100:.0f}" for d, v in per.items()))
    return {"accuracy": acc, "per_domain": per}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("EARMARK_DATA_CACHE", "/work/data-cache")))
    ap.add_argument("--tag", default="tagger-ev")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("/tmp/domain_head.json"))
    a = ap.parse_args()
    from sklearn.linear_model import LogisticRegression

    hold, hrows = load(a.cache, a.tag, "hold", a.jobs)
    dev, drows = load(a.cache, a.tag, "dev", a.jobs)
    Xh = np.array([features(r["probe"], r["yamnet"]) for r in hrows])
    Xd = np.array([features(r["probe"], r["yamnet"]) for r in drows])
    mu, sd = Xh.mean(axis=0), Xh.std(axis=0) + 1e-6
    heads = {}
    for j, h in enumerate(HEADS):
        y = np.array([r["domain"][j] != "0" for r in hold])
        lr = LogisticRegression(C=1.0, max_iter=2000).fit((Xh - mu) / sd, y)
        heads[h] = {"coef": lr.coef_[0].round(6).tolist(), "intercept": round(float(lr.intercept_[0]), 6)}
    meta = {"model_sha256": MODEL_SHA256, "mean": mu.round(6).tolist(), "std": sd.round(6).tolist(), "heads": heads}
    probe_dev = report("probe alone, dev", dev, [r["probe_domain"] for r in drows])
    head_dev = report("probe + YAMNet head, dev", dev, [code(predict(meta, x)) for x in Xd])
    report("probe + YAMNet head, hold (fitted on)", hold, [code(predict(meta, x)) for x in Xh])
    meta["measured"] = {"dev_probe": probe_dev, "dev_head": head_dev, "fit": f"{a.tag}/hold ({len(hold)} clips)"}
    a.out.write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
