"""BLEU-1..4 on hand-computed cases (corpus and MECAT-style sentence averaging)."""

import math

import pytest

from earmark.metrics.bleu import bleu, coco_tokenize


def test_papineni_clipping_example():
    # Papineni et al. 2002: "the" x7 against two references -> clipped unigram precision 2/7
    s = bleu(["the the the the the the the"], [["the cat is on the mat", "there is a cat on the mat"]])
    assert s["Bleu_1"] == pytest.approx(2 / 7)  # c=7, closest ref length 7 -> BP=1
    assert s["Bleu_2"] == s["Bleu_3"] == s["Bleu_4"] == 0.0


def test_brevity_penalty_and_missing_higher_orders():
    s = bleu(["the cat sat"], ["the cat sat on the mat"])  # bare string = one reference
    bp = math.exp(1 - 6 / 3)
    assert [s["Bleu_1"], s["Bleu_2"], s["Bleu_3"]] == pytest.approx([bp, bp, bp])
    assert s["Bleu_4"] == 0.0  # a 3-token candidate has no 4-grams


def test_multi_reference_clipping_uses_max_count_per_reference():
    s = bleu(["the cat the cat"], [["the cat", "the the cat cat"]])
    assert s["Bleu_1"] == pytest.approx(1.0)  # max counts: the 2, cat 2
    assert s["Bleu_2"] == pytest.approx(math.sqrt(1 / 3))  # "the cat" clipped to 1 of 2, "cat the" 0
    assert s["Bleu_3"] == 0.0


def test_corpus_pools_counts_but_sentence_mode_averages():
    cands = ["a dog barks loudly", "birds sing"]
    refs = [["a dog barks loudly"], ["birds sing"]]
    corpus = bleu(cands, refs)
    assert list(corpus.values()) == pytest.approx([1.0, 1.0, 1.0, 1.0])
    sentence = bleu(cands, refs, average="sentence")
    assert list(sentence.values()) == pytest.approx([1.0, 1.0, 0.5, 0.5])


def test_closest_reference_ties():
    cand, refs = ["a b c d e"], [["a b c d e f", "a b c d"]]  # lengths 6 and 4, both 1 away
    # corpus (coco/NLTK): the shorter reference wins -> r=4 < c=5 -> no penalty
    assert list(bleu(cand, refs).values()) == pytest.approx([1.0] * 4)
    # sentence (MECAT): the first listed wins -> r=6 -> BP = exp(1 - 6/5)
    assert list(bleu(cand, refs, average="sentence").values()) == pytest.approx([math.exp(-0.2)] * 4)


def test_tokenisation_lowercases_and_strips_punctuation():
    assert coco_tokenize("A dog's high-pitched bark, then... SILENCE!") == [
        "a",
        "dog",
        "'s",
        "high-pitched",
        "bark",
        "then",
        "silence",
    ]
    assert bleu(["The dog, barking!"], [["the dog barking"]])["Bleu_3"] == pytest.approx(1.0)
    # MECAT's own tokenizer is lower().split(): punctuation stays attached
    raw = bleu(["the dog, barking!"], [["the dog barking"]], tokenize=str.split)
    assert raw["Bleu_1"] == pytest.approx(1 / 3)


def test_empty_candidate_and_input_errors():
    assert list(bleu([""], [["a dog barks"]]).values()) == [0.0] * 4
    with pytest.raises(ValueError, match="2 candidates but 1 reference lists"):
        bleu(["a", "b"], [["a"]])
    with pytest.raises(ValueError, match="candidate 0 has no references"):
        bleu(["a"], [[]])
    with pytest.raises(ValueError, match="average must be"):
        bleu(["a"], [["a"]], average="macro")
