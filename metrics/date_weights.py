"""DATE's tf-idf token weights, bit for bit as mecat 1.1.0 computes them, without its per-sentence loop.

Why bit for bit: the weights are stored in fp16 and scale the input embeddings, so a weight one fp16 step
off (≈5e-4 relative) moves a sentence embedding by ≈1e-5 — enough to flip a discrimination count at the
δ/2 threshold (one flip in a 2,593-sample group is a 3.9e-4 change). So each quantity is computed with the
same operations, dtypes, batch boundaries and devices as upstream (`DATE.update_word_embeddings` and
`DATE.fetch_word_embeddings`):
- the word–word cosine table: fp16, normalised static input embeddings, 1,024-row blocks, on the device;
- the soft document frequency: upstream's "IDF stream" — 256 sentences at a time (duplicates included,
  padding to the corpus' longest sentence), fp16 products, squares and sums, fp32 accumulation, on the device.
  On a CPU the products are gathered from the cosine table instead of recomputed (a V × 256·L × D fp16
  product per step is minutes on a CPU; the CPU's fp16 product gives the table's entries, which
  tests/test_date.py checks through the weights);
- idf = ln((n+1)/(df+1)) + 1 in fp32 on the device;
- per sentence, in numpy as upstream: tf = Σ cos² over its own tokens (fp16 sum), w = tf·idf (fp32),
  w / mean(w), fp16; CLS gets the max, the first SEP the min. Sentences are grouped by their number of
  tokens so each numpy reduction runs over the same contiguous rows as upstream's per-sentence call
  (tests/test_date.py compares the weights with upstream's own on MECAT references, exactly).
"""

from __future__ import annotations

import numpy as np
import torch

SPECIAL_IDS = (0, 101, 102)  # PAD, CLS, SEP of the BERT uncased vocab, hard-coded upstream
CLS, SEP = 101, 102
SIM_BLOCK = 1024  # rows per fp16 word–word product upstream
IDF_BATCH = 256  # sentences per IDF-stream step upstream: the fp16 sums depend on this grouping
LOOKUP_BATCH = 4096


def _valid(ids: torch.Tensor) -> torch.Tensor:
    mask = torch.ones_like(ids, dtype=torch.bool)
    for sid in SPECIAL_IDS:
        mask &= ids != sid
    return mask


def word_statistics(
    ids: torch.Tensor, table: torch.nn.Embedding, vocab_size: int, device: torch.device
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vocab, word_sim, idf) of a corpus: its distinct non-special token ids (sorted), their fp16 cosine
    table, and their idf (fp32), from the corpus' padded token ids (N × L, on the CPU)."""
    vocab = torch.unique(ids)
    vocab = vocab[_valid(vocab)]
    n_words = len(vocab)
    if n_words == 0:
        return vocab.numpy(), np.zeros((0, 0), np.float16), np.zeros(0, np.float32)
    with torch.no_grad():
        emb = torch.cat([table(vocab[i : i + LOOKUP_BATCH].to(device)).cpu() for i in range(0, n_words, LOOKUP_BATCH)])
        emb = torch.nn.functional.normalize(emb.to(device, dtype=torch.float16), p=2, dim=-1)
        word_sim = torch.zeros((n_words, n_words), dtype=torch.float16)
        for i in range(0, n_words, SIM_BLOCK):
            word_sim[i : i + SIM_BLOCK] = torch.mm(emb[i : i + SIM_BLOCK], emb.t()).cpu()

        df = torch.zeros(n_words, dtype=torch.float32, device=device)
        lookup = torch.zeros((vocab_size, emb.shape[1]), dtype=torch.float16, device=device)
        lookup.index_copy_(0, vocab.long().to(device), emb)
        n_sents = len(ids)
        if device.type == "cpu":  # upstream's products are the cosine table's entries: gather them
            table = torch.cat([word_sim, torch.zeros((n_words, 1), dtype=torch.float16)], dim=1)
            column = torch.where(_valid(ids), torch.searchsorted(vocab, ids), n_words)
        for i in range(0, n_sents, IDF_BATCH):
            end = min(i + IDF_BATCH, n_sents)
            if device.type == "cpu":
                sims = table[:, column[i:end].reshape(-1)].reshape(n_words, end - i, -1)
            else:
                batch = ids[i:end].to(device).long()
                vecs = torch.nn.functional.embedding(batch, lookup)
                vecs = vecs * _valid(batch).unsqueeze(-1).to(dtype=vecs.dtype)
                sims = torch.mm(emb, vecs.reshape(-1, emb.shape[1]).t()).reshape(n_words, end - i, -1)
            df += torch.clamp(torch.sum(sims.pow(2), dim=2), min=0, max=1.0).float().sum(dim=1)
        idf = torch.log((n_sents + 1) / (df + 1)) + 1
    return vocab.numpy(), word_sim.numpy(), idf.cpu().numpy()


def token_weights(ids: torch.Tensor, table: torch.nn.Embedding, vocab_size: int, device: torch.device) -> torch.Tensor:
    """Upstream's per-position fp16 DATE weights (N × L, CPU) for a corpus' padded token ids (N × L, CPU)."""
    weights = torch.ones(ids.shape, dtype=torch.float16)
    vocab, word_sim, idf = word_statistics(ids, table, vocab_size, device)
    if len(vocab) == 0:
        return weights
    ids_np = ids.numpy()
    valid = _valid(ids).numpy()
    word_index = np.searchsorted(vocab, np.where(valid, ids_np, vocab[0]))
    counts = valid.sum(1)
    out = weights.numpy()  # shares memory with `weights`
    rows_all = np.arange(len(ids_np))
    for k in np.unique(counts[counts > 0]):
        rows = rows_all[counts == k]
        # positions of the k valid tokens of each row, in order (a stable sort keeps their order)
        pos = np.argsort(~valid[rows], axis=1, kind="stable")[:, :k]
        words = np.take_along_axis(word_index[rows], pos, axis=1)  # (n, k)
        sub = word_sim[words[:, :, None], words[:, None, :]]  # (n, k, k) fp16, upstream's np.ix_ slice
        tf = np.sum(np.square(sub).reshape(-1, k), axis=1).reshape(-1, k)  # fp16, per row as upstream
        w = tf * idf[words]  # fp16 × fp32 → fp32
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
