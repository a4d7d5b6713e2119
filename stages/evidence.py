"""Evidence: the expert tables of one clip folded into one compact JSON, and per-item views of it.

Small models write sensible text only from small focused prompts, so each caption kind gets a short
plain-language rendering of *its own* evidence (`render`), with numbers turned into words the model can
repeat without inventing. The full JSON (with probabilities) is stored in the `evidence` table and is what
a capable endpoint gets: every expert table of the clip is in it, the known ones summarised, any other
(e.g. a paper-profile table this module does not know) dumped generically without its lineage fields.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from earmark.schemas.records import (
    AcousticProfile,
    Clip,
    Diarization,
    DomainDecision,
    Evidence,
    LabelProb,
    MusicAnalysis,
    RoomAcoustics,
    Separation,
    SoundEvents,
    SpeakerAttributes,
    SpeechActivity,
    SpeechQuality,
    Transcript,
    TranscriptCheck,
)

EVIDENCE_VERSION = "2"
MAX_TRANSCRIPT_WORDS = 60
MAX_LIST = 12  # list fields of generically included tables are cut to this many items
SUMMARISED = {"domain", "vad", "asr", "dnsmos", "levels", "asr_check", "diarization", "speakers", "tags",
              "separation", "music", "acoustics"}
LINEAGE = {"clip_id", "expert", "expert_version"}


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(float(x), nd)


def build_evidence(clip: Clip, records: Mapping[str, Any]) -> dict[str, Any]:
    """Fold the expert records of one clip (by table name) into the evidence dict."""
    dom: DomainDecision = records["domain"]
    ev: dict[str, Any] = {
        "clip_id": clip.clip_id,
        "duration_s": clip.duration_s,
        "domain": dom.domain,
        "content": {
            "speech": {"present": dom.domain[0] == "S", "prob": _r(dom.speech_prob)},
            "music": {"present": dom.domain[1] == "M", "prob": _r(dom.music_prob)},
            "sound_events": {"present": dom.domain[2] == "A", "prob": _r(dom.sound_prob)},
            "silent": dom.silent,
            "backend": dom.backend,
        },
        "signal": {f.name: _r(f.value) for f in dom.features},
    }
    vad: SpeechActivity | None = records.get("vad")
    asr: Transcript | None = records.get("asr")
    if vad is not None:
        ev["speech"] = {
            "speech_s": _r(vad.speech_s, 2),
            "speech_ratio": _r(vad.speech_ratio),
            "segments": len(vad.segments),
        }
        if asr is not None and asr.text.strip():
            words = asr.words
            probs = [w.prob for w in words]
            ev["speech"].update({
                "transcript": asr.text.strip(),
                "language": asr.language,
                "words": len(words),
                "word_confidence": _r(sum(probs) / len(probs)) if probs else None,
                "words_per_s": _r(len(words) / vad.speech_s, 2) if vad.speech_s > 0 else None,
                "no_speech_prob": _r(asr.no_speech_prob),
            })
    q: SpeechQuality | None = records.get("dnsmos")
    if q is not None:
        ev["quality"] = {"dnsmos_ovrl": _r(q.ovrl_mos, 2), "dnsmos_sig": _r(q.sig_mos, 2), "dnsmos_bak": _r(q.bak_mos, 2)}
    lv: AcousticProfile | None = records.get("levels")
    if lv is not None:
        ev["levels"] = {
            "lufs": _r(lv.lufs, 1), "rms_dbfs": _r(lv.rms_dbfs, 1), "peak_dbfs": _r(lv.peak_dbfs, 1),
            "clipping_ratio": _r(lv.clipping_ratio, 5), "silence_ratio": _r(lv.silence_ratio),
        }
    _add_slots(ev, records)
    for table, rec in sorted(records.items()):  # tables this module does not know: included as they are
        if table not in SUMMARISED and isinstance(rec, BaseModel):
            ev[table] = _generic(rec.model_dump(exclude=LINEAGE))
    return ev


def _generic(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _generic(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_generic(v) for v in value[:MAX_LIST]]
    return value


def _probs(labels: list[LabelProb], min_prob: float = 0.0) -> dict[str, float]:
    return {lp.label: round(lp.prob, 3) for lp in labels if lp.prob >= min_prob}


def _add_slots(ev: dict[str, Any], records: Mapping[str, Any]) -> None:
    """The issue-[3/7] expert slots: speakers, transcript check, sound tags, music, acoustics."""
    chk: TranscriptCheck | None = records.get("asr_check")
    if chk is not None and "transcript" in ev.get("speech", {}):
        ev["speech"]["hallucination"] = {"score": _r(chk.hallucination_score), "flags": chk.flags,
                                         "vad_support": _r(chk.vad_support), "backend": chk.backend}
    dia: Diarization | None = records.get("diarization")
    spk: SpeakerAttributes | None = records.get("speakers")
    if dia is not None and dia.skipped_reason is None:
        people = {p.speaker: p for p in spk.speakers} if spk is not None else {}
        ev["speakers"] = {
            "count": dia.n_speakers, "backend": dia.backend,
            "attributes_backend": spk.backend if spk is not None else None,
            "speakers": [
                {"speaker": name, "speech_s": _r(sum(t.end_s - t.start_s for t in dia.turns if t.speaker == name), 2)}
                | ({"gender": _probs(p.gender), "age_band": _probs(p.age_band), "emotion": _probs(p.emotion),
                    "accent": _probs(p.accent), "pitch_median_hz": _r(p.pitch_median_hz, 1), "method": p.method}
                   if (p := people.get(name)) is not None else {})
                for name in sorted({t.speaker for t in dia.turns})
            ],
            "turns": len(dia.turns),
        }
    tags: SoundEvents | None = records.get("tags")
    if tags is not None:
        ev["sound_tags"] = {"label_set": tags.label_set, "backend": tags.backend, "clip": _probs(tags.clip_tags, 0.05),
                            "windows": [{"start_s": w.start_s, **_probs(w.tags, 0.5)} for w in tags.windows[:MAX_LIST]]}
    sep: Separation | None = records.get("separation")
    mus: MusicAnalysis | None = records.get("music")
    if mus is not None and mus.analyzed:
        contour = mus.loudness_contour_db
        ev["music"] = {
            "backend": mus.backend, "tempo_bpm": _r(mus.tempo_bpm, 1), "beats": len(mus.beat_times_s),
            "beat_strength": _r(mus.beat_strength), "key": mus.key, "key_confidence": _r(mus.key_confidence),
            "harmonic_ratio": _r(mus.harmonic_ratio), "tags": _probs(mus.tags), "tagger": mus.tagger,
            "loudness_range_db": _r(max(contour) - min(contour), 1) if contour else None,
        }
        if sep is not None and sep.skipped_reason is None:
            ev["music"]["separation"] = {"method": sep.method, "vocals_speech_s": sep.vocals_speech_s,
                                         **{s.stem: _r(s.energy_share) for s in sep.stems}}
    ac: RoomAcoustics | None = records.get("acoustics")
    if ac is not None:
        ev["acoustics"] = {"rt60_s": _r(ac.rt60_s, 2), "drr_db": _r(ac.drr_db, 1), "snr_db": _r(ac.snr_db, 1),
                           "bandwidth_hz": _r(ac.bandwidth_hz, 0), "plcmos": _r(ac.plcmos, 2), "method": ac.method,
                           "backend": ac.backend}


def to_record(ev: dict[str, Any]) -> Evidence:
    blob = json.dumps(ev, sort_keys=True, separators=(",", ":"))
    return Evidence(
        clip_id=ev["clip_id"], domain=ev["domain"], evidence_json=blob,
        evidence_sha=hashlib.sha256(blob.encode()).hexdigest()[:16],
    )


# ------------------------------------------------------------------------------ words for numbers
def _grade(value: float | None, bands: list[tuple[float, str]], top: str) -> str:
    """The word for the first band whose upper bound `value` is below; `top` above all of them."""
    if value is None:
        return "unknown"
    return next((word for bound, word in bands if value < bound), top)


# Upper bounds (exclusive) and their words. DNSMOS is on a 1-5 scale; loudness in LUFS (or dBFS RMS).
_PRESENCE = [(0.3, "absent"), (0.5, "possibly present, faint"), (0.8, "present")]
_LOUDNESS = [(-55, "near silent"), (-38, "very quiet"), (-26, "quiet"), (-14, "moderately loud")]
_QUALITY = [(2.0, "poor"), (2.7, "fair"), (3.3, "good")]
_NOISE = [(2.5, "strong background noise"), (3.4, "some background noise")]
_PACE = [(1.8, "slow"), (3.2, "moderate")]  # words per second of speech


def _presence(prob: float | None) -> str:
    return _grade(prob, _PRESENCE, "clearly present")


def _loudness(lufs: float | None, rms: float | None) -> str:
    level = lufs if lufs is not None else (rms if rms is not None else -120.0)
    return _grade(level, _LOUDNESS, "loud")


def _quality(mos: float | None) -> str:
    return _grade(mos, _QUALITY, "very clean")


def _noise(bak: float | None) -> str:
    return _grade(bak, _NOISE, "little background noise")


def _pace(wps: float | None) -> str:
    return _grade(wps, _PACE, "fast")


def _clean_transcript(text: str) -> str:
    # Angle brackets would let speech close the <transcript> tag; the words themselves are kept.
    words = re.sub(r"[<>{}]", " ", text).split()
    out = " ".join(words[:MAX_TRANSCRIPT_WORDS])
    return out + (" …" if len(words) > MAX_TRANSCRIPT_WORDS else "")


def _content_lines(ev: dict[str, Any]) -> list[str]:
    c = ev["content"]
    if c["silent"]:
        return ["- content: essentially silence, no speech, music or sound events"]
    return [
        f"- speech: {_presence(c['speech']['prob'])}",
        f"- music: {_presence(c['music']['prob'])}",
        f"- other sound events: {_presence(c['sound_events']['prob'])}",
    ]


def _share(ratio: float) -> str:
    if ratio >= 0.75:
        return "most of the clip"
    if ratio >= 0.4:
        return "about half of the clip"
    return "a small part of the clip"


def _count(n: float) -> str:
    return "one" if n <= 1 else "a few" if n <= 3 else "several" if n <= 8 else "many"


def _top(probs: dict[str, float] | None, min_prob: float = 0.6) -> str | None:
    """The most likely label when it is likely enough to state."""
    if not probs:
        return None
    label, prob = max(probs.items(), key=lambda kv: kv[1])
    return label if prob >= min_prob else None


def _speaker_lines(ev: dict[str, Any]) -> list[str]:
    spk = ev.get("speakers")
    if not spk or not spk.get("count"):
        return []
    n = spk["count"]
    lines = ["- one speaker" if n == 1 else f"- {({2: 'two', 3: 'three'}).get(n, 'several')} different speakers"]
    for i, p in enumerate(spk["speakers"][:3]):
        words = [w for w in (_top(p.get("age_band"), 0.8), _top(p.get("gender"), 0.8)) if w and w != "adult"]
        mood = {"calm": "calm", "animated": "lively"}.get(_top(p.get("emotion"), 0.5) or "")
        desc = ", ".join(x for x in (" ".join(words) + " voice" if words else "", mood and f"{mood} tone") if x)
        if desc:
            lines.append(f"- {'the' if n == 1 else ('first', 'second', 'third')[i]} speaker: {desc}")
    return lines


def _speech_lines(ev: dict[str, Any]) -> list[str]:
    sp = ev.get("speech") or {}
    if not ev["content"]["speech"]["present"]:
        return []
    stretches = "one stretch" if sp.get("segments", 0) <= 1 else "several stretches with pauses"
    lines = [f"- speech fills {_share(sp.get('speech_ratio') or 0)}, in {stretches}"] + _speaker_lines(ev)
    doubtful = (sp.get("hallucination") or {}).get("score", 0.0) >= 0.5
    if sp.get("transcript") and not doubtful:
        lines.append(f"- speaking pace: {_pace(sp.get('words_per_s'))}")
        lines.append(f"- transcript: <transcript>{_clean_transcript(sp['transcript'])}</transcript>")
    else:
        lines.append("- the words could not be made out")
    return lines


def _music_lines(ev: dict[str, Any]) -> list[str]:
    mu = ev.get("music")
    if mu:  # the music expert ran: its tempo, key and HPSS split
        lines = []
        bpm, strength = mu.get("tempo_bpm"), mu.get("beat_strength") or 0.0
        if bpm and strength >= 0.3:
            tempo = "slow" if bpm < 85 else "moderate" if bpm < 125 else "fast"
            lines.append(f"- a {'clear' if strength >= 0.6 else 'soft'} steady beat at a {tempo} tempo")
        else:
            lines.append("- no clear steady beat")
        if mu.get("key") and (mu.get("key_confidence") or 0) >= 0.4:
            lines.append(f"- the harmony centres on {mu['key']}")
        harm = mu.get("harmonic_ratio")
        if harm is not None:
            lines.append("- mostly sustained notes and chords" if harm >= 0.8 else
                         "- strongly percussive and rhythmic" if harm < 0.4 else "- a mix of melody and percussion")
        if (mu.get("loudness_range_db") or 0) > 12:
            lines.append("- the loudness changes a lot over the clip")
        return lines
    sig = ev.get("signal", {})
    lines = []
    if (sig.get("grid_score") or 0) > 0.2 and sig.get("grid_period_s"):
        bpm = 60.0 / sig["grid_period_s"]
        tempo = "slow" if bpm < 85 else "moderate" if bpm < 125 else "fast"
        lines.append(f"- a steady beat at a {tempo} tempo")
    else:
        lines.append("- no clear steady beat")
    if (sig.get("sustained_tonal_db") or -99) > -15:
        lines.append("- prominent sustained notes and chords")
    elif (sig.get("sustained_tonal_db") or -99) > -25:
        lines.append("- soft sustained notes")
    return lines


_TAG_WORDS = {"impulsive sound": "short impulsive sounds such as knocks, steps or hits",
              "noise": "noise-like sound, like wind, rain, traffic or hiss",
              "tonal sound": "sounds with a steady pitch, like a hum, beep or whistle"}


def _sound_lines(ev: dict[str, Any]) -> list[str]:
    sig = ev.get("signal", {})
    lines = []
    tags = (ev.get("sound_tags") or {}).get("clip", {})
    for label, words in _TAG_WORDS.items():
        if tags.get(label, 0.0) >= 0.5:
            lines.append(f"- {words}")
    if lines:
        return lines
    if (sig.get("offgrid_peaks") or 0) >= 1:
        lines.append(f"- {_count(sig['offgrid_peaks'])} short irregular sounds such as knocks, steps or barks")
    if (sig.get("sustained_noise_db") or -99) > -40:
        lines.append("- a lasting noise that rises and falls, like a passing vehicle, wind or rain")
    if (sig.get("floor_dbfs") or -99) > -45:
        lines.append("- a steady background noise bed")
    return lines


_REVERB = [(0.3, "dry, little room echo"), (0.7, "some room reverberation")]
_SNR = [(10, "noisy, the background is close to the main sound"), (25, "some background noise under the main sound")]
_BANDWIDTH = [(4500, "narrowband, telephone-like sound"), (7000, "somewhat muffled, limited high frequencies")]


def _acoustics_lines(ev: dict[str, Any]) -> list[str]:
    ac = ev.get("acoustics")
    if not ac:
        return []
    lines = []
    if ac.get("rt60_s") is not None:
        lines.append(f"- room: {_grade(ac['rt60_s'], _REVERB, 'strongly reverberant, like a large hall')}")
    if ac.get("snr_db") is not None:
        lines.append(f"- signal to noise: {_grade(ac['snr_db'], _SNR, 'clean, the background is far below it')}")
    if ac.get("bandwidth_hz"):
        lines.append(f"- frequency range: {_grade(ac['bandwidth_hz'], _BANDWIDTH, 'full range, crisp highs')}")
    return lines


def _recording_lines(ev: dict[str, Any]) -> list[str]:
    lv, q = ev.get("levels", {}), ev.get("quality", {})
    lines = [
        f"- loudness: {_loudness(lv.get('lufs'), lv.get('rms_dbfs'))}",
        f"- overall audio quality: {_quality(q.get('dnsmos_ovrl'))}",
        f"- background: {_noise(q.get('dnsmos_bak'))}",
    ]
    if (lv.get("clipping_ratio") or 0) > 0.001:
        lines.append("- audible clipping distortion")
    if (lv.get("silence_ratio") or 0) > 0.4:
        lines.append("- long silent gaps")
    return lines + _acoustics_lines(ev)


def render(ev: dict[str, Any], kind: str) -> str:
    """Plain-language evidence for one item type: 'short', 'long', 'speech', 'music', 'sound',
    'environment' or 'qa'."""
    c = ev["content"]
    if kind == "speech":
        lines = _speech_lines(ev) + _recording_lines(ev)[1:3]
    elif kind == "music":
        lines = [f"- music: {_presence(c['music']['prob'])}"] + _music_lines(ev)
        lines += [f"- speech alongside: {_presence(c['speech']['prob'])}"]
    elif kind == "sound":
        lines = [f"- sound events: {_presence(c['sound_events']['prob'])}"] + _sound_lines(ev)
    elif kind == "environment":
        lines = _recording_lines(ev)
    else:  # short, long, qa: everything, each part only when its content is there
        lines = _content_lines(ev) + _speech_lines(ev)
        lines += _music_lines(ev) if c["music"]["present"] else []
        lines += _sound_lines(ev) if c["sound_events"]["present"] else []
        lines += _recording_lines(ev) if kind != "short" else []
    return "\n".join(lines)
