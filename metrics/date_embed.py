"""DATE sentence embeddings of one corpus: fast (length-sorted, padding trimmed) and, for chosen rows, exactly
as mecat 1.1.0 computes them.

Upstream embeds a corpus 32 sentences at a time in corpus order, every batch padded to the corpus' longest
sentence, in fp32, then L2-normalises on the CPU. That is slow on a GPU (launch-bound, 3–5× the tokens) but
it fixes the arithmetic: `exact_rows` re-runs batches of that shape for the sentences whose score sits at a
discrimination threshold, so the decision there is upstream's own (see `metrics.date`). Everywhere else the
fast pass differs from upstream by rounding only (≈1e-7), far inside the 1e-4 agreement.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter

import numpy as np
import torch
from tokenizers import Tokenizer

from earmark.metrics.date_weights import sentence_weights, word_statistics

logger = logging.getLogger(__name__)

UPSTREAM_BATCH = 32  # mecat's scorer default: sentences per forward pass


@dataclass
class Corpus:
    """A corpus' padded token ids (N × L, CPU), its fp16 DATE weights and its raw (un-normalised) fast
    sentence embeddings (N × D, CPU fp32)."""

    ids: torch.Tensor
    token_type_ids: torch.Tensor | None
    weights: torch.Tensor
    raw: torch.Tensor | None = None

    def tensors(self) -> dict[str, torch.Tensor]:
        out = {"ids": self.ids.to(torch.int32), "weights": self.weights}
        if self.token_type_ids is not None:
            out["token_type_ids"] = self.token_type_ids.to(torch.int8)
        return out

    @classmethod
    def from_tensors(cls, stored: dict[str, torch.Tensor]) -> Corpus:
        tt = stored.get("token_type_ids")
        return cls(stored["ids"].long(), None if tt is None else tt.long(), stored["weights"])


def tokenize(model, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Token ids padded to the longest sentence (as upstream's two-pass padding), and token type ids.

    The library's own path (`model.preprocess`, what upstream's deprecated `tokenize` became) builds Python
    lists per sentence and spends ~10x the Rust tokenizer's time converting them (50 of 61 s of a GPU
    run's encoding, docs/benchmarks.md). So the texts are encoded by the model's Rust tokenizer
    (`encode_batch`, all cores; `encode` gives each distinct sentence once), and the result is checked
    against the library's path on a probe of every corpus (its longest sentences and a spread of others):
    any difference and the library's path is used."""
    texts = list(texts)
    fast = _rust_tokenize(model, texts)
    if fast is not None:
        probe = _probe(texts)
        ids, token_type_ids = _library_tokenize(model, [texts[i] for i in probe])
        if _same_rows(fast, probe, ids, token_type_ids):
            return fast[0], None if token_type_ids is None else fast[1]
        logger.warning("the Rust tokenizer's ids differ from the library's on %s: using the library's path", model)
    return _library_tokenize(model, texts)


PROBE_ROWS = 256


def _probe(texts: list[str]) -> list[int]:
    """The probe's rows: the PROBE_ROWS / 2 longest texts (ties in corpus order) and a spread of the rest."""
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    longest = np.argsort(-lengths, kind="stable")[: PROBE_ROWS // 2].tolist()
    spread = range(0, len(texts), max(1, len(texts) // (PROBE_ROWS // 2)))
    return sorted(set(longest) | set(spread))


def _library_tokenize(model, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor | None]:
    # preprocess == the deprecated tokenize upstream calls (strip, truncate to max_seq_length, pad).
    fn = getattr(model, "preprocess", None) or model.tokenize
    feats = fn(texts)
    return feats["input_ids"], feats.get("token_type_ids")


@dataclass(frozen=True)
class _RustCopy:
    """A model tokenizer's Rust backend, copied once with upstream's truncation and no padding."""

    tokenizer: Tokenizer
    zero_type_ids: bool  # a single sentence's type ids are 0 at every position (see _single_type_ids_zero)


_RUST_COPIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model tokenizer → {limit: _RustCopy}


def _rust_copy(tok, limit: int) -> _RustCopy:
    """The copy of `tok`'s backend for truncation at `limit`, made once per tokenizer object and limit.

    Copying from JSON took 1.3 s of a 47-corpus GPU run when it was redone per corpus. The copy is taken
    when a tokenizer is first used; every corpus is still checked against the library's path (`tokenize`),
    so a tokenizer changed in place afterwards sends a corpus down that path where the probe sees it."""
    try:
        copies = _RUST_COPIES.setdefault(tok, {})
    except TypeError:  # a tokenizer class without hash or weak references: a copy per call, as before
        copies = {}
    if limit not in copies:
        copies[limit] = _new_rust_copy(tok.backend_tokenizer.to_str(), limit)
    return copies[limit]


def _new_rust_copy(config: str, limit: int) -> _RustCopy:
    rust = Tokenizer.from_str(config)  # a copy: the model's own tokenizer keeps its settings
    rust.no_padding()
    rust.enable_truncation(max_length=limit, strategy="longest_first")
    return _RustCopy(rust, _single_type_ids_zero(json.loads(config).get("post_processor")))


def _single_type_ids_zero(post_processor: dict | None) -> bool:
    """Whether this post-processor gives every token of a single sentence type id 0. The model gives its
    tokens type id 0 (1 only to a pair's second sentence); only a template can set another. Unknown
    processors: False (the ids are then read per token)."""
    if post_processor is None or post_processor.get("type") in ("BertProcessing", "RobertaProcessing"):
        return True
    if post_processor.get("type") == "TemplateProcessing":
        return all(piece.get("type_id", 0) == 0 for item in post_processor["single"] for piece in item.values())
    return False


def _rust_tokenize(model, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """The same ids through the Rust tokenizer; None where the model has none."""
    tok = getattr(model[0], "tokenizer", None)
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None or not texts or tok.padding_side != "right":
        return None
    limit = min(int(getattr(model, "max_seq_length", None) or tok.model_max_length), int(tok.model_max_length))
    copy = _rust_copy(tok, limit)
    encode = getattr(copy.tokenizer, "encode_batch_fast", copy.tokenizer.encode_batch)
    encodings = encode([str(t).strip() for t in texts])
    lengths = np.fromiter(map(len, encodings), dtype=np.int64, count=len(encodings))
    ids = _padded(encodings, "ids", lengths, tok.pad_token_id or 0)
    types = np.zeros_like(ids) if copy.zero_type_ids else _padded(encodings, "type_ids", lengths, 0)
    return torch.from_numpy(ids), torch.from_numpy(types)


def _padded(encodings: list, field: str, lengths: np.ndarray, pad: int) -> np.ndarray:
    """One field of the encodings as an (N × longest) int64 array, right-padded with `pad`."""
    filled = np.arange(int(lengths.max()))[None, :] < lengths[:, None]
    out = np.full(filled.shape, pad, dtype=np.int64)
    values = chain.from_iterable(map(attrgetter(field), encodings))
    out[filled] = np.fromiter(values, dtype=np.int64, count=int(lengths.sum()))
    return out


def _same_rows(fast, probe: list[int], ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> bool:
    fast_ids, fast_types = (None if t is None else t.numpy() for t in fast)
    width = ids.shape[1]
    if width > fast_ids.shape[1] or not np.array_equal(fast_ids[probe, :width], ids.numpy()):
        return False
    if bool((fast_ids[probe, width:] != 0).any()):
        return False
    return token_type_ids is None or np.array_equal(fast_types[probe, :width], token_type_ids.numpy())


def word_table(model) -> torch.nn.Module:
    return model[0].auto_model.embeddings.word_embeddings


def vocab_size(model) -> int:
    return model.tokenizer.vocab_size


def _forward(model, ids: torch.Tensor, token_type_ids: torch.Tensor | None, weights: torch.Tensor, device):
    """Upstream's forward of one batch (`DATE.update_sentence_embeddings`): weighted static embeddings in."""
    ids = ids.to(device)
    batch = {"attention_mask": (ids != 0).long()}
    if token_type_ids is not None:
        batch["token_type_ids"] = token_type_ids.to(device)
    words = word_table(model)(ids)
    batch["inputs_embeds"] = words * weights.to(device).to(dtype=words.dtype).unsqueeze(-1)
    return model.forward(batch)["sentence_embedding"]


def encode(model, texts: Sequence[str], device: torch.device, batch_size: int, half: bool = False) -> Corpus:
    """Tokenise and weight a corpus (exactly as upstream) and embed each distinct sentence once, batched by
    length with padding trimmed (masked positions do not change the pooled output beyond rounding)."""
    # each distinct sentence is tokenised and embedded once; duplicates share its ids and weights (a weight
    # depends on the sentence and the corpus idf only), and the idf counts every row, duplicates included
    texts = list(texts)
    _, first, index = np.unique(np.asarray(texts, dtype=object), return_index=True, return_inverse=True)
    inverse = torch.as_tensor(index.reshape(-1))
    distinct_ids, distinct_types = tokenize(model, [texts[i] for i in first])
    ids = distinct_ids[inverse]
    token_type_ids = None if distinct_types is None else distinct_types[inverse]
    # the idf counts every row, duplicates included; the weights are computed once per distinct row
    statistics = word_statistics(ids, word_table(model), vocab_size(model), device)
    corpus = Corpus(ids, token_type_ids, sentence_weights(distinct_ids, *statistics)[inverse])
    lengths = (ids[first] != 0).sum(1)
    order = torch.argsort(lengths, descending=True)
    dim_of = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    out = torch.empty((len(first), dim_of()), dtype=torch.float32)
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.float16, enabled=half):
        for i in range(0, len(first), batch_size):
            rows = torch.as_tensor(first[order[i : i + batch_size].numpy()])
            width = int(lengths[order[i : i + batch_size]].max())
            tt = None if token_type_ids is None else token_type_ids[rows, :width]
            out[order[i : i + batch_size]] = (
                _forward(model, ids[rows, :width], tt, corpus.weights[rows, :width], device).float().cpu()
            )
    corpus.raw = out[inverse]
    return corpus


def exact_rows(model, corpus: Corpus, rows: Sequence[int], device: torch.device) -> dict[int, torch.Tensor]:
    """Raw embeddings of `rows` exactly as upstream computes them.

    A row's result depends on its own tokens and weights and on the batch's shape, not on the other rows of
    its batch (every kernel works row by row or sequence by sequence; only the shape picks the kernel). So
    rows of upstream's full batches are packed 32 at a time at the corpus' full width, each distinct
    sentence once, and rows of its last, shorter batch are computed in that batch. One exception: where an
    upstream batch holds no padding at all, transformers drops the attention mask and SDPA may pick another
    kernel, so rows of such a batch are computed in that very batch. On a GPU the packed batches replay one
    CUDA graph (the same kernels as eager, without the ~100 Python-side launches per pass; checked bitwise
    against eager on the first batch, else eager)."""
    n = len(corpus.ids)
    full = n // UPSTREAM_BATCH * UPSTREAM_BATCH
    own_batch = _unpadded_batches(corpus, full)
    key = {
        int(r): corpus.ids[r].numpy().tobytes() + corpus.weights[r].numpy().tobytes()
        for r in rows
        if r < full and r // UPSTREAM_BATCH not in own_batch
    }
    distinct: dict[bytes, int] = {}
    for r, k in key.items():
        distinct.setdefault(k, r)
    packed = list(distinct.values())
    out: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        run = _GraphedForward.build(model, corpus, device, packed[:UPSTREAM_BATCH]) if packed else None
        for i in range(0, len(packed), UPSTREAM_BATCH):
            batch = packed[i : i + UPSTREAM_BATCH]
            index = torch.as_tensor(batch + [batch[0]] * (UPSTREAM_BATCH - len(batch)))  # the shape is upstream's
            out.update(zip(batch, run(index) if run else _exact_batch(model, corpus, index, device)))
        for b in sorted({int(r) // UPSTREAM_BATCH for r in rows if r < full} & own_batch):
            span = range(b * UPSTREAM_BATCH, (b + 1) * UPSTREAM_BATCH)
            out.update(zip(span, _exact_batch(model, corpus, torch.as_tensor(span), device)))
        if any(r >= full for r in rows):
            out.update(zip(range(full, n), _exact_batch(model, corpus, torch.arange(full, n), device)))
    return {int(r): out[distinct[key[int(r)]]] if int(r) in key else out[int(r)] for r in rows}


def _unpadded_batches(corpus: Corpus, full: int) -> set[int]:
    """Upstream batches (of the `full` rows) without a single padding position."""
    if full == 0:
        return set()
    dense = (corpus.ids[:full] != 0).reshape(full // UPSTREAM_BATCH, -1).all(dim=1)
    return {int(b) for b in dense.nonzero().flatten()}


def _exact_batch(model, corpus: Corpus, index: torch.Tensor, device: torch.device) -> torch.Tensor:
    tt = None if corpus.token_type_ids is None else corpus.token_type_ids[index]
    return _forward(model, corpus.ids[index], tt, corpus.weights[index], device).cpu()


class _GraphedForward:
    """`_exact_batch` for one corpus as a CUDA graph of upstream's batch shape (32 × the corpus' width).

    The capture records the kernels eager launches for that shape; transformers keeps the attention mask
    while capturing (eager drops it only for batches without padding, which `exact_rows` runs eagerly)."""

    def __init__(self, model, corpus: Corpus, device: torch.device) -> None:
        self.corpus = corpus
        shape = (UPSTREAM_BATCH, corpus.ids.shape[1])
        self.ids = torch.zeros(shape, dtype=corpus.ids.dtype, device=device)
        self.weights = torch.ones(shape, dtype=corpus.weights.dtype, device=device)
        self.tt = None if corpus.token_type_ids is None else torch.zeros(shape, dtype=torch.long, device=device)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = _forward(model, self.ids, self.tt, self.weights, device)

    def __call__(self, index: torch.Tensor) -> torch.Tensor:
        self.ids.copy_(self.corpus.ids[index])
        self.weights.copy_(self.corpus.weights[index])
        if self.tt is not None:
            self.tt.copy_(self.corpus.token_type_ids[index])
        self.graph.replay()
        return self.out.cpu()

    @classmethod
    def build(cls, model, corpus: Corpus, device: torch.device, first: list[int]):
        """A graphed forward checked against eager on the first batch, or None (CPU, or any difference)."""
        if device.type != "cuda" or not first:
            return None
        index = torch.as_tensor(first + [first[0]] * (UPSTREAM_BATCH - len(first)))
        eager = _exact_batch(model, corpus, index, device)
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the default stream, as capture requires
                _exact_batch(model, corpus, index, device)
            torch.cuda.current_stream().wait_stream(side)
            graphed = cls(model, corpus, device)
            same = torch.equal(graphed(index), eager)
        except Exception as err:  # a host sync or an uncapturable op in this model's forward
            logger.warning("exact DATE batches run eagerly: CUDA graph capture failed (%s)", err)
            return None
        if not same:
            logger.warning("exact DATE batches run eagerly: the CUDA graph's output differs from eager")
            return None
        return graphed


def normalised(raw: torch.Tensor, per_sample: int) -> torch.Tensor:
    """Upstream's CPU normalisation of (N × D) embeddings grouped `per_sample` to a sample: (N/k × k × D)."""
    return torch.nn.functional.normalize(raw.reshape(len(raw) // per_sample, per_sample, -1), p=2, dim=-1)
