"""The CPU-side parts of DATE's encoding on the full MECAT test set: the previous code vs the current, same
inputs, same process, back to back.

    python benchmarks/scoring/date_cpu_parts.py [--repeat 3] [--limit N] [--out FILE.json]

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
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))

from date_full import groups  # noqa: E402

from earmark.metrics import date_embed  # noqa: E402
from earmark.metrics.date_weights import _valid, sentence_weights  # noqa: E402
from earmark.metrics.similarity import load_sbert  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # support: not installed
from support.date_previous import _previous_loop, _previous_tokenize  # noqa: E402


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
