"""The training scripts run end to end on tiny subsets (as the issue asks of CI), writing only into their cache,
never the shipped weights. The domain tagger's downloads 13 small Debian packages (apt, a package registry: 7 for
the domain mixes, 6 for the event mixes), scans at most 300 files of each, builds the train/dev and event mixes,
trains the MLP and a 1-epoch CNN, chooses the decision rule and evaluates on the tiny dev set (67 s on the 2 idle
cores from a cold cache, 2026-11-28); the event tagger's reuses that cache; the music tags' renders 88 General MIDI
clips, trains and calibrates its heads."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "experts" / "learned" / "probe_weights.npz"

pytestmark = pytest.mark.slow


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tagger_cache(tmp_path_factory) -> Path:
    """One cache for the domain tagger's and the event tagger's tiny runs: the first to run downloads the packages
    and builds the tiny corpus (the domain mixes and the event mixes) into it, the other reuses them, as a user's
    second training command reuses the first one's cache."""
    return tmp_path_factory.mktemp("tagger-cache")


def test_training_runs_on_the_tiny_subset_and_leaves_the_shipped_weights_alone(tagger_cache):
    tmp_path = tagger_cache
    assert shutil.which("apt-get") and shutil.which("dpkg-deb"), "the training corpus comes from Debian packages"
    before = _sha(SHIPPED)
    out = subprocess.run(
        [sys.executable, str(ROOT / "training" / "train_probe.py"), "--tiny", "--cache", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    tiny = tmp_path / "tagger-tiny"
    assert (tiny / "probe_weights_tiny.npz").stat().st_size > 0
    assert (tiny / "tagger_decision_tiny.json").exists()
    got = re.search(r"dev clips: (\d+)\s+domain accuracy: ([\d.]+)%", out.stdout)
    assert got, out.stdout[-2000:]
    assert int(got.group(1)) == 16 and float(got.group(2)) > 12.5  # better than chance over 8 domains
    assert _sha(SHIPPED) == before


def test_music_tag_training_runs_on_a_tiny_render_set_and_leaves_the_shipped_heads_alone(tmp_path):
    """training/train_music_tags.py --tiny: 88 GM renders (two small soundfont packages, installed by apt when
    missing), musicnn features, 3 epochs, calibration and the tag file, all under the cache."""
    shipped = ROOT / "experts" / "learned" / "musictags" / "music_tags.npz"
    before = _sha(shipped)
    out = subprocess.run(
        [sys.executable, str(ROOT / "training" / "train_music_tags.py"), "--tiny", "--cache", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    tiny = tmp_path / "music_tags_tiny"
    assert len((tiny / "renders" / "train.jsonl").read_text().splitlines()) == 48
    doc = __import__("json").loads((tiny / "out" / "music_tags.json").read_text())
    assert doc["tags"] and all(set(t) >= {"tag", "group", "in_evidence", "cal", "dev"} for t in doc["tags"])
    assert "| tag | group | in evidence |" in out.stdout
    assert _sha(shipped) == before


EVENTS_SHIPPED = ROOT / "experts" / "learned" / "events_weights.npz"


def test_event_tagger_training_runs_on_the_tiny_subset_and_leaves_the_shipped_weights_alone(tagger_cache):
    """training/train_events.py --tiny: the tiny corpus with 6 small event packages (3 TRAIN, 3 DEV), 48 + 12
    event mixes (built by the domain tagger's run above when it ran first), fold models, calibration, thresholds,
    final model, DEV report -- into the cache only."""
    tmp_path = tagger_cache
    before = _sha(EVENTS_SHIPPED)
    out = subprocess.run(
        [sys.executable, str(ROOT / "training" / "train_events.py"), "--tiny", "--cache", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    tiny = tmp_path / "tagger-tiny"
    meta = json.loads((tiny / "events_classes_tiny.json").read_text())
    assert meta["weights_sha256"] == _sha(tiny / "events_weights_tiny.npz")
    assert len(meta["classes"]) >= 3 and all(0 < c["threshold"] < 1 for c in meta["classes"])
    from earmark.experts.learned.events import EventTagger  # the fold models ship as one averaged ensemble

    tagger = EventTagger(tiny / "events_weights_tiny.npz", tiny / "events_classes_tiny.json")
    assert len(tagger.members) == meta["members"] > 1
    recs = [json.loads(line) for line in open(tiny / "mixes" / "ev_dev.jsonl")]
    assert len(recs) == 12 and all("events" in r and "class_windows" in r for r in recs)
    assert _sha(EVENTS_SHIPPED) == before


def test_yamnet_event_head_training_runs_on_the_tiny_event_mixes_and_leaves_the_shipped_policy_alone(tagger_cache):
    """training/calibrate_yamnet.py, yamnet_embeddings.py and train_yamnet_events.py on the tiny event mixes (made
    here if the tests above did not run first): YAMNet's score policy, the pooled embeddings, the fold networks, each
    node's rule and the head file with its policy -- written into the cache, the shipped files untouched."""
    from earmark.experts.yamnet import events as ye

    shipped = {p: _sha(p) for p in (ye.POLICY, ye.HEAD, ye.HEAD_POLICY)}
    tiny = tagger_cache / "tagger-tiny"
    if not (tiny / "mixes" / "ev_dev.jsonl").exists():
        step = "events" if (tiny / "sources.jsonl").exists() else "all"
        subprocess.run(
            [sys.executable, str(ROOT / "training" / "build_corpus.py"), step, "--tiny", "--cache", str(tagger_cache)],
            check=True,
            timeout=900,
        )
    common = ["--cache", str(tagger_cache), "--tag", "tagger-tiny"]
    runs = [
        ["calibrate_yamnet.py", *common, "--jobs", "1", "--out", str(tiny / "events_policy.json")],
        ["yamnet_embeddings.py", *common, "--jobs", "1", "--split", "ev_train", "--split", "ev_dev"],
        ["train_yamnet_events.py", *common, "--epochs", "2", "--out", str(tiny / "event_head.npz"),
         "--policy", str(tiny / "event_head.json"), "--score-policy", str(tiny / "events_policy.json")],
    ]  # fmt: skip
    for args in runs:
        out = subprocess.run(
            [sys.executable, str(ROOT / "training" / args[0]), *args[1:]], capture_output=True, text=True, timeout=900
        )
        assert out.returncode == 0, args[0] + out.stdout[-3000:] + out.stderr[-3000:]
    meta = json.loads((tiny / "event_head.json").read_text())
    assert meta["head_sha256"] == _sha(tiny / "event_head.npz") and meta["model_sha256"] == ye.MODEL_SHA256
    assert len(meta["nodes"]) == len(meta["classes"]) >= 3
    assert all(
        {"rule", "in_evidence", "train", "dev", "head_threshold", "score_threshold"} <= set(c) for c in meta["classes"]
    )
    import numpy as np

    with np.load(tiny / "event_head.npz") as z:
        head = ye.EventHead(ye.head_members({k: z[k] for k in z.files}), tuple(meta["nodes"]), meta["head_sha256"])
    assert len(head.members) == meta["members"] and head(np.zeros((2, 2 * 1024 + 521))).shape == (2, len(meta["nodes"]))
    assert {p: _sha(p) for p in shipped} == shipped
