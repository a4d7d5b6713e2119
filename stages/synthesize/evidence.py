"""evidence stage: the expert tables of one clip folded into a typed `ClipEvidence` (a list of atomic facts).

Every fact carries a confidence: the expert's own probability where it gives one (tagger, gender, key,
tempo after the octave check, transcript from word probabilities and the hallucination check), and a
fixed, documented confidence for measurements (the fact-type registry, earmark.schemas.facts). Renderers and the claim audit use only facts
whose confidence reaches `[evidence] min_confidence`; the others stay in the table, visibly unconfident.
Speech, music and sound-event presence is stricter: the domain code's verdict on a content is a fact
("present" / "absent") only when its calibrated probability reaches `[evidence] presence_confidence`,
otherwise the fact says "uncertain" and nothing may be written or claimed about that content.
Every expert table contributes: the known ones fact by fact, any other (e.g. a paper-profile table) one
fact per scalar field and per label; except the tables of `NOT_IN_EVIDENCE`, which the stage does not read.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from earmark.core.config import EvidenceSection
from earmark.schemas.evidence import ClipEvidence, Fact
from earmark.schemas.facts import fact_type, measured_confidence
from earmark.schemas.records import Clip, LabelProb
from earmark.stages.base import Inputs, StageSpec
from earmark.stages.facts import bands

T = TypeVar("T")

# 7: a low SNR only on speech alone; 8: blind SNR (unless clean) and RT60 only on speech alone; 9: quotable phrases
# (`speech.quote`), the HPSS texture and beat strength only on music without sound events; 10: voices by pitch,
# named events (`sound.event`), music tags by group; 14: a voice's gender carries a calibrated probability; 15: speech
# over music heard by the VAD as one unbroken segment is not stated; 16: nor speech over music without one word; 17:
# only a low-pitched male voice has a gender above the bar; 18: the same for a diarized speaker's gender; 19: YAMNet's
# named events under its measured policy, which also make sound present; 20: a phrase with a word outside the English
# word list is no quote ("Foop!" for a hiccup); 21: a voice's gender where its pitch and mn04's opinion agree; 22:
# two pitch groups under one cluster state no count, nor does an unpitched clustering beside sound events
EVIDENCE_VERSION = "22"
# Speech over music that the VAD hears as one unbroken segment over >= UNBROKEN_VOICE of the clip is a sung or
# voice-like lead more often than speech: of the speech-over-music clips of four real-audio builds (devbench,
# checkbench, review, fresh; 2026-11-27), the two such clips had no voice at all (Drascula's music, whose lead
# Whisper "transcribed" at a mean word probability of 0.24-0.68), and every clip with a real voice paused (VAD
# ratio <= 0.86, 3-4 segments). Nor is speech over music in which Whisper wrote not one word although the VAD
# gave it speech: the three such clips of five builds (fresh2, 2026-11-27) had no voice; no real voice of the 240
# clips got an empty transcript. Speech is then "uncertain": no item states or denies it.
UNBROKEN_VOICE, SUNG_CONFIDENCE = 0.95, 0.5
MAX_LIST = 12  # list fields of generically included tables are cut to this many items
# Expert tables the evidence does not read (nor key on). YAMNet's AudioSet scores are read: only its classes and
# groups whose precision was measured on labelled DEV packages state events (earmark.experts.yamnet.events).
NOT_IN_EVIDENCE: frozenset[str] = frozenset()
LINEAGE = {"clip_id", "expert", "expert_version", "backend"}
ONE_SIDED_CONFIDENCE = 0.3  # a blind room estimate on a clip with music or events: perhaps not the room
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
QUOTE_CALIBRATION = ((0.95, 0.95), (0.8, 0.77), (0.6, 0.6), (0.0, 0.35))
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


def evidence_tables(expert_refs: Mapping[str, T]) -> dict[str, T]:
    """The expert tables (by name, to their shards) the evidence reads: all but `NOT_IN_EVIDENCE`."""
    return {t: refs for t, refs in expert_refs.items() if t not in NOT_IN_EVIDENCE}


def spec(expert_tables: Sequence[str], cfg: EvidenceSection, prompt_dir: Path | None = None) -> StageSpec:
    """The evidence stage reads one prompt file, `evidence.toml`, for its `[events]` registry (the classes an
    AudioSet tagger's labels may state, and how a label maps to them): it is declared, and only that part is
    hashed into the key, so editing the file's phrases or claim words re-runs what renders or audits them, not the
    evidence."""
    return StageSpec(
        "evidence",
        EVIDENCE_VERSION,
        reads=("clips", *sorted(expert_tables)),
        writes=("evidence",),
        prompt_files=("evidence",),
        prompt_sha=event_classes_sha(prompt_dir),
        prompt_dir=prompt_dir,
        config={**cfg.model_dump(), "yamnet_policy": yamnet_policy_sha()},
    )


def event_classes(prompt_dir: Path | None = None) -> list[str]:
    """The event classes `evidence.toml`'s `[events]` table names (what an AudioSet label may be stated as)."""
    from earmark.prompts import load_phrases

    return sorted(load_phrases("evidence", prompt_dir)["events"])


def yamnet_policy_sha() -> str:
    """The sha256 of YAMNet's measured event policy (package data): a new policy re-runs the evidence."""
    from earmark.experts.yamnet.events import POLICY

    return hashlib.sha256(POLICY.read_bytes()).hexdigest()[:16]


def event_classes_sha(prompt_dir: Path | None = None) -> str:
    """A sha over what of the registry the evidence depends on: each class, whether it is a group, the AudioSet
    labels it settles."""
    from earmark.prompts import load_phrases
    from earmark.stages.facts.events import registry

    rows = registry(load_phrases("evidence", prompt_dir)).values()
    blob = "\n".join(sorted(f"{c.name}|{int(c.group)}|{','.join(c.audioset)}" for c in rows))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(float(x), nd)


def measured(type_: str) -> float | None:
    """A measurement's fixed confidence, from the fact-type registry (earmark.schemas.facts): how far its number
    can be trusted as a description of the clip (DSP levels are exact; blind reverberation and SNR estimates are
    not)."""
    return measured_confidence(type_)


class _Facts:
    """Collects the facts of one clip, each with its expert table, backend and confidence."""

    def __init__(self) -> None:
        self.facts: list[Fact] = []

    def add(
        self,
        rec: Any,
        type_: str,
        number: float | None = None,
        value: str | None = None,
        *,
        subject: str | None = None,
        confidence: float | None = None,
        generic: bool = False,
    ) -> None:
        """One fact. Its type must be in the registry (a typo raises UnknownFactType), but for a `generic` one: a
        field of an expert table this module does not know, kept as `<table>.<field>` without a confidence."""
        row = None if generic else fact_type(type_)
        if number is None and value is None:
            return
        conf = confidence if confidence is not None or row is None else row.confidence
        self.facts.append(
            Fact(
                type=type_,
                value=value,
                number=number,
                subject=subject,
                source=rec.expert,
                backend=rec.backend,
                confidence=None if conf is None else round(float(conf), 3),
            )
        )

    def labels(
        self, rec: Any, type_: str, labels: Sequence[LabelProb], min_prob: float = 0.0, subject: str | None = None
    ) -> None:
        for lp in labels:
            if lp.prob >= min_prob:
                p = round(lp.prob, 3)
                self.add(rec, type_, p, lp.label, subject=subject, confidence=p)


def transcript_confidence(asr: Any, check: Any) -> float:
    """Mean word probability × (1 − the hallucination score): a transcript is quoted only when both the
    recogniser is sure of its words and nothing suggests Whisper made them up."""
    probs = [w.prob for w in asr.words]
    if not probs:
        return 0.0
    hallucination = check.hallucination_score if check is not None else 0.5
    return round(sum(probs) / len(probs) * (1.0 - hallucination), 3)


def _speech_alone(facts: Sequence[Fact]) -> bool:
    state = {f.type: f.value for f in facts if f.type.startswith("content.")}
    speech, music, events = (state.get(f"content.{k}") for k in ("speech", "music", "sound_events"))
    return (speech, music, events) == ("present", "absent", "absent")


def _blind_estimate_confidence(name: str, value: float | None, facts: Sequence[Fact]) -> float | None:
    """The blind room estimates read speech: the SNR takes the quiet frames (between the VAD's speech, or a
    clip's quietest tenth) as the noise floor, the RT60 the decays after speech offsets. Music, sound events
    or a quiet passage there read as noise or as a dry room. A high SNR is evidence of a clean recording
    whatever the content; otherwise the estimate is a fact only on speech alone. Measured on the 2026-11-24
    dev build against the mixes' room-tone levels and drawn RT60s (benchmarks/quality/room_truth.py): 7 of 10
    "noisy" verdicts on clips with music or events were wrong, none shown right; "dry" was wrong on the 4
    strongly reverberant clips with music or events (true RT60 0.43-0.89 s, estimated 0.27-0.32 s) and within
    0.05 s on the 4 reverberated clips with speech."""
    if name not in ("snr_db", "rt60_s", "drr_db") or value is None:
        return None
    if name == "snr_db" and bands.word("noise", value) == "clean":
        return None
    return None if _speech_alone(facts) else ONE_SIDED_CONFIDENCE


def presence_state(present: bool, p: float, silent: bool, bar: float) -> tuple[str, float]:
    """The content fact of one domain-code letter: ("present" | "absent" | "uncertain", confidence), where
    `p` is P(present) and the verdict is stated only when its probability reaches `bar`."""
    conf = 1.0 if silent and not present else p if present else 1.0 - p
    return ("present" if present else "absent") if conf >= bar else "uncertain", conf


def build_evidence(
    clip: Clip, records: Mapping[str, Any], cfg: EvidenceSection = EvidenceSection(), prompt_dir: Path | None = None
) -> ClipEvidence:
    """Fold the expert records of one clip (by table name; `domain` required) into its facts (`prompt_dir`: where
    `evidence.toml` is, for an AudioSet tagger's event classes; None = the built-in files)."""
    f = _Facts()
    dom = records["domain"]
    calibrated = {nv.name: nv.value for nv in dom.features if nv.name.startswith("calibrated_")}
    vad, asr = records.get("vad"), records.get("asr")
    unbroken = vad is not None and len(vad.segments) == 1 and vad.speech_ratio >= UNBROKEN_VOICE
    wordless = asr is not None and asr.skipped_reason is None and asr.vad_speech_s > 0 and not asr.words
    voice_like = unbroken or wordless
    code = dom.domain
    for content, prob, idx, head in (
        ("speech", dom.speech_prob, 0, "speech"),
        ("music", dom.music_prob, 1, "music"),
        ("sound_events", dom.sound_prob, 2, "sound"),
    ):
        p = float(calibrated.get(f"calibrated_{head}", prob))  # P(present): calibrated where the tagger is
        state, conf = presence_state(code[idx] != "0", p, dom.silent, cfg.presence_confidence)
        if content == "speech" and state == "present" and voice_like and code[1] != "0":
            state, conf = "uncertain", min(conf, SUNG_CONFIDENCE)  # a voice-like lead over music, not speech
        f.add(dom, f"content.{content}", _r(float(prob)), state, confidence=conf)
    f.add(dom, "content.silent", 1.0 if dom.silent else 0.0, "silent" if dom.silent else "not silent", confidence=1.0)
    for w in dom.windows[:MAX_LIST]:  # when in the clip each content is heard
        f.labels(dom, "content.window", w.tags, 0.5, subject=f"{w.start_s:g}-{w.end_s:g}")
    if vad is not None:
        f.add(vad, "speech.seconds", _r(vad.speech_s, 2))
        f.add(vad, "speech.ratio", _r(vad.speech_ratio))
        f.add(vad, "speech.segments", float(len(vad.segments)))
        for seg in vad.segments[:MAX_LIST]:
            f.add(vad, "speech.segment", _r(seg.end_s - seg.start_s, 2), subject=f"{seg.start_s:.1f}-{seg.end_s:.1f}")
        _transcript(f, records.get("asr"), records.get("asr_check"), vad)
    if (q := records.get("dnsmos")) is not None and q.ovrl_mos is not None:  # speech quality only of speech
        for name in ("ovrl_mos", "sig_mos", "bak_mos"):
            f.add(q, f"quality.dnsmos_{name.split('_')[0]}", _r(getattr(q, name), 2))
    if (lv := records.get("levels")) is not None:
        f.add(lv, "levels.lufs", _r(lv.lufs, 1))
        f.add(lv, "levels.rms_dbfs", _r(lv.rms_dbfs, 1))
        f.add(lv, "levels.peak_dbfs", _r(lv.peak_dbfs, 1))
        f.add(lv, "levels.clipping_ratio", _r(lv.clipping_ratio, 5))
        f.add(lv, "levels.silence_ratio", _r(lv.silence_ratio))
    _speakers(f, records.get("diarization"), records.get("speakers"))
    # an event tagger's classes become `sound.event` facts; other labels (the heuristic's, an AudioSet tagger's
    # all) stay sound tags
    if (named := records.get("events")) is not None:
        _events(f, named, prompt_dir)
    if (tags := records.get("tags")) is not None and (
        not _events(f, tags, prompt_dir) or tags.label_set.startswith("audioset")
    ):
        f.labels(tags, "sound_tags.clip", tags.clip_tags, 0.05)
        for w in tags.windows[:MAX_LIST]:
            f.labels(tags, "sound_tags.window", w.tags, 0.5, subject=f"{w.start_s:g}-{w.end_s:g}")
    if (ya := records.get("yamnet")) is not None:
        _yamnet_events(f, ya, cfg.presence_confidence)
    _music(f, records.get("music"), records.get("separation"), cfg.music_tag_confidence)
    if (ac := records.get("acoustics")) is not None:
        for name, v in (
            ("rt60_s", _r(ac.rt60_s, 2)),
            ("drr_db", _r(ac.drr_db, 1)),
            ("snr_db", _r(ac.snr_db, 1)),
            ("bandwidth_hz", _r(ac.bandwidth_hz, 0)),
            ("plcmos", _r(ac.plcmos, 2)),
        ):  # a silent clip has no sound whose noise, echo or bandwidth could be described: kept, unconfident
            conf = 0.0 if dom.silent else _blind_estimate_confidence(name, v, f.facts)
            f.add(ac, f"acoustics.{name}", v, confidence=conf)
    known = {
        "domain",
        "vad",
        "asr",
        "asr_check",
        "dnsmos",
        "levels",
        "diarization",
        "speakers",
        "tags",
        "events",
        "yamnet",
        "music",
        "separation",
        "acoustics",
    }
    for table, rec in sorted(records.items()):  # tables this module does not know: scalar fields and labels
        if table not in known and isinstance(rec, BaseModel):
            _generic(f, rec, table)
    return _record(clip, _heard_domain(code, f.facts), f.facts)


def _yamnet_events(f: _Facts, rec: Any, bar: float) -> None:
    """`sound.event` facts from YAMNet's frame scores: each class or ontology group its measured policy lets state
    an event (`earmark.experts.yamnet.events`), per run of 2 s windows, its confidence the precision measured on
    the DEV packages at the threshold. A stated event is a sound heard: where the domain tagger was unsure of
    sound events, or called them absent, the named event makes them present (YAMNet hears a dog under speech
    that the domain tagger misses; the precision of its statements was measured in exactly such scenes)."""
    from earmark.experts.yamnet.events import class_names, stated_events

    n = len(rec.frame_scores)
    if not n or any(x.type == "content.silent" and x.value == "silent" for x in f.facts):
        return
    n_samples = int(round(((n - 1) * rec.hop_s + rec.frame_s - rec.padded_s) * 16_000))
    stated = stated_events(rec.frame_scores, n_samples, class_names())
    for ev in stated[:MAX_LIST]:
        f.add(
            rec, "sound.event", _r(ev.score), ev.name, subject=f"{ev.start_s:g}-{ev.end_s:g}", confidence=ev.precision
        )
    sure = max((ev.precision for ev in stated), default=0.0)
    for i, fact in enumerate(f.facts):
        if fact.type == "content.sound_events" and fact.value != "present" and sure >= bar:
            f.facts[i] = fact.model_copy(update={"value": "present", "confidence": round(sure, 3)})


def _heard_domain(domain: str, facts: Sequence[Fact]) -> str:
    """The domain code with sound events present where a named event made them present."""
    heard = any(x.type == "content.sound_events" and x.value == "present" for x in facts)
    return domain[:2] + "A" if heard and domain[2] == "0" else domain


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
        for w in re.findall(r"[A-Za-z]+(?:['’][A-Za-z]+)?", raw):
            low = w.lower().replace("’", "'")
            if low not in known and low.split("'")[0] not in known:
                out.append(w)
    return out


def _quotes(f: _Facts, asr: Any, check: Any) -> None:
    """One `speech.quote` fact per whole phrase, its confidence the calibrated P(its words are right) from its
    least sure word (`QUOTE_CALIBRATION`) × (1 − the hallucination score): a quote is made only of phrases every
    word of which was heard with confidence (a mean over the transcript let "spare. We add everything" through
    for "despair, we had everything"); the rule-written quote and the audit take only phrases at or above
    `render.QUOTE_CONFIDENCE`."""
    hallucination = check.hallucination_score if check is not None else 0.5
    cut = phrases(asr.words)
    for i, phrase in enumerate(cut[:MAX_LIST]):
        text = " ".join(w.word.strip() for w in phrase)  # the experts store words stripped
        least = min(w.prob for w in phrase)
        subject = f"{phrase[0].start_s:.1f}-{phrase[-1].end_s:.1f}"
        conf = next(p for bound, p in QUOTE_CALIBRATION if least >= bound) * (1.0 - hallucination)
        if i == len(cut) - 1 and text[-1:] not in PHRASE_END:  # the clip's end may have cut it short
            conf *= UNFINISHED
        if not_words(text):  # Whisper spelled a sound it could not place ("Foop!" for a hiccup, fresh5)
            conf = min(conf, NOT_A_WORD_CONFIDENCE)
        f.add(asr, "speech.quote", _r(least), text, subject=subject, confidence=conf)


PAPER_EVENT_THRESHOLD = 0.5  # an AudioSet tagger's (uncalibrated) probability from which a mapped class is heard


def event_policy(label_set: str, prompt_dir: Path | None = None) -> dict[str, tuple[float, float]] | None:
    """The event classes that may state an event for a tagger's label set: {class: (threshold, precision at it)};
    None for a label set that names no events (the coarse heuristic's). An AudioSet label set's classes come from
    `evidence.toml`, read on every call (inside the stage's prompt guard; a cache here once hid an undeclared read
    from the guard)."""
    if label_set.startswith("earmark-events"):
        return _probe_policy()
    if label_set.startswith("audioset"):
        return dict.fromkeys(event_classes(prompt_dir), (PAPER_EVENT_THRESHOLD, 0.0))
    return None


@functools.cache
def _probe_policy() -> dict[str, tuple[float, float]]:
    """The event tagger's classes that may state an event (its class file, package data: no prompt)."""
    from earmark.experts.learned.events import load_classes

    meta = load_classes()
    return {
        c["name"]: (c["threshold"], c["oof"]["precision"] or 0.0)
        for c in meta["classes"]
        if c["in_evidence"] and not _shown_wrong(c["dev"], meta["precision_bar"])
    }


def _shown_wrong(dev: dict, bar: float) -> bool:
    """A class admitted on TRAIN's out-of-fold windows whose DEV packages then gave precision under the bar (the
    event tagger's footsteps 0.83, crowd 0.62, sheep 0.60): it states no event. A class that stated nothing on DEV
    has not been shown wrong."""
    return dev.get("precision") is not None and dev["precision"] < bar


def _events(f: _Facts, tags: Any, prompt_dir: Path | None = None) -> bool:
    """`sound.event` facts from an event tagger's windows: per class that may state an event, each run of
    windows at or above its threshold is one fact (its span, the run's highest probability; the confidence is
    that probability, or the class's precision at the threshold measured by package where that is higher).
    A paper tagger's AudioSet labels count for the class they map to. False: not an event tagger."""
    policy = event_policy(tags.label_set, prompt_dir)
    if policy is None:
        return False
    from earmark.prompts import load_phrases
    from earmark.stages.facts.events import audioset_class, registry

    classes = registry(load_phrases("evidence", prompt_dir)) if tags.label_set.startswith("audioset") else {}
    runs: dict[str, list[list[float]]] = {}  # class -> [start, end, best p] runs of consecutive windows
    for w in tags.windows:
        best: dict[str, float] = {}
        for lp in w.tags:
            cls = audioset_class(lp.label, classes) if classes else lp.label
            if cls in policy and lp.prob >= policy[cls][0]:
                best[cls] = max(best.get(cls, 0.0), lp.prob)
        for cls, p in best.items():
            run = runs.setdefault(cls, [])
            if run and w.start_s <= run[-1][1] + 1e-6:
                run[-1][1], run[-1][2] = max(run[-1][1], w.end_s), max(run[-1][2], p)
            else:
                run.append([w.start_s, w.end_s, p])
    for cls, spans in sorted(runs.items()):
        for a, b, p in spans[:MAX_LIST]:
            conf = max(p, policy[cls][1])
            f.add(tags, "sound.event", _r(p), cls, subject=f"{a:g}-{b:g}", confidence=conf)
    return True


def _transcript(f: _Facts, asr: Any, check: Any, vad: Any) -> None:
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
        asr, "speech.words_per_s", _r(len(asr.words) / vad.speech_s, 2) if vad.speech_s > 0 else None, confidence=conf
    )
    f.add(asr, "speech.no_speech_prob", _r(asr.no_speech_prob))
    if check is not None:
        f.add(
            check, "speech.hallucination", _r(check.hallucination_score), ",".join(check.flags) or None, confidence=1.0
        )


def _semitones(a: float, b: float) -> float:
    return abs(12.0 * math.log2(a / b))


def speaker_count(
    n: int, profiles: Sequence[Any], voices: Sequence[Any], events: bool = False, genders: Sequence[str | None] = ()
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
    (`genders`, calibrated_gender): an engine is not heard as a woman speaking. Without pitch groups (an
    attribute model's profiles), `speaker_count_confidence`, and beside sound events not without pitch at all
    (a DEV clip's music and effects under one reader made two clusters and no pitched voice)."""
    if not voices:
        conf = speaker_count_confidence(n, profiles)
        unpitched = not any(p.pitch_median_hz for p in profiles)
        return n, min(conf, UNCHECKED_CONFIDENCE) if events and unpitched else conf
    if len(voices) == 2 and len(genders) == 2 and None not in genders and genders[0] != genders[1] and n <= 2:
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


def _speakers(f: _Facts, dia: Any, spk: Any) -> None:
    if dia is None or dia.skipped_reason is not None:
        return
    profiles = spk.speakers if spk is not None else []
    voices = spk.voices if spk is not None else []
    state = {x.type: x.value for x in f.facts if x.type.startswith("content.")}
    events = state.get("content.sound_events") != "absent"
    heuristic = str(getattr(spk, "backend", "")).startswith("heuristic:pitch")
    genders = [
        calibrated_gender(v.gender, v.pitch_median_hz, v.gender_check) if heuristic else v.gender for v in voices
    ]
    agreed = [_agreed(g) if v.gender_check else None for v, g in zip(voices, genders, strict=True)] if heuristic else []
    n, conf = speaker_count(dia.n_speakers, profiles, voices, events, agreed)
    f.add(dia, "speakers.count", float(n), confidence=conf)
    for i, (voice, gender) in enumerate(zip(voices, genders, strict=True), 1):  # the voices by pitch stand for
        f.labels(spk, "speaker.gender", gender, subject=f"V{i}")  # the diarized speakers' genders
        f.add(spk, "speaker.pitch_median_hz", voice.pitch_median_hz, subject=f"V{i}")
    people = {p.speaker: p for p in spk.speakers} if spk is not None else {}
    for name in sorted({t.speaker for t in dia.turns}):
        f.add(
            dia,
            "speaker.speech_s",
            _r(sum(t.end_s - t.start_s for t in dia.turns if t.speaker == name), 2),
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
            f.add(spk, "speaker.pitch_median_hz", _r(p.pitch_median_hz, 1), subject=name)


def _music(f: _Facts, mus: Any, sep: Any, tag_confidence: float = EvidenceSection().music_tag_confidence) -> None:
    if mus is None or not mus.analyzed:
        return
    f.add(mus, "music.tempo_bpm", _r(mus.tempo_bpm, 1), confidence=mus.tempo_confidence or 0.0)
    f.add(mus, "music.beats", float(len(mus.beat_times_s)))
    # HPSS and onsets read the whole mix: sound effects count as percussion and beats (15 items called
    # strings-only music percussive in a held-out build). On music with events they are not facts about the music.
    events = next((x.value for x in f.facts if x.type == "content.sound_events"), None)
    mixed = None if events == "absent" else ONE_SIDED_CONFIDENCE
    f.add(mus, "music.beat_strength", _r(mus.beat_strength), confidence=mixed)
    f.add(mus, "music.key", value=mus.key, confidence=mus.key_confidence or 0.0)
    f.add(mus, "music.harmonic_ratio", _r(mus.harmonic_ratio), confidence=mixed)
    groups = tag_groups()
    for lp in mus.tags:  # the group (instrument, genre, mood) as the subject, where the tag file knows it
        f.labels(mus, "music.tag", [lp], min_prob=tag_confidence, subject=groups.get(lp.label))
    contour = mus.loudness_contour_db
    f.add(mus, "music.loudness_range_db", _r(max(contour) - min(contour), 1) if contour else None)
    if sep is not None and sep.skipped_reason is None:
        f.add(sep, "separation.vocals_speech_s", sep.vocals_speech_s)
        for s in sep.stems:
            f.add(sep, "separation.stem_share", _r(s.energy_share), subject=s.stem)


@functools.cache
def tag_groups() -> dict[str, str]:
    """Music tag → its group (instrument, genre, mood, vocals), from the embedded music tagger's tag file."""
    from earmark.experts.learned.musictags import load_tag_file

    return {t["tag"]: t["group"] for t in load_tag_file()["tags"]}


def _generic(f: _Facts, rec: BaseModel, table: str) -> None:
    for name, value in rec.model_dump(exclude=LINEAGE).items():
        if isinstance(value, bool):
            f.add(rec, f"{table}.{name}", float(value), generic=True)
        elif isinstance(value, (int, float)):
            f.add(rec, f"{table}.{name}", round(float(value), 4), generic=True)
        elif isinstance(value, str):
            f.add(rec, f"{table}.{name}", value=value[:500], generic=True)
        elif isinstance(value, list):
            for item in value[:MAX_LIST]:
                if isinstance(item, dict) and {"label", "prob"} <= set(item):
                    p = round(float(item["prob"]), 3)
                    f.add(rec, f"{table}.{name}", p, str(item["label"]), confidence=p, generic=True)


def _record(clip: Clip, domain: str, facts: list[Fact]) -> ClipEvidence:
    blob = "\n".join(fact.model_dump_json() for fact in facts)
    return ClipEvidence(
        clip_id=clip.clip_id,
        domain=domain,
        duration_s=clip.duration_s,
        facts=facts,
        evidence_sha=hashlib.sha256(blob.encode()).hexdigest()[:16],
    )


def run(
    expert_tables: Sequence[str], cfg: EvidenceSection, inputs: Inputs, prompt_dir: Path | None = None
) -> dict[str, list[ClipEvidence]]:
    """The stage function: one ClipEvidence per clip that has a domain decision (the analyze tables say why
    another has none)."""
    by_table = {t: {r.clip_id: r for r in inputs(t)} for t in expert_tables}
    out = []
    for clip in inputs("clips"):
        records = {t: by_clip.get(clip.clip_id) for t, by_clip in by_table.items()}
        if records.get("domain") is not None:
            out.append(build_evidence(clip, {t: r for t, r in records.items() if r is not None}, cfg, prompt_dir))
    return {"evidence": out}


def evidence_of(
    clip_id: str,
    domain: str,
    values: Mapping[str, Any] | None = None,
    *,
    duration_s: float = 10.0,
    probs: Sequence[float] | None = None,
    presence_confidence: float = EvidenceSection().presence_confidence,
) -> ClipEvidence:
    """Evidence written by hand (tests, benchmarks with planted defects): `values` maps a fact type to a
    number, a text, or {label: probability}; `subject@type` keys set a subject ("S1@speaker.gender"). The
    content facts follow the domain code (probability 0.95 present / 0.05 absent unless `probs`, "uncertain"
    below `presence_confidence`, as in `build_evidence`); a value
    given as (number_or_text, confidence) sets the confidence, otherwise measurements get the registry's."""
    facts = []
    for idx, content in enumerate(("speech", "music", "sound_events")):
        present = domain[idx] != "0"
        p = probs[idx] if probs is not None else (0.95 if present else 0.05)
        state, conf = presence_state(present, p, domain == "000", presence_confidence)
        facts.append(Fact(type=f"content.{content}", value=state, number=p, source="domain", confidence=conf))
    facts.append(
        Fact(
            type="content.silent",
            value="silent" if domain == "000" else "not silent",
            number=1.0 if domain == "000" else 0.0,
            source="domain",
            confidence=1.0,
        )
    )
    for key, value in (values or {}).items():
        subject, _, type_ = key.rpartition("@")
        common = {"type": type_, "subject": subject or None, "source": type_.split(".")[0]}
        conf = measured(type_)
        if isinstance(value, tuple):
            value, conf = value
        if isinstance(value, Mapping):
            facts += [Fact(**common, value=label, number=p, confidence=p) for label, p in value.items()]
        elif isinstance(value, str):
            facts.append(Fact(**common, value=value, confidence=1.0 if conf is None else conf))
        elif value is not None:
            facts.append(Fact(**common, number=float(value), confidence=conf))
    return _record(
        Clip(
            clip_id=clip_id,
            source_path="",
            source_sha256="",
            source_format="",
            clip_index=0,
            offset_s=0.0,
            duration_s=duration_s,
            sample_rate=16_000,
            audio_flac=b"",
        ),
        domain,
        facts,
    )
