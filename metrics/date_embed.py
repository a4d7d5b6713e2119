"""DATE sentence embeddings of one corpus: fast (length-sorted, padding trimmed) and, for chosen rows, exactly
as mecat 1.1.0 computes them.

Upstream embeds a corpus 32 sentences at a time in corpus order, every batch padded to the corpus' longest
sentence, in fp32, then L2-normalises on the CPU. That is slow on a GPU (launch-bound, 3–5× the tokens) but
it fixes the arithmetic: `exact_rows` re-runs batches of that shape for the sentences whose score sits at a
discrimination threshold, so the decision there is upstream's own (see `metrics.date`). Everywhere else the
fast pass differs from upstream by rounding only (≈1e-7), far inside the 1e-4 agreement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from earmark.metrics.date_weights import token_weights

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
    """Token ids padded to the longest sentence (as upstream's two-pass padding), and token type ids."""
    # preprocess == the deprecated tokenize upstream calls (strip, truncate to max_seq_length, pad).
    fn = getattr(model, "preprocess", None) or model.tokenize
    feats = fn(list(texts))
    return feats["input_ids"], feats.get("token_type_ids")


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
    ids, token_type_ids = tokenize(model, texts)
    corpus = Corpus(ids, token_type_ids, token_weights(ids, word_table(model), vocab_size(model), device))
    # duplicates share ids and weights (a weight depends on the sentence and the corpus idf only)
    key = np.asarray(list(texts), dtype=object)
    _, first, index = np.unique(key, return_index=True, return_inverse=True)
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
    corpus.raw = out[torch.as_tensor(index)]
    return corpus


def exact_rows(model, corpus: Corpus, rows: Sequence[int], device: torch.device) -> dict[int, torch.Tensor]:
    """Raw embeddings of `rows` exactly as upstream computes them.

    A row's result depends on its own tokens and weights and on the batch's shape, not on the other rows of
    its batch (every kernel works row by row or sequence by sequence; only the shape picks the kernel). So
    rows of upstream's full batches are packed 32 at a time at the corpus' full width, each distinct
    sentence once, and rows of its last, shorter batch are computed in that batch."""
    n = len(corpus.ids)
    full = n // UPSTREAM_BATCH * UPSTREAM_BATCH
    key = {int(r): corpus.ids[r].numpy().tobytes() + corpus.weights[r].numpy().tobytes() for r in rows if r < full}
    distinct: dict[bytes, int] = {}
    for r, k in key.items():
        distinct.setdefault(k, r)
    packed = list(distinct.values())
    out: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        for i in range(0, len(packed), UPSTREAM_BATCH):
            batch = packed[i : i + UPSTREAM_BATCH]
            index = torch.as_tensor(batch + [batch[0]] * (UPSTREAM_BATCH - len(batch)))  # the shape is upstream's
            out.update(zip(batch, _exact_batch(model, corpus, index, device)))
        if any(r >= full for r in rows):
            out.update(zip(range(full, n), _exact_batch(model, corpus, torch.arange(full, n), device)))
    return {int(r): out[distinct[key[int(r)]]] if r < full else out[int(r)] for r in rows}


def _exact_batch(model, corpus: Corpus, index: torch.Tensor, device: torch.device) -> torch.Tensor:
    tt = None if corpus.token_type_ids is None else corpus.token_type_ids[index]
    return _forward(model, corpus.ids[index], tt, corpus.weights[index], device).cpu()


def normalised(raw: torch.Tensor, per_sample: int) -> torch.Tensor:
    """Upstream's CPU normalisation of (N × D) embeddings grouped `per_sample` to a sample: (N/k × k × D)."""
    return torch.nn.functional.normalize(raw.reshape(len(raw) // per_sample, per_sample, -1), p=2, dim=-1)
