"""The evidence stage declares the prompt file it reads. It reads `evidence.toml`'s `[events]` class list for an
AudioSet tagger's label set; on main at 26d63bd it did so without declaring it, so under `run_job`'s prompt guard
a paper-profile build past analyze raised UndeclaredPrompt, and the tests missed it because they built evidence
outside the guard and the list was cached (`functools.cache`), so one unguarded call hid the next."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from earmark import prompts
from earmark.core.config import EvidenceSection
from earmark.experts.learned.events import load_classes
from earmark.prompts import PROMPT_DIR
from earmark.schemas.records import DomainDecision, LabelProb, SoundEvents, WindowTags
from earmark.stages.synthesize import evidence

LINEAGE = {"clip_id": "e1", "expert": "tags", "expert_version": "1", "backend": "test"}


def _records(label_set: str, label: str) -> dict:
    dom = DomainDecision(
        **LINEAGE, domain="00A", speech_prob=0.001, music_prob=0.001, sound_prob=0.999, silent=False, features=[]
    )
    windows = [WindowTags(start_s=0.0, end_s=2.0, tags=[LabelProb(label=label, prob=0.95)])]
    tags = SoundEvents(
        **LINEAGE, label_set=label_set, window_s=2.0, windows=windows, clip_tags=[LabelProb(label=label, prob=0.95)]
    )
    return {"domain": dom, "tags": tags}


@pytest.mark.parametrize(
    ("label_set", "label"),
    [
        ("audioset-527", "Bark"),  # the paper profile's CED / AST tagger
        ("audioset-yamnet-tflite-1", "Bark"),  # an embedded AudioSet tagger
        (load_classes()["label_set"], "dog"),  # the embedded event tagger
        ("heuristic-coarse", "impulsive"),
    ],
)
def test_evidence_builds_under_the_prompt_guard_for_every_label_set(label_set: str, label: str):
    spec = evidence.spec(["domain", "tags"], EvidenceSection())
    evidence._probe_policy.cache_clear()  # nothing cached may stand between a read and the guard
    with prompts.only(spec.prompt_files):
        ev = evidence.build_evidence(SimpleNamespace(clip_id="e1", duration_s=2.0), _records(label_set, label))
    if label_set.startswith("audioset"):
        assert [f.value for f in ev.all("sound.event")] == ["Dog"]
    with prompts.only(()), pytest.raises(prompts.UndeclaredPrompt) if label_set.startswith("audioset") else _no():
        evidence.build_evidence(SimpleNamespace(clip_id="e1", duration_s=2.0), _records(label_set, label))


class _no:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def test_the_event_list_comes_from_the_configured_prompt_dir_and_only_it_keys_the_stage(tmp_path: Path):
    copy = tmp_path / "prompts"
    shutil.copytree(PROMPT_DIR, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    cfg = EvidenceSection()
    key = evidence.spec(["domain", "tags"], cfg, copy).plan(["x"])[0]
    assert key == evidence.spec(["domain", "tags"], cfg).plan(["x"])[0]
    path = copy / "evidence.toml"
    path.write_text(path.read_text() + "\n# a comment: no class changes\n")
    assert evidence.spec(["domain", "tags"], cfg, copy).plan(["x"])[0] == key  # phrases edits re-run no evidence
    path.write_text(path.read_text().replace("claim = 'dogs?|", "claim = 'doggies|dogs?|"))
    assert evidence.spec(["domain", "tags"], cfg, copy).plan(["x"])[0] == key  # nor do the audit's claim words

    assert "Slam" not in evidence.event_classes(copy)
    text = path.read_text().replace(
        "[events]\n", '[events]\nSlam = { noun = "a slam", clause = "something slams", claim = "slams?" }\n', 1
    )
    assert text != path.read_text()
    path.write_text(text)
    assert "Slam" in evidence.event_classes(copy)
    assert evidence.spec(["domain", "tags"], cfg, copy).plan(["x"])[0] != key  # a new class re-runs evidence
    policy = evidence.event_policy("audioset-527", copy)
    assert policy is not None and "Slam" in policy
