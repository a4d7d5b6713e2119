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

Agreement and speed: the tf-idf weights are upstream's bit for bit (`metrics.date_weights`); each distinct
sentence is embedded once in length-sorted batches with padding trimmed (`metrics.date_embed`), which
differs from upstream's 32-sentence full-width batches by rounding only (≈1e-7). That is far inside the
1e-4 agreement for similarity, but a discrimination count flips when a similarity sits within rounding of
its δ/2 threshold, and one flip moves a sample by 1/N (3.9e-4 in a 2,593-sample group). So every pair
within `tie_window` of its threshold is decided again on upstream's own embeddings of the sentences
involved — its batches, its CPU normalisation, its block products — and the decision is upstream's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from earmark.metrics.date_embed import Corpus, encode, exact_rows, normalised
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

UPSTREAM_ROWS = 1024  # candidates per similarity block upstream: the product's shape fixes its rounding
DEFAULT_BATCH = 256  # sentences per fast forward pass (docs/benchmarks.md, "DATE on a GPU")
TIE_WINDOW = 4e-6  # > twice the fast pass's largest rounding gap (8.4e-7 L2, measured), ≪ any real score gap


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


def _means(raw: torch.Tensor, counts: list[int]) -> torch.Tensor:
    """Per-sample mean of the normalised reference embeddings, on the CPU as upstream (n × D)."""
    if len(set(counts)) == 1:
        return normalised(raw, counts[0]).mean(dim=1)
    # upstream cannot score uneven reference counts (it fails); here each sample averages its own
    emb = torch.nn.functional.normalize(raw, p=2, dim=-1)
    owner = torch.as_tensor(np.repeat(np.arange(len(counts)), counts))
    total = torch.zeros((len(counts), emb.shape[1])).index_add_(0, owner, emb)
    return total / torch.as_tensor(counts, dtype=torch.float32).clamp(min=1).unsqueeze(1)


def _reference_side(model, refs: list[list[str]], dev: torch.device, batch_size: int, half: bool) -> dict:
    """What a group's references contribute: per-sample means, plus the token ids and weights that the tie
    repair re-embeds from (stored together in the reference cache)."""
    corpus = encode(model, [r for rs in refs for r in rs], dev, batch_size, half)
    counts = [len(r) for r in refs]
    return {"ref_mean": _means(corpus.raw, counts), "counts": torch.as_tensor(counts), **corpus.tensors()}


def _counts(cand, ref_mean, penalty, delta: float, window: float, rows: Sequence[int] | None = None):
    """Upstream's discrimination counts (`DATE.forward`, part 2), block by block as upstream, and the
    (row, column) pairs whose similarity lies within `window` of the row's threshold.

    count_i = #{j : s_ij > own_i + δ/2} + #{j : own_i − δ/2 ≤ s_ij ≤ own_i + δ/2} with s = cand·ref_meanᵀ ×
    penalty_i and own_i = Σ cand_i ⊙ ref_mean_i × penalty_i (not the diagonal of the product: the two round
    differently). `rows`: recount only the blocks holding these rows."""
    n = len(cand)
    own = (cand * ref_mean).sum(dim=1) * penalty
    counts = torch.empty(n, dtype=torch.float32, device=cand.device)
    ref_t = ref_mean.float().t()
    near: list[torch.Tensor] = []
    blocks = range(0, n, UPSTREAM_ROWS) if rows is None else sorted({r // UPSTREAM_ROWS * UPSTREAM_ROWS for r in rows})
    for i in blocks:
        end = min(i + UPSTREAM_ROWS, n)
        sims = torch.mm(cand[i:end].float(), ref_t) * penalty[i:end, None]
        upper = own[i:end].unsqueeze(1) + delta / 2
        lower = own[i:end].unsqueeze(1) - delta / 2
        above = (sims > upper).sum(dim=1).float()
        within = ((sims <= upper) & (sims >= lower)).sum(dim=1).float()
        counts[i:end] = above + within
        if window > 0:
            pairs = ((sims - lower).abs() <= window).nonzero()
            near.append(pairs + torch.as_tensor([i, 0], device=pairs.device))
    pairs = torch.cat(near).cpu() if near else torch.zeros((0, 2), dtype=torch.long)
    return own, counts, pairs


def _repair_ties(model, cand_corpus, cand, ref_side, ref_mean, penalty, delta, pairs, dev):
    """Recount the rows with a near-threshold pair on upstream's own embeddings of the sentences involved
    (upstream's batches, CPU normalisation, block products of the same shapes): their decision is then
    upstream's, whatever rounding the fast pass had. Returns (own, counts) for those rows."""
    rows = sorted({int(i) for i in pairs[:, 0]})
    cols = sorted({int(j) for j in pairs[:, 1]} | set(rows))
    k = int(ref_side["counts"][0])
    ref_corpus = Corpus.from_tensors(ref_side)
    cand_x, ref_x = cand.clone(), ref_mean.clone()
    raw = exact_rows(model, cand_corpus, rows, dev)
    cand_x[torch.as_tensor(rows, device=dev)] = normalised(torch.stack([raw[i] for i in rows]), 1)[:, 0].to(dev)
    raw = exact_rows(model, ref_corpus, [j * k + m for j in cols for m in range(k)], dev)
    stacked = torch.stack([raw[j * k + m] for j in cols for m in range(k)])
    ref_x[torch.as_tensor(cols, device=dev)] = normalised(stacked, k).mean(dim=1).to(dev)
    own, counts, _ = _counts(cand_x, ref_x, penalty, delta, 0.0, rows)
    index = torch.as_tensor(rows, device=dev)
    return index, own[index], counts[index]


def date_scores(
    candidates: list[str],
    references: list[list[str]],
    *,
    delta: float,
    sbert=None,
    error_checker: Callable[[list[str]], object] | None = None,
    device: str | torch.device | None = None,
    batch_size: int = DEFAULT_BATCH,
    half: bool = False,
    tie_window: float = TIE_WINDOW,
    reference_cache: dict | None = None,
) -> DateScores:
    """DATE of each candidate against its references, all samples forming one group (one δ, one idf).

    `delta` is the group's full tolerance (see GROUP_DELTA); ties within δ/2 count against the candidate.
    Give the samples in the official order (sorted sample keys, as `metrics.mecat_eval.score_group` does):
    upstream's batches follow that order, and the tie repair re-runs them.
    `sbert`: a loaded sentence-transformers model or a local directory (default: all-MiniLM-L6-v2 wheel).
    `error_checker`: optional callable returning one penalty factor per candidate (1 = no error).
    `device`: "cpu" (default) or "cuda"; a loaded model is moved there.
    `batch_size`: sentences per forward pass of the fast pass; `half`: run it under fp16 autocast (faster
    on a GPU, ≈1e-3 off upstream: the tie window must then be wider; see docs/benchmarks.md).
    `tie_window`: pairs whose similarity is this close to a threshold are decided on upstream's own
    embeddings (0 turns the repair off). It must exceed the fast pass's rounding difference.
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

    ref_side = cached_reference_means(
        reference_cache, "date", model, refs, lambda: _reference_side(model, refs, dev, batch_size, half), None
    )
    ref_mean = ref_side["ref_mean"].to(dev)
    cand_corpus = encode(model, list(candidates), dev, batch_size, half)
    cand = normalised(cand_corpus.raw, 1).squeeze(1).to(dev)
    penalty = error_penalties(error_checker, candidates, dev)

    own, counts, pairs = _counts(cand, ref_mean, penalty, delta, tie_window)
    uniform = len(set(len(r) for r in refs)) == 1  # upstream's shape; with uneven counts it has no answer
    if len(pairs) and uniform:
        index, own_x, counts_x = _repair_ties(model, cand_corpus, cand, ref_side, ref_mean, penalty, delta, pairs, dev)
        own[index], counts[index] = own_x, counts_x
    disc = 1 - counts / n
    date = 2 * own * disc / (own + disc + 1e-8)
    return DateScores(own.cpu().numpy(), disc.cpu().numpy(), date.cpu().numpy(), float(delta))
