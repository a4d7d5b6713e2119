"""evidence stage: the expert tables of one clip folded into a typed `ClipEvidence` (a list of atomic facts).

Every fact carries a confidence: the expert's own probability where it gives one (tagger, gender, key,
tempo after the octave check, transcript from word probabilities and the hallucination check), and a
fixed, documented confidence for measurements (the fact-type registry, earmark.schemas.facts). Renderers and the claim audit use only facts
whose confidence reaches `[evidence] min_confidence`; the others stay in the table, visibly unconfident.
Speech, music and sound-event presence is stricter: the domain code's verdict on a content is a fact
("present" / "absent") only when its calibrated probability reaches `[evidence] presence_confidence`,
otherwise the fact says "uncertain" and nothing may be written or claimed about that content.
Every expert table contributes: the known ones fact by fact, any other (e.g. a paper-profile table) one
fact per scalar field and per label; except the tables of `NOT_IN_EVIDENCE`, which the stage does not read."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from earmark.core.config import EvidenceSection
from earmark.schemas.evidence import ClipEvidence, Fact
from earmark.schemas.records import Clip
from earmark.stages.base import Inputs, StageSpec
from earmark.stages.facts import bands
from earmark.stages.synthesize.evidence.facts import (
    LINEAGE,
    MAX_LIST,
    ONE_SIDED_CONFIDENCE,
    Facts,
    T,
    measured,
    rounded,
)
from earmark.stages.synthesize.evidence.sounds import (
    _events,
    _heard_domain,
    _music,
    _probe_policy,
    _yamnet_events,
    event_classes,
    event_classes_sha,
    event_policy,
    yamnet_policy_sha,
)
from earmark.stages.synthesize.evidence.speech import (
    AGREED_CONFIDENCE,
    CHECKED_CONFIDENCE,
    MALE_CONFIDENCE,
    QUOTE_CALIBRATION,
    UNCHECKED_CONFIDENCE,
    UNSURE_GENDER,
    _speakers,
    _transcript,
    calibrated_gender,
    music_marker,
    not_words,
    phrases,
    speaker_count,
)

# 7: a low SNR only on speech alone; 8: blind SNR (unless clean) and RT60 only on speech alone; 9: quotable phrases
# (`speech.quote`), the HPSS texture and beat strength only on music without sound events; 10: voices by pitch,
# named events (`sound.event`), music tags by group; 14: a voice's gender carries a calibrated probability; 15: speech
# over music heard by the VAD as one unbroken segment is not stated; 16: nor speech over music without one word; 17:
# only a low-pitched male voice has a gender above the bar; 18: the same for a diarized speaker's gender; 19: YAMNet's
# named events under its measured policy, which also make sound present; 20: a phrase with a word outside the English
# word list is no quote ("Foop!" for a hiccup); 21: a voice's gender where its pitch and mn04's opinion agree; 22:
# two pitch groups under one cluster state no count, nor does an unpitched clustering beside sound events; 23: a run
# of sure words inside a phrase with an unsure word is a quote of its own (`speech.pieces`); 24: such runs of 4 words
# or more, and a whole sure phrase at the measured 0.91; 25: a word Whisper begins with a hyphen ("lip -ridge") is
# no word; 26: a named-event class measured on fewer than 3 DEV packages states its nearest trusted ancestor; 27: speech
# over music whose transcript is only Whisper's music mark ("🎵Music🎵") is not stated; 28: nor is the absence of sound
# events beside music; 29: a man and a woman by pitch and listener are no count of two where sound events are sure;
# 30: a whole phrase of one or two words states its measured 0.74, no quote
EVIDENCE_VERSION = "30"


# Speech over music that the VAD hears as one unbroken segment over >= UNBROKEN_VOICE of the clip is a sung or
# voice-like lead more often than speech: of the speech-over-music clips of four real-audio builds (devbench,
# checkbench, review, fresh; 2026-11-27), the two such clips had no voice at all (Drascula's music, whose lead
# Whisper "transcribed" at a mean word probability of 0.24-0.68), and every clip with a real voice paused (VAD
# ratio <= 0.86, 3-4 segments). Nor is speech over music in which Whisper wrote not one word although the VAD
# gave it speech: the three such clips of five builds (fresh2, 2026-11-27) had no voice; no real voice of the 240
# clips got an empty transcript; nor where its transcript is only Whisper's mark for music ("🎵Music🎵": fresh14's one
# such clip had no voice). Speech is then "uncertain": no item states or denies it.
UNBROKEN_VOICE, SUNG_CONFIDENCE = 0.95, 0.5
# Nor is the absence of sound events under music stated: the domain tagger misses sound under music (its DEV
# confusions are S0A / SMA), and on the untuned check builds fresh13-16 its sure "no sound events" beside music was
# right 4 of 5 times (thunder at 1.9-5.9 s under fresh16's music was denied), against 28 of 28 on silent clips and
# beside speech alone. The fact keeps the tagger's "absent" below the items' confidence bar, so no item states or
# denies it, while what it gates is still gated by it (the music's texture and beat, a speaker count over music). A
# named event still makes sound present.


# Expert tables the evidence does not read (nor key on). YAMNet's AudioSet scores are read: only its classes and
# groups whose precision was measured on labelled DEV packages state events (earmark.experts.yamnet.events).
NOT_IN_EVIDENCE: frozenset[str] = frozenset()


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
    f = Facts()
    dom = records["domain"]
    calibrated = {nv.name: nv.value for nv in dom.features if nv.name.startswith("calibrated_")}
    vad, asr = records.get("vad"), records.get("asr")
    unbroken = vad is not None and len(vad.segments) == 1 and vad.speech_ratio >= UNBROKEN_VOICE
    wordless = (
        asr is not None
        and asr.skipped_reason is None
        and asr.vad_speech_s > 0
        and (not asr.words or music_marker(asr.text))
    )
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
        if content == "sound_events" and state == "absent" and code[1] != "0":
            conf = min(conf, SUNG_CONFIDENCE)  # under music it may be missed: not stated (what it gates stays gated)
        f.add(dom, f"content.{content}", rounded(float(prob)), state, confidence=conf)
    f.add(dom, "content.silent", 1.0 if dom.silent else 0.0, "silent" if dom.silent else "not silent", confidence=1.0)
    for w in dom.windows[:MAX_LIST]:  # when in the clip each content is heard
        f.labels(dom, "content.window", w.tags, 0.5, subject=f"{w.start_s:g}-{w.end_s:g}")
    if vad is not None:
        f.add(vad, "speech.seconds", rounded(vad.speech_s, 2))
        f.add(vad, "speech.ratio", rounded(vad.speech_ratio))
        f.add(vad, "speech.segments", float(len(vad.segments)))
        for seg in vad.segments[:MAX_LIST]:
            f.add(
                vad, "speech.segment", rounded(seg.end_s - seg.start_s, 2), subject=f"{seg.start_s:.1f}-{seg.end_s:.1f}"
            )
        _transcript(f, records.get("asr"), records.get("asr_check"), vad)
    if (q := records.get("dnsmos")) is not None and q.ovrl_mos is not None:  # speech quality only of speech
        for name in ("ovrl_mos", "sig_mos", "bak_mos"):
            f.add(q, f"quality.dnsmos_{name.split('_')[0]}", rounded(getattr(q, name), 2))
    if (lv := records.get("levels")) is not None:
        f.add(lv, "levels.lufs", rounded(lv.lufs, 1))
        f.add(lv, "levels.rms_dbfs", rounded(lv.rms_dbfs, 1))
        f.add(lv, "levels.peak_dbfs", rounded(lv.peak_dbfs, 1))
        f.add(lv, "levels.clipping_ratio", rounded(lv.clipping_ratio, 5))
        f.add(lv, "levels.silence_ratio", rounded(lv.silence_ratio))
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
            ("rt60_s", rounded(ac.rt60_s, 2)),
            ("drr_db", rounded(ac.drr_db, 1)),
            ("snr_db", rounded(ac.snr_db, 1)),
            ("bandwidth_hz", rounded(ac.bandwidth_hz, 0)),
            ("plcmos", rounded(ac.plcmos, 2)),
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


def _generic(f: Facts, rec: BaseModel, table: str) -> None:
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
    below `presence_confidence`, as in `build_evidence`, but sound events absent beside music are stated with the
    tagger's confidence: what the evidence is given); a value
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


__all__ = [  # the stage, and what other modules read of its parts (speech.py, sounds.py)
    "AGREED_CONFIDENCE",
    "CHECKED_CONFIDENCE",
    "EVIDENCE_VERSION",
    "MALE_CONFIDENCE",
    "QUOTE_CALIBRATION",
    "UNCHECKED_CONFIDENCE",
    "UNSURE_GENDER",
    "_probe_policy",
    "build_evidence",
    "calibrated_gender",
    "event_classes",
    "event_policy",
    "evidence_of",
    "evidence_tables",
    "measured",
    "not_words",
    "phrases",
    "run",
    "spec",
    "speaker_count",
    "yamnet_policy_sha",
]
