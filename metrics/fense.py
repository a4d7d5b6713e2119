"""FENSE as mecat 1.1.0 computes it (mecat/DATE.py with `return_type="fense"`, used by scorer.py).

The official FENSE path is DATE's code path without tf-idf weighting: every sentence is embedded with
the plain SBERT forward pass (token ids, no re-weighted input embeddings), L2-normalised; a candidate's
score is its cosine to the mean of its references' normalised embeddings (= the mean cosine to each
reference) times the error-checker penalty (0.1 when the FENSE checker flags an error, else 1).
Group membership does not matter for FENSE (no idf, no discrimination), so per-sample scores are
independent of the other samples.

Differences from upstream, on purpose: upstream reshapes all reference embeddings with the reference
count of the first sample, which is wrong (or crashes) when samples have different numbers of
references; here each sample averages its own references. With equal counts, as in MECAT, both agree.
The error checker's weights are a download, so it is optional: any `list[str] -> penalties` callable
(mecat's RefinedErrorChecker works when its checkpoint is on disk); without one every penalty is 1.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from earmark.metrics.date import _resolve_model, error_penalties
from earmark.metrics.refcache import cached_reference_means


def _embed_unique(model, texts: list[str], device: torch.device, batch_size: int) -> torch.Tensor:
    """Normalised sentence embeddings, each distinct text encoded once."""
    unique, index = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
    emb = model.encode(
        unique.tolist(),
        batch_size=batch_size,
        convert_to_tensor=True,
        device=str(device),
        normalize_embeddings=False,
        show_progress_bar=False,
    ).float()
    emb = torch.nn.functional.normalize(emb, p=2, dim=-1)
    return emb[torch.as_tensor(index, device=emb.device)]


def fense_scores(
    candidates: list[str],
    references: list[list[str]],
    *,
    sbert=None,
    error_checker: Callable[[list[str]], object] | None = None,
    device: str | torch.device | None = None,
    batch_size: int = 32,
    reference_cache: dict | None = None,
) -> np.ndarray:
    """Per-sample FENSE (0–1 scale, input order). Arguments as `metrics.date.date_scores`, without δ."""
    if len(candidates) != len(references):
        raise ValueError(
            f"{len(candidates)} candidates but {len(references)} reference lists: give one list per candidate"
        )
    n = len(candidates)
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    dev = torch.device(device or "cpu")
    model = _resolve_model(sbert, dev)
    refs = [list(r) if len(r) else [""] for r in references]  # mecat's scorer substitutes "" for no reference

    def compute() -> torch.Tensor:
        owner = torch.as_tensor(np.repeat(np.arange(n), [len(r) for r in refs]), device=dev)
        with torch.no_grad():
            ref_emb = _embed_unique(model, [r for rs in refs for r in rs], dev, batch_size).to(dev)
        ref_mean = torch.zeros((n, ref_emb.shape[1]), device=dev).index_add_(0, owner, ref_emb)
        return ref_mean / torch.bincount(owner, minlength=n).clamp(min=1).unsqueeze(1).float()

    ref_mean = cached_reference_means(reference_cache, "fense", model, refs, compute, dev)
    with torch.no_grad():
        cand = _embed_unique(model, list(candidates), dev, batch_size).to(dev)

    penalty = error_penalties(error_checker, candidates, dev)
    return ((cand * ref_mean).sum(1) * penalty).cpu().numpy()
