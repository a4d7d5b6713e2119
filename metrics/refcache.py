"""The reference side of DATE and FENSE, kept across runs.

A group's reference embeddings depend only on its references and the SBERT weights (DATE's idf is computed
over the reference corpus alone), never on the candidates. Scoring a second system — or the same system
again — on the MECAT test set therefore needs only the candidates' forward pass. `ReferenceCache` stores
each group's reference side (per-sample reference means; for DATE also the token ids and weights its tie
repair re-embeds from) as one `.npz` file named by a key over (metric, model weights
fingerprint, reference texts); a different model or one changed reference makes a different key, so a
stale entry is never read. Writes are atomic (temp file + rename), so concurrent scorers cannot read a
half-written file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

_FINGERPRINT_ATTR = "_earmark_weights_sha"
_SINGLE = "value"  # the array name of an entry that is one tensor


def model_fingerprint(model: torch.nn.Module) -> str:
    """sha256 over the model's parameters (names, shapes, bytes), computed once per loaded model."""
    fp = getattr(model, _FINGERPRINT_ATTR, None)
    if fp is None:
        h = hashlib.sha256()
        for name, p in model.state_dict().items():
            t = p.detach().to("cpu").contiguous()
            h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        fp = h.hexdigest()
        object.__setattr__(model, _FINGERPRINT_ATTR, fp)
    return fp


def reference_key(metric: str, model: torch.nn.Module, refs: list[list[str]], **settings) -> str:
    payload = json.dumps(
        {"metric": metric, "model": model_fingerprint(model), "refs": refs, **settings},
        ensure_ascii=False,
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ReferenceCache:
    """Dict-like store of reference-mean matrices under `directory` (`get`, `[key] = tensor`)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.npz"

    def get(self, key: str, default=None):
        """The stored tensor, or dict of tensors, under `key` (`default` when absent or unreadable)."""
        path = self._path(key)
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {name: torch.from_numpy(npz[name]) for name in npz.files}
        except (FileNotFoundError, ValueError, OSError, KeyError):
            self.misses += 1
            return default
        self.hits += 1
        return arrays[_SINGLE] if set(arrays) == {_SINGLE} else arrays

    def __setitem__(self, key: str, value: torch.Tensor | dict[str, torch.Tensor]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = value if isinstance(value, dict) else {_SINGLE: value.float()}
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, **{name: t.detach().to("cpu").numpy() for name, t in arrays.items()})
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def cached_reference_means(
    cache, metric: str, model: torch.nn.Module, refs: list[list[str]], compute, device: torch.device | None
):
    """The reference side from `cache` (a dict or ReferenceCache, or None), else `compute()` stored in it.

    `compute()` returns one tensor (moved to `device`) or a dict of tensors (returned as stored)."""
    key = reference_key(metric, model, refs) if cache is not None else None
    value = cache.get(key) if cache is not None else None
    if value is None:
        value = compute()
        if cache is not None:
            cache[key] = value
    return value if isinstance(value, dict) else value.to(device)
