"""Grammar-constrained sampling for the embedded llama.cpp servers, checked one token at a time.

llama-cpp-python (0.3.x) puts the JSON grammar first in its sampler chain, so every generated token runs the
grammar over the whole vocabulary (151,936 tokens for Qwen2.5): about 18 ms a token on one core, about a quarter
of the time of a typical request (benchmarks/llm/grammar_sampling.py). llama.cpp's own server samples the other way round, and so does `GrammarLastSampler`:

1. sample a token from the unconstrained chain (top-k, typical, top-p, min-p, temperature, dist);
2. ask the grammar about that one token;
3. only if the grammar rejects it, apply the grammar to the whole vocabulary and sample again through the
   same chain.

Step 3 makes this rejection sampling: a token the grammar allows is drawn with the same probability as under
the grammar-first chain, except where the unconstrained top-k/top-p/min-p cut already removed it (the grammar-
first chain truncates after the grammar). With temperature 0 (greedy) both give the same tokens; a test checks
that. The output stays valid under the grammar whichever way a token was chosen.

`install()` runs inside the server process (see `earmark.llm.server`); it leaves llama-cpp-python's own chain
for requests it does not cover (mirostat, logits processors, no grammar). The repetition penalties (the
server's default `repeat_penalty` is 1.1) stay first in the chain and learn only the token finally chosen.
"""

from __future__ import annotations

import ctypes
import math
import os
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp import _internals
from llama_cpp import llama as _llama

# Set to 1 in the server's environment to keep llama-cpp-python's grammar-first chain (for comparisons).
FULL_GRAMMAR_ENV = "EARMARK_LLM_FULL_GRAMMAR"

_TOKEN = np.dtype([("id", np.intc), ("logit", np.float32), ("p", np.float32)], align=True)


class GrammarLastSampler:
    """Drop-in for llama-cpp-python's `LlamaSampler` chain: `sample(ctx, idx) -> token`."""

    def __init__(self, model: Any, grammar: Any, n_vocab: int, *, seed: int, **chain: Any) -> None:
        if _TOKEN.itemsize != ctypes.sizeof(llama_cpp.llama_token_data):
            raise RuntimeError("llama_token_data layout changed; the grammar-last sampler needs updating")
        self.n_vocab = n_vocab
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        self._chain = _chain(n_vocab, seed=seed, **chain)
        self._one = (llama_cpp.llama_token_data * 1)()
        self._all = np.empty(n_vocab, dtype=_TOKEN)
        self._ids = np.arange(n_vocab, dtype=np.intc)
        self.tokens = 0
        self.resampled = 0  # tokens the grammar rejected at step 2

    def allows(self, token: int) -> bool:
        """Whether the grammar, in its current state, accepts `token` next."""
        self._one[0].id, self._one[0].logit, self._one[0].p = token, 0.0, 0.0
        cur = llama_cpp.llama_token_data_array(self._one, 1, -1, False)
        llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(cur))
        return not math.isinf(self._one[0].logit)

    def _draw(self, ctx: Any, idx: int, constrained: bool) -> int:
        # the chain is applied, not sampled: its penalties learn only the token finally chosen (accept below)
        buf = self._all
        buf["id"] = self._ids
        buf["logit"] = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        buf["p"] = 0.0
        cur = llama_cpp.llama_token_data_array(
            buf.ctypes.data_as(llama_cpp.llama_token_data_p), self.n_vocab, -1, False
        )
        if constrained:
            llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(cur))
        llama_cpp.llama_sampler_apply(self._chain.sampler, ctypes.byref(cur))
        return int(cur.data[cur.selected].id)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        self.tokens += 1
        token = self._draw(ctx, idx, constrained=False)
        if not self.allows(token):
            self.resampled += 1
            token = self._draw(ctx, idx, constrained=True)
        llama_cpp.llama_sampler_accept(self._grammar, token)
        llama_cpp.llama_sampler_accept(self._chain.sampler, token)
        return token

    def close(self) -> None:
        if getattr(self, "_grammar", None) is not None:  # also after a failed __init__
            llama_cpp.llama_sampler_free(self._grammar)
            self._grammar = None
        if (chain := getattr(self, "_chain", None)) is not None:
            chain.close()

    def __del__(self) -> None:
        self.close()


def _chain(
    n_vocab: int,
    *,
    seed: int,
    top_k: int,
    top_p: float,
    min_p: float,
    typical_p: float,
    temp: float,
    penalty_last_n: int,
    repeat_penalty: float,
    frequency_penalty: float,
    presence_penalty: float,
) -> Any:
    # llama-cpp-python's Llama._init_sampler chain, without the grammar
    chain = _internals.LlamaSampler()
    chain.add_penalties(
        n_vocab=n_vocab,
        penalty_last_n=penalty_last_n,
        penalty_repeat=repeat_penalty,
        penalty_freq=frequency_penalty,
        penalty_present=presence_penalty,
    )
    if temp == 0.0:
        chain.add_greedy()
        return chain
    if temp > 0.0:
        chain.add_top_k(top_k)
        chain.add_typical(typical_p, 1)
        chain.add_top_p(top_p, 1)
        chain.add_min_p(min_p, 1)
        chain.add_temp(temp)
    chain.add_dist(seed)
    return chain


_grammar_first = _llama.Llama._init_sampler


def _init_sampler(self: Any, **kw: Any) -> Any:
    if kw.get("grammar") is None or kw.get("logits_processor") is not None or kw.get("mirostat_mode", 0) != 0:
        return _grammar_first(self, **kw)
    return GrammarLastSampler(
        self._model,
        kw["grammar"],
        self._n_vocab,
        seed=self._seed,
        top_k=kw.get("top_k", 40),
        top_p=kw.get("top_p", 0.95),
        min_p=kw.get("min_p", 0.05),
        typical_p=kw.get("typical_p", 1.0),
        temp=kw.get("temp", 0.80),
        penalty_last_n=self.last_n_tokens_size,
        repeat_penalty=kw.get("repeat_penalty", 1.0),
        frequency_penalty=kw.get("frequency_penalty", 0.0),
        presence_penalty=kw.get("presence_penalty", 0.0),
    )


def install() -> bool:
    """Use the grammar-last sampler in this process's llama-cpp-python (unless FULL_GRAMMAR_ENV is set)."""
    if os.environ.get(FULL_GRAMMAR_ENV, "") not in ("", "0", "false"):
        return False
    _llama.Llama._init_sampler = _init_sampler
    return True
