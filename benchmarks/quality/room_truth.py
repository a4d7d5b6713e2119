"""The blind room estimates of a build (SNR, RT60) beside what the dev-set script mixed into each clip.

    .venv/bin/python benchmarks/quality/room_truth.py /tmp/devdata2/devbuild --truth /work/data-cache/tagger/mixes/dev.jsonl

The truth file (training/build_corpus.py) gives per clip its domain, the room tone's level (`noise_db`), the
sources' levels (`music_db`, `sound_db`) and, for a reverberated clip, the drawn `rt60_s` and `drr_db`. Per clip
this prints the estimate, the band word it falls in (stages/facts/bands.py), and whether the evidence states it
(confidence ≥ `[evidence] min_confidence`); then counts the "noisy" and "dry" words by whether the clip has
music or events, against the mix: "noisy" is wrong where the room tone lies ≥ 25 dB under every source, "dry"
is wrong on a clip reverberated with a drawn RT60 ≥ 0.4 s.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from earmark.schemas import ClipEvidence, from_table
from earmark.stages.facts import bands
from earmark.storage import Catalog


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", type=Path)
    ap.add_argument("--truth", type=Path, required=True)
    ap.add_argument("--version")
    ap.add_argument("--min-confidence", type=float, default=0.6)
    args = ap.parse_args()
    cat = Catalog(args.dataset_dir.parent, args.dataset_dir.name)
    v = args.version or cat.latest_version()
    evidence = from_table(ClipEvidence, cat.read("evidence", cat.version_shards(v)["evidence"]))
    source = dict(cat.query(f"SELECT clip_id, source_path FROM {v}.clips"))
    truth = {r["id"]: r for r in (json.loads(line) for line in args.truth.read_text().splitlines() if line.strip())}
    counts: Counter[tuple[str, str, str]] = Counter()
    print(f"# {args.dataset_dir.name} {v}\n")
    print(
        "| clip | truth | noise_db | music_db | sound_db | rt60 drawn | SNR est. | word | stated | RT60 est. | word | stated |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for ev in sorted(evidence, key=lambda e: Path(source[e.clip_id]).stem):
        stem = Path(source[ev.clip_id]).stem
        t = truth.get(stem)
        if t is None or t["domain"] == "000":
            continue
        others = t["domain"][1:] != "00"
        row = [stem, t["domain"], t.get("noise_db"), t.get("music_db"), t.get("sound_db"), t.get("rt60_s")]
        for fact, band in (("acoustics.snr_db", "noise"), ("acoustics.rt60_s", "reverb")):
            f = ev.get(fact)
            value = None if f is None else f.number
            word = bands.word(band, value)
            stated = f is not None and (f.confidence is None or f.confidence >= args.min_confidence)
            row += [value, word or "–", "yes" if stated and word else "no"]
            if word in ("noisy", "dry"):
                levels = [x for x in (t.get("music_db"), t.get("sound_db")) if x is not None]
                if word == "noisy":
                    wrong = bool(levels) and all(x - t["noise_db"] >= 25 for x in levels)
                else:
                    wrong = (t.get("rt60_s") or 0) >= 0.4
                key = ("with music/events" if others else "speech alone", word, "stated" if stated else "not stated")
                counts[(*key[:2], f"{key[2]}, {'wrong' if wrong else 'not shown wrong'}")] += 1
        print("| " + " | ".join("–" if x is None else str(x) for x in row) + " |")
    print("\n| clips | word | verdict vs the mix | n |\n|---|---|---|---|")
    for (who, word, verdict), n in sorted(counts.items()):
        print(f"| {who} | {word} | {verdict} | {n} |")


if __name__ == "__main__":
    main()
