"""Sound facts of the evidence: named events (the learned tagger's, YAMNet's and a paper tagger's, each under its
measured policy, with their times) and the music's facts and tags."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from earmark.core.config import EvidenceSection
from earmark.schemas.evidence import Fact
from earmark.stages.synthesize.evidence.facts import MAX_LIST, ONE_SIDED_CONFIDENCE, Facts, rounded


def event_classes(prompt_dir: Path | None = None) -> list[str]:
    """The event classes `evidence.toml`'s `[events]` table names (what an AudioSet label may be stated as)."""
    from earmark.prompts import load_phrases

    return sorted(load_phrases("evidence", prompt_dir)["events"])


def yamnet_policy_sha() -> str:
    """The sha256 of YAMNet's measured event policy (package data; it names the head's sha256): a new policy
    re-runs the evidence."""
    from earmark.experts.yamnet.events import HEAD_POLICY

    return hashlib.sha256(HEAD_POLICY.read_bytes()).hexdigest()[:16]


def event_classes_sha(prompt_dir: Path | None = None) -> str:
    """A sha over what of the registry the evidence depends on: each class, whether it is a group, the AudioSet
    labels it settles."""
    from earmark.prompts import load_phrases
    from earmark.stages.facts.events import registry

    rows = registry(load_phrases("evidence", prompt_dir)).values()
    blob = "\n".join(sorted(f"{c.name}|{int(c.group)}|{','.join(c.audioset)}" for c in rows))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _yamnet_events(f: Facts, rec: Any, bar: float) -> None:
    """`sound.event` facts from YAMNet's frame scores: each class or ontology group its measured policy lets state
    an event (`earmark.experts.yamnet.events`), per run of 2 s windows, its confidence the precision measured on
    the DEV packages at the threshold. A stated event is a sound heard: where the domain tagger was unsure of
    sound events, or called them absent, the named event makes them present (YAMNet hears a dog under speech
    that the domain tagger misses; the precision of its statements was measured in exactly such scenes)."""
    from earmark.experts.yamnet.events import class_names, event_head, stated_events

    n = len(rec.frame_scores)
    if not n or any(x.type == "content.silent" and x.value == "silent" for x in f.facts):
        return
    n_samples = int(round(((n - 1) * rec.hop_s + rec.frame_s - rec.padded_s) * 16_000))
    # the head's probabilities count only where they are the shipped head's (the expert's key names its sha256)
    head = rec.window_events if rec.event_head == event_head().sha256[:12] else None
    stated = stated_events(rec.frame_scores, n_samples, class_names(), head=head)
    for ev in stated[:MAX_LIST]:
        f.add(
            rec,
            "sound.event",
            rounded(ev.score),
            ev.name,
            subject=f"{ev.start_s:g}-{ev.end_s:g}",
            confidence=ev.precision,
        )
    sure = max((ev.precision for ev in stated), default=0.0)
    for i, fact in enumerate(f.facts):
        if fact.type == "content.sound_events" and fact.value != "present" and sure >= bar:
            f.facts[i] = fact.model_copy(update={"value": "present", "confidence": round(sure, 3)})


def _heard_domain(domain: str, facts: Sequence[Fact]) -> str:
    """The domain code with sound events present where a named event made them present."""
    heard = any(x.type == "content.sound_events" and x.value == "present" for x in facts)
    return domain[:2] + "A" if heard and domain[2] == "0" else domain


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


def _events(f: Facts, tags: Any, prompt_dir: Path | None = None) -> bool:
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
            f.add(tags, "sound.event", rounded(p), cls, subject=f"{a:g}-{b:g}", confidence=conf)
    return True


def _music(f: Facts, mus: Any, sep: Any, tag_confidence: float = EvidenceSection().music_tag_confidence) -> None:
    if mus is None or not mus.analyzed:
        return
    f.add(mus, "music.tempo_bpm", rounded(mus.tempo_bpm, 1), confidence=mus.tempo_confidence or 0.0)
    f.add(mus, "music.beats", float(len(mus.beat_times_s)))
    # HPSS and onsets read the whole mix: sound effects count as percussion and beats (15 items called
    # strings-only music percussive in a held-out build). On music with events they are not facts about the music.
    events = next((x.value for x in f.facts if x.type == "content.sound_events"), None)
    mixed = None if events == "absent" else ONE_SIDED_CONFIDENCE
    f.add(mus, "music.beat_strength", rounded(mus.beat_strength), confidence=mixed)
    f.add(mus, "music.key", value=mus.key, confidence=mus.key_confidence or 0.0)
    f.add(mus, "music.harmonic_ratio", rounded(mus.harmonic_ratio), confidence=mixed)
    groups = tag_groups()
    for lp in mus.tags:  # the group (instrument, genre, mood) as the subject, where the tag file knows it
        f.labels(mus, "music.tag", [lp], min_prob=tag_confidence, subject=groups.get(lp.label))
    contour = mus.loudness_contour_db
    f.add(mus, "music.loudness_range_db", rounded(max(contour) - min(contour), 1) if contour else None)
    if sep is not None and sep.skipped_reason is None:
        f.add(sep, "separation.vocals_speech_s", sep.vocals_speech_s)
        for s in sep.stems:
            f.add(sep, "separation.stem_share", rounded(s.energy_share), subject=s.stem)


@functools.cache
def tag_groups() -> dict[str, str]:
    """Music tag → its group (instrument, genre, mood, vocals), from the embedded music tagger's tag file."""
    from earmark.experts.learned.musictags import load_tag_file

    return {t["tag"]: t["group"] for t in load_tag_file()["tags"]}
