"""The embedded server's reply to a request does not depend on what it answered before (earmark.llm.prefix).

With llama-cpp-python's own prefix reuse, a prompt the server had just answered (the three references of one
caption kind share their prompt) was evaluated again from its last token alone, which the CPU kernels compute
differently from a fresh evaluation: Qwen2.5-0.5B then answered the same request differently, and a build killed
in synthesis and resumed differed from an uninterrupted one (docs/benchmarks-history.md, issue [3/3])."""

from __future__ import annotations

import pytest

from earmark.llm import prefix, sampling
from earmark.llm.models import resolve_model_path

QWEN = "qwen2.5-coder-0.5b-instruct-q4_k_m"
SYSTEM = "You write one caption for an audio clip from the facts given. Say only what the facts state."
SCHEMA = {
    "type": "object",
    "properties": {"caption": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["caption", "confidence"],
}


@pytest.mark.parametrize(
    ("cached", "prompt_len", "tokens", "keep"),
    [
        (list(range(100)), 100, list(range(100)), 80),  # the same prompt again: 84 shared, 20 evaluated
        (list(range(100)), 100, list(range(40)) + [-1] * 60, 32),  # 40 shared: down to a multiple of 16
        (list(range(100)), 30, list(range(100)), 16),  # never into the previous completion
        (list(range(10)), 10, list(range(20)), 0),  # fewer than 16 shared
        (list(range(100)), 100, list(range(20)), 0),  # a short prompt is evaluated whole
        (list(range(1200)), 1200, list(range(1100)), 1024),  # longer than a micro-batch: whole micro-batches
    ],
)
def test_the_reused_prefix_is_aligned_inside_the_previous_prompt(cached, prompt_len, tokens, keep):
    assert prefix.aligned_prefix(cached, prompt_len, tokens, n_ubatch=512) == keep


@pytest.mark.slow
def test_a_request_gets_the_reply_a_fresh_server_gives_whatever_came_before():
    from llama_cpp import Llama

    sampling.install()
    prefix.install()
    llm = Llama(model_path=str(resolve_model_path(QWEN)), n_ctx=2048, n_threads=1, verbose=False)

    def ask(facts: str, seed: int) -> str:
        user = f"Facts:\n{facts}\nWrite a long caption (15-25 words) and your confidence."
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
        reply = llm.create_chat_completion(
            messages=messages,
            response_format={"type": "json_object", "schema": SCHEMA},
            max_tokens=60,
            temperature=0.2,
            seed=seed,
        )
        return reply["choices"][0]["message"]["content"]

    music = "- music is present (sure)\n- key: D# major\n- a steady beat\n- sustained notes and chords\n- loud"
    speech = "- speech: a man speaks\n- words: 'good morning everyone'\n- quiet room"
    after_itself = [ask(music, 4), ask(music, 5)][-1]  # another reference of the same prompt first
    after_other = [ask(speech, 1), ask(music, 5)][-1]
    llm.reset()
    fresh = ask(music, 5)
    assert after_itself == fresh
    assert after_other == fresh
