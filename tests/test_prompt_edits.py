"""Every word sent to an LLM lives in prompts/, and each file is in the key of exactly the shards rendered from
it: editing one file and rebuilding a real small dataset (SmolLM2) recomputes exactly those shards and what
depends on them; every other shard is reused. A file a stage reads without declaring it fails the stage
(earmark.prompts.only), so the table below cannot silently miss a dependency.

Every file is checked against the stages' keys (which stage keys an edit changes, and what follows from them);
a real rebuild after the edit is run for one file of each kind of dependency (`REBUILT`), to keep the suite short.
"""

from __future__ import annotations

import shutil

import pytest

from earmark.core.config import load_config
from earmark.corpus import generate_corpus
from earmark.flows.build import run_build
from earmark.prompts import PROMPT_DIR, prompt_files
from earmark.stages import synthesize

pytestmark = pytest.mark.slow

ITEMS = {"synthesize:captions", "synthesize:qa", "synthesize:entailment", "synthesize:instructions"}
AFTER = {"filter", "publish"}  # any item change gives new QC verdicts and a new version
CAPTIONS = {"synthesize:captions", "synthesize:entailment"} | AFTER  # entailment premises are captions
RULE_QA = {"synthesize:qa", "synthesize:instructions"}  # rule-written QA and instructions reuse the caption phrases
# file → the build stages that must recompute after it is edited (nothing else may)
EXPECTED: dict[str, set[str]] = {
    **{f"caption_{k}": CAPTIONS for k in ("short", "long", "speech", "music", "sound", "environment")},
    "absent": CAPTIONS | RULE_QA,
    "content_captions": CAPTIONS | RULE_QA,  # rule-written content captions and the short/long fallback
    "qa": {"synthesize:qa"} | AFTER,
    "qa_rules": RULE_QA | AFTER,  # rule-written QA pairs and instruction triples (the default)
    "entailment": {"synthesize:entailment"} | AFTER,
    "entailment_rules": {"synthesize:entailment"} | AFTER,  # the rule-written fallback sets
    "ifeval": {"synthesize:instructions"} | AFTER,
    "evidence": ITEMS | AFTER,  # every item's notes, and the offline margin filter's anchor text
    "repair": ITEMS | AFTER,
    "joint": set(),  # the joint strategy's prompt: not used by this (focused) build
    "description": set(),  # the paper profile's audio-LM description expert
    "mecat_eval": set(),  # asked of a model under test by `evaluate --endpoint`
    "entailment_judge": set(),  # evaluation only (tests/test_evaluate_flow.py checks their keys)
    "ifeval_judge": set(),
}


# one file per kind of dependency: a caption prompt, the phrases rule-written captions and QA share, the QA rules,
# the entailment rules, the evidence phrases (every stage) and a file this build does not read
REBUILT = ("caption_short", "content_captions", "qa_rules", "entailment_rules", "evidence", "joint")


def _stage_shas(cfg) -> dict[str, str | None]:
    """The prompt part of each synthesis and filter stage key of a focused build, as the build computes it."""
    from earmark.stages import filter as filter_stage

    shas = {
        f"synthesize:{item}": synthesize.spec(item, cfg.synthesize, cfg.llm, cfg.evidence).prompt_sha
        for item in ("captions", "qa", "entailment", "instructions")
    }
    shas["filter"] = filter_stage.spec(cfg, "sbert").prompt_sha
    return shas


def _with_followers(direct: set[str]) -> set[str]:
    """What recomputes after these stages' keys change: entailment follows captions (its premises), QC and the
    version follow any item."""
    out = set(direct)
    if "synthesize:captions" in out:
        out.add("synthesize:entailment")
    return out | AFTER if out else out


def _edited(path, then):
    """`then()` while `path` carries one more comment line (a change no rendered request sees); restored after."""
    original = path.read_bytes()
    path.write_bytes(original + b"\n# edited by tests/test_prompt_edits.py\n")
    try:
        return then()
    finally:
        path.write_bytes(original)


def _computed(result) -> set[str]:
    return {stage for stage, n in result["shards"].items() if n["computed"]}


@pytest.fixture(scope="module")
def project(tmp_path_factory, prefect_harness):
    root = tmp_path_factory.mktemp("prompt-edits")
    items = generate_corpus(root / "corpus", per_domain=1, seed=3)
    inputs = root / "inputs"
    inputs.mkdir()
    speech = next(i for i in items if i.domain == "S0A")
    shutil.copy(speech.path, inputs / speech.path.name)
    prompts = root / "prompts"
    shutil.copytree(PROMPT_DIR, prompts, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    cfg = load_config(
        None,
        {
            "data_root": str(root / "data"),
            "dataset": "edits",
            "inputs": [str(inputs)],
            "llm.model": "smollm2-135m-instruct",
            "llm.n_threads": 1,  # as tests/test_build_e2e.py: the other core runs another test file
            "synthesize.prompt_dir": str(prompts),
            "filter.margin_backend": "off",
        },
    )
    first = run_build(cfg)
    return cfg, prompts, first


def test_the_table_covers_every_prompt_file(project):
    _, prompts, _ = project
    assert set(prompt_files(prompts)) == set(EXPECTED) == set(prompt_files())


def test_editing_each_file_changes_exactly_its_dependents_keys(project):
    cfg, prompts, _ = project
    before = _stage_shas(cfg)
    for name, expected in EXPECTED.items():
        after = _edited(prompts / f"{name}.toml", lambda: _stage_shas(cfg))
        assert _with_followers({s for s in before if after[s] != before[s]}) == expected, name
    assert _stage_shas(cfg) == before


def test_editing_a_file_recomputes_exactly_its_dependents(project):
    cfg, prompts, first = project
    assert first["llm"]["calls"] > 0 and _computed(first) >= ITEMS | AFTER
    again = run_build(cfg)
    assert _computed(again) == set() and again["llm"]["calls"] == 0 and again["version"] == first["version"]
    for name in REBUILT:
        expected = EXPECTED[name]
        edited = _edited(prompts / f"{name}.toml", lambda: run_build(cfg))
        # The previous file is back as it was, so its shards come from the catalog again; only the version
        # (publish) may differ from the previous build's.
        assert _computed(edited) - {"publish"} == expected - {"publish"}, name
        assert "publish" in _computed(edited) or not expected, name
        # a comment changes no rendered request: every LLM reply comes from the request cache
        assert edited["llm"]["calls"] == 0, name
    restored = run_build(cfg)  # every file as it was: the first build's shards and a version equal to the first
    assert _computed(restored) - {"publish"} == set() and restored["llm"]["calls"] == 0


def test_a_wording_change_reaches_the_model_only_for_its_own_requests(project):
    cfg, prompts, _ = project
    path = prompts / "caption_short.toml"
    original = path.read_text()
    path.write_text(original.replace("Write one caption", "Write one short caption", 1))
    try:
        edited = run_build(cfg)
    finally:
        path.write_text(original)
    assert _computed(edited) == CAPTIONS
    # only the 3 short-caption references (and their repairs, if any) missed the request cache
    assert 3 <= edited["llm"]["calls"] <= 6
