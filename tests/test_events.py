"""The learned sound-event tagger (experts/learned/events.py, experts/learned/events.py): the shipped weights, class file and
calibration belong together; the expert runs after the domain expert on generated audio, reads the same cached
feature pass and writes valid `SoundEvents`; bad input fails clearly. Its accuracy is measured per class on DEV
packages by training/train_events.py (training/EVENTS.md), not here."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from earmark.core.config import AnalyzeSection, IngestSection
from earmark.corpus import generate_corpus
from earmark.experts.base import ClipAudio, MissingContext
from earmark.experts.learned.events import (
    EVENT_CLASSES,
    EVENT_WEIGHTS,
    LABEL_SET,
    EventModelMismatch,
    EventTagger,
    load_classes,
    tag_events,
)
from earmark.schemas.records import SoundEvents
from earmark.stages.ingest import decode_clip, ingest_file


def test_shipped_weights_class_file_and_calibration_agree() -> None:
    meta = load_classes()
    assert meta["label_set"] == LABEL_SET
    assert meta["weights_sha256"] == hashlib.sha256(EVENT_WEIGHTS.read_bytes()).hexdigest(), (
        "events_classes.json was written for other weights: re-run training/train_events.py"
    )
    names = [c["name"] for c in meta["classes"]]
    assert len(names) == len(set(names)) >= 30
    tg = EventTagger()  # checks the network's outputs against the class list
    assert tg.names == names and all(m[-1][0].shape[1] == len(names) for m in tg.members)
    for c in meta["classes"]:
        x, y = np.asarray(c["calibration"]["x"]), np.asarray(c["calibration"]["y"])
        assert len(x) == len(y) >= 2 and np.all(np.diff(x) >= 0) and np.all(np.diff(y) >= -1e-9), c["name"]
        assert 0 < y.min() and y.max() < 1
        assert isinstance(c["in_evidence"], bool) and 0 < c["threshold"] < 1
        if c["in_evidence"]:  # chosen on TRAIN out-of-fold windows: precision at the bar there
            assert c["oof"]["precision"] >= meta["precision_bar"] and c["oof"]["hits"] >= meta["min_oof_hits"]
    assert sum(c["in_evidence"] for c in meta["classes"]) >= 1
    assert EVENT_WEIGHTS.stat().st_size < 8e6  # package data of a few MB


def test_a_class_file_for_other_weights_is_refused(tmp_path) -> None:
    meta = load_classes()
    meta["weights_sha256"] = "0" * 64
    stale = tmp_path / "events_classes.json"
    stale.write_text(json.dumps(meta))
    with pytest.raises(EventModelMismatch, match="train_events.py"):
        EventTagger(EVENT_WEIGHTS, stale)


def _clips(tmp_path, domains: tuple[str, ...]) -> list[ClipAudio]:
    items = {i.domain: i for i in generate_corpus(tmp_path / "c", per_domain=1, seed=2, hostile=False)}
    out = []
    for d in domains:
        rows, _ = ingest_file(items[d].path, IngestSection())
        out.append(decode_clip(rows[0]))
    return out


def test_expert_tags_generated_audio_after_the_domain_expert_and_reuses_its_features(tmp_path) -> None:
    from earmark.experts.learned.domain import LearnedDomainExpert
    from earmark.experts.learned.events import LearnedEventsExpert
    from earmark.experts.learned.model import feature_cache_stats
    from earmark.experts.levels import LevelsExpert

    clips = _clips(tmp_path, ("000", "00A", "S0A"))
    levels = {r.clip_id: r for r in LevelsExpert().analyze(clips, {})}
    domain = {r.clip_id: r for r in LearnedDomainExpert().analyze(clips, {"levels": levels})}
    before = feature_cache_stats()
    expert = LearnedEventsExpert()
    rows = expert.analyze(clips, {"domain": domain})
    after = feature_cache_stats()
    heard = [c for c in clips if not domain[c.clip_id].silent]
    assert after["hits"] - before["hits"] == len(heard) >= 2  # the domain expert's Whisper / musicnn pass
    assert after["misses"] == before["misses"]
    names = [c["name"] for c in load_classes()["classes"]]
    for clip, row in zip(clips, rows):
        assert isinstance(row, SoundEvents) and SoundEvents.model_validate(row.model_dump()) == row
        assert row.label_set == LABEL_SET and row.window_s == 2.0 and row.backend.startswith("events:")
        assert row.windows[0].start_s == 0.0 and abs(row.windows[-1].end_s - clip.duration_s) < 0.01
        for w in row.windows:
            assert sorted(t.label for t in w.tags) == sorted(names)
            assert all(0.0 <= t.prob <= 1.0 for t in w.tags)
            assert [t.prob for t in w.tags] == sorted((t.prob for t in w.tags), reverse=True)
        best = {n: max(t.prob for w in row.windows for t in w.tags if t.label == n) for n in names}
        assert {t.label: t.prob for t in row.clip_tags} == best
    silent = rows[0]
    assert domain[clips[0].clip_id].silent and all(t.prob == 0.0 for t in silent.clip_tags)
    key = expert.key_config()
    assert key["label_set"] == LABEL_SET and key["weights"] == expert.backend.split(":", 1)[1]


def test_broken_input_fails_clearly() -> None:
    from earmark.experts.learned.events import LearnedEventsExpert

    with pytest.raises(ValueError, match="finite"):
        tag_events(np.full(16000, np.nan, np.float32))
    with pytest.raises(ValueError, match="finite"):
        tag_events(np.zeros(0, np.float32))
    clip = ClipAudio("x", np.zeros(16000, np.float32))
    with pytest.raises(MissingContext, match="domain"):
        LearnedEventsExpert().analyze([clip], {})


def test_the_event_tagger_runs_beside_the_coarse_tags_and_can_be_left_out() -> None:
    from earmark.experts import build_experts
    from earmark.experts.learned.events import LearnedEventsExpert
    from earmark.experts.tags import CoarseTagsExpert

    experts = build_experts(AnalyzeSection())
    assert isinstance(experts["events"], LearnedEventsExpert) and isinstance(experts["tags"], CoarseTagsExpert)
    assert "events" not in build_experts(AnalyzeSection(events=False))
    assert EVENT_CLASSES.exists()


def test_only_classes_not_shown_wrong_on_dev_state_events() -> None:
    """A class admitted on TRAIN's out-of-fold windows states an event only if its DEV packages did not then give
    a precision under the bar (footsteps 0.83, crowd 0.62, sheep 0.60 at training time): what reaches the items
    is what held up on audio the tagger never saw."""
    from earmark.experts.learned.events import load_classes
    from earmark.stages.synthesize.evidence import event_policy

    meta = load_classes()
    policy = event_policy(meta["label_set"])
    admitted = {c["name"]: c for c in meta["classes"] if c["in_evidence"]}
    assert set(policy) <= set(admitted)
    for name, c in admitted.items():
        shown_wrong = c["dev"]["precision"] is not None and c["dev"]["precision"] < meta["precision_bar"]
        assert (name in policy) != shown_wrong, name
        if name in policy:
            assert policy[name][0] == c["threshold"]
