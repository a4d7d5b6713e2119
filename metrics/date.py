"""DATE — MECAT's Discriminability based Audio Task Evaluation, vectorised, reproducing `mecat==1.1.0`.

What the official code (mecat/DATE.py) computes, and so what this module computes (where paper and code
differ, the code wins):
- Each corpus (the references of a group, and separately the candidates of that group) is tokenised with
  the SBERT WordPiece tokenizer. Tokens other than PAD/CLS/SEP (ids 0/101/102, hard-coded upstream) get a
  soft tf-idf weight from cosines of the *static* input word embeddings (fp16, as upstream):
  tf = Σ_positions cos², soft df = Σ_sentences clamp(Σ_positions cos², 0, 1), idf = ln((n+1)/(df+1)) + 1.
  Weights are normalised to mean 1 per sentence and stored in fp16; CLS gets the sentence's max weight,
  SEP its min, padding 1.
- The weighted static embeddings go through the transformer as `inputs_embeds`; the pooled sentence
  embedding is L2-normalised.
- similarity_i = cos(candidate_i, mean of its normalised reference embeddings) × penalty_i.
- discrimination_i = 1 − #{j : s_ij ≥ s_ii − δ/2} / N with s_ij = cos(candidate_i, ref-mean_j) × penalty_i,
  i.e. references of other clips that score within δ/2 of the candidate's own (itself included) count
  against it.
- date_i = 2·sim·disc / (sim + disc + 1e-8).
The FENSE error checker multiplies a candidate's scores by 0.1 when it flags an error. Its weights are a
download, so here it is optional: pass any callable `list[str] -> penalties` (mecat's RefinedErrorChecker
works when its checkpoint is on disk); without one every penalty is 1.

Speed: each corpus is tokenised once, each unique sentence embedded once in length-sorted batches, tf and
df come from one sparse×dense product, and discrimination is a blocked N×N matrix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from earmark.metrics.refcache import cached_reference_means
from earmark.metrics.similarity import load_sbert
from earmark.schemas.records import QA_CATEGORIES

# mecat.DATE.DATE.subset_data_delta and the group → subtask map of DATE.forward, verbatim.
_SUBSET_DATA_DELTA: dict[str, dict[str, float]] = {
    "long": {"all": 0.1703},
    "short": {"all": 0.1772},
    "speech": {"pure": 0.2078, "mixed": 0.2078},
    "music": {"pure": 0.1566, "mixed": 0.1851},
    "sound": {"pure": 0.1988, "mixed": 0.2593},
    "environment": {"all": 0.2150},
}
_GROUP_TO_SUBTASK = {
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
QA_GROUPS = QA_CATEGORIES  # MECAT's six QA categories


def _official_delta(group: str) -> float:
    # Upstream never selects "mixed": it takes the first value of a dict without "all", and unknown
    # groups (all QA categories) fall back to "long".
    table = _SUBSET_DATA_DELTA.get(_GROUP_TO_SUBTASK.get(group, "long"), {"all": 0.2})
    return table["all"] if "all" in table else next(iter(table.values()))


GROUP_DELTA: dict[str, float] = {g: _official_delta(g) for g in (*_GROUP_TO_SUBTASK, *QA_GROUPS)}

_SPECIAL_IDS = (0, 101, 102)  # PAD, CLS, SEP of the BERT uncased vocab, as hard-coded upstream
_CHUNK = 2048  # sentences per sparse tf/df block: bounds the dense (chunk × vocab) product


@dataclass(frozen=True)
class DateScores:
    """Per-sample DATE components, 0–1 scale, in input order."""

    similarity: np.ndarray
    discrimination: np.ndarray
    date: np.ndarray
    delta: float

    def mean(self) -> dict[str, float]:
        return {
            "similarity": float(self.similarity.mean()),
            "discrimination": float(self.discrimination.mean()),
            "date": float(self.date.mean()),
        }


def _tokenize(model, texts: Sequence[str]) -> dict[str, torch.Tensor]:
    # preprocess == the deprecated tokenize upstream calls (strip, truncate to max_seq_length, pad).
    fn = getattr(model, "preprocess", None) or model.tokenize
    feats = fn(list(texts))
    return {k: v for k, v in feats.items() if isinstance(v, torch.Tensor)}


def _word_embedding_layer(model) -> torch.nn.Module:
    return model[0].auto_model.embeddings.word_embeddings


def _tfidf_weights(ids: torch.Tensor, counts: torch.Tensor, table: torch.nn.Module) -> torch.Tensor:
    """fp16 per-position weights (U×L) for unique sentences `ids` occurring `counts` times in the corpus."""
    dev = ids.device
    valid = torch.ones_like(ids, dtype=torch.bool)
    for sid in _SPECIAL_IDS:
        valid &= ids != sid
    weights = torch.ones(ids.shape, dtype=torch.float16, device=dev)
    if not bool(valid.any()):
        return weights
    vocab, inverse = torch.unique(ids[valid], return_inverse=True)
    n_words = len(vocab)
    with torch.no_grad():
        emb = torch.nn.functional.normalize(table(vocab).half(), p=2, dim=-1)
        cos = torch.empty((n_words, n_words), dtype=torch.float16, device=dev)
        for i in range(0, n_words, 1024):  # same fp16 products as upstream
            cos[i : i + 1024] = emb[i : i + 1024] @ emb.t()
        cos_sq_t = cos.pow(2).float().t().contiguous()  # fp16 square, as upstream; [t, w] = cos²(w, t)

    rows, cols = valid.nonzero(as_tuple=True)
    n_sent = ids.shape[0]
    df = torch.zeros(n_words, dtype=torch.float32, device=dev)
    tf = torch.empty(len(rows), dtype=torch.float16, device=dev)
    # positions are grouped by row (nonzero is row-major), so each chunk of sentences is a contiguous slice
    bounds = torch.searchsorted(rows, torch.arange(0, n_sent + _CHUNK, _CHUNK, device=dev).clamp(max=n_sent))
    for c, start in enumerate(range(0, n_sent, _CHUNK)):
        lo, hi = int(bounds[c]), int(bounds[c + 1])
        if lo == hi:
            continue
        r, w = rows[lo:hi] - start, inverse[lo:hi]
        n_rows = min(_CHUNK, n_sent - start)
        occ = torch.sparse_coo_tensor(
            torch.stack([r, w]), torch.ones(hi - lo, device=dev), (n_rows, n_words), check_invariants=False
        ).coalesce()
        soft = torch.sparse.mm(occ, cos_sq_t).half()  # [s, w] = Σ_positions of s cos²(w, t), fp16 like upstream
        df += (soft.clamp(0, 1).float() * counts[start : start + n_rows, None]).sum(0)
        tf[lo:hi] = soft[r, w]
        del soft, occ
    n_docs = counts.sum()
    idf = torch.log((n_docs + 1) / (df + 1)) + 1
    raw = tf.float() * idf[inverse]  # numpy fp16 × fp32 → fp32 upstream

    per_row = torch.zeros(n_sent, dtype=torch.float32, device=dev).index_add_(0, rows, raw)
    mean = per_row / valid.sum(1).clamp(min=1)
    norm = torch.where(mean > 1e-9, mean, torch.ones_like(mean))
    w32 = raw / norm[rows]
    weights[rows, cols] = w32.half()
    has = valid.any(1)
    w_max = torch.full((n_sent,), -torch.inf, device=dev).scatter_reduce(0, rows, w32, "amax")
    w_min = torch.full((n_sent,), torch.inf, device=dev).scatter_reduce(0, rows, w32, "amin")
    cls_rows = has & (ids[:, 0] == 101)
    weights[cls_rows, 0] = w_max[cls_rows].half()
    is_sep = ids == 102
    sep_rows = has & is_sep.any(1)
    sep_pos = is_sep.int().argmax(1)
    weights[sep_rows, sep_pos[sep_rows]] = w_min[sep_rows].half()
    return weights


def _corpus_embeddings(model, texts: Sequence[str], device: torch.device, batch_size: int) -> torch.Tensor:
    """Normalised DATE sentence embeddings for every text; idf is over `texts` (duplicates included)."""
    unique, index, counts = np.unique(np.asarray(list(texts), dtype=object), return_inverse=True, return_counts=True)
    feats = {k: v.to(device) for k, v in _tokenize(model, unique.tolist()).items()}
    table = _word_embedding_layer(model)
    weights = _tfidf_weights(feats["input_ids"], torch.as_tensor(counts, dtype=torch.float32, device=device), table)
    lengths = feats["attention_mask"].sum(1)
    order = torch.argsort(lengths, descending=True)
    dim_of = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    out = torch.empty((len(unique), dim_of()), dtype=torch.float32, device=device)
    with torch.no_grad():
        for i in range(0, len(unique), batch_size):
            sel = order[i : i + batch_size]
            width = int(lengths[sel].max())  # trim padding: masked positions do not change the pooled output
            ids = feats["input_ids"][sel, :width]
            batch = {
                "attention_mask": feats["attention_mask"][sel, :width],
                "inputs_embeds": table(ids) * weights[sel, :width].float().unsqueeze(-1),
            }
            if "token_type_ids" in feats:
                batch["token_type_ids"] = feats["token_type_ids"][sel, :width]
            out[sel] = model.forward(batch)["sentence_embedding"].float()
    out = torch.nn.functional.normalize(out, p=2, dim=-1)
    return out[torch.as_tensor(index, device=device)]


def _reference_means(model, refs: list[list[str]], dev: torch.device, batch_size: int) -> torch.Tensor:
    """Per sample, the mean of its references' normalised embeddings (idf over all references of the group)."""
    n = len(refs)
    owner = torch.as_tensor(np.repeat(np.arange(n), [len(r) for r in refs]), device=dev)
    ref_emb = _corpus_embeddings(model, [r for rs in refs for r in rs], dev, batch_size)
    ref_mean = torch.zeros((n, ref_emb.shape[1]), device=dev).index_add_(0, owner, ref_emb)
    return ref_mean / torch.bincount(owner, minlength=n).clamp(min=1).unsqueeze(1).float()


def _resolve_model(sbert, device: torch.device):
    model = sbert if sbert is not None and not isinstance(sbert, (str, Path)) else load_sbert(sbert)
    if next(model.parameters()).device != device:
        model = model.to(device)
    return model.eval()


def error_penalties(error_checker: Callable | None, candidates: Sequence[str], dev: torch.device) -> torch.Tensor:
    """Per-candidate multipliers from the FENSE error checker (1 for every candidate without one)."""
    n = len(candidates)
    if error_checker is None:
        return torch.ones(n, device=dev)
    penalty = torch.as_tensor(
        np.asarray(torch.as_tensor(error_checker(list(candidates))).cpu(), dtype=np.float32).reshape(-1), device=dev
    )
    if len(penalty) != n:
        raise ValueError(f"error_checker returned {len(penalty)} penalties for {n} candidates")
    return penalty


def date_scores(
    candidates: list[str],
    references: list[list[str]],
    *,
    delta: float,
    sbert=None,
    error_checker: Callable[[list[str]], object] | None = None,
    device: str | torch.device | None = None,
    batch_size: int = 32,
    block: int = 1024,
    reference_cache: dict | None = None,
) -> DateScores:
    """DATE of each candidate against its references, all samples forming one group (one δ, one idf).

    `delta` is the group's full tolerance (see GROUP_DELTA); ties within δ/2 count against the candidate.
    `sbert`: a loaded sentence-transformers model or a local directory (default: all-MiniLM-L6-v2 wheel).
    `error_checker`: optional callable returning one penalty factor per candidate (1 = no error).
    `device`: "cpu" (default) or "cuda"; a loaded model is moved there.
    `reference_cache`: a dict or a `metrics.refcache.ReferenceCache` (on disk); the references' side of a
    group (its idf and embeddings) does not depend on the candidates, so scoring several systems on one
    group — in this process or a later one — embeds the references once.
    """
    if len(candidates) != len(references):
        raise ValueError(
            f"{len(candidates)} candidates but {len(references)} reference lists: give one list per candidate"
        )
    n = len(candidates)
    if n == 0:
        empty = np.zeros(0, dtype=np.float32)
        return DateScores(empty, empty, empty, float(delta))
    dev = torch.device(device or "cpu")
    model = _resolve_model(sbert, dev)
    refs = [list(r) if len(r) else [""] for r in references]  # mecat's scorer substitutes "" for no reference

    ref_mean = cached_reference_means(
        reference_cache, "date", model, refs, lambda: _reference_means(model, refs, dev, batch_size), dev
    )
    cand = _corpus_embeddings(model, list(candidates), dev, batch_size)

    penalty = error_penalties(error_checker, candidates, dev)

    own = (cand * ref_mean).sum(1) * penalty
    half = delta / 2
    against = torch.empty(n, device=dev)
    with torch.no_grad():
        for i in range(0, n, block):
            sims = (cand[i : i + block] @ ref_mean.t()) * penalty[i : i + block, None]
            against[i : i + block] = (sims >= (own[i : i + block] - half)[:, None]).sum(1).float()
    disc = 1 - against / n
    date = 2 * own * disc / (own + disc + 1e-8)
    return DateScores(own.cpu().numpy(), disc.cpu().numpy(), date.cpu().numpy(), float(delta))
