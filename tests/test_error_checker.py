"""metrics.error_checker reproduces mecat 1.1.0's RefinedErrorChecker on the same checkpoint.

The real checkpoint is a download; here both implementations load one checkpoint of the same format built
from a randomly initialised tiny BERT (its last-class bias set so that about half the sentences are flagged).
"""

from __future__ import annotations

import math

import pytest
import torch

from earmark.metrics.error_checker import FenseErrorChecker, load_error_checker

WORDS = "a dog barks loudly while rain falls on the roof and music plays softly in background man speaks".split()
SENTENCES = (
    [
        "A dog barks loudly.",
        "rain falls on the roof",
        "music music plays plays",
        "a man speaks while music plays",
        "the the the",
        "",
        "Rain, falls; softly!",
        "a dog " * 40 + "barks",  # > 64 tokens: mecat's 64 vs 256 quirk
    ]
    + [" ".join(WORDS[i : i + 5]) for i in range(0, 14)]
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root = tmp_path_factory.mktemp("echecker")
    enc = root / "tiny-bert"
    enc.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(WORDS))]
    (enc / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(enc / "vocab.txt"), do_lower_case=True).save_pretrained(enc)
    torch.manual_seed(0)
    BertModel(
        BertConfig(
            vocab_size=len(vocab),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=300,
        )
    ).save_pretrained(enc)
    from mecat.DATE import BERTFlatClassifier

    clf = BERTFlatClassifier(model_type=str(enc), num_classes=5).eval()
    path = root / "echecker_clotho_audiocaps_base.ckpt"
    torch.save({"model_type": str(enc), "num_classes": 5, "state_dict": clf.state_dict()}, path)
    # move the last class's bias so that the 0.9 threshold splits the sentences roughly in half
    checker = FenseErrorChecker(path)
    with torch.no_grad():
        logits = checker.model(**checker._batch(SENTENCES, 256))[:, -1]
    state = clf.state_dict()
    state["clf.bias"][-1] += math.log(0.9 / 0.1) - float(logits.median())
    torch.save({"model_type": str(enc), "num_classes": 5, "state_dict": state}, path)
    return path


@pytest.fixture(scope="module")
def official(checkpoint):
    import mecat.DATE as upstream

    real = upstream.check_download_resource
    upstream.check_download_resource = lambda remote: str(checkpoint)  # the download is the only difference
    try:
        return upstream.RefinedErrorChecker("echecker_clotho_audiocaps_base", device="cpu")
    finally:
        upstream.check_download_resource = real


def test_same_penalties_as_mecat(checkpoint, official):
    ours = FenseErrorChecker(checkpoint)
    theirs = official(SENTENCES).float()
    got = ours(SENTENCES)
    assert torch.equal(got, theirs)
    assert 0 < int((got < 1).sum()) < len(SENTENCES)  # both verdicts occur
    for s in SENTENCES[:3] + SENTENCES[7:8]:  # one sentence at a time: the 64-token path
        assert torch.equal(ours(s), official(s).float()), s
    assert torch.allclose(got[got < 1], torch.tensor(0.1))


def test_auto_is_off_without_weights_and_says_where_to_put_them(tmp_path, monkeypatch, checkpoint):
    monkeypatch.setenv("FENSE_DATA", str(tmp_path))
    checker, note = load_error_checker("auto")
    assert checker is None and str(tmp_path) in note and "download" in note
    with pytest.raises(FileNotFoundError, match="not found"):
        load_error_checker(tmp_path / "missing.ckpt")
    checker, note = load_error_checker(checkpoint)
    assert checker is not None and "on" in note
