"""Audio Entailment metrics on hand-made confusion cases, and the free-form label parser."""

import pytest

from earmark.metrics.entailment import entailment_scores, parse_label

E, N, C = "entailment", "neutral", "contradiction"


def test_balanced_confusion_with_an_unparsed_prediction():
    labels = [E, E, E, N, N, N, C, C, C]
    preds = [E, E, N, N, None, C, C, C, E]
    s = entailment_scores(labels, preds)
    assert s["n"] == 9 and s["unparsed"] == 1
    assert s["ACC"] == pytest.approx(5 / 9)
    # precision E 2/3, N 1/2, C 2/3 (the None is a false positive for no class)
    assert s["P"] == pytest.approx(11 / 18)
    # recall E 2/3, N 1/3, C 2/3: on balanced data macro recall == ACC, as in the paper's tables
    assert s["R"] == pytest.approx(5 / 9) == s["ACC"]
    # F1 E 2/3, N 2/5, C 2/3 -> mean of per-class F1
    assert s["F1"] == pytest.approx(26 / 45)
    assert (s["EACC"], s["NACC"], s["CACC"]) == pytest.approx((2 / 3, 1 / 3, 2 / 3))


def test_always_entailment_and_all_correct():
    s = entailment_scores([E, N, C], [E, E, E])
    assert s["ACC"] == pytest.approx(1 / 3)
    assert s["P"] == pytest.approx(1 / 9)  # 1/3 for E, 0 for the never-predicted classes
    assert s["R"] == pytest.approx(1 / 3)
    assert s["F1"] == pytest.approx(1 / 6)  # F1(E) = 1/2
    assert (s["EACC"], s["NACC"], s["CACC"]) == (1.0, 0.0, 0.0)
    perfect = entailment_scores([E, N, C, C], [E, N, C, C])
    assert perfect["ACC"] == perfect["P"] == perfect["R"] == perfect["F1"] == 1.0


def test_all_unparsed_scores_zero_and_bad_inputs_raise():
    s = entailment_scores([E, N], [None, None])
    assert s["ACC"] == s["P"] == s["R"] == s["F1"] == 0.0 and s["unparsed"] == 2
    with pytest.raises(ValueError, match="2 labels but 1 predictions"):
        entailment_scores([E, N], [E])
    with pytest.raises(ValueError, match="predictions contain"):
        entailment_scores([E], ["yes"])
    with pytest.raises(ValueError, match="labels contain"):
        entailment_scores([None], [E])
    with pytest.raises(ValueError, match="no items"):
        entailment_scores([], [])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Yes", E),
        ("yes.", E),
        ("Yes, the audio clearly contains a dog barking.", E),
        ("True", E),
        ("Entailment", E),
        ("**Entailment**", E),
        ("The audio entails the hypothesis.", E),
        ("The hypothesis is true given the audio.", E),
        ("The answer is yes", E),
        ("The hypothesis is supported by the recording.", E),
        ("The hypothesis does not contradict the audio; it is implied by it.", E),
        ("No", C),
        ("No, there is no dog in the recording.", C),
        ("NO.", C),
        ("false", C),
        ("Contradiction", C),
        ("The hypothesis contradicts the audio.", C),
        ("The premise does not entail the hypothesis.", C),
        ("The audio doesn’t support this claim.", C),
        ("This is not true: the sound is a car horn.", C),
        ("The hypothesis is incorrect.", C),
        ("Label: contradiction", C),
        ("Maybe", N),
        ("maybe, it could be a cat", N),
        ("Neutral", N),
        ("It cannot be determined from the audio.", N),
        ("It can't be determined", N),
        ("There is not enough information to tell.", N),
        ("The audio is insufficient to verify this.", N),
        ("I don't know.", N),
        ("It is unclear whether the speaker is a child.", N),
        ("The hypothesis neither follows from nor contradicts the audio.", N),
        ("Possibly, but it is hard to tell.", N),
        ("The audio does not necessarily entail that.", N),
        ("", None),
        ("   ", None),
        (None, None),
        ("A dog is barking in a park.", None),
    ],
)
def test_parse_label(text, expected):
    assert parse_label(text) == expected
