"""IFEval-Audio rule checks (AudioBench codes 1–13) and IFR/SCR/OSR aggregation."""

import pytest

from earmark.metrics.ifeval import (
    DIMENSION_OF_RULE,
    DIMENSIONS,
    RuleVerdict,
    audiobench_verdict,
    check_rule,
    ifeval_scores,
    parse_judge_rating,
)


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


def test_ifeval_scores_dimension_from_rule_and_warnings_name_the_record():
    s = ifeval_scores([_rec(None, 13, '{"a": 0}', '{"a": 1}')])
    assert s["per_dimension"]["Format"]["IFR"] == 1.0 and s["warnings"] == []
    s = ifeval_scores([_rec("Content", 1, "x", "x"), _rec("Content", 99, "x", "x")])
    assert s["overall"]["IFR"] == 0.5 and s["per_dimension"]["Content"]["n"] == 2
    assert s["warnings"] == ["record 1: rule code 99 is not one of 1-13: AudioBench scores it as not followed"]
    s = ifeval_scores([_rec("Style", 1, "x", "x")])  # AudioBench: overall only, no dimension row
    assert s["overall"]["n"] == 1 and s["per_dimension"] == {}
    assert s["warnings"][0].startswith("record 0: unknown IFEval dimension 'Style'")


# AudioBench's format_test (AudioLLMs/AudioBench src/dataset_src/eval_methods/eval_llama_3_70b_combined.py) on rows
# earmark's strict check refuses: (prediction, rule, rule_content, passed, row zeroed by its judge loop's except)
@pytest.mark.parametrize(
    ("prediction", "rule", "content", "passed", "zeroed"),
    [
        ("any text", None, None, True, False),  # `if not rule: return True`: a content-only item
        ("any text", "", "", True, False),
        ("any text", 0, "", True, False),
        ("any text", "0", "", False, False),  # a non-empty string: "ERROR - undefined rule!"
        ("any text", 14, "", False, False),
        ("any text", " 3", "", False, False),  # str(rule) is compared as it is
        ("any text", True, "", False, False),
        ("- a\n- b", 11, "4", False, False),  # list style other than 0-3
        ("- a", 11, "", False, False),
        ("- a", 11, None, False, False),
        ("- a", 11, 0, False, False),
        ("one two three", 12, "ten", False, False),
        ("one two three", 12, "5", False, False),
        ("one two three", 12, "10-5", False, False),  # lo > hi: never holds
        ("one two three", 12, "", False, False),
        ("one two three", 12, None, False, True),  # None.split raises
        ("a dog barks", 1, "", True, False),  # the empty word: \b\b matches any word boundary
        ("", 1, "", False, False),
        ("a dog barks", 2, "", False, False),
        ("a dog barks", 5, "", False, False),
        ("", 6, "", True, False),
        ("a dog barks", 1, None, False, True),  # re.escape(None) raises
        ("a dog barks", 1, 5, False, True),
        ("Answer: x", 7, "", False, False),  # `if not target: return False`
        ("END", 8, None, False, False),
        ('"x"', 9, "", False, False),
        ('{"a": 1}', 13, "not json", False, False),
        ('{"a": 1}', 13, "[1]", False, False),
        ('{"a": 1}', 13, None, False, True),  # the answer parses, then None.find raises
        ("plain text", 13, None, False, False),  # the answer does not parse: False before the target
    ],
)
def test_audiobench_verdict_on_rows_the_strict_check_refuses(prediction, rule, content, passed, zeroed):
    v = audiobench_verdict(prediction, rule, content)
    assert (v.passed, v.zeroes_row) == (passed, zeroed)
    assert v.warning  # every such row is a warning
    assert ("followed" in v.warning) and ("judge rating" in v.warning) == zeroed


@pytest.mark.parametrize(
    ("prediction", "rule", "content", "passed"),
    [("a dog", 1, "dog", True), ("LOUD", 3, None, True), ("LOUD", "3", 7, True), ("one two", 12, "1-0", True)],
)
def test_audiobench_verdict_on_valid_rows_is_the_strict_check_without_warning(prediction, rule, content, passed):
    assert audiobench_verdict(prediction, rule, content) == RuleVerdict(passed)


def test_a_row_audiobench_zeroes_loses_its_judge_rating_too():
    s = ifeval_scores([_rec("Content", 1, None, "a dog", judge=True), _rec("Content", 1, "dog", "a dog", judge=True)])
    assert s["overall"]["SCR"] == 0.5 and s["overall"]["OSR"] == 0.5 and len(s["warnings"]) == 1


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


def test_evaluation_scores_foreign_items_as_audiobench_and_counts_the_warnings():
    from earmark.stages.evaluate.items import InstructionItem, score_ifeval

    def item(i, dimension, rule, content):
        return InstructionItem(f"i{i}", "c1", "Describe the clip.", "A dog barks.", dimension, rule, content)

    items = [
        item(0, "Content Requirements", 0, ""),  # content only: no format rule
        item(1, "List and Structure Requirements", 11, "4"),  # a list style AudioBench does not know
        item(2, "Length Requirements", 12, "ten"),  # a length that is no 'lo-hi'
        item(3, "Capitalization", 3, ""),  # an ordinary row
    ]
    answers = {"i0": "a dog barks", "i1": "1. a dog", "i2": "a dog barks", "i3": "A DOG"}
    result = score_ifeval("e", "m", "v0001", items, answers, verdicts={f"i{i}": True for i in range(4)})
    ifr = {r.item_id: r.value for r in result.rows if r.metric == "ifr"}
    assert ifr == {"i0": 1.0, "i1": 0.0, "i2": 0.0, "i3": 1.0}
    assert result.scores["overall"]["IFR"] == 0.5 and result.scores["overall"]["OSR"] == 0.5
    assert [w.split(":")[0] for w in result.scores["warnings"]] == ["i0", "i1", "i2"]
    note = next(n for n in result.notes if "warnings" in n)
    assert note.startswith("3 warnings: items scored by AudioBench's own fallbacks") and "i1: rule 11" in note
    assert sum("audiobench=fallback" in (r.note or "") for r in result.rows) == 3


def test_malformed_ifeval_prediction_lines_are_reported_with_file_and_line(tmp_path):
    from earmark.stages.evaluate import plan_files
    from earmark.stages.evaluate.predictions import prediction_problems

    (tmp_path / "ifeval.jsonl").write_text('{"i0": "a dog"}\n{"i1": \n["i2"]\n')
    plan = plan_files(tmp_path, None, ["similarity"])  # what the evaluate flow reads and checks
    assert list(plan.item_files) == ["ifeval"] and not plan.text_files
    problems = prediction_problems([*plan.text_files.values(), *plan.item_files.values()])
    path = tmp_path / "ifeval.jsonl"
    assert [p.split(": ", 1)[0] for p in problems] == [f"{path}:2", f"{path}:3"]
