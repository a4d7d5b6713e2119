"""metrics.date reproduces mecat 1.1.0's DATE per sample, on MECAT references shipped in the mecat wheel.

The official DATE constructor downloads the FENSE error-checker checkpoint; that network boundary is
replaced by a tiny deterministic rule checker, used identically by both implementations.
"""

from __future__ import annotations

import gzip
import json
import os
from importlib.resources import files

import numpy as np
import pandas as pd
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from earmark.metrics.date import GROUP_DELTA, date_scores  # noqa: E402
from earmark.metrics.similarity import default_sbert_path, load_sbert  # noqa: E402

TOL = 1e-4
LONG_CANDIDATE = " ".join(
    ["a dense electronic track with layered synthesizers, a steady kick drum and echoing vocals"] * 30
)


class RepetitionChecker(torch.nn.Module):
    """Flags a sentence as erroneous when a word repeats back-to-back (FENSE's typical failure), penalty 0.9."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, sentences, batch_size: int = 32):
        sentences = [sentences] if isinstance(sentences, str) else sentences

        def bad(s: str) -> bool:
            words = s.lower().split()
            return any(a == b for a, b in zip(words, words[1:]))

        return torch.tensor([0.1 if bad(s) else 1.0 for s in sentences])


def _wheel_records(kind: str, domains: tuple[str, ...], limit: int) -> list[tuple[str, dict]]:
    root = files("mecat") / "reference" / kind / "test"
    out: list[tuple[str, dict]] = []
    for dom in domains:
        with gzip.open(str(root / f"{dom}.jsonl.gz"), "rt", encoding="utf-8") as fh:
            for line in fh:
                out.extend(json.loads(line).items())
                if len(out) >= limit * (domains.index(dom) + 1):
                    break
    return out


def _caption_case(field: str, other: str, domains: tuple[str, ...], n: int) -> tuple[list[str], list[list[str]]]:
    recs = [v for _, v in _wheel_records("caption", domains, n // len(domains) + 1)][:n]
    refs = [list(v[field]) for v in recs]
    cands = []
    for i, v in enumerate(recs):
        if i % 5 == 0:
            cands.append(recs[(i + 7) % n][other][0])  # someone else's caption
        elif i % 7 == 0:
            cands.append("Music is playing.")  # generic, duplicated across samples
        else:
            cands.append(v[other][0])
    cands[1], cands[2], cands[3] = "", LONG_CANDIDATE, "music music plays plays loudly"
    cands[4] = cands[5]  # duplicate candidate
    return cands, refs


def _qa_case(category: str, n: int) -> tuple[list[str], list[list[str]]]:
    recs = [v for _, v in _wheel_records("qa", ("000", "S0A", "0MA", "SMA"), 400) if v["category"] == category][:n]
    refs = [[v["answer"]] for v in recs]
    cands = [recs[(i + 3) % n]["answer"] if i % 4 == 0 else v["answer"].split(".")[0] for i, v in enumerate(recs)]
    cands[0], cands[1] = "Yes.", "Yes."
    return cands, refs


@pytest.fixture(scope="module")
def sbert():
    return load_sbert()


@pytest.fixture(scope="module")
def official(sbert):
    import mecat.DATE as upstream

    threads = torch.get_num_threads()
    real_checker = upstream.RefinedErrorChecker
    upstream.RefinedErrorChecker = RepetitionChecker  # the only network boundary: checkpoint download
    try:
        model = upstream.DATE(sbert_name_or_path=str(default_sbert_path()), device="cpu")
    finally:
        upstream.RefinedErrorChecker = real_checker
        torch.set_num_threads(threads)  # importing mecat.DATE pins torch to one thread
    return model


def _run_official(model, group: str, cands: list[str], refs: list[list[str]]) -> pd.DataFrame:
    field = {"content_long": "long", "mixed_music": "music"}.get(group, "long")
    keys = [f"s{i:05d}" for i in range(len(cands))]
    ref_data = {k: {field: list(r)} for k, r in zip(keys, refs)}
    val_data = {k: {field: [c]} for k, c in zip(keys, cands)}
    frame = pd.DataFrame(columns=["sample_id", "field_type", "delta", "similarity", "discrimination", "date"])
    _, frame = model(ref_data=ref_data, val_data=val_data, group_name=group, dataframe=frame, field_type=field)
    assert list(frame["sample_id"]) == keys
    return frame


def _uneven_case(n: int) -> tuple[list[str], list[list[str]]]:
    """content_long with 1–5 references per sample (earmark versions can lose references to QC)."""
    cands, refs = _caption_case("long", "short", ("000", "S00", "0M0", "SMA"), n)
    pool = [r for rs in refs for r in rs]
    uneven = [(rs + pool[i * 3 : i * 3 + 2])[: 1 + i % 5] for i, rs in enumerate(refs)]
    assert {len(r) for r in uneven} == {1, 2, 3, 4, 5}
    return cands, uneven


CASES = {
    "content_long": lambda: _caption_case("long", "short", ("000", "S00", "0M0", "SMA"), 48),
    "mixed_music": lambda: _caption_case("music", "long", ("SM0", "0MA", "SMA"), 45),
    "direct_perception": lambda: _qa_case("direct_perception", 40),
}


@pytest.mark.parametrize("group", list(CASES))
def test_matches_official_per_sample(group, sbert, official):
    cands, refs = CASES[group]()
    frame = _run_official(official, group, cands, refs)
    ours = date_scores(cands, refs, delta=GROUP_DELTA[group], sbert=sbert, error_checker=RepetitionChecker())
    for column in ("similarity", "discrimination", "date"):
        theirs = frame[column].to_numpy(dtype=np.float64)
        diff = np.abs(getattr(ours, column).astype(np.float64) - theirs)
        assert diff.max() <= TOL, f"{group}/{column}: max |Δ| {diff.max():.2e} at sample {diff.argmax()}"
    # the cases are not degenerate: scores spread, the penalty bit, duplicates score identically
    assert ours.discrimination.min() < 0.5 < ours.discrimination.max()
    assert np.ptp(ours.similarity) > 0.3
    if group != "direct_perception":
        assert ours.similarity[3] < 0.2  # "music music plays plays loudly" is penalised ×0.1


def test_group_delta_matches_official_lookup(official):
    import inspect

    import mecat.DATE as upstream

    # the lookup block of DATE.forward, evaluated with delta=None for each group name
    source = inspect.getsource(upstream.DATE.forward)
    assert "list(subtask_delta_dict.values())[0]" in source and '"all" in subtask_delta_dict' in source
    mapping = {
        "content_long": "long",
        "content_short": "short",
        "pure_speech": "speech",
        "mixed_speech": "speech",
        "pure_music": "music",
        "mixed_music": "music",
        "pure_sound": "sound",
        "mixed_sound": "sound",
        "environment": "environment",
    }
    for group, delta in GROUP_DELTA.items():
        table = official.subset_data_delta.get(mapping.get(group, "long"), {"all": 0.2})
        expected = table["all"] if "all" in table else list(table.values())[0]
        assert delta == expected, group
    assert len(GROUP_DELTA) == 15
    assert GROUP_DELTA["pure_music"] == GROUP_DELTA["mixed_music"] == 0.1566
    assert GROUP_DELTA["mixed_sound"] == 0.1988 and GROUP_DELTA["application_context"] == 0.1703


def test_official_reports_the_resolved_delta(official):
    cands, refs = ["a piano melody", "a man speaks"], [["soft piano music"] * 3, ["a man is talking"] * 3]
    keys = ["a", "b"]
    out, _ = official(
        ref_data={k: {"music": r} for k, r in zip(keys, refs)},
        val_data={k: {"music": [c]} for k, c in zip(keys, cands)},
        group_name="mixed_music",
    )
    assert out["delta"] == pytest.approx(GROUP_DELTA["mixed_music"] / 2)


def test_input_errors_and_empty(sbert):
    with pytest.raises(ValueError, match="one list per candidate"):
        date_scores(["a"], [], delta=0.2, sbert=sbert)
    empty = date_scores([], [], delta=0.2, sbert=sbert)
    assert empty.date.shape == (0,)


def test_reference_cache_gives_identical_scores(sbert):
    cands, refs = _qa_case("direct_perception", 12)
    cache: dict = {}
    cold = date_scores(cands, refs, delta=GROUP_DELTA["direct_perception"], sbert=sbert, reference_cache=cache)
    other = ["It sounds like " + c for c in cands]  # a second system scored on the same group
    warm = date_scores(other, refs, delta=GROUP_DELTA["direct_perception"], sbert=sbert, reference_cache=cache)
    fresh = date_scores(other, refs, delta=GROUP_DELTA["direct_perception"], sbert=sbert)
    assert len(cache) == 1
    np.testing.assert_array_equal(warm.date, fresh.date)
    assert not np.array_equal(cold.similarity, warm.similarity)


def test_disk_reference_cache_survives_the_process_and_keys_on_references(sbert, tmp_path):
    from earmark.metrics.refcache import ReferenceCache

    cands, refs = _qa_case("direct_perception", 12)
    delta = GROUP_DELTA["direct_perception"]
    first = ReferenceCache(tmp_path)
    cold = date_scores(cands, refs, delta=delta, sbert=sbert, reference_cache=first)
    assert (first.hits, first.misses) == (0, 1) and len(list(tmp_path.rglob("*.npz"))) == 1
    second = ReferenceCache(tmp_path)  # a new scorer process reading the same directory
    warm = date_scores(cands, refs, delta=delta, sbert=sbert, reference_cache=second)
    assert (second.hits, second.misses) == (1, 0)
    np.testing.assert_array_equal(warm.date, cold.date)
    changed = [list(r) for r in refs]
    changed[0][0] = changed[0][0] + " loudly"  # one reference edited → another key, never the stale entry
    date_scores(cands, changed, delta=delta, sbert=sbert, reference_cache=second)
    assert second.misses == 1 and len(list(tmp_path.rglob("*.npz"))) == 2


def test_uneven_reference_counts(sbert, official):
    """mecat 1.1.0 assumes the same number of references per sample and fails otherwise; an earmark version
    can hold 1–3 references per clip after QC, so ours averages whatever references a sample has."""
    from earmark.metrics.date_embed import encode

    cands, refs = _uneven_case(40)
    with pytest.raises(RuntimeError, match="must match the size"):
        _run_official(official, "content_long", cands, refs)
    ours = date_scores(cands, refs, delta=GROUP_DELTA["content_long"], sbert=sbert)
    dev = torch.device("cpu")
    ref_emb = torch.nn.functional.normalize(encode(sbert, [r for rs in refs for r in rs], dev, 32).raw, dim=-1)
    cand_emb = torch.nn.functional.normalize(encode(sbert, cands, dev, 32).raw, dim=-1)
    bounds = np.cumsum([0] + [len(r) for r in refs])
    means = torch.stack([ref_emb[a:b].mean(0) for a, b in zip(bounds[:-1], bounds[1:])])
    np.testing.assert_allclose(ours.similarity, (cand_emb * means).sum(1).numpy(), atol=1e-6)
    # the same samples with their 3 references each still match the official code (covered above); here
    # a sample's score moves when its references change, and every score is finite
    assert np.isfinite(ours.date).all() and 0 < ours.discrimination.mean() < 1


def test_token_weights_are_upstreams_bit_for_bit(sbert, official):
    """The fp16 tf-idf weights equal mecat's own (its per-sentence numpy loop), position by position."""
    from earmark.metrics.date_embed import tokenize, vocab_size, word_table
    from earmark.metrics.date_weights import token_weights

    _, refs = _caption_case("long", "short", ("000", "S00", "0M0", "SMA"), 60)
    refs[0] = ["", "a a a a", refs[0][2]]  # no tokens; one token repeated
    keys = [f"s{i:05d}" for i in range(len(refs))]
    theirs = official.update_word_embeddings({k: {"long": list(r)} for k, r in zip(keys, refs)}, "long")
    ids, _ = tokenize(sbert, [r for rs in refs for r in rs])
    assert torch.equal(ids, theirs["features"]["input_ids"])
    ours = token_weights(ids, word_table(sbert), vocab_size(sbert), torch.device("cpu"))
    assert torch.equal(ours, theirs["tf_idf_weights"])


def test_every_pair_decided_on_upstreams_embeddings_is_upstream_exactly(sbert, official):
    """tie_window=inf re-embeds every sentence in upstream-shaped batches (packed, distinct sentences once):
    the scores are then upstream's, bit for bit, not only within 1e-4."""
    cands, refs = _caption_case("music", "long", ("SM0", "0MA", "SMA"), 20)
    frame = _run_official(official, "mixed_music", cands, refs)
    ours = date_scores(
        cands, refs, delta=GROUP_DELTA["mixed_music"], sbert=sbert, error_checker=RepetitionChecker(), tie_window=np.inf
    )
    for column in ("similarity", "discrimination", "date"):
        np.testing.assert_array_equal(getattr(ours, column), frame[column].to_numpy(dtype=np.float32), err_msg=column)


def test_threshold_ties_are_counted_as_upstream_counts_them(official):
    """Constructed ties: other samples' similarities exactly at own − δ/2, one float32 step either side, and
    exactly at own + δ/2, fed to upstream's own discrimination code (DATE.forward) and to ours."""
    from earmark.metrics.date import _counts

    delta = GROUP_DELTA["pure_music"]
    own = np.float32(0.75)
    lower = np.float32(own - np.float32(delta / 2))  # as torch computes own − δ/2 in float32
    upper = np.float32(own + np.float32(delta / 2))
    # unit candidate e0; sample j's reference mean (s_j, t_j) so that cand·mean_j = s_j exactly
    column = [own, lower, np.nextafter(lower, np.float32(1)), np.nextafter(lower, np.float32(0)), upper, own, 0.1]
    n = len(column)
    cand = torch.zeros((n, 2))
    cand[:, 0] = 1.0
    ref_mean = torch.tensor([[s, 0.5] for s in column], dtype=torch.float32)

    def fake_word_embeddings(self, data, subtask, n_sents=None, **kwargs):
        return {"references": n_sents is None}  # upstream reads all references, one candidate per key

    def fake_sentence_embeddings(self, batch_output, *args, **kwargs):
        return (ref_mean if batch_output["references"] else cand).unsqueeze(1), torch.ones((n, 1))

    keys = [f"r{i}" for i in range(n)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(official), "update_word_embeddings", fake_word_embeddings)
        mp.setattr(type(official), "update_sentence_embeddings", fake_sentence_embeddings)
        frame = pd.DataFrame(columns=["sample_id", "field_type", "delta", "similarity", "discrimination", "date"])
        _, frame = official(
            ref_data={k: {"music": ["x"] * 3} for k in keys},
            val_data={k: {"music": ["y"]} for k in keys},
            group_name="pure_music",
            dataframe=frame,
            field_type="music",
        )
    own_t, counts, _ = _counts(cand, ref_mean, torch.ones(n), delta, 0.0)
    theirs = frame["discrimination"].to_numpy(dtype=np.float32)
    np.testing.assert_array_equal((1 - counts / n).numpy(), theirs)
    # row 0 (own 0.75): samples at own, at lower, one step above lower, at upper and its own count; one step
    # below lower and 0.1 do not
    assert counts[0] == 5


def test_rust_tokenizer_path_equals_the_librarys(sbert, monkeypatch):
    """The corpus is tokenised by the model's Rust tokenizer, each distinct text once; its ids equal the
    library's own path (what upstream calls) on awkward text, truncation past 256 tokens included, and any
    difference on the probe rows sends the whole corpus down the library's path."""
    from earmark.metrics import date_embed

    texts = [
        "  a dog barks twice  ",
        "",
        "Café AU LAIT, naïve façade — 東京 🎵",
        "a dog barks twice",
        LONG_CANDIDATE,
        "tab\tseparated\nand newline",
        "a dog barks twice",
    ] * 3
    fast = date_embed.tokenize(sbert, texts)
    library = date_embed._library_tokenize(sbert, texts)
    assert fast[0].shape[1] == 256  # LONG_CANDIDATE truncated at max_seq_length
    assert torch.equal(fast[0], library[0].long())
    assert (fast[1] is None) == (library[1] is None)
    assert fast[1] is None or torch.equal(fast[1], library[1].long())

    real = date_embed._rust_tokenize

    def off_by_one(model, corpus):
        ids, types = real(model, corpus)
        return ids.clone().index_fill_(1, torch.tensor([1]), 7), types

    monkeypatch.setattr(date_embed, "_rust_tokenize", off_by_one)
    assert torch.equal(date_embed.tokenize(sbert, texts)[0], library[0])


def test_rows_of_an_unpadded_upstream_batch_are_computed_in_that_batch(sbert):
    """transformers drops the attention mask for a batch without padding (SDPA may then pick another
    kernel): rows of such an upstream batch are computed in it, the others packed at the corpus' width."""
    from earmark.metrics.date_embed import _exact_batch, _unpadded_batches, encode, exact_rows

    longest = "the longest sentence of this corpus, with exactly this many tokens in it"
    texts = [longest] * 32 + [f"a shorter one, number {i}" for i in range(32)] + ["a last partial batch"]
    dev = torch.device("cpu")
    corpus = encode(sbert, texts, dev, 16)
    assert _unpadded_batches(corpus, 64) == {0}
    rows = [3, 40, 64]
    got = exact_rows(sbert, corpus, rows, dev)
    assert torch.equal(got[3], _exact_batch(sbert, corpus, torch.arange(0, 32), dev)[3])
    assert torch.equal(got[40], _exact_batch(sbert, corpus, torch.arange(32, 64), dev)[8])
    assert torch.equal(got[64], _exact_batch(sbert, corpus, torch.arange(64, 65), dev)[0])
