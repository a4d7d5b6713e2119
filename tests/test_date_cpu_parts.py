"""The CPU-side parts of metrics.date's encoding give bitwise what they gave before they were made faster:
the cached Rust tokenizer copy, the tf-idf weights' chunked, threaded numpy arithmetic (against a verbatim
copy of the previous per-token-count loop), and the weights of distinct rows only."""

from __future__ import annotations

import gzip
import json
import os
from importlib.resources import files

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from earmark.metrics import date_embed, date_weights  # noqa: E402
from earmark.metrics.date_weights import sentence_weights, word_statistics  # noqa: E402
from earmark.metrics.similarity import load_sbert  # noqa: E402
from support.date_previous import _previous_loop  # noqa: E402  (the loop before 2026-11-26, verbatim)


@pytest.fixture(scope="module")
def sbert():
    return load_sbert()


@pytest.fixture(scope="module")
def references() -> list[str]:
    """Long and short caption references of 400 clips of the mecat wheel, with awkward texts and duplicates."""
    out: list[str] = []
    with gzip.open(str(files("mecat") / "reference" / "caption" / "test" / "SMA.jsonl.gz"), "rt") as fh:
        for line, _ in zip(fh, range(400)):
            for v in json.loads(line).values():
                out.extend([*v["long"], *v["short"]])
    return out + ["", "a a a a", "[SEP] inside [CLS] the text", " ".join(["very long"] * 200)] + out[:50]


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.numpy().view(np.uint16)


def test_weights_equal_the_previous_loop_bitwise_threaded_chunked_and_on_distinct_rows(sbert, references, monkeypatch):
    ids, _ = date_embed.tokenize(sbert, references)
    stats = word_statistics(ids, date_embed.word_table(sbert), date_embed.vocab_size(sbert), torch.device("cpu"))
    before = _bits(_previous_loop(ids, *stats))
    assert np.array_equal(_bits(sentence_weights(ids, *stats, threads=1)), before)
    assert np.array_equal(_bits(sentence_weights(ids, *stats, threads=4)), before)
    monkeypatch.setattr(date_weights, "CHUNK_ENTRIES", 7)  # one row per chunk, hundreds of chunks
    assert np.array_equal(_bits(sentence_weights(ids, *stats, threads=3)), before)
    distinct, inverse = np.unique(ids.numpy(), axis=0, return_inverse=True)
    assert len(distinct) < len(ids)
    weights = sentence_weights(torch.from_numpy(distinct), *stats)[torch.as_tensor(inverse.reshape(-1))]
    assert np.array_equal(_bits(weights), before)


def test_fp16_squares_are_numpys_and_correctly_rounded():
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    x = patterns.view(np.float16)
    with np.errstate(all="ignore"):
        assert np.array_equal(date_weights._fp16_squares().view(np.uint16), np.square(x).view(np.uint16))
        finite = np.isfinite(x)
        exact = (x[finite].astype(np.float32) ** 2).astype(np.float16)  # exact in fp32, one rounding
    assert np.array_equal(date_weights._fp16_squares()[finite].view(np.uint16), exact.view(np.uint16))


def test_cached_rust_tokenizer_gives_a_fresh_copys_ids(sbert, references):
    from tokenizers import Tokenizer

    tok = sbert[0].tokenizer
    first = date_embed._rust_tokenize(sbert, references)
    copy = date_embed._rust_copy(tok, 256)
    assert date_embed._rust_tokenize(sbert, references[::-1])[0].shape[0] == len(references)
    assert date_embed._rust_copy(tok, 256) is copy  # made once per tokenizer and limit
    fresh = Tokenizer.from_str(tok.backend_tokenizer.to_str())
    fresh.no_padding()
    fresh.enable_truncation(max_length=256, strategy="longest_first")
    encodings = fresh.encode_batch([t.strip() for t in references])
    for row, enc in zip(range(len(references)), encodings):
        n = len(enc.ids)
        assert first[0][row, :n].tolist() == enc.ids and not first[0][row, n:].any()
        assert first[1][row, :n].tolist() == enc.type_ids and not first[1][row, n:].any()
    assert copy.zero_type_ids
    assert not date_embed._single_type_ids_zero({"type": "Sequence", "processors": []})
    pair_template = {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 1}}]}
    assert not date_embed._single_type_ids_zero(pair_template)


def test_an_unhashable_tokenizer_gets_a_copy_per_call(sbert):
    class Unhashable:
        __hash__ = None
        backend_tokenizer = sbert[0].tokenizer.backend_tokenizer

    tok = Unhashable()
    first, second = date_embed._rust_copy(tok, 256), date_embed._rust_copy(tok, 256)
    assert first is not second
    assert first.tokenizer.encode("a dog barks").ids == second.tokenizer.encode("a dog barks").ids


def test_per_token_type_ids_path_equals_the_zero_path(sbert, references, monkeypatch):
    zero = date_embed._rust_tokenize(sbert, references)
    copy = date_embed._rust_copy(sbert[0].tokenizer, 256)
    monkeypatch.setitem(
        date_embed._RUST_COPIES[sbert[0].tokenizer], 256, date_embed._RustCopy(copy.tokenizer, zero_type_ids=False)
    )
    per_token = date_embed._rust_tokenize(sbert, references)
    assert torch.equal(zero[0], per_token[0]) and torch.equal(zero[1], per_token[1])


def test_probe_rows_are_the_longest_texts_and_a_spread():
    texts = [f"text {'x' * (i % 37)}" for i in range(1000)]
    previous_longest = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)[:128]
    spread = range(0, len(texts), len(texts) // 128)
    assert date_embed._probe(texts) == sorted(set(previous_longest) | set(spread))
