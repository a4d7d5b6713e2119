"""Plain-language views of a clip's evidence, one per item type, in the words of prompts/evidence.toml.

Small models write sensible text only from small focused prompts, so each caption kind gets a short
rendering of *its own* evidence, with numbers turned into words the model can repeat without inventing.
The logic (which fact, which threshold) is here; every word sent to the model is in the phrase file.
"""

from __future__ import annotations

import re
from typing import Any

from earmark.prompts import Phrases
from earmark.schemas.evidence import ClipEvidence

MAX_TRANSCRIPT_WORDS = 60


def _grade(p: Phrases, value: float | None, band: str) -> str:
    """The word for the first band whose upper bound `value` is below; the band's `top` above all."""
    if value is None:
        return p["unknown"]
    spec = p["bands"][band]
    return next((word for bound, word in spec["bands"] if value < bound), spec["top"])


def _clean_transcript(p: Phrases, text: str) -> str:
    # Angle brackets would let speech close the <transcript> tag; the words themselves are kept.
    words = re.sub(r"[<>{}]", " ", text).split()
    out = " ".join(words[:MAX_TRANSCRIPT_WORDS])
    return out + (p["transcript_more"] if len(words) > MAX_TRANSCRIPT_WORDS else "")


def _presence(p: Phrases, ev: ClipEvidence, content: str) -> str:
    return _grade(p, ev.num(f"content.{content}"), "presence")


def _content_lines(p: Phrases, ev: ClipEvidence) -> list[str]:
    c = p["content"]
    if ev.num("content.silent"):
        return [c["silent"]]
    return [c[k].format(presence=_presence(p, ev, k)) for k in ("speech", "music", "sound_events")]


def _share(p: Phrases, ratio: float) -> str:
    s = p["speech"]
    return s["share_most"] if ratio >= 0.75 else s["share_half"] if ratio >= 0.4 else s["share_small"]


def _top(probs: dict[str, float], min_prob: float) -> str | None:
    """The most likely label when it is likely enough to state."""
    if not probs:
        return None
    label, prob = max(probs.items(), key=lambda kv: kv[1])
    return label if prob >= min_prob else None


def _speaker_lines(p: Phrases, ev: ClipEvidence) -> list[str]:
    s = p["speech"]
    n = int(ev.num("speakers.count") or 0)
    if not n:
        return []
    lines = [
        s["one_speaker"]
        if n == 1
        else s["n_speakers"].format(n=({2: s["counts"][0], 3: s["counts"][1]}).get(n, s["several"]))
    ]
    for i, who in enumerate(ev.subjects("speaker.speech_s")[:3]):
        words = [
            w
            for w in (_top(ev.labels("speaker.age_band", who), 0.8), _top(ev.labels("speaker.gender", who), 0.8))
            if w and w != "adult"
        ]
        mood = s["moods"].get(_top(ev.labels("speaker.emotion", who), 0.5) or "")
        desc = ", ".join(
            x
            for x in (s["voice"].format(words=" ".join(words)) if words else "", mood and s["tone"].format(mood=mood))
            if x
        )
        if desc:
            lines.append(s["speaker"].format(which=s["the"] if n == 1 else s["ordinals"][i], description=desc))
    return lines


def _speech_lines(p: Phrases, ev: ClipEvidence) -> list[str]:
    s = p["speech"]
    if not ev.present("speech"):
        return []
    stretches = s["one_stretch"] if (ev.num("speech.segments") or 0) <= 1 else s["several_stretches"]
    lines = [s["fills"].format(share=_share(p, ev.num("speech.ratio") or 0), stretches=stretches)]
    lines += _speaker_lines(p, ev)
    transcript = ev.text("speech.transcript")
    doubtful = (ev.num("speech.hallucination") or 0.0) >= 0.5
    if transcript and not doubtful:
        lines.append(s["pace"].format(pace=_grade(p, ev.num("speech.words_per_s"), "pace")))
        quoted = p["transcript_open"] + _clean_transcript(p, transcript) + p["transcript_close"]
        lines.append(s["transcript"].format(transcript=quoted))
    else:
        lines.append(s["unclear"])
    return lines


def _music_lines(p: Phrases, ev: ClipEvidence) -> list[str]:
    m = p["music"]
    if ev.has("music."):  # the music expert ran: its tempo, key and HPSS split
        lines = []
        bpm, strength = ev.num("music.tempo_bpm"), ev.num("music.beat_strength") or 0.0
        if bpm and strength >= 0.3:
            clarity = m["beat_clear"] if strength >= 0.6 else m["beat_soft"]
            lines.append(m["beat"].format(clarity=clarity, tempo=_grade(p, bpm, "tempo")))
        else:
            lines.append(m["no_beat"])
        key = ev.get("music.key")
        if key is not None and (key.confidence or 0) >= 0.4:
            lines.append(m["key"].format(key=key.value))
        harm = ev.num("music.harmonic_ratio")
        if harm is not None:
            lines.append(m["sustained"] if harm >= 0.8 else m["percussive"] if harm < 0.4 else m["mixed"])
        if (ev.num("music.loudness_range_db") or 0) > 12:
            lines.append(m["dynamic"])
        return lines
    period, grid = ev.num("signal.grid_period_s"), ev.num("signal.grid_score") or 0
    lines = [
        m["signal_beat"].format(tempo=_grade(p, 60.0 / period, "tempo")) if grid > 0.2 and period else m["no_beat"]
    ]
    tonal = ev.num("signal.sustained_tonal_db")
    tonal = -99 if tonal is None else tonal
    if tonal > -15:
        lines.append(m["prominent_tonal"])
    elif tonal > -25:
        lines.append(m["soft_tonal"])
    return lines


def _count(p: Phrases, n: float) -> str:
    words = p["sound"]["counts"]
    return words[0] if n <= 1 else words[1] if n <= 3 else words[2] if n <= 8 else words[3]


def _sound_lines(p: Phrases, ev: ClipEvidence) -> list[str]:
    s = p["sound"]
    tags = ev.labels("sound_tags.clip")
    lines = [words for label, words in s["tags"].items() if tags.get(label, 0.0) >= 0.5]
    if lines:
        return lines
    if (ev.num("signal.offgrid_peaks") or 0) >= 1:
        lines.append(s["offgrid"].format(count=_count(p, ev.num("signal.offgrid_peaks"))))
    if (ev.num("signal.sustained_noise_db") or -99) > -40:
        lines.append(s["lasting_noise"])
    if (ev.num("signal.floor_dbfs") or -99) > -45:
        lines.append(s["noise_bed"])
    return lines


def _acoustics_lines(p: Phrases, ev: ClipEvidence) -> list[str]:
    r = p["recording"]
    if not ev.has("acoustics."):
        return []
    lines = []
    if (rt60 := ev.num("acoustics.rt60_s")) is not None:
        lines.append(r["room"].format(reverb=_grade(p, rt60, "reverb")))
    if (snr := ev.num("acoustics.snr_db")) is not None:
        lines.append(r["snr"].format(snr=_grade(p, snr, "snr")))
    if bw := ev.num("acoustics.bandwidth_hz"):
        lines.append(r["bandwidth"].format(bandwidth=_grade(p, bw, "bandwidth")))
    return lines


def _recording_lines(p: Phrases, ev: ClipEvidence) -> list[str]:
    r = p["recording"]
    lufs, rms = ev.num("levels.lufs"), ev.num("levels.rms_dbfs")
    level = lufs if lufs is not None else (rms if rms is not None else -120.0)
    lines = [
        r["loudness"].format(loudness=_grade(p, level, "loudness")),
        r["quality"].format(quality=_grade(p, ev.num("quality.dnsmos_ovrl"), "quality")),
        r["background"].format(noise=_grade(p, ev.num("quality.dnsmos_bak"), "noise")),
    ]
    if (ev.num("levels.clipping_ratio") or 0) > 0.001:
        lines.append(r["clipping"])
    if (ev.num("levels.silence_ratio") or 0) > 0.4:
        lines.append(r["gaps"])
    return lines + _acoustics_lines(p, ev)


def render(ev: ClipEvidence, kind: str, phrases: Phrases) -> str:
    """Plain-language evidence for one view: 'short', 'long', 'speech', 'music', 'sound', 'environment'."""
    p, c = phrases, phrases["content"]
    if kind == "speech":
        lines = _speech_lines(p, ev) + _recording_lines(p, ev)[1:3]
    elif kind == "music":
        lines = [c["music_view"].format(presence=_presence(p, ev, "music"))] + _music_lines(p, ev)
        lines += [c["speech_alongside"].format(presence=_presence(p, ev, "speech"))]
    elif kind == "sound":
        lines = [c["sound_view"].format(presence=_presence(p, ev, "sound_events"))] + _sound_lines(p, ev)
    elif kind == "environment":
        lines = _recording_lines(p, ev)
    else:  # short, long, qa: everything, each part only when its content is there
        lines = _content_lines(p, ev) + _speech_lines(p, ev)
        lines += _music_lines(p, ev) if ev.present("music") else []
        lines += _sound_lines(p, ev) if ev.present("sound_events") else []
        lines += _recording_lines(p, ev) if kind != "short" else []
    return "\n".join(lines)


def render_all(ev: ClipEvidence, phrases: Phrases) -> str:
    """All views of the evidence, each line once (the joint strategy's notes)."""
    seen: list[str] = []
    for kind in ("long", "speech", "music", "sound", "environment"):
        for line in render(ev, kind, phrases).splitlines():
            if line not in seen:
                seen.append(line)
    return "\n".join(seen)


__all__: list[Any] = ["render", "render_all", "MAX_TRANSCRIPT_WORDS"]
