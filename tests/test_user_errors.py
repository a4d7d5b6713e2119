"""Errors a user sees: one clear line for SQL, malformed prediction lines named with file, line and reason
(and `--strict` to fail on them), unknown datasets listed instead of created."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb
import pytest

from earmark.cli.commands import sql_error
from earmark.cli.main import main
from earmark.stages.evaluate.predictions import PredictionError, load_predictions, read_predictions
from earmark.storage import Catalog


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("SELECT nope FROM t", 'SQL: Binder Error: Referenced column "nope" not found'),
        ("FROM nothere", "SQL: Catalog Error: Table with name nothere does not exist"),
        ("SELEC 1", 'SQL: Parser Error: syntax error at or near "SELEC" at LINE 1: SELEC 1'),
    ],
)
def test_sql_errors_become_one_line_naming_the_problem(query, expected):
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a INTEGER)")
    with pytest.raises(duckdb.Error) as err:
        con.execute(query)
    line = sql_error(err.value, "demo")
    assert "\n" not in line and line.startswith(expected), line
    if "Binder" in expected or "Catalog" in expected:
        assert "SHOW TABLES" in line  # where to look next


def test_earmark_sql_prints_one_error_line_not_a_traceback(tmp_path):
    Catalog(tmp_path, "ds")
    env = {**os.environ}
    out = subprocess.run(
        [sys.executable, "-m", "earmark.cli.main", "sql", "-d", "ds", "--data-root", str(tmp_path), "FROM nothere"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr
    assert out.stderr.startswith("earmark: error: SQL: Catalog Error: Table with name nothere does not exist")

    missing = subprocess.run(
        [sys.executable, "-m", "earmark.cli.main", "sql", "-d", "typo", "--data-root", str(tmp_path), "FROM captions"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and "dataset 'typo' not found" in missing.stderr and "ds" in missing.stderr
    assert not (tmp_path / "typo").exists()  # reading never creates a dataset


def test_malformed_prediction_lines_are_reported_with_file_line_and_reason(tmp_path):
    jsonl = tmp_path / "long.jsonl"
    jsonl.write_text(
        "\n".join(
            [
                json.dumps({"c1": "a dog barks"}),
                '{"c2": "rain on a roof"',  # cut off
                json.dumps(["c3", "a list"]),
                json.dumps({"c4": None}),
                "",
                json.dumps({"c5": "a man speaks"}),
            ]
        )
        + "\n"
    )
    preds, problems = read_predictions(jsonl)
    assert preds == {"c1": "a dog barks", "c5": "a man speaks"}
    assert [p.split(": ", 1)[0] for p in problems] == [f"{jsonl}:2", f"{jsonl}:3", f"{jsonl}:4"]
    assert "not valid JSON" in problems[0] and "expected a JSON object" in problems[1] and "no text" in problems[2]
    with pytest.raises(PredictionError, match="3 malformed prediction lines"):
        load_predictions(jsonl, strict=True)

    csv = tmp_path / "short.csv"
    csv.write_text("c1,a dog\nc2,rain, on a roof\n")
    assert read_predictions(csv)[1] == [f"{csv}:2: expected 2 columns (key, text), got 3; quote texts with commas"]
    latin = tmp_path / "sound.txt"
    latin.write_bytes("c1\tcaf\xe9 noise\n".encode("latin-1"))
    assert "not valid UTF-8" in read_predictions(latin)[1][0]


def test_mecat_score_warns_about_skipped_lines_and_strict_fails(tmp_path, capsys):
    (tmp_path / "ref" / "caption").mkdir(parents=True)
    (tmp_path / "ref" / "caption" / "00A.jsonl").write_text(
        json.dumps({"c1": {"long": ["a dog barks", "a dog is barking", "barking"], "domain": "00A"}}) + "\n"
    )
    preds = tmp_path / "long.csv"
    preds.write_text("c1,a dog barks\nc2,too,many,columns\n")
    args = ["mecat-score", "-p", str(preds), "--subtask", "long", "--references", str(tmp_path / "ref")]
    args += ["--metric", "bleu"]
    assert main(args) == 0
    assert f"{preds}:2: expected 2 columns" in capsys.readouterr().err
    assert main([*args, "--strict"]) == 2
    err = capsys.readouterr().err
    assert "1 malformed prediction lines" in err and f"{preds}:2" in err


def test_the_api_key_comes_from_the_env_else_a_prefect_secret_block(prefect_harness, monkeypatch):
    from prefect.blocks.system import Secret

    from earmark.core.config import load_config
    from earmark.flows.runs import load_api_key
    from earmark.llm.session import api_key

    Secret(value="sk-from-block").save("earmark-test-key", overwrite=True)
    cfg = load_config(
        None,
        {
            "llm.endpoint": "http://127.0.0.1:9/v1",
            "llm.api_key_env": "EARMARK_TEST_KEY_VAR",
            "llm.api_key_secret": "earmark-test-key",
        },
    )
    monkeypatch.setenv("EARMARK_TEST_KEY_VAR", "sk-from-env")
    load_api_key(cfg)
    assert api_key(cfg.llm) == "sk-from-env"  # the environment wins
    monkeypatch.delenv("EARMARK_TEST_KEY_VAR")
    load_api_key(cfg)
    assert api_key(cfg.llm) == "sk-from-block"
    assert "sk-from-block" not in cfg.model_dump_json()  # the config holds the block's name only
    monkeypatch.delenv("EARMARK_TEST_KEY_VAR")
    missing = cfg.model_copy(update={"llm": cfg.llm.model_copy(update={"api_key_secret": "missing-block"})})
    with pytest.raises(ValueError, match="no such Prefect Secret block"):
        load_api_key(missing)


def test_a_key_in_the_endpoint_url_is_refused_and_never_echoed():
    from earmark.core.config import ConfigError, load_config
    from earmark.llm.client import shown_url

    with pytest.raises(ConfigError) as err:
        load_config(None, {"llm.endpoint": "https://user:sk-s3cret@llm.example/v1"})
    assert "carries credentials" in str(err.value) and "sk-s3cret" not in str(err.value)
    assert shown_url("https://user:sk-s3cret@llm.example:8443/v1") == "https://***@llm.example:8443/v1"
    assert shown_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
