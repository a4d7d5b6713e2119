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

from concurrent.futures import ThreadPoolExecutor
from functools import cache

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


def token_weights(
    ids: torch.Tensor, table: torch.nn.Embedding, vocab_size: int, device: torch.device, threads: int | None = None
) -> torch.Tensor:
    """Upstream's per-position fp16 DATE weights (N × L, CPU) for a corpus' padded token ids (N × L, CPU)."""
    return sentence_weights(ids, *word_statistics(ids, table, vocab_size, device), threads=threads)


def sentence_weights(
    ids: torch.Tensor, vocab: np.ndarray, word_sim: np.ndarray, idf: np.ndarray, threads: int | None = None
) -> torch.Tensor:
    """Upstream's per-sentence numpy arithmetic for each row of `ids` (N × L, CPU), given the corpus'
    `word_statistics`. A row's weights depend on its own ids and the corpus statistics only, so any subset of
    a corpus' rows (its distinct rows, say) may be weighted here.

    Rows are grouped by their number of k valid tokens and each group is cut into chunks of at most
    `CHUNK_ENTRIES` gathered table entries; every numpy reduction runs per row, over the same contiguous k
    entries as upstream's per-sentence call, so the chunking does not change a bit. Chunks write disjoint
    rows and numpy releases the GIL in its kernels: they run on `threads` threads (default: torch's)."""
    weights = torch.ones(ids.shape, dtype=torch.float16)
    if len(vocab) == 0:
        return weights
    ids_np = ids.numpy()
    valid = _valid(ids).numpy()
    tasks = _chunks(valid.sum(1))
    out = weights.numpy()  # shares memory with `weights`
    column = np.zeros(max(int(ids_np.max()), int(vocab.max())) + 1, dtype=np.intp)
    column[vocab] = np.arange(len(vocab))  # token id → its row / column of word_sim (vocab is sorted)

    def run(task: tuple[np.ndarray, int]) -> None:
        _weigh_rows(out, ids_np, valid, task[0], task[1], column, word_sim, idf)

    threads = max(1, min(threads or torch.get_num_threads(), len(tasks)))
    if threads == 1:
        for task in tasks:
            run(task)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(run, tasks))
    return weights


@cache
def _fp16_squares() -> np.ndarray:
    """np.square of every fp16 bit pattern, indexed by the pattern. A square of an fp16 value is exact in
    fp32 (11-bit significands), so every implementation of np.square rounds it once, to the same fp16: the
    lookup gives np.square's bits, and is ~10x faster than numpy's fp16 arithmetic."""
    with np.errstate(all="ignore"):  # inf and nan patterns square to inf and nan
        return np.square(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16))


CHUNK_ENTRIES = 1 << 18  # rows × k × k gathered fp16 cosines per chunk: ~0.5 MB, stays in a core's cache


def _chunks(counts: np.ndarray) -> list[tuple[np.ndarray, int]]:
    """(rows, k) chunks of the rows with k > 0 valid tokens, rows ascending within a chunk, biggest first."""
    order = np.argsort(counts, kind="stable")
    ks, starts = np.unique(counts[order], return_index=True)
    ends = np.append(starts[1:], len(order))
    tasks = []
    for k, start, end in zip(ks.tolist(), starts.tolist(), ends.tolist()):
        if k == 0:
            continue
        step = max(1, CHUNK_ENTRIES // (k * k))
        tasks.extend((order[i : min(i + step, end)], k) for i in range(start, end, step))
    return sorted(tasks, key=lambda t: len(t[0]) * t[1] * t[1], reverse=True)


def _weigh_rows(
    out: np.ndarray,
    ids_np: np.ndarray,
    valid: np.ndarray,
    rows: np.ndarray,
    k: int,
    column: np.ndarray,
    word_sim: np.ndarray,
    idf: np.ndarray,
) -> None:
    """Upstream's weights of `rows`, each with exactly k valid tokens, written into `out` (N × L fp16)."""
    row_ids = ids_np[rows]
    pos = np.nonzero(valid[rows])[1].reshape(-1, k)  # the k valid positions of each row, in order
    words = column[np.take_along_axis(row_ids, pos, axis=1)]  # (n, k) rows / columns of word_sim
    sub = word_sim[words[:, :, None], words[:, None, :]]  # (n, k, k) fp16, upstream's np.ix_ slice
    squares = _fp16_squares()[sub.view(np.uint16)]  # np.square(sub), looked up
    tf = np.sum(squares.reshape(-1, k), axis=1).reshape(-1, k)  # fp16, per row as upstream
    w = tf * idf[words]  # fp16 × fp32 → fp32
    mean = np.mean(w, axis=1)
    scale = mean > 1e-9
    w[scale] = w[scale] / mean[scale, None]
    out[rows[:, None], pos] = w.astype(np.float16)
    is_cls = row_ids[:, 0] == CLS
    out[rows[is_cls], 0] = w.max(axis=1)[is_cls].astype(np.float16)
    is_sep = row_ids == SEP
    has_sep = is_sep.any(1)
    out[rows[has_sep], is_sep.argmax(1)[has_sep]] = w.min(axis=1)[has_sep].astype(np.float16)
