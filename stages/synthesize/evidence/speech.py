"""Speech facts of the evidence: the transcript and its quotable phrases, the voices' gender (pitch and a listening
model's second opinion, as measured), and the speaker count where the experts agree."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from earmark.core.text import normalise
from earmark.experts.asr_check import BRACKETED
from earmark.schemas.records import LabelProb
from earmark.stages.facts.claim_vocab import EDGE_WORDS
from earmark.stages.synthesize.evidence.facts import MAX_LIST, Facts, rounded

ONE_SPEAKER_CONFIDENCE, MORE_SPEAKERS_CONFIDENCE = 0.75, 0.65  # Resemblyzer clustering on ≤ 10 s


# The count, checked against pitch (speaker_count_confidence): two diarized voices are two when each has speech
# enough and their median pitches lie apart; one voice whose pitch spread is as wide as two voices' may be two.
APART_ST, ONE_VOICE_SPREAD_ST, MIN_VOICE_S = 2.5, 8.0, 1.0


CHECKED_CONFIDENCE, UNCHECKED_CONFIDENCE = 0.8, 0.4


PHRASE_GAP_S = 0.5  # a pause this long ends a quotable phrase, as punctuation does


PHRASE_END = ".,;:!?"


UNFINISHED = 0.5  # a last phrase without closing punctuation: perhaps cut by the clip's end, not a whole phrase


# A phrase with a word outside the English word list (filter.wording.english_words: ~160,000 words and common
# names) is not quoted: a quote states exact words, and such a "word" is Whisper spelling a sound it could not
# place ("Foop!" for a hiccup, at a least word probability of 0.98: fresh5's blind check, 2026-11-27) or a name
# it guessed. It keeps the lowest band of QUOTE_CALIBRATION.
NOT_A_WORD_CONFIDENCE = 0.35


# P(a phrase's words are right | its least sure word's probability), Whisper tiny.en: every phrase of the dev
# benchmark against the best-matching run of the words said in its span (word times ±0.5 s), right at WER ≤ 0.2
# (`benchmarks/quality/devset_truth.py data/devbench --phrases`, 2026-11-26): least ≥ 0.95: 11 of 11 right, 0.8-0.95: 10 of
# 13 (homophones of one-word utterances: "Sue" for "shoe", "Can't" for "cart"), 0.6-0.8: 6 of 10, below: 9 of 26.
# (lower bound of the least probability, P right), the first that applies. On the untuned check and review builds
# the phrases at ≥ 0.95 were right 12 of 13 times (docs/benchmarks.md, "Issue [1/4]").
# Over more builds the top band is lower: whole phrases every word of which was heard at ≥ 0.95 were right 53 of
# 58 times on devq and fresh4-10 (`quote_runs.py --explore --min-words 1`, 2026-11-28: "wait!" for "no way",
# "It's because I can live red." for "lip read"), so it states 0.91.
QUOTE_CALIBRATION = ((0.95, 0.91), (0.8, 0.77), (0.6, 0.6), (0.0, 0.35))

# Of those, the phrases of one or two words are surer words but no surer quotes: at the top band on the check builds
# fresh13-20 (2026-11-29, `devset_truth.py DIR --phrases`, its table by length) 26 of 35 were right, against 53 of
# 55 of three words or more. The wrong ones are short lines misheard whole: "it's you" for "Take it, it's yours" on
# five clips of four builds (blind checks of fresh16 and fresh20), "Yoni" for "Johnny, honey", "my stuff?" for "what
# do I know, master". Such a whole phrase states its measured 0.74, below every quote's bar.
SHORT_PHRASE_WORDS, SHORT_PHRASE_CONFIDENCE = 2, 0.74


# P(a voice's gender is right | the pitch group's median F0), the embedded pitch heuristic (`experts.speakers`),
# measured on the pitch groups of five 48-clip real-audio builds (devbench, checkbench, review, fresh, fresh2;
# clips whose voices all have one known gender; `benchmarks/quality/devset_truth.py` and the truth's groups, 2026-11-27):
# below 150 Hz 32 of 32 were men; 150-200 Hz 10 men and 6 women; 200-230 Hz 8 women and 2 men; above 230 Hz 8 women
# and 4 men (game voice acting: high cartoon men; pitch groups of a sung or played lead). Pitch alone states only
# "male" below 150 Hz. A paper backend's probabilities are its own.
MALE_BELOW_HZ, MALE_CONFIDENCE, UNSURE_GENDER = 150.0, 0.95, 0.5


# With the second opinion of a model that listens (EfficientAT mn04's male / female speech classes over the voice's
# segments, `experts.speakers.voice_gender_check`) a gender is stated where the two agree: mn04's share q =
# P(female speech) / (P(male) + P(female)) at most AGREE_MALE_Q with a pitch up to MALE_UP_TO_HZ is a man, at least
# AGREE_FEMALE_Q with a pitch from FEMALE_FROM_HZ a woman; anything else is unsure, whatever the pitch alone says.
# Measured on 278 files of the 10 DEV speech groups with a gender (training/calibrate_gender.py, 2026-11-28): male
# stated 90 times, 89 right (0.99); female 99 times, 96 right (0.97); pitch alone: male 100, 97 right, female never.
AGREE_MALE_Q, MALE_UP_TO_HZ, AGREE_FEMALE_Q, FEMALE_FROM_HZ = 0.25, 200.0, 0.75, 165.0


AGREED_CONFIDENCE = 0.95


def calibrated_gender(
    labels: Sequence[LabelProb], pitch_hz: float | None, second: Sequence[LabelProb] = ()
) -> list[LabelProb]:
    """The voice's gender probabilities as measured: with mn04's opinion (`second`), the agreed gender at
    AGREED_CONFIDENCE, every label unsure where they do not agree; without it, by pitch alone (MALE_BELOW_HZ)."""
    if not labels:
        return []
    opinion = {lp.label: lp.prob for lp in second}
    if pitch_hz is not None and pitch_hz > 0 and {"male", "female"} <= set(opinion):
        q = opinion["female"] / max(opinion["male"] + opinion["female"], 1e-9)
        agreed = (
            "male"
            if q <= AGREE_MALE_Q and pitch_hz <= MALE_UP_TO_HZ
            else "female"
            if q >= AGREE_FEMALE_Q and pitch_hz >= FEMALE_FROM_HZ
            else None
        )
        return _stated(labels, agreed, AGREED_CONFIDENCE)
    top = max(labels, key=lambda lp: lp.prob)
    low = top.label == "male" and pitch_hz is not None and 0 < pitch_hz < MALE_BELOW_HZ
    return _stated(labels, "male" if low else None, MALE_CONFIDENCE)


def _agreed(labels: Sequence[LabelProb]) -> str | None:
    """The gender stated (a label at AGREED_CONFIDENCE; of a voice with the listener's opinion: the two agreed)."""
    return next((lp.label for lp in labels if lp.prob >= AGREED_CONFIDENCE), None)


def _stated(labels: Sequence[LabelProb], gender: str | None, confidence: float) -> list[LabelProb]:
    """`gender` at `confidence` and the rest sharing what is left; every label at UNSURE_GENDER for None."""
    if gender is None or gender not in {lp.label for lp in labels}:
        return [LabelProb(label=lp.label, prob=UNSURE_GENDER) for lp in labels]
    rest = (1.0 - confidence) / max(1, len(labels) - 1)
    return [LabelProb(label=lp.label, prob=confidence if lp.label == gender else rest) for lp in labels]


def transcript_confidence(asr: Any, check: Any) -> float:
    """Mean word probability × (1 − the hallucination score): a transcript is quoted only when both the
    recogniser is sure of its words and nothing suggests Whisper made them up."""
    probs = [w.prob for w in asr.words]
    if not probs:
        return 0.0
    hallucination = check.hallucination_score if check is not None else 0.5
    return round(sum(probs) / len(probs) * (1.0 - hallucination), 3)


def phrases(words: Sequence[Any]) -> list[list[Any]]:
    """The transcript's words cut into phrases: at punctuation and at pauses of `PHRASE_GAP_S`."""
    out: list[list[Any]] = [[]]
    for w in words:
        if out[-1] and w.start_s - out[-1][-1].end_s >= PHRASE_GAP_S:
            out.append([])
        out[-1].append(w)
        if w.word.strip()[-1:] in PHRASE_END:
            out.append([])
    return [p for p in out if p]


def not_words(text: str) -> list[str]:
    """The words of a phrase that are not in the English word list (numbers and contractions are words)."""
    from earmark.stages.filter.wording import english_words

    known = english_words()
    out = []
    for raw in text.split():
        if re.match(r"-[A-Za-z]", raw):  # a piece Whisper glued to no word: "lip -ridge" for "lip-read" (fresh10)
            out.append(raw)
            continue
        for w in re.findall(r"[A-Za-z]+(?:['’][A-Za-z]+)?", raw):
            low = w.lower().replace("’", "'")
            if low not in known and low.split("'")[0] not in known:
                out.append(w)
    return out


# A phrase with an unsure word is not lost whole: a run of RUN_MIN_WORDS or more words inside it, each heard at
# RUN_BAR or more and each an English word, trimmed of the function words at its edges ("you have to go to the"
# for "they have to go to court" loses "to the"), is quoted on its own at RUN_CONFIDENCE. Against the mixes' truth
# (WER ≤ 0.2; `benchmarks/quality/quote_runs.py`, 2026-11-28), runs of 3 such words were right 47 of 50 times on
# the check builds fresh4-8, on 38 clips, 8 of 8 on fresh9 (untuned) and 7 of 8 on fresh10 ("you in anything" for
# "you with anything"); runs of 4 words or more 36 of 37 times over devq and fresh4-10 (the one counted wrong is
# "he's" for "he is"), on 32 clips. The DEV build devq has no such run: its words are said one at a time. A higher
# bar is no surer (0.99, 3 words: 15 of 17 on fresh4-8): Whisper's probabilities saturate. Both bars were chosen on
# builds read before, the length after fresh10. The rest of such a phrase is a piece at most PIECE_CONFIDENCE:
# never quoted, and it breaks a run of quoted phrases, so no quote joins words not said one after another.
RUN_BAR, RUN_MIN_WORDS, RUN_CONFIDENCE, PIECE_CONFIDENCE = 0.95, 4, 0.95, 0.35


def _bare(word: Any) -> str:
    return word.word.strip().lower().strip(".,;:!?\"'")


def pieces(phrase: Sequence[Any]) -> list[tuple[list[Any], bool | None]]:
    """The phrase as quotable pieces, in order: [(phrase, None)] for a phrase judged whole (every word at the top
    band of QUOTE_CALIBRATION, or one with no run to quote); else (words, True) for each run of sure words
    (RUN_BAR, English, RUN_MIN_WORDS after trimming EDGE_WORDS) and (words, False) for what lies between."""
    words = list(phrase)
    if min(w.prob for w in words) >= QUOTE_CALIBRATION[0][0]:
        return [(words, None)]
    sure = [w.prob >= RUN_BAR and not not_words(w.word) for w in words]
    i = 0
    while i < len(words):  # trim each run's edge words, then drop runs too short to quote
        if not sure[i]:
            i += 1
            continue
        j = i
        while j < len(words) and sure[j]:
            j += 1
        a, b = i, j
        while a < b and _bare(words[a]) in EDGE_WORDS:
            a += 1
        while b > a and _bare(words[b - 1]) in EDGE_WORDS:
            b -= 1
        for k in range(i, j):
            sure[k] = a <= k < b and b - a >= RUN_MIN_WORDS
        i = j
    if not any(sure):
        return [(words, None)]
    out: list[tuple[list[Any], bool | None]] = []
    for w, s in zip(words, sure, strict=True):
        if out and out[-1][1] == s:
            out[-1][0].append(w)
        else:
            out.append(([w], s))
    return out


def _quotes(f: Facts, asr: Any, check: Any) -> None:
    """`speech.quote` facts, in the order heard: one per whole phrase, its confidence the calibrated P(its words
    are right) from its least sure word (`QUOTE_CALIBRATION`) × (1 − the hallucination score): a whole phrase is
    quoted only if every word of it was heard with confidence (a mean over the transcript let "spare. We add
    everything" through for "despair, we had everything"). A phrase with an unsure word is cut into `pieces`: its
    runs of sure words at RUN_CONFIDENCE, the rest below any quote. The rule-written quote and the audit take only
    facts at or above `render.QUOTE_CONFIDENCE`, joined only while they follow one another."""
    hallucination = check.hallucination_score if check is not None else 0.5
    cut = phrases(asr.words)
    for i, phrase in enumerate(cut[:MAX_LIST]):
        parts = pieces(phrase)
        for j, (piece, run) in enumerate(parts):
            text = " ".join(w.word.strip() for w in piece)  # the experts store words stripped
            least = min(w.prob for w in piece)
            subject = f"{piece[0].start_s:.1f}-{piece[-1].end_s:.1f}"
            calibrated = next(p for bound, p in QUOTE_CALIBRATION if least >= bound)
            conf = calibrated if run is None else RUN_CONFIDENCE if run else min(PIECE_CONFIDENCE, calibrated)
            if run is None and len(piece) <= SHORT_PHRASE_WORDS:
                conf = min(conf, SHORT_PHRASE_CONFIDENCE)
            conf *= 1.0 - hallucination
            last = i == len(cut) - 1 and j == len(parts) - 1
            if last and text[-1:] not in PHRASE_END:  # the clip's end may have cut it short
                conf *= UNFINISHED
            if not_words(text):  # Whisper spelled a sound it could not place ("Foop!" for a hiccup, fresh5)
                conf = min(conf, NOT_A_WORD_CONFIDENCE)
            f.add(asr, "speech.quote", rounded(least), text, subject=subject, confidence=conf)


def _transcript(f: Facts, asr: Any, check: Any, vad: Any) -> None:
    if asr is None or not asr.text.strip():
        return
    conf = transcript_confidence(asr, check)
    f.add(asr, "speech.transcript", value=asr.text.strip(), confidence=conf)
    _quotes(f, asr, check)
    # tiny.en and other English-only models cannot identify a language: their "en" is not a finding
    lid = 0.0 if ".en" in asr.backend else asr.language_prob
    f.add(asr, "speech.language", value=asr.language, confidence=lid)
    f.add(asr, "speech.words", float(len(asr.words)), confidence=conf)
    f.add(
        asr,
        "speech.words_per_s",
        rounded(len(asr.words) / vad.speech_s, 2) if vad.speech_s > 0 else None,
        confidence=conf,
    )
    f.add(asr, "speech.no_speech_prob", rounded(asr.no_speech_prob))
    if check is not None:
        f.add(
            check,
            "speech.hallucination",
            rounded(check.hallucination_score),
            ",".join(check.flags) or None,
            confidence=1.0,
        )


def _semitones(a: float, b: float) -> float:
    return abs(12.0 * math.log2(a / b))


def speaker_count(
    n: int,
    profiles: Sequence[Any],
    voices: Sequence[Any],
    events: bool = False,
    genders: Sequence[str | None] = (),
    sure_events: bool = False,
) -> tuple[int, float]:
    """The speaker count and how sure it is, the diarization checked against the voices' pitch. Resemblyzer split
    single readers into two (22 items said "two people" of one reader in a held-out build) and merged two into
    one; on the dev benchmark its "one speaker" was wrong on 4 of 11 clips. Where the speakers expert grouped the
    speech segments by pitch (`voices`), two groups confirm two voices only where the clustering also found two:
    one group cannot rule out a second voice of the same pitch, and two groups under one cluster were one reader
    as often as two (DEV and three check builds, 2026-11-28: 10 of 19 such clips had one voice; a KTuberling
    reader's words at 109 and 174 Hz), so the count is then not stated ("one or more people"). Where sound events
    may be heard (`events`), even agreement is not enough: a steam engine and an explosion under one reader each
    made two clusters *and* two pitch groups (2 of the 4 counts stated on a fresh check build were wrong), so no
    count is stated, unless the two pitch groups are a man and a woman by the agreement of pitch and listener
    (`genders`, calibrated_gender): an engine is not heard as a woman speaking. Where sound events are surely
    heard (`sure_events`) not even then: a man and a woman so counted were one voice on 2 of the 3 such clips of
    fresh13-19 (one man under music, an explosion and water made a woman at 247 Hz; fresh19's blind check), and
    right on 8 of 8 where sound events were absent or uncertain. Without pitch groups (an
    attribute model's profiles), `speaker_count_confidence`, and beside sound events not without pitch at all
    (a DEV clip's music and effects under one reader made two clusters and no pitched voice)."""
    if not voices:
        conf = speaker_count_confidence(n, profiles)
        unpitched = not any(p.pitch_median_hz for p in profiles)
        return n, min(conf, UNCHECKED_CONFIDENCE) if events and unpitched else conf
    man_woman = len(voices) == 2 and len(genders) == 2 and None not in genders and genders[0] != genders[1]
    if man_woman and n <= 2 and not sure_events:
        return 2, CHECKED_CONFIDENCE
    if events:
        return n, UNCHECKED_CONFIDENCE
    if len(voices) == 2 and n == 2:
        return 2, CHECKED_CONFIDENCE
    return n, UNCHECKED_CONFIDENCE


def speaker_count_confidence(n: int, profiles: Sequence[Any]) -> float:
    """How sure the diarization's count is, checked against the diarized speakers' pitch medians: a count pitch
    contradicts falls below the evidence bar."""
    pitched = sorted((p for p in profiles if p.pitch_median_hz), key=lambda p: -p.speech_s)
    if not pitched:  # no pitch to check against (an attribute model's profile): the clustering alone
        return ONE_SPEAKER_CONFIDENCE if n == 1 else MORE_SPEAKERS_CONFIDENCE
    if n == 1:
        p = pitched[0]
        half = (p.pitch_iqr_hz or 0.0) / 2
        low, high = p.pitch_median_hz - half, p.pitch_median_hz + half
        wide = low <= 0 or _semitones(high, low) >= ONE_VOICE_SPREAD_ST
        return UNCHECKED_CONFIDENCE if wide else ONE_SPEAKER_CONFIDENCE
    if len(pitched) < 2 or pitched[1].speech_s < MIN_VOICE_S:
        return UNCHECKED_CONFIDENCE
    apart = _semitones(pitched[0].pitch_median_hz, pitched[1].pitch_median_hz) >= APART_ST
    return CHECKED_CONFIDENCE if apart else UNCHECKED_CONFIDENCE


def _speakers(f: Facts, dia: Any, spk: Any) -> None:
    if dia is None or dia.skipped_reason is not None:
        return
    profiles = spk.speakers if spk is not None else []
    voices = spk.voices if spk is not None else []
    state = {x.type: x.value for x in f.facts if x.type.startswith("content.")}
    events = state.get("content.sound_events") != "absent"
    sure_events = state.get("content.sound_events") == "present"
    heuristic = str(getattr(spk, "backend", "")).startswith("heuristic:pitch")
    genders = [
        calibrated_gender(v.gender, v.pitch_median_hz, v.gender_check) if heuristic else v.gender for v in voices
    ]
    agreed = [_agreed(g) if v.gender_check else None for v, g in zip(voices, genders, strict=True)] if heuristic else []
    n, conf = speaker_count(dia.n_speakers, profiles, voices, events, agreed, sure_events)
    f.add(dia, "speakers.count", float(n), confidence=conf)
    for i, (voice, gender) in enumerate(zip(voices, genders, strict=True), 1):  # the voices by pitch stand for
        f.labels(spk, "speaker.gender", gender, subject=f"V{i}")  # the diarized speakers' genders
        f.add(spk, "speaker.pitch_median_hz", voice.pitch_median_hz, subject=f"V{i}")
    people = {p.speaker: p for p in spk.speakers} if spk is not None else {}
    for name in sorted({t.speaker for t in dia.turns}):
        f.add(
            dia,
            "speaker.speech_s",
            rounded(sum(t.end_s - t.start_s for t in dia.turns if t.speaker == name), 2),
            subject=name,
        )
        if (p := people.get(name)) is None:
            continue
        for attr in ("age_band", "emotion", "accent") if voices else ("gender", "age_band", "emotion", "accent"):
            labels = getattr(p, attr)
            if attr == "gender" and heuristic:  # the voices' pitch rule (fresh2: a 532 Hz "woman" was a man)
                labels = calibrated_gender(labels, p.pitch_median_hz)
            f.labels(spk, f"speaker.{attr}", labels, subject=name)
        if not voices:
            f.add(spk, "speaker.pitch_median_hz", rounded(p.pitch_median_hz, 1), subject=name)


def music_marker(text: str) -> bool:
    """Whether a transcript is only Whisper's mark for music ("🎵Music🎵", "[Music]", "♪ ♪", "Music."): Whisper's
    way of saying it heard music and no words (fresh14: "🎵Music🎵" on a music-only clip the domain probe heard
    speech in)."""
    marked = text.replace("🎵", "♪").replace("🎶", "♪")
    return normalise(BRACKETED.sub(" ", marked)) in ("", "music")
