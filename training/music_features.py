"""Per-window musicnn features of the labelled music clips, cached per split (the inference code computes them).

    python training/music_features.py [--splits train cal dev real] [--part 0/2]

For every clip of <cache>/music_tags/{renders,real}/<split>.jsonl: the 2 s windows (experts/learned/windows.py)
and the pooled MTT and MSD mid-end features of each (experts/learned/musictags/model.py `window_pools`, float16), saved
as <cache>/music_tags/features/<split>[.part-i-of-n].npz with the clip index of every window. Parts let two
processes share the work; `load_split` merges them.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import soundfile as sf

from music_corpus import cache_dir

SPLIT_DIRS = {"train": "renders", "cal": "renders", "dev": "renders", "real": "real"}
SPLIT_DIRS.update({s + "2": "renders" for s in ("train", "cal", "dev")})


def clips(cache: Path, split: str) -> list[dict]:
    index = cache / SPLIT_DIRS[split] / f"{split}.jsonl"
    return [json.loads(line) for line in index.read_text().splitlines()] if index.exists() else []


def audio(cache: Path, row: dict) -> np.ndarray:
    x, sr = sf.read(cache / SPLIT_DIRS[row["split"]] / row["split"] / f"{row['id']}.flac", dtype="float32")
    assert sr == 16000, row["id"]
    return x if x.ndim == 1 else x.mean(axis=1)


def extract(cache: Path, split: str, part: tuple[int, int] = (0, 1)) -> Path:
    from earmark.experts.learned.musicnn import Musicnn
    from earmark.experts.learned.musictags.model import window_pools

    mtt, msd = Musicnn("MTT_musicnn"), Musicnn("MSD_musicnn")
    rows = clips(cache, split)[part[0] :: part[1]]
    out = cache / "features" / (f"{split}.part-{part[0]}-of-{part[1]}.npz" if part[1] > 1 else f"{split}.npz")
    out.parent.mkdir(parents=True, exist_ok=True)
    pm, ps, ids, starts = [], [], [], []
    t0 = time.time()
    for n, row in enumerate(rows):
        bounds, a, b = window_pools(audio(cache, row), mtt, msd)
        pm.append(a.astype(np.float16))
        ps.append(b.astype(np.float16))
        ids += [row["id"]] * len(bounds)
        starts += [s / 16000 for s, _ in bounds]
        if n % 200 == 0:
            print(f"{split} {part}: {n}/{len(rows)} clips, {time.time() - t0:.0f} s", flush=True)
    np.savez(out, mtt=np.concatenate(pm), msd=np.concatenate(ps), ids=np.array(ids), starts=np.array(starts))
    print(f"{split} {part}: {len(rows)} clips in {time.time() - t0:.0f} s -> {out}")
    return out


def load_split(cache: Path, split: str) -> dict[str, np.ndarray]:
    """The split's window features (parts merged): mtt, msd (n, 1506) float32, ids, starts."""
    d = cache / "features"
    files = [d / f"{split}.npz"] if (d / f"{split}.npz").exists() else sorted(d.glob(f"{split}.part-*.npz"))
    if not files:
        raise FileNotFoundError(f"no features for {split} under {d}: run training/music_features.py")
    zs = [np.load(f) for f in files]
    return {k: np.concatenate([z[k] for z in zs]) for k in ("mtt", "msd", "ids", "starts")}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=None)
    ap.add_argument("--splits", nargs="+", default=["train", "cal", "dev", "real", "train2", "cal2", "dev2"])
    ap.add_argument("--part", default="0/1", help="i/n: this process takes every n-th clip from the i-th")
    a = ap.parse_args(argv)
    part = tuple(int(v) for v in a.part.split("/"))
    for split in a.splits:
        if clips(cache_dir(a.cache), split):
            extract(cache_dir(a.cache), split, part)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
