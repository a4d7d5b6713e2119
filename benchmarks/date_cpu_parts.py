"""The CPU-side parts of DATE's encoding on the full MECAT test set: the previous code vs the current, same
inputs, same process, back to back.

    PYTHONPATH=. python benchmarks/date_cpu_parts.py [--repeat 3] [--limit N] [--out FILE.json]

For every corpus of a cold pass (each of the 15 groups' references and candidates, as `date_full.py` reads
them) it times
- tokenising: the distinct texts (`np.unique`, as `encode`), the Rust tokenizer and the library's probe;
- the tf-idf weights' numpy arithmetic (`sentence_weights`; before: the per-token-count loop on every row).
The previous code is kept below verbatim (`_previous_*`, from commit ffde92c). Not timed: the model's forward
passes and the weights' word statistics (`word_statistics`: the cosine table and the IDF stream, on the GPU
in a real run; minutes on a CPU). The loop's inputs come from a stand-in instead — the fp32 cosine table cast
to fp16 and a token-count idf — the same for both sides, so the timing and the bitwise comparison hold
(the weights' agreement with upstream's own is tests/test_date.py's). Every corpus' token ids, type ids and
weights are compared bit for bit; any difference fails the run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from itertools import chain
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))

from date_full import groups  # noqa: E402

from earmark.metrics import date_embed  # noqa: E402
from earmark.metrics.date_weights import CLS, SEP, _valid, sentence_weights  # noqa: E402
from earmark.metrics.similarity import load_sbert  # noqa: E402


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


def stand_in_statistics(model, ids: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vocab, word_sim, idf) shaped as `word_statistics`' output, cheaply (not upstream's values)."""
    vocab = torch.unique(ids)
    vocab = vocab[_valid(vocab)]
    with torch.no_grad():
        emb = torch.nn.functional.normalize(date_embed.word_table(model)(vocab), dim=-1)
        word_sim = (emb @ emb.T).half().numpy()
    df = np.bincount(torch.searchsorted(vocab, ids)[_valid(ids)].numpy(), minlength=len(vocab))
    return vocab.numpy(), word_sim, (np.log((len(ids) + 1) / (df + 1)) + 1).astype(np.float32)


def _distinct(texts: list[str]) -> tuple[np.ndarray, torch.Tensor]:
    _, first, index = np.unique(np.asarray(texts, dtype=object), return_index=True, return_inverse=True)
    return first, torch.as_tensor(index.reshape(-1))


def previous(model, texts: list[str], stats) -> tuple[dict[str, float], tuple[torch.Tensor, ...]]:
    start = time.perf_counter()
    first, inverse = _distinct(texts)
    distinct_ids, distinct_types = _previous_tokenize(model, [texts[i] for i in first])
    ids, types = distinct_ids[inverse], distinct_types[inverse]
    mid = time.perf_counter()
    weights = _previous_loop(ids, *stats)
    return {"tokenise": mid - start, "weights": time.perf_counter() - mid}, (ids, types, weights)


def current(model, texts: list[str], stats) -> tuple[dict[str, float], tuple[torch.Tensor, ...]]:
    start = time.perf_counter()
    first, inverse = _distinct(texts)
    distinct_ids, distinct_types = date_embed.tokenize(model, [texts[i] for i in first])
    ids, types = distinct_ids[inverse], distinct_types[inverse]
    mid = time.perf_counter()
    weights = sentence_weights(distinct_ids, *stats)[inverse]
    return {"tokenise": mid - start, "weights": time.perf_counter() - mid}, (ids, types, weights)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="samples per group (default: all)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    model = load_sbert()
    corpora = []
    for group, (_, cands, refs) in groups(args.limit).items():
        corpora += [(f"{group}/references", [r for rs in refs for r in rs]), (f"{group}/candidates", cands)]
    print(
        f"{len(corpora)} corpora, {sum(len(t) for _, t in corpora)} sentences; torch threads {torch.get_num_threads()}"
    )
    stats = {}
    for name, texts in corpora:  # the loop's inputs, once per corpus, not timed
        first, inverse = _distinct(texts)
        stats[name] = stand_in_statistics(model, date_embed.tokenize(model, [texts[i] for i in first])[0][inverse])
    runs = []
    for rep in range(args.repeat):
        totals = {}
        for side, fn in (("previous", previous), ("current", current)):
            date_embed._RUST_COPIES.clear()  # each pass copies the tokenizer at least once
            spent = {"tokenise": 0.0, "weights": 0.0}
            for name, texts in corpora:
                seconds, outputs = fn(model, texts, stats[name])
                spent = {k: spent[k] + seconds[k] for k in spent}
                totals.setdefault(name, []).append(outputs)
            totals[side] = spent
            print(
                f"repeat {rep + 1} {side:8s} tokenise {spent['tokenise']:6.2f} s  weights {spent['weights']:6.2f} s  "
                f"total {sum(spent.values()):6.2f} s",
                flush=True,
            )
        for name, _ in corpora:
            before, after = totals[name]
            for label, a, b in zip(("ids", "type ids", "weights"), before, after):
                if a.dtype != b.dtype or not np.array_equal(a.numpy().view(np.uint8), b.numpy().view(np.uint8)):
                    raise SystemExit(f"{name}: {label} differ between the previous and the current code")
        runs.append({side: totals[side] for side in ("previous", "current")})
        ratio = sum(runs[-1]["previous"].values()) / sum(runs[-1]["current"].values())
        print(f"repeat {rep + 1}: ids, type ids and weights bitwise equal in all {len(corpora)} corpora; {ratio:.2f}x")
    if args.out:
        args.out.write_text(json.dumps({"corpora": len(corpora), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
