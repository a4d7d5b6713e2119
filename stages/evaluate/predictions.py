"""Prediction files, as `mecat-evaluate` reads them: `.jsonl` lines `{key: text}` (or `{key: {field: text}}`),
`.json` one object, `.csv` two columns, `.txt` `key<TAB>text`. A file scores one subtask; a directory scores
every subtask it has a file for (`short.jsonl`, `long.csv`, `direct_perception.jsonl`, …). Also which metrics
a run asks for (`parse_metrics`)."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from earmark.metrics.mecat_eval import METRICS as MECAT_METRICS
from earmark.schemas.records import CAPTION_KINDS, QA_CATEGORIES

SUFFIXES = (".jsonl", ".json", ".csv", ".txt")
MECAT_SUBTASKS: tuple[str, ...] = (*CAPTION_KINDS, *QA_CATEGORIES, "qa")


class PredictionError(ValueError):
    pass


def _first_string(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return next((v for v in value.values() if isinstance(v, str)), None)
    return None if value is None else str(value)


def load_predictions(path: Path, strict: bool = False) -> dict[str, str]:
    """{key: text} from a prediction file; malformed lines are skipped (`read_predictions` says which and why),
    or with `strict` raise PredictionError."""
    out, problems = read_predictions(path)
    if strict and problems:
        raise PredictionError(malformed_message(problems))
    return out


def malformed_message(problems: Sequence[str], limit: int = 20) -> str:
    more = f"\n  … and {len(problems) - limit} more" if len(problems) > limit else ""
    return f"{len(problems)} malformed prediction lines:\n  " + "\n  ".join(problems[:limit]) + more


def prediction_problems(paths: Sequence[Path]) -> list[str]:
    """Every malformed line of these prediction files, as `file:line: reason`."""
    return [p for path in paths for p in read_predictions(path)[1]]


def read_predictions(path: Path) -> tuple[dict[str, str], list[str]]:
    """({key: text}, one `file:line: reason` per malformed line) from a .jsonl / .json / .csv / .txt file."""
    if not path.is_file():
        raise PredictionError(f"prediction file {path} does not exist")
    suffix = path.suffix.lower()
    out: dict[str, str] = {}
    bad: list[str] = []
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        bad.append(f"{path}: not valid UTF-8 (byte {exc.start}; such bytes read as U+FFFD); save the file as UTF-8")
    if suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                bad.append(f"{path}:{n}: not valid JSON ({exc.args[0].split(':')[0]})")
                continue
            if not isinstance(obj, dict):
                bad.append(f"{path}:{n}: expected a JSON object {{key: text}}, got {type(obj).__name__}")
                continue
            for k, v in obj.items():
                if (s := _first_string(v)) is not None:
                    out[str(k)] = s
                else:
                    bad.append(f"{path}:{n}: key {str(k)[:60]!r} has no text (null)")
    elif suffix == ".json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PredictionError(f"{path}: not valid JSON ({exc}); expected one object {{key: text}}") from exc
        if not isinstance(obj, dict):
            raise PredictionError(f"{path}: expected one JSON object {{key: text}}, got {type(obj).__name__}")
        for k, v in obj.items():
            if (s := _first_string(v)) is not None:
                out[str(k)] = s
            else:
                bad.append(f"{path}: key {str(k)[:60]!r} has no text (null)")
    elif suffix == ".csv":
        for n, row in enumerate(csv.reader(text.splitlines()), 1):
            if len(row) == 2:
                out[row[0]] = row[1]
            elif row:
                bad.append(f"{path}:{n}: expected 2 columns (key, text), got {len(row)}; quote texts with commas")
    elif suffix == ".txt":
        for n, line in enumerate(text.splitlines(), 1):
            parts = line.strip().split("\t", 1) if "\t" in line else line.strip().split(" ", 1)
            if len(parts) == 2:
                out[parts[0]] = parts[1]
            elif line.strip():
                bad.append(f"{path}:{n}: expected 'key<TAB>text' (or 'key text'), got a key without text")
    else:
        raise PredictionError(f"{path}: unsupported prediction format {suffix!r}; use one of {', '.join(SUFFIXES)}")
    if bad and not out:
        raise PredictionError(f"{path}: no line could be parsed; expected {{key: text}} rows. {bad[0]}")
    return out, bad


def parse_metrics(metric: str | None) -> list[str]:
    """ "similarity" (default) or a comma-separated mix of MECAT metrics ("date,fense,bleu")."""
    names = [m.strip().lower() for m in (metric or "similarity").split(",") if m.strip()]
    if names == ["similarity"]:
        return names
    bad = [m for m in names if m not in MECAT_METRICS]
    if bad or not names:
        raise PredictionError(
            f"unknown metric {', '.join(bad) or metric!r}; use 'similarity' or any of "
            f"{', '.join(MECAT_METRICS)} (comma-separated)"
        )
    return [m for m in MECAT_METRICS if m in names]


def prediction_files(path: Path, subtask: str | None, kinds: tuple[str, ...] = CAPTION_KINDS) -> dict[str, Path]:
    """{subtask: file}; `kinds` are the subtasks the chosen metric can score."""
    if path.is_dir():
        found = {p.stem: p for p in sorted(path.iterdir()) if p.stem in kinds and p.suffix in SUFFIXES}
        if not found:
            raise PredictionError(f"{path} holds no prediction file named after a subtask ({', '.join(kinds)})")
        return found
    kind = subtask or "long"
    if kind not in kinds:
        raise PredictionError(f"unknown subtask {kind!r} for this metric; use one of {', '.join(kinds)}")
    return {kind: path}
