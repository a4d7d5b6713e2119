"""Does an embedded LLM server's reply to a request depend on what it answered before? (issue 45, item 4)

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/llm/server_history.py [--model qwen2.5-coder-0.5b-instruct-q4_k_m]

One request R (a long caption from music facts, seed 5) is sent to a fresh single-thread embedded server after
four histories: nothing; R with seed 4 (what the three references of one caption kind do: same prompt, other
seed); another prompt Q sharing the system prompt; Q, R (seed 4), Q. Prints each reply and whether they are equal.
On 2026-11-27 (VM, llama-cpp-python 0.3.36) R after R differed from R fresh, the other histories did not: the
server re-evaluated a just-answered prompt from its last token alone, which the CPU kernels compute differently
from a fresh evaluation. That is why a build killed in synthesis and resumed differed from an uninterrupted one
(a reference whose predecessor came from the request cache met another server state). Since earmark.llm.prefix
(aligned prefix reuse) the four replies are equal.
"""

from __future__ import annotations

import argparse

from earmark.llm.client import LLMClient
from earmark.llm.server import LocalLLMServer

SYSTEM = "You write one caption for an audio clip from the facts given. Say only what the facts state."
SCHEMA = {
    "type": "object",
    "properties": {"caption": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["caption", "confidence"],
}


def _messages(facts: str) -> list[dict]:
    user = f"Facts:\n{facts}\nWrite a long caption (15-25 words) and your confidence."
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


R = _messages("- music is present (sure)\n- key: D# major\n- a steady beat\n- sustained notes and chords\n- loud")
Q = _messages("- speech: a man speaks\n- words: 'good morning everyone'\n- quiet room")
HISTORIES = {
    "fresh": [(R, 5)],
    "after R (seed 4)": [(R, 4), (R, 5)],
    "after Q": [(Q, 1), (R, 5)],
    "after Q, R, Q": [(Q, 1), (R, 4), (Q, 2), (R, 5)],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m")
    args = ap.parse_args()
    replies = {}
    for name, requests in HISTORIES.items():
        with LocalLLMServer(args.model, n_threads=1) as server:
            client = LLMClient(server.base_url, server.model_id, schema_mode="llama_cpp")
            for messages, seed in requests:
                result = client.complete_json(messages, SCHEMA, max_tokens=80, temperature=0.2, seed=seed)
            replies[name] = result.text or str(result.error)
        print(f"{name:>18}: {replies[name][:150]}", flush=True)
    same = len(set(replies.values())) == 1
    print(f"\nR's reply the same after every history: {same}")


if __name__ == "__main__":
    main()
