"""Prompt-prefix reuse that does not change what the embedded model says.

llama-cpp-python keeps the previous request's tokens in the KV cache and evaluates only what a new prompt does
not share with them; for a prompt it has just answered (the three references of one caption kind share their
prompt) it re-evaluates the last prompt token alone. That is fast, but not exact: the CPU matrix kernels tile a
batch's rows, so a token's activations depend on where its batch started and how long it was. Measured with
Qwen2.5-0.5B Q4_K_M (docs/benchmarks-history.md, issue [3/3]): evaluating a 43-token prompt as two batches split
at position r gave the fresh evaluation's logits exactly for r = 8, 12, …, 32 and moved them by 0.30–0.57 for
every other r, and for r = 36 and 40 (a suffix of 7 or 3 tokens, which takes another kernel). So a request's reply
depended on what the server had answered before, and a build resumed after a kill could differ from an
uninterrupted one.

`install()` makes the server reuse only a prefix that ends on a multiple of `ALIGN` positions, lies inside the
previous *prompt* (never its completion, whose tokens were evaluated one at a time), and leaves at least
`MIN_BATCH` tokens to evaluate; a prompt longer than one micro-batch reuses only whole micro-batches. Every
prompt token is then evaluated in a batch that starts where the fresh evaluation's would (modulo `ALIGN`) and
ends where it ends, so the reply to a request is the same whatever the server did before
(`tests/test_llm_prefix.py`, `benchmarks/llm/server_history.py`). The cost: up to `ALIGN + MIN_BATCH - 1` more
prompt tokens per request than the unaligned reuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_cpp import llama as _llama

ALIGN = 16  # a multiple of every row tile of the CPU kernels (4 measured on AVX2)
MIN_BATCH = 16  # suffixes of 11 tokens or more took the fresh evaluation's kernel; 7 or fewer did not

_generate = _llama.Llama.generate


def aligned_prefix(cached: Sequence[int], prompt_len: int, tokens: Sequence[int], n_ubatch: int) -> int:
    """How many leading tokens of `tokens` to keep from the cache: the shared prefix with the previous prompt
    (`cached[:prompt_len]`), rounded down to a multiple of ALIGN (of the micro-batch when the prompt is longer than
    one), leaving at least MIN_BATCH tokens to evaluate; 0: evaluate the whole prompt."""
    limit = min(prompt_len, len(cached), len(tokens) - MIN_BATCH)
    shared = 0
    while shared < limit and cached[shared] == tokens[shared]:
        shared += 1
    step = n_ubatch if len(tokens) > n_ubatch else ALIGN
    return (shared // step) * step


def _aligned_generate(self: Any, tokens: Sequence[int], *args: Any, reset: bool = True, **kwargs: Any) -> Any:
    tokens = list(tokens)
    if reset and self.n_tokens > 0:
        keep = aligned_prefix(
            self._input_ids.tolist(), getattr(self, "_earmark_prompt_len", 0), tokens, self.context_params.n_ubatch
        )
        if keep and not self._ctx.kv_cache_seq_rm(-1, keep, -1):
            keep = 0
        # llama-cpp-python's own prefix match then finds exactly `keep` tokens (0: it resets and evaluates all)
        self.n_tokens = keep
    self._earmark_prompt_len = len(tokens)
    return _generate(self, tokens, *args, reset=reset, **kwargs)


def install() -> None:
    """Use the aligned prefix reuse in this process's llama-cpp-python (the embedded server's)."""
    _llama.Llama.generate = _aligned_generate
