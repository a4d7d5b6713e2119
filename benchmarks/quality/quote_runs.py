"""Would runs of sure words inside a phrase make right quotes? Whisper's words against the mixes' truth.

    .venv/bin/python benchmarks/quality/quote_runs.py data/devq [data/fresh4 ...] [--wrong] [--explore --min-words 3]

A quote is made today only of a whole phrase whose every word was heard at ≥ 0.95 (`evidence.speech`). A phrase
with one unsure word ("Sue" in "Sue, take the bag") yields no quote at all. This script takes every phrase Whisper
heard in each build's `asr` table (cut as `evidence.speech.phrases` cuts it), finds the maximal runs of consecutive
words each heard at ≥ BAR and each an English word, and scores each run as a quote against the words said in its
span (±0.5 s, the truth's turns; `devset_truth.quote_wer`): right at WER ≤ 0.2. Runs that are a whole phrase are
counted apart from runs that are part of one. Clips whose transcript is flagged as made up
(`asr_check.hallucination_score` above 0.05) are left out, as the evidence leaves their quotes out.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from devset_truth import WORD_TIME_S, quote_wer, words  # noqa: E402

from earmark.stages.synthesize.evidence.speech import QUOTE_CALIBRATION, RUN_BAR, not_words, phrases, pieces  # noqa: E402
from earmark.storage import Catalog  # noqa: E402

BARS = (0.9, 0.95, 0.98)
MAX_HALLUCINATION = 0.05  # RUN_CONFIDENCE 0.95 × (1 − h) ≥ render.QUOTE_CONFIDENCE (0.9) needs h ≤ 0.053


class Word:
    def __init__(self, d: dict) -> None:
        self.word, self.start_s, self.end_s, self.prob = d["word"], d["start_s"], d["end_s"], d["prob"]


def runs(phrase: list[Word], bar: float, min_words: int) -> list[list[Word]]:
    """Maximal runs of consecutive words heard at ≥ bar that are English words, at least min_words long."""
    out: list[list[Word]] = [[]]
    for w in phrase:
        if w.prob >= bar and not not_words(w.word):
            out[-1].append(w)
        elif out[-1]:
            out.append([])
    return [r for r in out if len(r) >= min_words]


def candidates(phrase: list[Word], explore: bool, min_words: int) -> list[tuple[float, list[Word], str]]:
    """(bar, words, whole or part) of each candidate quote of the phrase: the shipped rule (`speech.pieces`: whole
    phrases at ≥ 0.95, trimmed runs at RUN_BAR), or with `explore` untrimmed runs at every bar of BARS."""
    if not explore:
        out = []
        for piece, run in pieces(phrase):
            if run is None and min(w.prob for w in piece) >= QUOTE_CALIBRATION[0][0]:
                out.append((QUOTE_CALIBRATION[0][0], piece, "whole phrase"))
            elif run:
                out.append((RUN_BAR, piece, "run inside a phrase (shipped)"))
        return out
    return [
        (bar, run, "whole phrase" if len(run) == len(phrase) else "part of a phrase")
        for bar in BARS
        for run in runs(phrase, bar, min_words)
    ]


def said_in(truth: dict, a: float, b: float) -> list[str] | None:
    turns = sorted((t for s in truth["speakers"] for t in s["turns"]), key=lambda t: t["start_s"])
    heard = [t for t in turns if min(b, t["end_s"]) - max(a, t["start_s"]) > -WORD_TIME_S]
    if not heard or not all(t["text"] for t in heard):
        return None
    return [w for t in heard for w in words(t["text"])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("datasets", type=Path, nargs="+")
    ap.add_argument("--min-words", type=int, default=3, help="with --explore: the shortest run")
    ap.add_argument("--wrong", action="store_true", help="list the wrong runs")
    ap.add_argument("--explore", action="store_true", help="untrimmed runs at each bar of BARS, not the shipped rule")
    a = ap.parse_args()
    tally: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0])
    wrong: list[str] = []
    clips_quoted: dict[tuple, set] = defaultdict(set)
    for ds in a.datasets:
        truth = {
            (r := json.loads(line))["id"]: r
            for line in (ds.parent / f"{ds.name}-input" / "truth.jsonl").read_text().splitlines()
        }
        cat = Catalog(ds.parent, ds.name)
        v = cat.latest_version()
        shards = cat.version_shards(v)
        name = {c: Path(p).stem for c, p in cat.query(f"SELECT clip_id, source_path FROM {v}.clips")}
        checks = {
            r["clip_id"]: r["hallucination_score"] for r in cat.read("asr_check", shards["asr_check"]).to_pylist()
        }
        for row in cat.read("asr", shards["asr"]).to_pylist():
            clip = name.get(row["clip_id"], "")
            if clip not in truth or checks.get(row["clip_id"], 1.0) > MAX_HALLUCINATION:
                continue
            for phrase in phrases([Word(w) for w in row["words"]]):
                for bar, run, whole in candidates(phrase, a.explore, a.min_words):
                    said = said_in(truth[clip], run[0].start_s, run[-1].end_s)
                    if said is None:
                        continue
                    quote = " ".join(w.word.strip() for w in run)
                    e = quote_wer(words(quote), said)
                    ok = e <= 0.2
                    tally[(bar, whole)][0] += 1
                    tally[(bar, whole)][2] += e == 0
                    tally[(bar, whole)][1] += ok
                    if ok:
                        clips_quoted[(bar, whole)].add((ds.name, clip))
                    if not ok and a.wrong:
                        wrong.append(f"{bar} {ds.name}/{clip} {whole}: {quote!r} / said {' '.join(said)!r}")
    rule = f"untrimmed runs of ≥ {a.min_words} words" if a.explore else "the shipped rule (speech.pieces)"
    print(f"builds: {', '.join(d.name for d in a.datasets)}; {rule}\n")
    print(
        "| every word at ≥ | run | runs | right (WER ≤ 0.2) | share | exact (WER 0) | clips with a right run |\n"
        "|---|---|---|---|---|---|---|"
    )
    for (bar, whole), (n, ok, exact) in sorted(tally.items()):
        print(f"| {bar} | {whole} | {n} | {ok} | {ok / n:.3f} | {exact} | {len(clips_quoted[(bar, whole)])} |")
    for line in wrong:
        print(line)


if __name__ == "__main__":
    main()
