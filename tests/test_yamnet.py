"""YAMNet in the embedded profile (experts/yamnet, experts/audioset_tags.py, table `yamnet`): the expert's scores are
a plain ai-edge-litert run of the vendored file, exactly; it hears espeak speech as Speech and a sine as no speech;
a corrupt or swapped file is refused by sha256; `build --until analyze` writes the table; and the evidence reads it
(its named events: tests/test_yamnet_events.py)."""

from __future__ import annotations

import shutil
import subprocess
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

from earmark.core.config import AnalyzeSection
from earmark.experts import build_experts
from earmark.experts.audioset_tags import YamnetExpert
from earmark.experts.base import SAMPLE_RATE as SR
from earmark.experts.base import ClipAudio
from earmark.experts.yamnet import model as ym
from earmark.schemas import TABLES, AudioSetScores, to_table


def _speech(tmp: Path) -> np.ndarray:
    wav = tmp / "say.wav"
    text = "The weather is mild today, and the train to the city leaves at nine in the morning."
    subprocess.run(["espeak-ng", "-w", str(wav), text], check=True, capture_output=True)
    audio, sr = sf.read(wav, dtype="float32")
    return soxr.resample(audio, sr, SR).astype(np.float32)


def _tone(seconds: float, freq: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> np.ndarray:
    return _speech(tmp_path_factory.mktemp("yamnet"))


def _plain(frames: np.ndarray, keep: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The reference: ai-edge-litert's Interpreter on the vendored file, one thread, one invoke per frame."""
    from ai_edge_litert.interpreter import Interpreter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = Interpreter(model_path=str(ym.MODEL), num_threads=1, experimental_preserve_all_tensors=keep)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    emb = next(d for d in it.get_tensor_details() if d["name"] == ym.EMBEDDING_TENSOR)
    scores, embs = [], []
    for f in frames:
        it.set_tensor(inp, f)
        it.invoke()
        scores.append(it.get_tensor(out)[0].copy())
        if keep:
            scale, zero = emb["quantization"]
            embs.append((it.get_tensor(emb["index"]).reshape(-1).astype(np.float32) - zero) * scale)
    return np.array(scores), np.array(embs)


def test_frames_start_every_0_48_s_and_zeros_fill_the_last() -> None:
    assert [ym.frame_count(n) for n in (0, 1, 15_600, 15_601, 23_280, 23_281, 160_000)] == [1, 1, 1, 2, 2, 3, 20]
    x = np.arange(1, 20_001, dtype=np.float32)
    fr = ym.frames(x)
    assert fr.shape == (2, 15_600) and fr.dtype == np.float32
    assert fr[1, 0] == x[7_680] and fr[1, 20_000 - 7_680 - 1] == x[-1] and not fr[1, 20_000 - 7_680 :].any()


def test_the_expert_scores_are_a_plain_interpreter_run_of_the_vendored_file(speech) -> None:
    """Tolerance 0: the same frames through ai-edge-litert's Interpreter (one thread, only the output kept) give the
    expert's scores bit for bit, whatever its thread budget; the embedding is the dequantised int8 tensor."""
    x = np.concatenate([speech, _tone(1.3)])
    [row] = YamnetExpert().analyze([ClipAudio("c", x)], {})
    scores, _ = _plain(ym.frames(x))
    _, kept = _plain(ym.frames(x), keep=True)
    assert np.array_equal(np.array(row.frame_scores, np.float32), scores)
    assert scores.shape == (ym.frame_count(x.size), 521)
    assert np.array_equal(scores * 256, np.round(scores * 256))  # steps of 1/256
    assert row.clip_max == scores.max(axis=0).tolist()
    assert np.allclose(row.clip_mean, scores.mean(axis=0, dtype=np.float64), atol=1e-12)
    assert np.allclose(row.embedding, kept.mean(axis=0, dtype=np.float64), atol=5e-5) and len(row.embedding) == 1024
    assert row.label_set == "audioset-yamnet-tflite-1" and row.hop_s == 0.48 and row.frame_s == 0.975
    assert row.padded_s == ((len(scores) - 1) * 7_680 + 15_600 - x.size) / SR
    # the event head's window probabilities: the shipped head over the plain run's pooled frames
    from earmark.experts.yamnet import events as ye

    want = ye.event_head()(ye.window_features(scores, kept, x.size))
    assert len(row.window_events) == len(ye.window_bounds_s(x.size)) and row.event_head == ye.event_head().sha256[:12]
    assert np.allclose(np.array(row.window_events), want, atol=1e-5)
    AudioSetScores.model_validate(row.model_dump())
    assert to_table(TABLES["yamnet"], [row]).num_rows == 1


def test_speech_is_heard_as_speech_and_a_tone_is_not(speech) -> None:
    rows = YamnetExpert().analyze([ClipAudio("speech", speech), ClipAudio("tone", _tone(4.0))], {})
    said, tone = ([t.label for t in r.top] for r in rows)
    assert "Speech" in said[:3], said
    assert tone[0] != "Speech" and "Speech" not in tone[:3], tone
    names = [c.name for c in ym.yamnet().classes]
    assert names[0] == "Speech" and rows[0].clip_max[0] > 0.5 > rows[1].clip_max[0]


def test_threads_score_at_once_as_one_does(speech) -> None:
    """A process runs several analyze shards on threads: each has its own interpreter, and the scores do not
    depend on which thread or how many at once."""
    model, x = ym.yamnet(), speech[: 3 * SR]
    alone = model.score(x).scores
    got: list[np.ndarray] = []
    workers = [threading.Thread(target=lambda: got.append(model.score(x).scores)) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(got) == 3 and all(np.array_equal(g, alone) for g in got)


@pytest.mark.parametrize("damage", ["flipped byte", "swapped file"])
def test_a_corrupt_or_swapped_weights_file_is_refused_naming_it_and_the_sha256(tmp_path, damage) -> None:
    bad = tmp_path / ym.MODEL.name
    if damage == "flipped byte":
        data = bytearray(ym.MODEL.read_bytes())
        data[len(data) // 2] ^= 0x01
        bad.write_bytes(bytes(data))
    else:
        shutil.copy(ym.CLASS_MAP, bad)
    with pytest.raises(ym.WeightsMismatch) as err:
        ym.Yamnet(bad)
    assert str(bad) in str(err.value) and ym.MODEL_SHA256 in str(err.value)
    bad_map = tmp_path / ym.CLASS_MAP.name
    bad_map.write_text(ym.CLASS_MAP.read_text().replace("Speech", "Spech", 1))
    with pytest.raises(ym.WeightsMismatch, match=ym.CLASS_MAP_SHA256):
        ym.Yamnet(ym.MODEL, bad_map)


def test_the_vendored_files_are_the_authors_and_carry_their_licence() -> None:
    here = ym.MODEL.parent
    provenance = (here / "PROVENANCE.md").read_text()
    assert ym.MODEL_SHA256 in provenance and ym.CLASS_MAP_SHA256 in provenance and "Apache-2.0" in provenance
    assert "Apache License" in (here / "LICENSE").read_text()
    model = ym.Yamnet()  # checks both sha256 and the label list inside the model file
    assert len(model.classes) == 521 and model.classes[0].mid == "/m/09x0r"


def test_the_embedded_profile_runs_it_unless_switched_off() -> None:
    assert isinstance(build_experts(AnalyzeSection())["yamnet"], YamnetExpert)
    assert "yamnet" not in build_experts(AnalyzeSection(yamnet=False))
    assert list(build_experts(AnalyzeSection(only=["yamnet"]))) == ["yamnet"]  # it needs no other table


def test_the_evidence_reads_the_yamnet_table_and_keys_on_its_policy() -> None:
    """Its scores state events under the measured policy: the evidence stage reads the table, and a new policy
    file re-runs it."""
    from earmark.core.config import EvidenceSection
    from earmark.stages.synthesize import evidence

    tables = {"domain": ["d"], "levels": ["l"], "yamnet": ["y"]}
    assert evidence.evidence_tables(tables) == tables
    spec = evidence.spec(list(tables), EvidenceSection())
    assert "yamnet" in spec.reads and spec.config["yamnet_policy"] == evidence.yamnet_policy_sha()


@pytest.mark.slow
def test_build_until_analyze_writes_the_yamnet_table(tmp_path, prefect_harness, speech) -> None:
    from conftest import CatalogConnection
    from earmark.core.config import load_config
    from earmark.flows.build import run_build

    inputs = tmp_path / "inputs"
    inputs.mkdir()
    sf.write(inputs / "speech.wav", speech, SR)
    sf.write(inputs / "tone.wav", _tone(2.0), SR)
    cfg = load_config(
        None,
        {"data_root": str(tmp_path / "data"), "dataset": "yam", "inputs": [str(inputs)], "analyze.only": ["yamnet"]},
    )
    got = run_build(cfg, until="analyze")
    assert got["shards"]["analyze:yamnet"]["computed"] == 1
    con = CatalogConnection(tmp_path / "data", "yam")
    rows = con.execute(
        f"SELECT c.source_path, y.label_set, len(y.frame_scores), len(y.frame_scores[1]), y.top[1].label "
        f"FROM {got['version']}.yamnet y JOIN {got['version']}.clips c USING (clip_id) ORDER BY 1"
    ).fetchall()
    n_speech = ym.frame_count(speech.size)
    assert rows == [
        ("inputs/speech.wav", "audioset-yamnet-tflite-1", n_speech, 521, "Speech"),
        ("inputs/tone.wav", "audioset-yamnet-tflite-1", 4, 521, rows[1][4]),
    ]
    assert rows[1][4] != "Speech"
