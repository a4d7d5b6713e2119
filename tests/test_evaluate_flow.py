"""evaluate end to end on a small hand-built version: the model under test (a loopback audio chat server
that really decodes the clip and answers from its pitch) is asked for captions, QA, entailment and IFEval
answers; the answers are scored (DATE, entailment metrics, IFEval IFR, and with the embedded SmolLM2 as
classifier/judge), stored in `scores`, and a re-run asks the model nothing and recomputes nothing."""

from __future__ import annotations

import base64
import io
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from earmark.core.config import load_config
from earmark.flows.evaluate import evaluate_flow
from earmark.flows.publish import publish_flow
from earmark.schemas import Caption, Clip, EntailmentHypothesis, InstructionTriple, QAPair, QCResult, to_table
from earmark.stages.ingest import encode_flac
from earmark.storage import Catalog, ShardMeta

SR = 16_000
PITCH = {"clip_high": 1760.0, "clip_low": 110.0}  # what the toy model "hears"


def _tone(freq: float) -> bytes:
    t = np.arange(SR * 2) / SR
    return encode_flac((0.3 * 32767 * np.sin(2 * np.pi * freq * t)).astype(np.int16), SR)


def _lineage(clip_id: str) -> dict:
    return dict(clip_id=clip_id, domain="00A", prompt_name="test", prompt_sha="0" * 8, model="hand", confidence=0.9)


# (clip, label, hypothesis); the toy model is wrong on exactly one item: it says yes to "indoors" (gold neutral)
HYPOTHESES = [
    ("clip_high", "entailment", "A high-pitched tone is heard."),
    ("clip_high", "contradiction", "A low-pitched tone is heard."),
    ("clip_high", "neutral", "The tone was recorded indoors."),
    ("clip_low", "entailment", "A low-pitched tone is heard."),
    ("clip_low", "contradiction", "A high-pitched tone is heard."),
    ("clip_low", "neutral", "The tone comes from a synthesizer in a studio."),
]
# (clip, dimension, instruction, expected answer, rule, rule_content); the toy model ignores "lowercase"
INSTRUCTIONS = [
    ("clip_high", "Capitalization", "Describe the sound in capital letters only.", "A HIGH-PITCHED TONE.", 3, ""),
    ("clip_low", "Capitalization", "Describe the sound in capital letters only.", "A LOW-PITCHED TONE.", 3, ""),
    ("clip_low", "Capitalization", "Describe the sound in lowercase letters only.", "a low-pitched tone.", 4, ""),
]


class ToyAudioModel(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests = 0
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: ToyAudioModel

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests += 1
        parts = body["messages"][0]["content"]
        prompt = next(p["text"] for p in parts if p["type"] == "text")
        audio = next(p["input_audio"]["data"] for p in parts if p["type"] == "input_audio")
        x, sr = sf.read(io.BytesIO(base64.b64decode(audio)))
        freq = np.argmax(np.abs(np.fft.rfft(x))) * sr / len(x)
        pitch = "high-pitched" if freq > 500 else "low-pitched"
        if "Hypothesis:" in prompt:
            hyp = re.search(r'Hypothesis: "(.*)"', prompt).group(1)
            if "synthesizer" in hyp:
                answer = "Maybe; the audio does not say where it comes from."
            elif "indoors" in hyp or pitch in hyp:
                answer = "Yes, that is what I hear."
            else:
                answer = "No, the tone I hear is the opposite."
        elif "capital letters" in prompt or "lowercase" in prompt:
            answer = f"A {pitch.upper()} TONE."
        else:
            answer = f"A steady {pitch} tone."
        data = json.dumps(
            {"choices": [{"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def toy_model():
    srv = ToyAudioModel()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, prefect_harness):
    root = tmp_path_factory.mktemp("evalflow")
    cfg = load_config(None, {"data_root": str(root / "data"), "dataset": "ev", "llm.model": "smollm2-135m-instruct"})
    cat = Catalog(cfg.data_root, cfg.dataset)
    clips = [
        Clip(
            clip_id=c,
            source_path=f"{c}.wav",
            source_sha256=c,
            source_format="wav",
            clip_index=0,
            offset_s=0,
            duration_s=2.0,
            sample_rate=SR,
            audio_flac=_tone(f),
        )
        for c, f in PITCH.items()
    ]
    captions, qa, ent, ins = [], [], [], []
    for c in PITCH:
        pitch = "high-pitched" if c == "clip_high" else "low-pitched"
        for kind in ("short", "long"):
            for i in range(3):
                captions.append(
                    Caption(
                        **_lineage(c),
                        item_id=f"{c}:{kind}:{i}",
                        kind=kind,
                        ref_index=i,
                        text=f"A steady {pitch} tone{'' if i == 0 else ' plays'}{'.' * (i + 1)}",
                    )
                )
        qa.append(
            QAPair(
                **_lineage(c),
                item_id=f"{c}:qa:0",
                qa_index=0,
                category="direct_perception",
                difficulty="basic",
                question="What do you hear?",
                answer=f"A steady {pitch} tone.",
            )
        )
    for n, (c, label, hyp) in enumerate(HYPOTHESES):
        ent.append(
            EntailmentHypothesis(
                **_lineage(c),
                item_id=f"{c}:ent:{n}",
                premise_kind="long",
                premise=next(x.text for x in captions if x.item_id == f"{c}:long:0"),  # a kept caption: kept text
                label=label,
                hypothesis=hyp,
            )
        )
    for n, (c, dim, instr, ans, rule, content) in enumerate(INSTRUCTIONS):
        ins.append(
            InstructionTriple(
                **_lineage(c),
                item_id=f"{c}:if:{n}",
                dimension=dim,
                instruction=instr,
                answer=ans,
                rule=rule,
                rule_content=content,
            )
        )
    items = (
        [("captions", x) for x in captions]
        + [("qa", x) for x in qa]
        + [("entailment", x) for x in ent]
        + [("instructions", x) for x in ins]
    )
    qc = [
        QCResult(item_table=t, item_id=x.item_id, clip_id=x.clip_id, check="hand", keep=True, reason=None, score=None)
        for t, x in items
    ]
    tables = {
        "clips": to_table(Clip, clips),
        "captions": to_table(Caption, captions),
        "qa": to_table(QAPair, qa),
        "entailment": to_table(EntailmentHypothesis, ent),
        "instructions": to_table(InstructionTriple, ins),
        "qc": to_table(QCResult, qc),
    }
    cat.write_shard("handbuilt", tables, ShardMeta(stage="test", stage_version="1", inputs=[]), None)
    publish_flow(cfg, {t: ["handbuilt"] for t in tables})
    return cfg


def _scores(cfg, eval_key: str) -> list[tuple]:
    path = Path(cfg.data_root) / cfg.dataset / "scores" / f"{eval_key}.parquet"
    import duckdb

    return duckdb.sql(f"SELECT subtask, metric, value, item_id, note FROM read_parquet('{path}')").fetchall()


def test_ask_the_model_and_score_every_task(dataset, toy_model):
    out = evaluate_flow(
        dataset, endpoint=toy_model.base_url, model_id="toy", model_name="toy", metric="date", judge="off"
    )
    asked = toy_model.requests
    # 2 clips × 2 caption kinds + 2 QA + 6 hypotheses + 3 instructions
    assert asked == 4 + 2 + 6 + 3
    ent, ife = out["scores"]["entailment"], out["scores"]["ifeval"]
    assert ent["n"] == 6 and ent["ACC"] == pytest.approx(5 / 6) and ent["NACC"] == pytest.approx(0.5)
    assert ent["EACC"] == 1.0 and ent["CACC"] == 1.0 and ent["decided_by"] == {"rule": 6}
    assert ife["overall"]["IFR"] == pytest.approx(2 / 3) and ife["overall"]["SCR"] is None
    assert "date" in out["scores"]["mecat"]["groups"]["content_long"]["scores"]
    assert "Audio Entailment" in out["markdown"] and "IFEval-Audio" in out["markdown"]
    assert "FENSE error checker: off (weights absent" in out["markdown"]
    assert out["plot"] and Path(out["plot"]).read_bytes()[:4] == b"\x89PNG"
    rows = [r for key in out["eval_keys"] for r in _scores(dataset, key)]
    # two near-identical references: DATE's discrimination is 0 by design here, its similarity is high
    sims = [r[2] for r in rows if r[0] == "content_long" and r[1] == "date_similarity"]
    assert len(sims) == 2 and min(sims) > 0.5
    wrong = [r for r in rows if r[0] == "entailment" and r[2] == 0.0]
    assert len(wrong) == 1 and "indoors" not in wrong[0][3] and "pred=entailment gold=neutral by=rule" == wrong[0][4]

    again = evaluate_flow(
        dataset, endpoint=toy_model.base_url, model_id="toy", model_name="toy", metric="date", judge="off"
    )
    assert toy_model.requests == asked  # answers came from the runner cache
    assert again["eval_keys"] == out["eval_keys"] and again["scores"]["entailment"]["ACC"] == ent["ACC"]


def test_llm_classifier_and_judge_decide_and_are_counted(dataset, toy_model):
    preds = Path(dataset.data_root) / "ev" / "predictions" / "toy"
    version = next(preds.iterdir())
    out = evaluate_flow(dataset, predictions=version, model_name="toy-judged", metric="similarity", judge="llm")
    ent, ife = out["scores"]["entailment"], out["scores"]["ifeval"]
    assert sum(ent["decided_by"].values()) == 6
    assert ent["decided_by"].get("llm", 0) + ent["decided_by"].get("rule", 0) == 6
    assert ife["overall"]["n_judged"] == 3 and ife["overall"]["SCR"] is not None
    assert "judge smollm2-135m-instruct" in out["markdown"]


def test_judge_prompt_files_key_their_scoring_shards(dataset, toy_model, tmp_path):
    """Editing a judge prompt re-scores exactly the subtask that judge reads; the other shards are reused."""
    import shutil

    from earmark.prompts import PROMPT_DIR

    preds = next((Path(dataset.data_root) / "ev" / "predictions" / "toy").iterdir())
    prompts = tmp_path / "prompts"
    shutil.copytree(PROMPT_DIR, prompts, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    cfg = dataset.model_copy(update={"synthesize": dataset.synthesize.model_copy(update={"prompt_dir": prompts})})

    def keys() -> dict[str, str]:
        out = evaluate_flow(cfg, predictions=preds, model_name="toy-judged", metric="similarity", judge="llm")
        return dict(zip(("entailment", "ifeval"), out["eval_keys"][-2:]))

    before = keys()
    assert keys() == before  # nothing edited: the same scoring shards
    for name, subtask in (("entailment_judge", "entailment"), ("ifeval_judge", "ifeval")):
        path = prompts / f"{name}.toml"
        original = path.read_bytes()
        path.write_bytes(original + b"\n# edited\n")
        try:
            after = keys()
        finally:
            path.write_bytes(original)
        assert {s for s in before if before[s] != after[s]} == {subtask}, name


def test_bad_requests_name_the_fix(dataset, toy_model, tmp_path):
    with pytest.raises(ValueError, match="not both"):
        evaluate_flow(dataset, predictions=tmp_path, endpoint=toy_model.base_url)
    with pytest.raises(ValueError, match="unknown task"):
        evaluate_flow(dataset, endpoint=toy_model.base_url, tasks=["captions", "translation"])
    with pytest.raises(ValueError, match="nothing to score"):
        evaluate_flow(dataset)


def test_publish_exports_entailment_and_ifeval_in_their_benchmark_shapes(dataset):
    import csv

    from earmark.metrics.ifeval import ifeval_scores
    from earmark.stages.publish.formats import AUDIOBENCH_COLUMNS, ENTAILMENT_COLUMNS

    root = Path(dataset.data_root) / "ev" / "exports" / "v0001"
    with (root / "entailment" / "entailment.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames) == ENTAILMENT_COLUMNS  # the Audio Entailment release's columns
    assert {r["Audio file"] for r in rows} == {f"{c}.wav" for c, _, _ in HYPOTHESES}  # one row per clip
    assert {(r["Audio file"][:-4], r["Neutral"]) for r in rows} == {
        (c, h) for c, lab, h in HYPOTHESES if lab == "neutral"
    }
    records = [json.loads(line) for line in (root / "ifeval" / "ifeval.jsonl").read_text().splitlines()]
    assert len(records) == len(INSTRUCTIONS) and all(tuple(r) == AUDIOBENCH_COLUMNS for r in records)
    assert {r["instruction_type"] for r in records} == {"Capitalization Requirements"}
    scored = ifeval_scores(  # the reference passes; AudioBench's instruction_type is earmark's dimension
        [{**r, "dimension": r["instruction_type"], "model_prediction": r["answer"]} for r in records]
    )
    assert scored["overall"]["IFR"] == 1.0
