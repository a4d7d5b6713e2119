"""The margin filter's backends on planted swaps in a real build: which one tells a clip's own caption from another's.

    .venv/bin/python benchmarks/quality/margin_audio.py data/fresh4 [--version v0001] [--swap 0.25] [--seed 0]

From a built dataset (its LLM-written long captions, evidence and `yamnet` table), a share `--swap` of the
clips get the long caption of another clip whose domain differs (a planted mismatch, as MECAT's filter is meant to
catch); the others keep their own. Both offline backends then score every caption against its clip, with the
filter's own `margin_checks` (6 negatives, seeded by item id):

- `evidence-sbert`: the caption against the clip's rendered expert evidence;
- `yamnet`: the caption's closeness to YAMNet's class names against the clip's YAMNet scores (from the audio).

Printed per backend: ROC AUC of the margin separating own captions from swapped ones, and at the backend's
default threshold the share of swaps rejected (recall) and of own captions kept.
"""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from earmark.core.config import FilterSection  # noqa: E402
from earmark.metrics.similarity import embed, load_sbert  # noqa: E402
from earmark.prompts import load_phrases  # noqa: E402
from earmark.schemas import ClipEvidence, from_table  # noqa: E402
from earmark.schemas.records import Caption  # noqa: E402
from earmark.stages.filter.margin import EvidenceSbertBackend, YamnetSbertBackend, margin_checks  # noqa: E402
from earmark.storage import Catalog  # noqa: E402


def auc(pos: list[float], neg: list[float]) -> float:
    """P(a random own caption's margin > a random swapped one's)."""
    p, n = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (p.size * n.size))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="a dataset folder (data_root/dataset)")
    ap.add_argument("--version", default=None)
    ap.add_argument("--swap", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--all-writers", action="store_true", help="rule-written long captions too (the filter compares only LLM ones)"
    )
    a = ap.parse_args()
    folder = Path(a.data)
    cat = Catalog(folder.parent, folder.name)
    v = a.version or cat.latest_version()
    shards = cat.version_shards(v)
    caps = [
        c
        for c in from_table(Caption, cat.read("captions", shards["captions"]))
        if c.kind == "long" and (a.all_writers or c.model != "rule")
    ]
    evidence = {e.clip_id: e for e in from_table(ClipEvidence, cat.read("evidence", shards["evidence"]))}
    got = cat.read("yamnet", shards["yamnet"], ["clip_id", "clip_max"]).to_pydict()
    yam = dict(zip(got["clip_id"], got["clip_max"]))
    by_clip = {}
    for c in sorted(caps, key=lambda c: c.item_id):
        by_clip.setdefault(c.clip_id, c)
    clips = sorted(c for c in by_clip if c in evidence and c in yam)
    rng = random.Random(a.seed)
    swapped = set(rng.sample(clips, int(round(a.swap * len(clips)))))
    planted = []
    for cid in clips:
        c = by_clip[cid]
        if cid in swapped:
            others = [o for o in clips if evidence[o].domain != evidence[cid].domain] or [o for o in clips if o != cid]
            c = c.model_copy(update={"text": by_clip[rng.choice(others)].text})
        planted.append(c.model_copy(update={"model": "compared"}))  # every caption compared, whoever wrote it
    model = load_sbert()

    def emb(texts):
        return embed(model, list(texts))

    phrases = load_phrases("evidence")
    print(f"{a.data} {v}: {len(planted)} long captions, {len(swapped)} swapped with another domain's clip\n")
    print("| backend | ROC AUC own vs swapped | threshold | swaps rejected | own kept |")
    print("|---|---|---|---|---|")
    for name, backend in (
        ("evidence", EvidenceSbertBackend(evidence, emb, phrases)),
        ("yamnet", YamnetSbertBackend(yam, emb)),
    ):
        cfg = FilterSection(margin_backend=name)
        rows = {r.item_id: r for r in margin_checks(planted, backend, cfg)}
        own = [rows[c.item_id].score for c in planted if c.clip_id not in swapped and rows[c.item_id].score is not None]
        bad = [rows[c.item_id].score for c in planted if c.clip_id in swapped and rows[c.item_id].score is not None]
        rej = np.mean([not rows[c.item_id].keep for c in planted if c.clip_id in swapped])
        kept = np.mean([rows[c.item_id].keep for c in planted if c.clip_id not in swapped])
        from earmark.stages.filter.margin import threshold

        print(f"| {backend.check} | {auc(own, bad):.3f} | {threshold(cfg):g} | {rej:.2f} | {kept:.2f} |")


if __name__ == "__main__":
    main()
