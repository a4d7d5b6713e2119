"""DATE's CPU-side encoding as it was before commit ffde92c, verbatim: what benchmarks/scoring/date_cpu_parts.py times the current code against, and tests/test_date_cpu_parts.py holds it bitwise equal to."""

from __future__ import annotations

from itertools import chain

import numpy as np
import torch

from earmark.metrics import date_embed
from earmark.metrics.date_weights import CLS, SEP, _valid


def _previous_tokenize(model, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor | None]:
    fast = _previous_rust_tokenize(model, texts)
    probe = _previous_probe(texts)
    ids, token_type_ids = date_embed._library_tokenize(model, [texts[i] for i in probe])
    if _previous_same_rows(fast, probe, ids, token_type_ids):
        return fast[0], None if token_type_ids is None else fast[1]
    return date_embed._library_tokenize(model, texts)


def _previous_probe(texts: list[str]) -> list[int]:
    longest = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)[:128]
    spread = range(0, len(texts), max(1, len(texts) // 128))
    return sorted(set(longest) | set(spread))


def _previous_rust_tokenize(model, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    from tokenizers import Tokenizer

    tok = model[0].tokenizer
    rust = Tokenizer.from_str(tok.backend_tokenizer.to_str())
    rust.no_padding()
    limit = min(int(getattr(model, "max_seq_length", None) or tok.model_max_length), int(tok.model_max_length))
    rust.enable_truncation(max_length=limit, strategy="longest_first")
    encode = getattr(rust, "encode_batch_fast", rust.encode_batch)
    encodings = encode([str(t).strip() for t in texts])
    lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
    width = int(lengths.max())
    filled = np.arange(width)[None, :] < lengths[:, None]
    ids = np.full((len(texts), width), tok.pad_token_id or 0, dtype=np.int64)
    ids[filled] = np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.int64, count=int(lengths.sum()))
    types = np.zeros((len(texts), width), dtype=np.int64)
    types[filled] = np.fromiter(
        chain.from_iterable(e.type_ids for e in encodings), dtype=np.int64, count=int(lengths.sum())
    )
    return torch.from_numpy(ids), torch.from_numpy(types)


def _previous_same_rows(fast, probe: list[int], ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> bool:
    fast_ids, fast_types = fast
    width = ids.shape[1]
    rows = torch.as_tensor(probe)
    if width > fast_ids.shape[1] or not torch.equal(fast_ids[rows, :width], ids.long()):
        return False
    if bool((fast_ids[rows, width:] != 0).any()):
        return False
    return token_type_ids is None or torch.equal(fast_types[rows, :width], token_type_ids.long())


def _previous_loop(ids: torch.Tensor, vocab: np.ndarray, word_sim: np.ndarray, idf: np.ndarray) -> torch.Tensor:
    weights = torch.ones(ids.shape, dtype=torch.float16)
    ids_np = ids.numpy()
    valid = _valid(ids).numpy()
    word_index = np.searchsorted(vocab, np.where(valid, ids_np, vocab[0]))
    counts = valid.sum(1)
    out = weights.numpy()
    rows_all = np.arange(len(ids_np))
    for k in np.unique(counts[counts > 0]):
        rows = rows_all[counts == k]
        pos = np.argsort(~valid[rows], axis=1, kind="stable")[:, :k]
        words = np.take_along_axis(word_index[rows], pos, axis=1)
        sub = word_sim[words[:, :, None], words[:, None, :]]
        tf = np.sum(np.square(sub).reshape(-1, k), axis=1).reshape(-1, k)
        w = tf * idf[words]
        mean = np.mean(w, axis=1)
        scale = mean > 1e-9
        w[scale] = w[scale] / mean[scale, None]
        out[rows[:, None], pos] = w.astype(np.float16)
        cls = rows[ids_np[rows, 0] == CLS]
        out[cls, 0] = w.max(axis=1)[ids_np[rows, 0] == CLS].astype(np.float16)
        is_sep = ids_np[rows] == SEP
        has_sep = is_sep.any(1)
        out[rows[has_sep], is_sep.argmax(1)[has_sep]] = w.min(axis=1)[has_sep].astype(np.float16)
    return weights
