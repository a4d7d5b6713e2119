"""Word counts of MECAT's test-set caption references per caption kind, as a small JSON the dataset card's and
the view's length plots compare earmark's captions against (so the core install needs no `mecat` wheel).

    .venv/bin/python benchmarks/quality/mecat_caption_lengths.py > stages/publish/data/mecat_caption_lengths.json

Reads the references shipped in the official `mecat` 1.1.0 wheel (test split, caption/<domain>.jsonl.gz; each
line {key: {kind: [refs…], …}}); a kind's histogram counts every non-empty reference in 1-word bins up to 60
(longer ones in the last bin).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

KINDS = ("short", "long", "speech", "music", "sound", "environment")
MAX_WORDS = 60


def main() -> int:
    import mecat

    root = Path(mecat.__file__).parent / "reference" / "caption" / "test"
    counts = {k: [0] * (MAX_WORDS + 1) for k in KINDS}
    for path in sorted(root.glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                if not line.strip():
                    continue
                for entry in json.loads(line).values():
                    for kind in KINDS:
                        refs = entry.get(kind) or []
                        for ref in refs if isinstance(refs, list) else [refs]:
                            n = len(str(ref).split())
                            if n:
                                counts[kind][min(n, MAX_WORDS)] += 1
    json.dump(
        {"source": "mecat 1.1.0 test references (caption)", "max_words": MAX_WORDS, "histograms": counts}, sys.stdout
    )
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
