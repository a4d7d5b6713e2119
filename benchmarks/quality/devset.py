"""A real-audio dev benchmark with full ground truth: clips mixed from DEV-package sources, and what is in each.

    .venv/bin/python benchmarks/quality/devset.py --corpus /work/data-cache/tagger-ev --out data/devset-input \\
        --per-domain 6 [--seed 7] [--events events.jsonl] [--music music.jsonl]
    .venv/bin/python benchmarks/quality/devset.py --corpus /work/data-cache/checkset --split check \\
        --out data/checkbench-input --per-domain 6      # the independent check set (benchmarks/quality/checkset_corpus.py)

Every clip is mixed here from the decoded sources of the corpus `training/build_corpus.py scan` wrote (DEV
packages only: never trained or tuned on; the held-out packages are never in the corpus), so what it contains is
known exactly. `<out>/truth.jsonl` holds one line per clip — the record `benchmarks/quality/devset_truth.py` and the
by-hand sheet check items against:

    id, domain, len_s,
    speakers: [{group, gender, turns: [{start_s, end_s, text, file}]}]   # text: the words said, where known
    music:    {file, pkg, start_s, end_s, drum_heavy, tags: {group: [tag, ...]}} or null   # drum_heavy: null = unknown
    events:   [{class, start_s, end_s, file, pkg}]                         # AudioSet class of a labelled effect
    room:     {noise_dbfs}

What is known, and how:
- the check corpus (`--split check`, from packages nothing in earmark was trained or tuned on) carries the words
  (`text`, English) and `gender` of its speech in sources.jsonl; the rules below are the DEV corpus's;
- the words: Warzone 2100's message voice (the text in the comment of its audio/audio.cfg line) and KTuberling's
  English words (the file name); other speech (Tux Paint, KTuberling in other languages) has no text and is not
  English, which Whisper tiny.en cannot transcribe;
- gender: per speaker group, from the median F0 of 12 of its files (`GENDER`, measured once by
  `--measure-groups`); groups whose files disagree or lie between 130 and 185 Hz, or sound like children, have
  no gender truth;
- events: only effects with a class from the event tagger's path rules (training/event_labels.py, the `event`
  field of sources.jsonl; `--events` uid → class adds or overrides), placed at a known time, level chosen to be
  audible over the other stems;
- music tags: where the music labels (`--music`: uid → {group: [tags]}) know them; otherwise empty (unknown, not
  "absent").
Two speaker groups in one clip are two voices (different packages or languages).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # support: not installed
from support.devset import DOMAINS, SR, Sources, make_clip, measure_groups  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True, help="build_corpus.py's tagger folder (sources.jsonl)")
    ap.add_argument("--split", default="dev", help='which sources to mix: "dev", or "check" (checkset_corpus.py)')
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--per-domain", type=int, default=6)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--events", type=Path, help="JSON lines {uid, class}: event classes beside sources.jsonl's")
    ap.add_argument("--music", type=Path, help="JSON lines {uid, tags: {group: [tag]}}: DEV music with known tags")
    ap.add_argument("--measure-groups", action="store_true", help="print the speech groups' median F0 and stop")
    a = ap.parse_args()
    events = {}
    if a.events:
        events = {r["uid"]: r["class"] for r in map(json.loads, a.events.read_text().splitlines()) if r.get("class")}
    music = {}
    if a.music:
        music = {r["uid"]: r["tags"] for r in map(json.loads, a.music.read_text().splitlines())}
    src = Sources(a.corpus, events, music, a.split)
    if a.measure_groups:
        return measure_groups(src)
    if not src.events:
        raise SystemExit(
            f"no {a.split} effect has an event class: scan the corpus with training/event_labels.py, or --events"
        )
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for d_i, domain in enumerate(DOMAINS):
        for i in range(a.per_domain):
            rng = np.random.default_rng([a.seed, d_i, i])
            clip_id = f"{a.split}_{domain}_{i:02d}"
            y, truth = make_clip(src, domain, rng, clip_id)
            sf.write(a.out / f"{clip_id}.wav", y, SR, subtype="PCM_16")
            rows.append(truth)
    with open(a.out / "truth.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"{len(rows)} clips in {a.out} (truth.jsonl beside them)")


if __name__ == "__main__":
    main()
