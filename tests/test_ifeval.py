"""IFEval-Audio rule checks (AudioBench codes 1–13) and IFR/SCR/OSR aggregation."""

import pytest

from earmark.metrics.ifeval import DIMENSION_OF_RULE, DIMENSIONS, check_rule, ifeval_scores, parse_judge_rating


@pytest.mark.parametrize(
    ("prediction", "rule", "content", "expected"),
    [
        # 1 include word: whole word, case-insensitive
        ("The sound of TECHNOLOGY is loud.", 1, "technology", True),
        ("Biotechnology is everywhere.", 1, "technology", False),
        ("Rivera played in Super Bowl XX.", 1, "super bowl", True),
        ("", 1, "dog", False),
        ("Un café très chaud.", 1, "café", True),
        # 2 exclude word
        ("Rivera played in Championship Game XX.", 2, "Super Bowl", True),
        ("Rivera played in super bowl XX.", 2, "Super Bowl", False),
        ("Dogs barking.", 2, "dog", True),  # "Dogs" is not the word "dog"
        ("", 2, "dog", True),
        # 3 all upper (letters only; no letters passes)
        ("A DOG BARKS TWICE, 2 TIMES!", 3, "", True),
        ("A DOG barks", 3, "", False),
        ("123 !!", 3, "", True),
        ("", 3, "", True),
        ("STRASSE ÜBER", 3, "", True),
        ("STRAßE", 3, "", False),  # ß is lower case
        # 4 all lower
        ("a dog barks twice.", 4, "", True),
        ("a dog barks in Paris", 4, "", False),
        ("ünïcödé letters", 4, "", True),
        # 5 word upper: passes when any occurrence is upper, or the word is absent
        ("The DOG and the dog.", 5, "dog", True),
        ("The Dog barks.", 5, "dog", False),
        ("A cat meows.", 5, "dog", True),
        # 6 word lower
        ("The Dog and the dog.", 6, "DOG", True),
        ("The DOG barks.", 6, "dog", False),
        ("", 6, "dog", True),
        # 7 starts with (raw: leading whitespace fails)
        ("Answer: a dog.", 7, "Answer:", True),
        ("  Answer: a dog.", 7, "Answer:", False),
        ("answer: a dog.", 7, "Answer:", False),
        ("", 7, "Answer:", False),
        # 8 ends with (raw: trailing whitespace fails)
        ("A dog barks. END", 8, "END", True),
        ("A dog barks. END\n", 8, "END", False),
        ("A dog barks. END.", 8, "END", False),
        ("Fin 🎵", 8, "🎵", True),
        # 9 wrapped by: bracket pairs, otherwise the same string on both sides
        ("[a dog barks]", 9, "[]", True),
        ("[a dog barks", 9, "[]", False),
        ("(a dog)", 9, "()", True),
        ("{a dog}", 9, "{}", True),
        ("<a dog>", 9, "<>", True),
        ('"A dog barks."', 9, '"', True),
        ('"A dog barks."\n', 9, '"', False),
        ("***bold***", 9, "***", True),
        ("", 9, '"', False),
        # 10 no symbols: anything outside \w/whitespace, and "_", fails
        ("A dog barks twice in 2024", 10, "", True),
        ("Café naïve 中文", 10, "", True),
        ("A dog barks.", 10, "", False),
        ("dog's bark", 10, "", False),
        ("snake_case", 10, "", False),
        ("happy 🙂", 10, "", False),
        ("", 10, "", True),
        # 12 word count lo-hi inclusive, hi=0 unbounded
        ("one two three", 12, "3-5", True),
        ("one two", 12, "3-5", False),
        ("one two three four five six", 12, "3-5", False),
        ("  one\ttwo\nthree  ", 12, "3-3", True),
        (" ".join(["w"] * 5000), 12, "10-0", True),
        ("short", 12, "10-0", False),
        ("", 12, "0-5", True),
        ("", 12, "1-0", False),
    ],
)
def test_rules_1_to_10_and_12(prediction, rule, content, expected):
    assert check_rule(prediction, rule, content) is expected


@pytest.mark.parametrize(
    ("prediction", "style", "expected"),
    [
        ("- rain\n- thunder\n- wind", "0", True),
        ("* rain\n* thunder", "0", False),
        ("Sounds heard:\n- rain\nThat is all.", "0", True),  # unmarked lines are ignored
        ("1. rain\n2. thunder\n3. wind", "1", True),
        ("  3. rain\n\n  4. thunder  ", "1", True),  # any start, blank lines and indentation ignored
        ("1. rain\n3. wind", "1", False),  # gap
        ("2. rain\n1. wind", "1", False),  # decreasing
        ("1) rain\n2) wind", "1", False),  # only "N." markers count
        ("I. rain\nII. thunder\nIII. wind\nIV. hail", "2", True),
        ("I. rain\nIII. wind", "2", False),
        ("A. rain\nB. thunder\nC. wind", "3", True),
        ("A. rain\nC. wind", "3", False),
        ("a. rain\nb. wind", "3", False),  # lower-case letters are not markers
        ("rain, thunder, wind", "1", False),  # no marker at all
        ("", "2", True),  # AudioBench: an empty answer passes any list style
        ("   \n  ", "0", True),
    ],
)
def test_rule_11_list_styles(prediction, style, expected):
    assert check_rule(prediction, 11, style) is expected


TEMPLATE = '{"speaker": "", "topics": [], "duration_s": 0, "details": {"mood": "", "loud": true, "extra": null}}'


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        (
            '{"speaker": "Ann", "topics": ["a", 1], "duration_s": 2.5, '
            '"details": {"mood": "calm", "loud": false, "extra": null}}',
            True,
        ),
        # embedded in prose / code fences: first "{" to last "}" is parsed
        (
            'Here you go:\n```json\n{"speaker": "Ann", "topics": [], "duration_s": 3, '
            '"details": {"mood": "x", "loud": true, "extra": null}}\n```',
            True,
        ),
        # missing nested key
        ('{"speaker": "Ann", "topics": [], "duration_s": 3, "details": {"mood": "x", "loud": true}}', False),
        # extra top-level key
        (
            '{"speaker": "Ann", "topics": [], "duration_s": 3, "x": 1, '
            '"details": {"mood": "x", "loud": true, "extra": null}}',
            False,
        ),
        # wrong types: list expected, number given; bool is not a number
        (
            '{"speaker": "Ann", "topics": 3, "duration_s": 3, "details": {"mood": "x", "loud": true, "extra": null}}',
            False,
        ),
        (
            '{"speaker": "Ann", "topics": [], "duration_s": true, '
            '"details": {"mood": "x", "loud": true, "extra": null}}',
            False,
        ),
        (
            '{"speaker": "Ann", "topics": [], "duration_s": 3, "details": {"mood": "x", "loud": 1, "extra": null}}',
            False,
        ),
        # single quotes are not JSON (the paper's qwen2 failure mode)
        ("{'speaker': 'Ann', 'topics': [], 'duration_s': 3, 'details': {}}", False),
        ("no json here", False),
        ("", False),
        ('[{"speaker": "Ann"}]', False),
    ],
)
def test_rule_13_json_structure(prediction, expected):
    assert check_rule(prediction, 13, TEMPLATE) is expected


def test_rule_13_lenient_extraction_matches_audiobench():
    # bare keys are quoted on the retry; keys differing only by surrounding spaces match
    assert check_rule('{name: "Ann", age: 3}', 13, '{"name": "", "age": 0}') is True
    assert check_rule('{" name ": "Ann"}', 13, '{"name": ""}') is True
    # escaped JSON as some models emit it
    assert check_rule('{\\"name\\": \\"Ann\\"}', 13, '{"name": ""}') is True


def test_rule_codes_as_strings_are_accepted():
    assert check_rule("ALL CAPS", "3", "") is True


@pytest.mark.parametrize(
    ("rule", "content", "fragment"),
    [
        (0, "", "rule code 0"),
        (14, "", "rule code 14"),
        ("x", "", "rule code 'x'"),
        (True, "", "rule code True"),
        (1, "", "rule 1"),
        (9, "", "rule 9"),
        (11, "4", "rule 11"),
        (11, "", "rule 11"),
        (12, "5", "rule 12"),
        (12, "a-b", "rule 12"),
        (12, "1-2-3", "rule 12"),
        (12, "10-5", "rule 12"),
        (13, "not json", "rule 13"),
        (13, "[1, 2]", "rule 13"),
    ],
)
def test_unknown_rule_or_malformed_content_raises(rule, content, fragment):
    with pytest.raises(ValueError, match=fragment):
        check_rule("anything", rule, content)


def test_dimension_of_rule_covers_all_codes():
    assert set(DIMENSION_OF_RULE) == set(range(1, 14))
    assert set(DIMENSION_OF_RULE.values()) == set(DIMENSIONS)
    assert DIMENSION_OF_RULE[11] == "List Structure" and DIMENSION_OF_RULE[13] == "Format"


def _rec(dimension, rule, content, prediction, judge=None):
    rec = {
        "instruction": "q",
        "answer": "a",
        "dimension": dimension,
        "rule": rule,
        "rule_content": content,
        "model_prediction": prediction,
    }
    if judge is not None:
        rec["judge_correct"] = judge
    return rec


def test_ifeval_scores_overall_and_per_dimension():
    records = [
        _rec("Content", 1, "dog", "a dog barks", True),  # rule ok, judge ok
        _rec("Content Requirements", 2, "dog", "a dog barks", True),  # rule fails, judge ok
        _rec("Capitalization", 3, "", "LOUD", False),  # rule ok, judge fails
        _rec("Length", 12, "1-2", "one two three", False),  # both fail
        _rec("Symbol Rules", 10, "", "no symbols here"),  # rule ok, not judged
    ]
    s = ifeval_scores(records)
    o = s["overall"]
    assert o["n"] == 5 and o["n_judged"] == 4
    assert o["IFR"] == pytest.approx(3 / 5)
    assert o["SCR"] == pytest.approx(2 / 4)
    assert o["OSR"] == pytest.approx(1 / 4)
    per = s["per_dimension"]
    assert list(per) == ["Content", "Capitalization", "Symbol", "Length"]
    assert per["Content"] == {"n": 2, "n_judged": 2, "IFR": 0.5, "SCR": 1.0, "OSR": 0.5}
    assert per["Capitalization"]["OSR"] == 0.0 and per["Capitalization"]["IFR"] == 1.0
    assert per["Symbol"] == {"n": 1, "n_judged": 0, "IFR": 1.0, "SCR": None, "OSR": None}


def test_ifeval_scores_dimension_from_rule_and_errors_name_the_record():
    s = ifeval_scores([_rec(None, 13, '{"a": 0}', '{"a": 1}')])
    assert s["per_dimension"]["Format"]["IFR"] == 1.0
    with pytest.raises(ValueError, match="record 1: unknown IFEval rule code 99"):
        ifeval_scores([_rec("Content", 1, "x", "x"), _rec("Content", 99, "x", "x")])
    with pytest.raises(ValueError, match="record 0: unknown IFEval dimension 'Style'"):
        ifeval_scores([_rec("Style", 1, "x", "x")])


def test_judge_prompt_and_rating_parser():
    from earmark.prompts import load_prompt

    filled = load_prompt("ifeval_judge").render_user(reference="R", prediction="P", question="Q")
    assert filled.startswith("[Reference Answer]\nR\n") and "[Model Answer]\nP" in filled
    assert "Correctness Rating: (int)" in filled
    assert parse_judge_rating("Correctness Rating: 1\nExplanation: fine") is True
    assert parse_judge_rating("**Correctness Rating**: 0\nExplanation: wrong") is False
    assert parse_judge_rating("Sure!\nCorrectness Rating: (1)") is True
    assert parse_judge_rating("Correctness Rating: 5") is None
    assert parse_judge_rating("I think it is right.") is None
