"""One registry of facts and classes (issue [1/3] must-have 4).

- Fact types (earmark.schemas.facts): the evidence refuses to write a type that is not registered and
  `ClipEvidence` refuses to read one, naming the closest; every fact type named in the package's code is registered;
  a measurement's confidence and the band its number is read in come from the registry.
- Event classes (prompts/evidence.toml [events], earmark.stages.facts.events): one row per class gives the words it
  is rendered in, the words a caption may claim it with, and (from the vendored ontology) its MID and parents; an
  AudioSet label maps to the nearest class. Adding a class is a row of data: the test adds one in a copied prompt
  directory and an item naming it is audited as supported by a fact of it, with no code change.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from earmark import prompts
from earmark.experts.yamnet.events import ontology
from earmark.schemas import facts as fact_registry
from earmark.schemas.facts import FACT_TYPES, UnknownFactType
from earmark.stages.facts import bands
from earmark.stages.facts.events import RegistryError, audioset_class, nearest, registry
from earmark.stages.filter.claims import audit, extract
from earmark.stages.filter.wording import _fold, english_words
from earmark.stages.synthesize.evidence import evidence_of

PACKAGE = Path(prompts.__file__).parents[1]


def test_a_misspelt_fact_type_is_refused_on_read_and_on_write() -> None:
    ev = evidence_of("c", "S00", {"speech.transcript": "hello there"})
    with pytest.raises(UnknownFactType, match="'speech.transcipt'.*speech.transcript"):
        ev.get("speech.transcipt")
    with pytest.raises(UnknownFactType, match="sound.evnt"):
        list(ev.all("sound.evnt"))
    with pytest.raises(UnknownFactType, match="FACT_TYPES"):
        evidence_of("c", "S00", {"speaker.gendr": {"male": 0.9}})


def test_every_fact_type_the_code_names_is_registered() -> None:
    """A string literal shaped like a fact type ("topic.attribute" of a registered topic) anywhere in the package
    (not the tests) is a registered type: the typo that used to make a claim silently "unsupported" fails here."""
    topics = {t.split(".")[0] for t in FACT_TYPES}
    alternatives = "|".join(sorted(topics))
    literal = re.compile(r"[\"']((?:" + alternatives + r")\.[a-z_]+)[\"']")
    named = set()
    for path in PACKAGE.rglob("*.py"):
        if any(
            part in ("tests", "build", ".venv", "benchmarks", "training") for part in path.relative_to(PACKAGE).parts
        ):
            continue
        named |= set(literal.findall(path.read_text()))
    assert named, "no fact type found: the scan is broken"
    assert not named - set(FACT_TYPES)


def test_measurement_confidence_and_bands_come_from_the_registry() -> None:
    assert fact_registry.measured_confidence("levels.lufs") == 1.0
    assert fact_registry.measured_confidence("acoustics.drr_db") == 0.5
    assert fact_registry.measured_confidence("speaker.gender") is None  # carries the expert's own probability
    assert bands.recording() == [
        ("loudness", "levels.lufs"),
        ("noise", "acoustics.snr_db"),
        ("reverb", "acoustics.rt60_s"),
        ("bandwidth", "acoustics.bandwidth_hz"),
    ]
    assert set(fact_registry.banded()) == set(bands.BANDS) == set(bands.CONTRADICTS)
    ev = evidence_of("c", "S00", {"acoustics.rt60_s": 0.9})
    assert ev.get("acoustics.rt60_s").confidence == 0.7


def test_each_event_class_is_an_ontology_class_with_its_words() -> None:
    reg = registry()
    onto = ontology()
    assert len(reg) >= 70
    for c in reg.values():
        assert onto.nodes[c.name].mid == c.mid and c.mid.startswith("/")
        assert c.noun and c.clause and re.compile(c.claim)
        assert c.parents == tuple(onto.parents.get(c.name, ()))
    assert reg["Dog"].parents == ("Domestic animals, pets",) and not reg["Dog"].group
    assert reg["Animal"].group


def test_the_registry_refuses_a_name_the_ontology_lacks(tmp_path: Path) -> None:
    copy = _copy_prompts(tmp_path)
    text = (copy / "evidence.toml").read_text()
    (copy / "evidence.toml").write_text(text.replace('"Dog" = {', '"Dgo" = {'))
    with pytest.raises(RegistryError, match=r"'Dgo' is not an AudioSet class name; did you mean 'Dog'"):
        registry(prompts.load_phrases("evidence", copy))
    (copy / "evidence.toml").write_text(text.replace("claim = 'dogs?|bark", "clam = 'dogs?|bark"))
    with pytest.raises(RegistryError, match="'Dog' lacks claim"):
        registry(prompts.load_phrases("evidence", copy))


def test_audioset_labels_map_to_the_nearest_class() -> None:
    reg = registry()
    assert audioset_class("Bark", reg) == "Dog"
    assert audioset_class("Dog", reg) == "Dog"
    assert audioset_class("Bicycle bell", reg) == "Bell"  # two nearest (Alarm, Bell): the row settles it
    assert audioset_class("Kettle whistle", reg) == "Alarm"  # groups are not taken for a label
    assert audioset_class("Speech", reg) is None
    targets = {c.name for c in reg.values() if not c.group}
    listed = {lab for c in reg.values() for lab in c.audioset}
    ties = [lab for lab in ontology().nodes if lab not in reg and lab not in listed and len(nearest(lab, targets)) > 1]
    assert ties == []  # every label with two nearest classes is settled by a row


def test_the_registry_words_are_english_words() -> None:
    words = english_words()
    assert {w for c in registry() for w in re.findall(r"[a-z]+", _fold(c))} <= words


def test_a_new_class_is_a_row_of_data(tmp_path: Path) -> None:
    """A class added to a copy of evidence.toml is claimed, rendered and audited with no code change; inside a
    stage's prompt guard the audit reads the stage's prompt directory."""
    copy = _copy_prompts(tmp_path)
    with (copy / "evidence.toml").open("a") as fh:
        fh.write('"Zipper (clothing)" = { noun = "a zipper", clause = "a zipper is pulled", claim = \'zip\\w*\' }\n')
    text = "A zipper is pulled at the start."
    assert ("event", "Zipper (clothing)") not in {(c.type, c.value) for c in extract(text)}
    reg = registry(prompts.load_phrases("evidence", copy))
    assert reg["Zipper (clothing)"].parents == ("Domestic sounds, home sounds",)
    assert ("event", "Zipper (clothing)") in {(c.type, c.value) for c in extract(text, reg)}
    ev = evidence_of("z", "00A", {"0-2@sound.event": ("Zipper (clothing)", 0.95)})
    with prompts.only(("evidence",), copy):
        verdicts = {(a.claim.type, a.claim.value): a.judgement.verdict for a in audit(text, ev)}
    assert verdicts[("event", "Zipper (clothing)")] == "supported"
    with prompts.only(()), pytest.raises(prompts.UndeclaredPrompt):
        extract(text)  # the audit's event words are a declared prompt read


def _copy_prompts(tmp_path: Path) -> Path:
    copy = tmp_path / "prompts"
    shutil.copytree(Path(prompts.__file__).parent, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return copy
