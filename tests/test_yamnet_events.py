"""YAMNet's named events (experts/yamnet/events.py): the vendored ontology, the measured policy, the back-off to a
group of the ontology, the evidence's `sound.event` facts and the claim audit's reading of a group."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from earmark.experts.yamnet import events as ye
from earmark.experts.yamnet import model as ym
from earmark.schemas.records import AudioSetScores
from earmark.stages.facts.events import registry
from earmark.stages.filter.claims import audit
from earmark.stages.synthesize import evidence
from earmark.stages.synthesize.evidence import build_evidence, evidence_of

NAMES = ye.class_names()
RULES = (ye.Rule("Dog", 0.5, 0.95), ye.Rule("Domestic animals, pets", 0.3, 0.92), ye.Rule("Animal", 0.3, 0.91))


def _frames(seconds: float, hot: dict[str, tuple[float, float, float]]) -> tuple[np.ndarray, int]:
    """Frame scores of a clip where each named class scores `s` in the frames centred between a and b (s)."""
    n = int(seconds * ym.SR)
    fs = np.zeros((ym.frame_count(n), len(NAMES)), np.float32)
    centres = (np.arange(len(fs)) * ym.HOP + ym.FRAME / 2) / ym.SR
    for name, (a, b, s) in hot.items():
        fs[(centres >= a) & (centres < b), NAMES.index(name)] = s
    return fs, n


def test_the_ontology_is_the_vendored_file_and_knows_parents_and_children() -> None:
    onto = ye.ontology()
    assert len(onto.nodes) == 632 and onto.nodes["Dog"].mid == "/m/0bt9lr"
    assert {"Domestic animals, pets", "Animal"} <= onto.ancestors("Dog")
    assert {"Dog", "Bark", "Cat", "Meow"} <= onto.subtree("Domestic animals, pets")
    assert "Explosion" in onto.ancestors("Gunshot, gunfire")
    assert ye.ONTOLOGY_SHA256 in (ye.HERE / "PROVENANCE.md").read_text()


def test_a_corrupt_ontology_is_refused_naming_the_file(tmp_path, monkeypatch) -> None:
    bad = tmp_path / "audioset_ontology.json"
    bad.write_bytes(ye.ONTOLOGY.read_bytes()[:-10])
    monkeypatch.setattr(ye, "ONTOLOGY", bad)
    ye.ontology.cache_clear()
    try:
        with pytest.raises(ym.WeightsMismatch, match="audioset_ontology.json"):
            ye.ontology()
    finally:
        ye.ontology.cache_clear()


def test_the_most_specific_sure_class_is_stated_with_its_time() -> None:
    fs, n = _frames(8.0, {"Dog": (2.0, 4.0, 0.8), "Cat": (2.0, 4.0, 0.4)})
    got = ye.stated_events(fs, n, NAMES, RULES)
    assert [(e.name, e.start_s, e.end_s, e.precision) for e in got] == [("Dog", 2.0, 4.0, 0.95)]


def test_an_unsure_class_backs_off_to_the_group_that_is_sure() -> None:
    fs, n = _frames(8.0, {"Dog": (0.0, 2.0, 0.4), "Bark": (6.0, 8.0, 0.35)})
    got = ye.stated_events(fs, n, NAMES, RULES)
    assert [(e.name, e.start_s, e.end_s) for e in got] == [
        ("Domestic animals, pets", 0.0, 2.0),
        ("Domestic animals, pets", 6.0, 8.0),
    ]
    assert ye.stated_events(*_frames(8.0, {"Dog": (0.0, 2.0, 0.2)}), NAMES, RULES) == []


def test_the_shipped_policy_was_measured_on_this_model_and_states_only_measured_classes() -> None:
    meta = ye.load_policy(ye.HEAD_POLICY)
    assert meta["model_sha256"] == ym.MODEL_SHA256 and meta["precision_bar"] == 0.9
    assert meta["nodes"] == [c["name"] for c in sorted(meta["classes"], key=lambda c: c["output"])]
    for c in meta["classes"]:
        if c["in_evidence"]:
            assert c["dev"]["precision"] >= 0.9 and c["dev"]["tp"] >= 10 and c["dev"]["packages"] >= 2, c["name"]
            assert c["train"]["precision"] >= meta["train_bar"] and c["name"] in ye.ontology().nodes
            assert c["rule"] in ("head", "scores", "either", "both")
            assert c["rule"] == "scores" or c["head_threshold"] is not None
            assert c["rule"] == "head" or c["score_threshold"] is not None
    got = {r.name: r for r in ye.rules(back_off=False)}
    assert set(got) == {c["name"] for c in meta["classes"] if c["in_evidence"]}
    for c in meta["classes"]:
        if c["in_evidence"]:
            r = got[c["name"]]
            assert (r.head_threshold is not None) == (c["rule"] in ("head", "either", "both")), c["name"]
            assert (r.threshold is not None) == (c["rule"] in ("scores", "either", "both")), c["name"]
            assert r.both == (c["rule"] == "both"), c["name"]


def test_the_head_file_is_the_one_its_policy_measured_and_a_swapped_one_is_refused(tmp_path, monkeypatch) -> None:
    head = ye.event_head()
    assert head.nodes == tuple(ye.load_policy(ye.HEAD_POLICY)["nodes"]) and len(head.members) >= 1
    x = np.zeros((3, 2 * ym.EMBEDDING_DIM + len(NAMES)), np.float32)
    p = head(x)
    assert p.shape == (3, len(head.nodes)) and np.all((p >= 0) & (p <= 1))
    bad = tmp_path / "event_head.npz"
    bad.write_bytes(ye.HEAD.read_bytes()[:-7] + b"\0" * 7)
    monkeypatch.setattr(ye, "HEAD", bad)
    ye.event_head.cache_clear()
    try:
        with pytest.raises(ym.WeightsMismatch, match="event_head.npz"):
            ye.event_head()
    finally:
        ye.event_head.cache_clear()


def test_a_node_the_head_is_sure_of_is_stated_even_where_yamnets_scores_are_not() -> None:
    """A rule of the head states from the head's window probability; a rule of both states from either."""
    fs, n = _frames(8.0, {"Dog": (6.0, 8.0, 0.9)})
    rules = (ye.Rule("Cat", None, 0.95, head_threshold=0.8, output=1), ye.Rule("Dog", 0.5, 0.93, 0.9, output=0))
    head = np.zeros((4, 2), np.float32)
    head[1, 1] = 0.85  # the head hears a cat in 2-4 s, YAMNet's cat scores are nil
    head[0, 0] = 0.95  # the head hears a dog in 0-2 s; YAMNet's scores hear one in 6-8 s
    got = ye.stated_events(fs, n, NAMES, rules, head=head)
    assert [(e.name, e.start_s, e.end_s) for e in got] == [("Cat", 2.0, 4.0), ("Dog", 0.0, 2.0), ("Dog", 6.0, 8.0)]
    # without the head's probabilities only the scores state anything
    assert [(e.name, e.start_s) for e in ye.stated_events(fs, n, NAMES, rules)] == [("Dog", 6.0)]
    # a rule of both states only where the head and the scores agree
    both = (ye.Rule("Dog", 0.5, 0.97, 0.9, output=0, both=True),)
    assert ye.stated_events(fs, n, NAMES, both, head=head) == []
    head[3, 0] = 0.92  # the head now hears the dog YAMNet's scores hear in 6-8 s
    assert [(e.name, e.start_s, e.end_s) for e in ye.stated_events(fs, n, NAMES, both, head=head)] == [
        ("Dog", 6.0, 8.0)
    ]


def test_every_stated_class_can_be_rendered_and_audited() -> None:
    """A class the policy may state has its words in evidence.toml and a claim pattern the audit reads, so an item
    can say it and the audit can check it."""
    phrases = tomllib.loads((Path(evidence.__file__).parents[3] / "prompts" / "evidence.toml").read_text())["events"]
    audited = {c.name for c in registry().values() if c.claim}
    for r in ye.rules():
        assert r.name in phrases and {"noun", "clause"} <= set(phrases[r.name]), r.name
        assert r.name in audited, r.name


def clip_record(clip_id: str, seconds: float):
    from earmark.schemas.records import Clip

    return Clip(
        clip_id=clip_id, source_path="", source_sha256="", source_format="", clip_index=0, offset_s=0.0,
        duration_s=seconds, sample_rate=16_000, audio_flac=b"",
    )  # fmt: skip


def _yamnet_record(fs: np.ndarray, n: int) -> AudioSetScores:
    return AudioSetScores(
        clip_id="c1",
        expert="yamnet",
        expert_version="1",
        backend="yamnet:test",
        label_set=ym.LABEL_SET,
        frame_s=ym.FRAME / ym.SR,
        hop_s=ym.HOP / ym.SR,
        padded_s=((len(fs) - 1) * ym.HOP + ym.FRAME - n) / ym.SR,
        frame_scores=fs.tolist(),
        clip_max=fs.max(axis=0).tolist(),
        clip_mean=fs.mean(axis=0).tolist(),
        embedding=[0.0] * ym.EMBEDDING_DIM,
        top=[],
    )


def test_the_evidence_states_yamnets_event_and_hears_sound_the_domain_tagger_missed(monkeypatch) -> None:
    from earmark.schemas.records import DomainDecision

    monkeypatch.setattr(ye, "rules", lambda: RULES)
    fs, n = _frames(8.0, {"Dog": (2.0, 4.0, 0.8)})
    dom = DomainDecision(
        clip_id="c1", expert="domain", expert_version="1", backend="t", domain="S00", speech_prob=0.97,
        music_prob=0.02, sound_prob=0.1, silent=False, windows=[], features=[],
    )  # fmt: skip
    ev = build_evidence(clip_record("c1", 8.0), {"domain": dom, "yamnet": _yamnet_record(fs, n)})
    assert [(f.value, f.subject, f.confidence) for f in ev.all("sound.event")] == [("Dog", "2-4", 0.95)]
    assert ev.domain == "S0A" and ev.present("sound_events")
    quiet, n = _frames(8.0, {})
    ev = build_evidence(clip_record("c1", 8.0), {"domain": dom, "yamnet": _yamnet_record(quiet, n)})
    assert list(ev.all("sound.event")) == [] and ev.domain == "S00"


def _verdicts(text, ev):
    return {(a.claim.type, a.claim.value): a.judgement.verdict for a in audit(text, ev)}


def test_a_group_is_supported_by_a_class_under_it_and_not_the_other_way() -> None:
    dog = evidence_of("d", "00A", {"2-4@sound.event": ("Dog", 0.95)})
    pet = evidence_of("p", "00A", {"2-4@sound.event": ("Domestic animals, pets", 0.92)})
    assert _verdicts("An animal is heard.", dog) == {("event", "Animal"): "supported"}
    assert _verdicts("A domestic animal is heard.", dog) == {("event", "Domestic animals, pets"): "supported"}
    assert _verdicts("A dog barks.", pet)[("event", "Dog")] == "unsupported"
    assert _verdicts("A domestic animal is heard.", pet) == {("event", "Domestic animals, pets"): "supported"}


def test_the_learned_taggers_classes_are_in_the_registry() -> None:
    """The event classes are one registry (evidence.toml [events], read by earmark.stages.facts.events, which
    refuses a name the ontology lacks); the learned tagger's classes and YAMNet's stated classes are all in it."""
    from earmark.experts.learned.events import load_classes

    learned = {c["name"] for c in load_classes()["classes"]}
    assert learned <= set(registry()) and {r.name for r in ye.rules()} <= set(registry())


def test_the_audio_margin_without_yamnet_is_refused_before_the_build_starts() -> None:
    from earmark.core.config import load_config
    from earmark.stages.graph import plan_build

    cfg = load_config(None, {"filter.margin_backend": "yamnet", "analyze.yamnet": False})
    with pytest.raises(ValueError, match="analyze.yamnet = true"):
        plan_build(cfg, "publish")
    assert not plan_build(cfg, "synthesize").runs("filter")  # the filter does not run: nothing to refuse
    assert plan_build(load_config(None, {"filter.margin_backend": "yamnet"}), "publish").runs("filter")


def test_a_thinly_measured_class_states_its_nearest_trusted_ancestor() -> None:
    """A class shown right on fewer than 3 DEV packages (Helicopter: 2) states its nearest ancestor that meets the bar
    (Aircraft: 4), at the lower of the two precisions; a trusted class states itself (fresh13: two jets taking off were
    stated as a helicopter)."""
    meta = ye.load_policy(ye.HEAD_POLICY)
    dev = {c["name"]: c["dev"] for c in meta["classes"] if c["in_evidence"]}
    got = {r.name: r for r in ye.rules()}
    for name, d in dev.items():
        trusted = d["packages"] >= ye.TRUSTED_DEV_PACKAGES and d["tp"] >= ye.TRUSTED_DEV_RIGHT
        as_ = ye.nearest_trusted(name, {n for n, x in dev.items() if x["packages"] >= 3 and x["tp"] >= 10})
        if trusted:
            assert got[name].stated_as is None, name
        elif as_ is None:
            assert name not in got, name
        else:
            assert got[name].stated_as == as_ and as_ in ye.ontology().ancestors(name), name
            assert got[name].precision == min(d["precision"], dev[as_]["precision"]), name
    assert got["Helicopter"].stated_as == "Aircraft" and got["Cat"].stated_as == "Domestic animals, pets"
    assert "Helicopter" not in ye.stated_names() and {"Aircraft", "Animal"} <= ye.stated_names()
    assert {r.name: r.stated_as for r in ye.rules(back_off=False)}.get("Helicopter", "x") is None

    # the leaf's windows are stated under its ancestor's name, and join the ancestor's own windows into one event
    fs, n = _frames(8.0, {"Helicopter": (2.0, 4.0, 0.8), "Aircraft": (4.0, 6.0, 0.8)})
    pol = (ye.Rule("Helicopter", 0.5, 1.0, stated_as="Aircraft"), ye.Rule("Aircraft", 0.5, 0.96))
    got_events = ye.stated_events(fs, n, NAMES, pol)
    assert [(e.name, e.start_s, e.end_s, e.precision) for e in got_events] == [("Aircraft", 2.0, 6.0, 0.96)]
