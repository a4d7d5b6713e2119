"""Per-fact accuracy of a build over the real-audio dev benchmark, against what was really mixed into each clip.

    .venv/bin/python benchmarks/quality/devset_truth.py data/devbench --truth data/devbench-input/truth.jsonl \\
        [--version v0001] [--json benchmarks/results/devset_facts.json]

`benchmarks/quality/devset.py` mixed the clips and wrote their truth. For every clip of the version, the facts the
evidence *states* (the ones that reach prompts and rule-written items: confident, presence at its stricter bar)
are compared with the truth, per fact type:

| fact | stated when | right when |
|---|---|---|
| speech / music / sound events present or absent | the presence fact says present or absent | the clip has it / has not |
| speaker count | the count is confident (the pitch check confirmed it) | the number of voices mixed |
| gender | one voice, its gender confident (what "a man" / "a woman" says) | the voice's group's gender (groups without one are skipped) |
| quote | the rule-written quote (`rule_captions.quote_of`); also the share of clean English speech clips (speech alone, every word known) that get a right one | word error rate against the best-matching run of the words said in the quote's time span (a quote need not be all that was said; contractions spelt out) |
| percussion | the music's texture is stated (percussive or mixed: drums; sustained: none) | the music's drums, where known |
| event (per class) | a confident `sound.event` of the class, with its span | an event of that class (of a class under it, for a group of the ontology) mixed within 1 s of the span |
| music tag | a confident music tag fact | the track's labels say so (tracks without labels are skipped) |

Also the kept items' claims (table `claims`, supported ones) of the same types, so what the benchmark says is
measured as well as what the evidence holds.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

from earmark.experts.yamnet.events import ontology
from earmark.prompts import load_phrases
from earmark.schemas import ClipEvidence, from_table
from earmark.stages.facts.render import View
from earmark.stages.filter.claims import event_spans
from earmark.stages.synthesize.item_types.captions.rules import FACTS, quote_of
from earmark.storage import Catalog

TOLERANCE_S = 1.0
CONTENT = {"speech": "speakers", "music": "music", "sound_events": "events"}
WORDS, PHRASES = load_phrases("content_captions")["words"], load_phrases("evidence")


CONTRACTIONS = {"'re": " are", "n't": " not", "'ll": " will", "'ve": " have", "'m": " am", "'d": " would"}


def words(text: str) -> list[str]:
    """Lower-case words, contractions spelt out ("they're" = "they are"), so a quote is not wrong for its spelling."""
    text = text.lower().replace("’", "'")
    for short, full in CONTRACTIONS.items():
        text = text.replace(short, full)
    return re.findall(r"[a-z0-9']+", text)


def wer(said: list[str], ref: list[str]) -> float:
    """Word error rate of `said` against `ref` (Levenshtein over words / len(ref))."""
    d = list(range(len(ref) + 1))
    for i, w in enumerate(said, 1):
        prev, d[0] = d[0], i
        for j, r in enumerate(ref, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (w != r))
    return d[len(ref)] / max(len(ref), 1)


def quote_wer(quote: list[str], said: list[str]) -> float:
    """Word error rate of a quote against the best-matching run of the words said: a quote claims that these
    words were said, not that nothing else was (Levenshtein with free start and end in `said`, / len(quote))."""
    d = [0] * (len(said) + 1)  # row 0: the quote may start anywhere in what was said
    for i, w in enumerate(quote, 1):
        prev, d[0] = d[0], i
        for j, r in enumerate(said, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (w != r))
    return min(d) / max(len(quote), 1)


class Tally:
    def __init__(self) -> None:
        self.n: dict[str, int] = defaultdict(int)
        self.right: dict[str, int] = defaultdict(int)
        self.errors: dict[str, list[str]] = defaultdict(list)
        self.coverage: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # name -> [clips, with it]

    def cover(self, name: str, ok: bool) -> None:
        """A share over clips (not a stated fact): e.g. clean English speech clips that get a right quote."""
        self.coverage[name][0] += 1
        self.coverage[name][1] += ok

    def add(self, fact: str, ok: bool, clip: str, detail: str = "") -> None:
        self.n[fact] += 1
        self.right[fact] += ok
        if not ok:
            self.errors[fact].append(f"{clip}: {detail}")

    def table(self) -> list[dict]:
        return [
            {"fact": f, "stated": self.n[f], "right": self.right[f], "accuracy": round(self.right[f] / self.n[f], 3)}
            for f in sorted(self.n)
        ]


def _span(subject: str | None) -> tuple[float, float] | None:
    if not subject or "-" not in subject:
        return None
    a, _, b = subject.partition("-")
    return float(a), float(b)


def quote_span(ev: ClipEvidence, quote: str) -> tuple[float, float] | None:
    """Start and end of the run of phrase facts the quote was made of."""
    want, facts = words(quote), [f for f in ev.all("speech.quote") if f.value and _span(f.subject)]
    for i in range(len(facts)):
        got: list[str] = []
        for j in range(i, len(facts)):
            got += words(facts[j].value)
            if got == want:
                return _span(facts[i].subject)[0], _span(facts[j].subject)[1]  # type: ignore[index]
            if len(got) >= len(want):
                break
    return None


WORD_TIME_S = 0.5  # how far Whisper tiny.en's word times may be off the truth's turn times
PHRASE_BINS = (0.95, 0.8, 0.6, 0.0)  # the least sure word's probability: the bins of evidence.QUOTE_CALIBRATION


def phrase_rows(ev: ClipEvidence, truth: dict) -> list[tuple[float, float, str, str]]:
    """Every phrase Whisper heard (every `speech.quote` fact, whatever its confidence) against the words said in
    its span: (least word probability, WER against the best-matching run, phrase, words said). Phrases over speech
    whose words are not known are left out."""
    said = sorted((turn for s in truth["speakers"] for turn in s["turns"]), key=lambda turn: turn["start_s"])
    rows = []
    for f in ev.all("speech.quote"):
        if not f.value or (span := _span(f.subject)) is None:
            continue
        a, b = span
        heard = [turn for turn in said if min(b, turn["end_s"]) - max(a, turn["start_s"]) > -WORD_TIME_S]
        if heard and all(turn["text"] for turn in heard):
            ref = [w for turn in heard for w in words(turn["text"])]
            rows.append((f.number or 0.0, quote_wer(words(f.value), ref), f.value, " ".join(ref)))
    return rows


def check_clip(ev: ClipEvidence, truth: dict, thr: float, t: Tally, quotes: list[float]) -> None:
    v, clip = View(ev, thr), truth["id"]
    for kind, key in CONTENT.items():
        state = v.content(kind)
        if state in ("present", "absent"):
            has = bool(truth[key])
            t.add(f"presence:{kind}", (state == "present") == has, clip, f"stated {state}, truth {has}")
    n = v.num("speakers.count")
    if n is not None and v.content("speech") == "present":
        t.add("speakers.count", int(n) == len(truth["speakers"]), clip, f"stated {n:g}, truth {len(truth['speakers'])}")
    speech = FACTS["speech"](v, WORDS, PHRASES) or {}
    stated, mixed = speech.get("gender"), [s["gender"] for s in truth["speakers"]]
    if stated and speech.get("who", "").endswith("voice"):  # "a male voice": at least one voice is male
        if stated in mixed or None not in mixed:
            t.add("gender (a voice)", stated in mixed, clip, f"stated a {stated} voice, truth {mixed}")
    elif stated:  # "a man": one voice, male
        if len(mixed) > 1 or mixed[0]:
            t.add("gender (one voice)", mixed == [stated], clip, f"stated one {stated} voice, truth {mixed}")
    quote = quote_of(v)
    turns = [turn for s in truth["speakers"] for turn in s["turns"]]
    clean = truth["domain"] == "S00" and bool(turns) and all(turn["text"] for turn in turns)
    if quote and (span := quote_span(ev, quote)) is not None:
        a, b = span
        said = sorted((turn for s in truth["speakers"] for turn in s["turns"]), key=lambda turn: turn["start_s"])
        overlap = lambda turn: min(b, turn["end_s"]) - max(a, turn["start_s"])  # noqa: E731
        # a quote may be a few words of a long turn; Whisper's word times are off by up to half a second
        # ("right?" of a turn that ends at 4.60 s is timed 4.64 s)
        heard = [turn for turn in said if overlap(turn) > -WORD_TIME_S]
        if heard and all(turn["text"] for turn in heard):  # words known for everything said then
            ref = [w for turn in heard for w in words(turn["text"])]
            e = quote_wer(words(quote), ref)
            quotes.append(e)
            t.add("quote (WER ≤ 0.2)", e <= 0.2, clip, f"quoted {quote!r}, said {' '.join(ref)!r}")
            if clean:
                t.cover("clean speech quoted (WER ≤ 0.2)", e <= 0.2)
                clean = False
    if clean:  # English speech alone, its words known, and no quote of them
        t.cover("clean speech quoted (WER ≤ 0.2)", False)
    harm = v.num("music.harmonic_ratio")
    if harm is not None and truth["music"] and truth["music"].get("drum_heavy") is not None:
        drums = harm < 0.8
        t.add("percussion", drums == truth["music"]["drum_heavy"], clip, f"harmonic ratio {harm:g}")
    for cls, a, b in event_spans(ev, thr):
        under = ontology().subtree(cls) | {cls}  # a group ("Animal") is right for any class under it
        ok = any(
            e["class"] in under and e["end_s"] >= a - TOLERANCE_S and e["start_s"] <= b + TOLERANCE_S
            for e in truth["events"]
        )
        t.add(f"event:{cls}", ok, clip, f"stated {a:g}-{b:g} s; truth {[e['class'] for e in truth['events']]}")
    music_tags = truth["music"]["tags"] if truth["music"] else {}
    for f in ev.facts:
        group = f.subject if f.type == "music.tag" else None  # the tag's group (instrument, genre, mood)
        if group in music_tags and f.value and (f.confidence or 0) >= thr:
            t.add(f"music.{group}:{f.value}", f.value in music_tags[group], clip, f"labels {music_tags[group]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", type=Path)
    ap.add_argument("--truth", type=Path, required=True)
    ap.add_argument("--version")
    ap.add_argument("--min-confidence", type=float, default=0.6)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--errors", action="store_true", help="list every wrong fact")
    ap.add_argument(
        "--phrases", action="store_true", help="every phrase Whisper heard, right (WER ≤ 0.2) by its least word prob"
    )
    a = ap.parse_args()
    cat = Catalog(a.dataset_dir.parent, a.dataset_dir.name)
    v = a.version or cat.latest_version()
    truth = {r["id"]: r for r in map(json.loads, a.truth.read_text().splitlines())}
    evidence = from_table(ClipEvidence, cat.read("evidence", cat.version_shards(v)["evidence"]))
    source = dict(cat.query(f"SELECT clip_id, source_path FROM {v}.clips"))
    t, quotes = Tally(), []
    for ev in evidence:
        row = truth.get(Path(source.get(ev.clip_id, "")).stem)
        if row is not None:
            check_clip(ev, row, a.min_confidence, t, quotes)
    rows = t.table()
    print(f"{a.dataset_dir.name} {v}: {len(evidence)} clips\n\n| fact | stated | right | accuracy |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['fact']} | {r['stated']} | {r['right']} | {r['accuracy']:.3f} |")
    if quotes:
        print(f"\nquotes: {len(quotes)}, mean WER {sum(quotes) / len(quotes):.3f}")
    for name, (n, ok) in sorted(t.coverage.items()):
        print(f"{name}: {ok} of {n} clips ({ok / n:.2f})")
    if a.phrases:
        rows_p = [
            r
            for ev in evidence
            if (row := truth.get(Path(source.get(ev.clip_id, "")).stem))
            for r in phrase_rows(ev, row)
        ]
        print("\n| least word probability | phrases | right (WER ≤ 0.2) | share |\n|---|---|---|---|")
        upper = 1.01
        for low in PHRASE_BINS:
            got = [r for r in rows_p if low <= r[0] < upper]
            ok = sum(r[1] <= 0.2 for r in got)
            print(f"| {low:.2f}–{min(upper, 1.0):.2f} | {len(got)} | {ok} | {ok / len(got) if got else 0:.2f} |")
            upper = low
        top = [r for r in rows_p if r[0] >= PHRASE_BINS[0]]
        print("\n| top band (least ≥ 0.95), words | phrases | right | share |\n|---|---|---|---|")
        for name, keep in (("1–2", lambda n: n <= 2), ("3 or more", lambda n: n > 2)):
            got = [r for r in top if keep(len(words(r[2])))]
            ok = sum(r[1] <= 0.2 for r in got)
            print(f"| {name} | {len(got)} | {ok} | {ok / len(got) if got else 0:.2f} |")
    if a.errors:
        for fact, errs in sorted(t.errors.items()):
            print(f"\n{fact}:\n  " + "\n  ".join(errs))
    if a.json:
        a.json.write_text(json.dumps({"version": v, "facts": rows, "quote_wer": quotes, "errors": t.errors}, indent=1))


if __name__ == "__main__":
    main()
