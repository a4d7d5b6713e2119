"""IFEval-Audio scoring: AudioBench's rule checks (codes 1–13), the binary judge prompt, IFR/SCR/OSR.

The rule semantics follow AudioBench's `format_test` (AudioLLMs/AudioBench,
src/dataset_src/eval_methods/eval_llama_3_70b_combined.py) check for check, quirks included, so scores
are comparable with the published numbers. Two entry points:
- `check_rule` is strict: an unknown rule code or a rule_content AudioBench does not accept raises ValueError
  naming it. Synthesis and QC use it on earmark's own items, where such a row is a generator bug.
- `audiobench_verdict` scores anyone's items the way AudioBench does, and never raises: a row without a rule
  (a content-only item) counts as followed, an unknown code or an unaccepted rule_content (list style '4',
  length 'ten', wrapper '') as not followed, and where AudioBench's check itself raises (a missing
  rule_content for rules 1/2/5/6/12/13) its judge loop scores the whole row 0, judge rating included. Each
  such row carries a warning; `ifeval_scores` (evaluation) uses it, so a foreign dataset never stops a run.
One deliberate difference: rule 13 maps keys that differ only by surrounding whitespace instead of raising
KeyError (which in AudioBench zeroes the whole row, judge verdict included).
Quirks kept on purpose (they define the benchmark):
- rules 1/2/5/6 match the target as a whole word, case-insensitively (`\\b target \\b`);
- rules 5/6 pass when the word is absent, and pass if *any* occurrence has the required case;
- rules 3/4 look at letters only and pass when there are none;
- rules 7/8/9 compare the raw prediction: leading/trailing whitespace makes them fail;
- rule 10 "no symbols" = no character outside `\\w`/whitespace, and no underscore: any punctuation
  (. , ' " - ! ?), emoji or currency sign fails; digits and non-ASCII letters (é, ß, 中) pass;
- rule 11 ignores lines without a marker, needs at least one marked line, and markers must increase by
  exactly 1 from line to line (any start value); an empty prediction passes;
- rule 12 counts whitespace-separated words; `lo-hi` inclusive, hi=0 = up to 99,999 words;
- rule 13 compares JSON *structure* (same key sets recursively, compatible value types; lists only
  need to be lists; int and float are interchangeable, bool is not a number).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DIMENSIONS = ("Content", "Capitalization", "Symbol", "List Structure", "Length", "Format")

DIMENSION_OF_RULE: dict[int, str] = {
    1: "Content", 2: "Content",
    3: "Capitalization", 4: "Capitalization", 5: "Capitalization", 6: "Capitalization",
    7: "Symbol", 8: "Symbol", 9: "Symbol", 10: "Symbol",
    11: "List Structure",
    12: "Length",
    13: "Format",
}  # fmt: skip

# AudioBench's dataset spells dimensions out ("Symbol Rules", "List and Structure Requirements", ...).
_DIMENSION_ALIASES = {
    "content requirements": "Content",
    "capitalization requirements": "Capitalization",
    "symbol rules": "Symbol",
    "symbol requirements": "Symbol",
    "list and structure requirements": "List Structure",
    "list structure requirements": "List Structure",
    "length requirements": "Length",
    "format requirements": "Format",
    **{d.lower(): d for d in DIMENSIONS},
}

_RATING = re.compile(r"correctness\s+rating\**\s*:\s*\**\s*\(?\s*([01])\b", re.IGNORECASE)


def parse_judge_rating(text: str) -> bool | None:
    """The judge's binary verdict from its reply, or None when it gave none.

    AudioBench reads `int(first_line.split(":")[-1])`; this also accepts the rating on a later line or
    in brackets/bold, which small judges produce, and rejects anything but 0/1.
    """
    m = _RATING.search(text or "")
    return None if m is None else m.group(1) == "1"


# ------------------------------------------------------------------------------------------ rule checks
def _word_pattern(target: str) -> re.Pattern[str]:
    return re.compile(r"\b" + re.escape(target) + r"\b", re.IGNORECASE)


def _letters(text: str) -> list[str]:
    return [c for c in text if c.isalpha()]


_WRAP_PAIRS = {"()": ("(", ")"), "[]": ("[", "]"), "{}": ("{", "}"), "<>": ("<", ">")}

_LIST_MARKER = {
    "0": re.compile(r"^-"),
    "1": re.compile(r"^\d+\."),
    "2": re.compile(r"^[IVXLCDM]+\."),
    "3": re.compile(r"^[A-Z]\."),
}
_ROMAN = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def _roman_to_int(s: str) -> int:
    # Lenient like AudioBench: "IIII" is 4, "IC" is 99.
    total, prev = 0, 0
    for ch in reversed(s):
        v = _ROMAN[ch]
        total += v if v >= prev else -v
        prev = v
    return total


def _marker_value(style: str, marker: str) -> int:
    body = marker[:-1]  # drop the trailing "."
    if style == "1":
        return int(body)
    if style == "2":
        return _roman_to_int(body)
    return ord(body) - ord("A") + 1


def _list_ok(prediction: str, style: str) -> bool:
    lines = [ln.strip() for ln in prediction.splitlines() if ln.strip()]
    if not lines:
        return True
    pattern = _LIST_MARKER[style]
    matches = [m for m in (pattern.match(ln) for ln in lines) if m]
    if not matches:
        return False
    if style == "0":
        return True
    values = [_marker_value(style, m.group(0)) for m in matches]
    return all(b == a + 1 for a, b in zip(values, values[1:]))


_NO_UPPER = 99_999  # AudioBench's stand-in for hi=0


def _parse_range(rule_content: str) -> tuple[int, int]:
    parts = rule_content.split("-")
    try:
        if len(parts) != 2:
            raise ValueError
        lo, hi = int(parts[0]), int(parts[1])
    except ValueError:
        raise ValueError(
            f"rule 12 needs rule_content 'lo-hi' with integers (hi=0 = unbounded), got {rule_content!r}"
        ) from None
    upper = _NO_UPPER if hi == 0 else hi
    if lo > upper:
        raise ValueError(f"rule 12 range {rule_content!r} is empty (lo > hi); use hi=0 for no upper bound")
    return lo, upper


def _loads_lenient(s: str) -> Any:
    """AudioBench's JSON extraction: first '{' to last '}', collapse escaped backslashes, then retry with
    unescaped quotes and quoted bare keys. None when nothing parses."""
    first, last = s.find("{"), s.rfind("}")
    if first == -1 or last == -1 or first > last:
        return None
    s = re.sub(r"\\{2,}", r"\\", s[first : last + 1].strip())
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        s = re.sub(r"(\w+):", r'"\1":', s.replace('\\"', '"'))
        try:
            return json.loads(s)
        except json.JSONDecodeError:
            return None


def _same_structure(pred: Any, target: Any) -> bool:
    if isinstance(target, dict):
        if not isinstance(pred, dict):
            return False
        pred_by_key = {k.strip() if isinstance(k, str) else k: v for k, v in pred.items()}
        target_by_key = {k.strip() if isinstance(k, str) else k: v for k, v in target.items()}
        if set(pred_by_key) != set(target_by_key):
            return False
        return all(_same_structure(pred_by_key[k], v) for k, v in target_by_key.items())
    if isinstance(target, list):
        return isinstance(pred, list)
    # Exact type() comparisons on purpose: bool is not accepted where a number is expected.
    if type(target) is str:
        return type(pred) is str
    if type(target) in (int, float):
        return type(pred) in (int, float)
    if type(target) is bool:
        return type(pred) is bool
    if target is None:
        return pred is None
    return False


def check_rule(prediction: str, rule: int | str, rule_content: str) -> bool:
    """Whether `prediction` satisfies AudioBench rule `rule` with argument `rule_content`.

    Codes: 1 include word, 2 exclude word, 3 all upper, 4 all lower, 5 word upper, 6 word lower,
    7 starts with, 8 ends with, 9 wrapped by, 10 no symbols, 11 list style (0 dash, 1 arabic, 2 roman,
    3 letter), 12 word count 'lo-hi' (hi=0 unbounded), 13 JSON structure equal to rule_content's.
    """
    if isinstance(rule, str) and rule.strip().isdigit():  # AudioBench's data stores codes as strings
        rule = int(rule.strip())
    if isinstance(rule, bool) or not isinstance(rule, int) or rule not in DIMENSION_OF_RULE:
        raise ValueError(f"unknown IFEval rule code {rule!r}: expected an int 1-13 (see DIMENSION_OF_RULE)")
    content = "" if rule_content is None else str(rule_content)
    if rule in (1, 2, 5, 6, 7, 8, 9) and not content:
        raise ValueError(f"rule {rule} needs a non-empty rule_content (the word/affix/wrapper), got {rule_content!r}")

    if rule in (1, 2, 5, 6):
        return _word_rule(prediction, rule, content)
    if rule == 3:
        return all(c.isupper() for c in _letters(prediction))
    if rule == 4:
        return all(c.islower() for c in _letters(prediction))
    if rule == 7:
        return prediction.startswith(content)
    if rule == 8:
        return prediction.endswith(content)
    if rule == 9:
        left, right = _WRAP_PAIRS.get(content, (content, content))
        return prediction.startswith(left) and prediction.endswith(right)
    if rule == 10:
        return not re.search(r"[^\w\s]|_", prediction)
    if rule == 11:
        if content not in _LIST_MARKER:
            raise ValueError(
                "rule 11 needs rule_content '0' (dash), '1' (arabic), '2' (roman) or '3' (letter), "
                f"got {rule_content!r}"
            )
        return _list_ok(prediction, content)
    if rule == 12:
        lo, hi = _parse_range(content)
        return lo <= len(prediction.split()) <= hi
    # rule 13
    target = _loads_lenient(content)
    if not isinstance(target, dict):
        raise ValueError(f"rule 13 needs rule_content holding a JSON object template, got {rule_content!r}")
    pred = _loads_lenient(prediction)
    return isinstance(pred, dict) and _same_structure(pred, target)


def _word_rule(prediction: str, rule: int, word: str) -> bool:
    """Rules 1/2 (include / exclude) and 5/6 (upper / lower case) of a whole word, case-insensitive match."""
    found = _word_pattern(word).findall(prediction)
    if rule in (1, 2):
        return bool(found) == (rule == 1)
    return not found or any(w.isupper() if rule == 5 else w.islower() for w in found)


# ------------------------------------------------------------------------------ AudioBench's own verdicts
@dataclass(frozen=True)
class RuleVerdict:
    """AudioBench's verdict on one row; `warning` says why a row was scored by one of its fallbacks."""

    passed: bool
    warning: str | None = None
    zeroes_row: bool = False  # AudioBench's check raised: its judge loop scores the row 0, judge rating too


_AUDIOBENCH_CODES = {str(code) for code in DIMENSION_OF_RULE}


def audiobench_verdict(prediction: str, rule: Any, rule_content: Any) -> RuleVerdict:
    """Whether `prediction` follows the rule, exactly as AudioBench's `format_test` scores it, for any input.

    AudioBench (AudioLLMs/AudioBench, src/dataset_src/eval_methods/eval_llama_3_70b_combined.py,
    `format_test` and `llama3_70b_as_judge_binary_one_sample`): `if not rule: return True` (an item with no
    format rule, e.g. a content-only one, follows the format); `rule = str(rule)` and any code but "1".."13"
    prints "ERROR - undefined rule!" and returns False; rules 7/8/9/11 return False for an empty target and
    rule 11 for a style other than "0".."3"; rule 12 returns False unless the content is two integers
    `lo-hi`; rule 13 returns False unless the content holds a JSON object; rules 1/2/5/6 with an empty word
    match `\b\b` (any word boundary). Where its check raises instead (no rule_content for rules 1/2/5/6/12, or
    13 with a JSON answer), the judge loop's bare `except` scores correctness and format 0 (`zeroes_row`).
    """
    if not rule:
        return RuleVerdict(True, f"no format rule ({rule!r}): AudioBench scores it as followed (a content-only item)")
    code = str(rule)
    if code not in _AUDIOBENCH_CODES:
        return RuleVerdict(False, f"rule code {rule!r} is not one of 1-13: AudioBench scores it as not followed")
    n = int(code)
    if n in (3, 4, 10):  # the content is not read
        return RuleVerdict(check_rule(prediction, n, ""))
    if rule_content is None or isinstance(rule_content, str):
        try:
            return RuleVerdict(check_rule(prediction, n, rule_content))
        except ValueError as exc:
            problem = str(exc)
    else:
        problem = f"rule {n} needs a text rule_content, got {type(rule_content).__name__} {rule_content!r}"
    passed, zeroed = _audiobench_fallback(prediction, n, rule_content)
    outcome = "followed" if passed else "not followed"
    if zeroed:
        outcome += " and its check raises, so the judge rating of the row is 0 too"
    return RuleVerdict(passed, f"{problem}; AudioBench scores it as {outcome}", zeroed)


def _audiobench_fallback(prediction: str, rule: int, content: Any) -> tuple[bool, bool]:
    """(passed, row zeroed) for a rule_content `check_rule` refuses, as AudioBench's functions treat it."""
    if rule in (7, 8, 9, 11) and not content:  # `if not target: return False`
        return False, False
    if rule == 11:  # `target not in ["0", "1", "2", "3"]`
        return False, False
    if not isinstance(content, str):  # re.escape / .split / .find of a non-string raise
        if rule == 13 and _loads_lenient(prediction) is None:  # the prediction is parsed (and fails) first
            return False, False
        return False, True
    if rule in (1, 2, 5, 6):  # the empty word
        return _word_rule(prediction, rule, content), False
    if rule == 12:  # is_word_count_in_range: two integer bounds or False; lo > hi simply never holds
        bounds = content.split("-")
        if len(bounds) != 2:
            return False, False
        try:
            lo, hi = int(bounds[0]), int(bounds[1]) or _NO_UPPER
        except ValueError:
            return False, False
        return lo <= len(prediction.split()) <= hi, False
    return False, False  # rule 13: the template is not a JSON object


# ---------------------------------------------------------------------------------------- aggregation
def normalize_dimension(name: str | None, rule: int | str | None = None) -> str:
    """Short dimension name from either spelling; falls back to the rule's dimension when absent."""
    if name:
        short = _DIMENSION_ALIASES.get(str(name).strip().lower())
        if short is None:
            raise ValueError(f"unknown IFEval dimension {name!r}: expected one of {', '.join(DIMENSIONS)}")
        return short
    code = int(rule) if isinstance(rule, str) and rule.strip().isdigit() else rule
    if code in DIMENSION_OF_RULE:
        return DIMENSION_OF_RULE[code]
    raise ValueError(f"record has no dimension and rule {rule!r} does not imply one")


def _rates(ifr: list[bool], judged: list[tuple[bool, bool]]) -> dict[str, float | int | None]:
    n, nj = len(ifr), len(judged)
    return {
        "n": n,
        "n_judged": nj,
        "IFR": sum(ifr) / n if n else None,
        "SCR": sum(j for j, _ in judged) / nj if nj else None,
        "OSR": sum(j and r for j, r in judged) / nj if nj else None,
    }


def row_dimension(name: str | None, rule: Any = None) -> tuple[str | None, str | None]:
    """(short dimension, warning) without raising: a dimension AudioBench does not know (or none, with no rule
    to imply one) is None, and such a row counts in the overall rates only, as in AudioBench."""
    try:
        return normalize_dimension(name, rule), None
    except ValueError as exc:
        return None, f"{exc}; counted in the overall rates only, as AudioBench does"


def ifeval_scores(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """IFR (rule pass rate), SCR (judge pass rate) and OSR (both pass), overall and per dimension.

    Each record: instruction, answer, dimension, rule, rule_content, model_prediction and optionally
    judge_correct (bool) and item_id (names it in warnings). Rules are scored by `audiobench_verdict`, so a
    row AudioBench scores by a fallback (no rule, an unknown code, a rule_content it does not accept, an
    unknown dimension) is scored the same way and listed in "warnings" instead of stopping the evaluation.
    SCR/OSR are computed over the records that carry a judge verdict (`n_judged`) and are None where there
    are none; IFR always covers every record. Rates are fractions in [0, 1].
    Returns {"overall": {...}, "per_dimension": {dimension: {...}}, "warnings": [...]} with keys n, n_judged,
    IFR, SCR, OSR; dimensions without records are left out.
    """
    groups: dict[str, tuple[list[bool], list[tuple[bool, bool]]]] = {}
    all_ifr: list[bool] = []
    all_judged: list[tuple[bool, bool]] = []
    warnings: list[str] = []
    for i, rec in enumerate(records):
        rule = rec.get("rule")
        verdict = audiobench_verdict(rec.get("model_prediction") or "", rule, rec.get("rule_content"))
        dim, dim_warning = row_dimension(rec.get("dimension"), rule)
        name = rec.get("item_id") or f"record {i}"
        warnings += [f"{name}: {w}" for w in (verdict.warning, dim_warning) if w]
        passed = verdict.passed
        judge = rec.get("judge_correct")
        judge = None if judge is None else bool(judge) and not verdict.zeroes_row
        all_ifr.append(passed)
        if judge is not None:
            all_judged.append((judge, passed))
        if dim is None:
            continue
        ifr, judged = groups.setdefault(dim, ([], []))
        ifr.append(passed)
        if judge is not None:
            judged.append((judge, passed))
    return {
        "overall": _rates(all_ifr, all_judged),
        "per_dimension": {d: _rates(*groups[d]) for d in DIMENSIONS if d in groups},
        "warnings": warnings,
    }
