"""Precision and recall of each QC check on a set with planted bad items.

How the set is built (no LLM, no audio): 48 clips, 6 per MECAT domain. Each clip gets an evidence dict of the
shape `earmark.stages.synthesize.evidence.build_evidence` writes (content presence, a hand-written transcript for speech clips,
tempo/key/beat for music clips, coarse sound tags for sound clips, levels/quality/acoustics), and clean
hand-templated items: a long and a short caption, speech/music/sound captions (absence stated by the rule text
where the domain lacks the content), one QA pair, three entailment hypotheses and two IFEval triples whose
answers satisfy their rules. Then defects are planted, each on a random subset (seeded):

- mismatched captions: the long caption of 12 clips is swapped with that of a clip of another domain;
- "no speech" claims: 8 clips with speech get a speech or long caption claiming there is none;
- hallucinated transcripts: 8 clips get the transcript "Thank you for watching. Please subscribe." with an
  asr_check verdict (known_phrase, score 0.92) and a speech caption quoting it; decoys: 6 flagged clips whose
  items do not use the transcript, 6 unflagged clips whose items quote their (real) transcript;
- failing IFEval answers: 12 triples whose answer breaks its rule (case, word count, JSON keys, list markers);
- duplicate hypotheses: 10 clips where one hypothesis repeats another (punctuation/case change, or a near copy)
  or the premise.

    python benchmarks/quality/qc_planted.py [--threshold T]
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections import defaultdict

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from earmark.core.config import FilterSection  # noqa: E402
from earmark.metrics.similarity import embed, load_sbert  # noqa: E402
from earmark.prompts import load_phrases  # noqa: E402
from earmark.schemas.evidence import ClipEvidence  # noqa: E402
from earmark.schemas.records import DOMAIN_CODES, Caption, EntailmentHypothesis, InstructionTriple, QAPair  # noqa: E402
from earmark.stages.filter.margin import EvidenceSbertBackend, margin_checks  # noqa: E402
from earmark.stages.filter.qc import ClipContext, run_checks  # noqa: E402
from earmark.stages.synthesize import ITEM_TYPES
from earmark.stages.synthesize.evidence import evidence_of  # noqa: E402

ABSENT_TEXT = load_phrases("absent")["captions"]

TRANSCRIPTS = [
    "the train to the airport leaves from platform four",
    "please remember to bring your passport tomorrow",
    "we will start the meeting with the budget review",
    "the soup needs another ten minutes on the stove",
    "turn left at the bakery and walk two blocks",
    "our team won the match in the final minute",
    "the library closes early on public holidays",
    "can you hand me the blue folder on the desk",
    "the weather will be sunny and warm all weekend",
    "i planted tomatoes and basil in the garden",
    "the concert tickets sold out within an hour",
    "my grandmother taught me how to knit scarves",
    "the printer on the second floor is jammed again",
    "let us review chapter seven before the exam",
    "the new bridge opens to traffic next spring",
    "he parked the red car behind the old warehouse",
    "the children are building a sandcastle at the beach",
    "the doctor said to rest for three days",
    "the museum has a new exhibit about ancient egypt",
    "we ordered pizza with mushrooms and olives",
    "the flight was delayed because of heavy fog",
    "she practices the violin every morning at seven",
    "the recipe calls for two cups of flour",
    "the river flooded the fields after the storm",
]
MUSIC = [
    ("slow", 70, "A minor", "a gentle piano melody with sustained chords"),
    ("moderate", 100, "C major", "an acoustic guitar strumming a steady rhythm"),
    ("fast", 140, "E minor", "an energetic drum groove with a bass line"),
    ("slow", 60, "D major", "soft string pads holding long notes"),
    ("moderate", 110, "G major", "a bright synthesizer arpeggio over a beat"),
    ("fast", 150, "F minor", "rapid electronic percussion and stabs"),
]
SOUNDS = [
    ("impulsive sound", "knocking on a wooden door, then footsteps"),
    ("noise", "steady rain falling with gusts of wind"),
    ("tonal sound", "a high electronic beep repeating and a low hum"),
    ("impulsive sound", "a dog barking several times in the yard"),
    ("noise", "traffic passing on a wet road"),
    ("tonal sound", "a kettle whistling in a kitchen"),
]


def evidence(clip: str, domain: str, i: int, transcript: str | None) -> ClipEvidence:
    speech, music, sound = domain[0] == "S", domain[1] == "M", domain[2] == "A"
    tempo_word, bpm, key, _ = MUSIC[i % len(MUSIC)]
    tag, _ = SOUNDS[i % len(SOUNDS)]
    values: dict = {
        "levels.lufs": -18.0 - i % 10,
        "levels.rms_dbfs": -20.0,
        "levels.clipping_ratio": 0.0,
        "levels.silence_ratio": 0.9 if domain == "000" else 0.05,
        "quality.dnsmos_ovrl": 2.5 + (i % 4) * 0.3,
        "quality.dnsmos_bak": 2.8 + (i % 3) * 0.4,
        "acoustics.rt60_s": 0.2 + (i % 3) * 0.3,
        "acoustics.snr_db": 8.0 + (i % 4) * 8,
        "acoustics.bandwidth_hz": 7800.0,
    }
    if speech:
        values |= {
            "speech.seconds": 7.0,
            "speech.ratio": 0.7,
            "speech.segments": 2,
            "speech.transcript": transcript,
            "speech.words_per_s": 2.4,
        }
    else:
        values |= {"speech.seconds": 0.0, "speech.ratio": 0.0, "speech.segments": 0}
    if music:
        values |= {
            "music.tempo_bpm": float(bpm),
            "music.beat_strength": 0.7,
            "music.key": {key: 0.6},
            "music.harmonic_ratio": 0.85 if tempo_word == "slow" else 0.5,
            "music.loudness_range_db": 6.0,
        }
    if sound:
        values["sound_tags.clip"] = {tag: 0.9}
    return evidence_of(
        clip, domain, values, probs=[0.95 if speech else 0.03, 0.9 if music else 0.05, 0.85 if sound else 0.05]
    )


def _lin(clip: str, domain: str, model: str = "hand") -> dict:
    return dict(clip_id=clip, domain=domain, prompt_name="hand", prompt_sha="0" * 16, model=model, confidence=0.9)


def clean_long(domain: str, i: int, transcript: str | None) -> str:
    parts = []
    if domain[0] == "S":
        parts.append(f'A {"man" if i % 2 else "woman"} says "{transcript}"')
    if domain[1] == "M":
        parts.append(("while " if parts else "") + MUSIC[i % len(MUSIC)][3] + " plays")
    if domain[2] == "A":
        parts.append(("with " if parts else "") + SOUNDS[i % len(SOUNDS)][1] + (" in the background" if parts else ""))
    if not parts:
        return "A nearly silent recording with only a faint steady background hiss throughout the clip."
    text = " ".join(parts)
    return text[0].upper() + text[1:] + ", recorded in a small room."


def build(seed: int = 0):
    rng = random.Random(seed)
    clips = [(f"{d}_{i}", d, i) for d in DOMAIN_CODES for i in range(6)]
    ts = iter(TRANSCRIPTS * 3)
    transcript = {c: next(ts) for c, d, _ in clips if d[0] == "S"}
    ev = {c: evidence(c, d, i, transcript.get(c)) for c, d, i in clips}
    truth: dict[str, set[str]] = defaultdict(set)  # defect → bad item ids
    caps, qa, ents, ins = [], [], [], []
    context: dict[str, ClipContext] = {c: ClipContext(t, 0.0, ()) for c, t in transcript.items()}
    long_text = {c: clean_long(d, i, transcript.get(c)) for c, d, i in clips}

    speech_clips = [c for c, d, _ in clips if d[0] == "S"]
    mismatched = set(rng.sample([c for c, _, _ in clips], 12))
    no_speech = set(rng.sample(speech_clips, 8))
    rest = [c for c in speech_clips if c not in no_speech]
    halluc = set(rng.sample(rest, 8))
    rest = [c for c in rest if c not in halluc]
    flagged_decoy = set(rest[:3]) | set(rng.sample([c for c, d, _ in clips if d[0] != "S"], 3))
    for c in halluc:
        transcript[c] = "Thank you for watching. Please subscribe."
        context[c] = ClipContext(transcript[c], 0.92, ("known_phrase", "no_vad_support"))
    for c in flagged_decoy:
        context[c] = ClipContext("Thanks for watching.", 0.92, ("known_phrase",))
        transcript.setdefault(c, None)
    for c, d, i in clips:
        lin = _lin(c, d)
        text = long_text[c]
        if c in mismatched:
            other = rng.choice([o for o, od, _ in clips if od != d])
            text = long_text[other]
            truth["mismatched"].add(f"{c}:long:0")
        if c in no_speech and i % 2 == 0:
            text = text.rstrip(".") + ", with no speech at all."
            truth["no_speech"].add(f"{c}:long:0")
        caps.append(Caption(**lin, item_id=f"{c}:long:0", kind="long", ref_index=0, text=text))
        caps.append(
            Caption(
                **lin,
                item_id=f"{c}:short:0",
                kind="short",
                ref_index=0,
                text=clean_long(d, i, "something").split(",")[0].split(" says")[0] + ".",
            )
        )
        for kind, idx in (("speech", 0), ("music", 1), ("sound", 2)):
            if d[idx] == "0":
                caps.append(
                    Caption(
                        **_lin(c, d, "rule"), item_id=f"{c}:{kind}:0", kind=kind, ref_index=0, text=ABSENT_TEXT[kind][0]
                    )
                )
                continue
            if kind == "speech":
                t = transcript[c]
                txt = f'A calm voice says "{t}" at a moderate pace.' if t else "A calm voice speaks at a moderate pace."
                if c in no_speech and i % 2 == 1:
                    txt = "There is no speech in this recording, only background sound."
                    truth["no_speech"].add(f"{c}:speech:0")
                if c in halluc:
                    truth["hallucination"].add(f"{c}:speech:0")
            elif kind == "music":
                txt = MUSIC[i % len(MUSIC)][3].capitalize() + f" at a {MUSIC[i % len(MUSIC)][0]} tempo."
            else:
                txt = SOUNDS[i % len(SOUNDS)][1].capitalize() + "."
            caps.append(Caption(**lin, item_id=f"{c}:{kind}:0", kind=kind, ref_index=0, text=txt))
        answer = (
            f'They say "{transcript[c]}".'
            if d[0] == "S" and transcript.get(c)
            else "The recording is fairly clean with little background noise."
        )
        if c in halluc:
            truth["hallucination"].add(f"{c}:qa:0")
        qa.append(
            QAPair(
                **lin,
                item_id=f"{c}:qa:0",
                qa_index=0,
                category="direct_perception",
                difficulty="basic",
                question="What is the main thing you hear?" if d[0] == "S" else "How clean is the recording?",
                answer=answer,
            )
        )
        premise = long_text[c]
        hyps = {
            "entailment": f"The clip has {'speech' if d[0] == 'S' else 'music' if d[1] == 'M' else 'some sound'} in it.",
            "neutral": f"The recording was made on a {['Monday', 'rainy afternoon', 'school trip', 'night shift', 'holiday', 'farm'][i]}.",
            "contradiction": "A large choir sings in a cathedral.",
        }
        ents += [
            EntailmentHypothesis(
                **lin, item_id=f"{c}:ent:{lab}", premise_kind="long", premise=premise, label=lab, hypothesis=h
            )
            for lab, h in hyps.items()
        ]
        ins += [
            InstructionTriple(
                **lin,
                item_id=f"{c}:if:0",
                dimension="Capitalization",
                instruction="Describe the audio in capital letters only.",
                answer=clean_long(d, i, "words").upper(),
                rule=3,
                rule_content="",
            ),
            InstructionTriple(
                **lin,
                item_id=f"{c}:if:1",
                dimension="Length",
                instruction="Describe the audio in 5 to 20 words.",
                answer=" ".join(clean_long(d, i, "words").split()[:12]),
                rule=12,
                rule_content="5-20",
            ),
        ]
    # duplicate hypotheses on 10 clips
    by_clip = defaultdict(list)
    for k, e in enumerate(ents):
        by_clip[e.clip_id].append(k)
    for n, c in enumerate(rng.sample(sorted(by_clip), 10)):
        ent_k, neu_k, con_k = by_clip[c]
        if n % 3 == 0:  # contradiction repeats the entailment hypothesis (case/punctuation only)
            ents[con_k] = ents[con_k].model_copy(
                update={"hypothesis": ents[ent_k].hypothesis.upper().rstrip(".") + "!"}
            )
            truth["duplicate"] |= {ents[con_k].item_id, ents[ent_k].item_id}
        elif n % 3 == 1:  # neutral is a near copy of the entailment hypothesis
            h = ents[ent_k].hypothesis.replace("The clip has", "The clip contains")
            ents[neu_k] = ents[neu_k].model_copy(update={"hypothesis": h})
            truth["duplicate"] |= {ents[neu_k].item_id, ents[ent_k].item_id}
        else:  # the entailment hypothesis is the premise itself
            ents[ent_k] = ents[ent_k].model_copy(update={"hypothesis": ents[ent_k].premise})
            truth["duplicate"].add(ents[ent_k].item_id)
    # failing IFEval answers on 12 triples
    for n, k in enumerate(rng.sample(range(len(ins)), 12)):
        t = ins[k]
        if t.rule == 3:
            bad = t.answer.capitalize()
        else:
            bad = (
                " ".join((t.answer + " and it goes on for a while longer than asked").split()[:25])
                if n % 2
                else "Short."
            )
        ins[k] = t.model_copy(update={"answer": bad})
        truth["ifeval"].add(t.item_id)
    return ev, caps, qa, ents, ins, context, truth


CHECK_OF = {
    "mismatched": "margin:evidence-sbert",
    "no_speech": "domain_consistency",
    "hallucination": "hallucination",
    "ifeval": "ifeval_answer",
    "duplicate": "duplicate_hypothesis",
}
TABLE_OF = {
    "mismatched": "captions",
    "no_speech": "captions",
    "hallucination": None,
    "ifeval": "instructions",
    "duplicate": "entailment",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threshold", type=float, default=None, help="margin threshold (default: the backend's)")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    model = load_sbert(None)
    emb = lambda texts: embed(model, texts)  # noqa: E731
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # tp, fp, fn, n
    fp_any = [0, 0]
    t0 = time.perf_counter()
    margins: list[tuple[float, bool]] = []
    for seed in range(args.seeds):
        ev, caps, qa, ents, ins, ctx, truth = build(seed)
        items = {"captions": caps, "qa": qa, "entailment": ents, "instructions": ins}
        rows = run_checks(items, [], FilterSection(), ITEM_TYPES, context=ctx, embed=emb)
        rows += margin_checks(
            caps,
            EvidenceSbertBackend(ev, emb, load_phrases("evidence")),
            FilterSection(margin_threshold=args.threshold),
        )
        for defect, check in CHECK_OF.items():
            applicable = [r for r in rows if r.check == check and (TABLE_OF[defect] in (None, r.item_table))]
            flagged = {r.item_id for r in applicable if not r.keep}
            items = {r.item_id for r in applicable}
            bad = truth[defect] & items
            t = totals[defect]
            t[0] += len(flagged & bad)
            t[1] += len(flagged - bad)
            t[2] += len(bad - flagged)
            t[3] += len(items)
        margins += [
            (r.score, r.item_id in truth["mismatched"])
            for r in rows
            if r.check == "margin:evidence-sbert" and r.score is not None
        ]
        all_bad = set().union(*truth.values())
        rejected = {r.item_id for r in rows if not r.keep}
        clean = {r.item_id for r in rows} - all_bad
        fp_any[0] += len(rejected & clean)
        fp_any[1] += len(clean)
    print(f"{args.seeds} seeds × 48 clips, {time.perf_counter() - t0:.1f} s\n")
    print("| planted defect | check | items checked | planted | precision | recall |")
    print("|---|---|---|---|---|---|")
    for defect, (tp, fp, fn, n) in totals.items():
        p = tp / (tp + fp) if tp + fp else float("nan")
        r = tp / (tp + fn) if tp + fn else float("nan")
        print(f"| {defect} | `{CHECK_OF[defect]}` | {n} | {tp + fn} | {p:.2f} | {r:.2f} |")
    print(f"\nclean items rejected by any check: {fp_any[0]} / {fp_any[1]}")
    good = sorted(m for m, b in margins if not b)
    bad = sorted(m for m, b in margins if b)
    q = lambda xs, f: xs[int(f * (len(xs) - 1))] if xs else float("nan")  # noqa: E731
    print(
        f"margin (cosine × 100) on matched long captions: p10 {q(good, 0.1):.1f}, median {q(good, 0.5):.1f}; "
        f"on mismatched: median {q(bad, 0.5):.1f}, p90 {q(bad, 0.9):.1f}"
    )


if __name__ == "__main__":
    main()
