"""The embedded LLM server's JSON grammar: llama-cpp-python's grammar-first chain vs the grammar-last sampler.

    .venv/bin/python benchmarks/llm/grammar_sampling.py [--requests benchmarks/data/demo_requests.jsonl] [--greedy 12]

Replays the same real synthesis requests (every 8th request of a cold `earmark demo` build at commit 351ace1:
captions, QA, entailment and instruction prompts with their JSON schemas, temperatures, seeds and max_tokens)
against two embedded servers at once, one per sampler, each a single thread pinned to its own core (0 and 1),
one request at a time, and prints wall time,
completion tokens, how many replies parse as JSON and validate against their schema, and — with the requests
re-sent at temperature 0 — how many greedy replies are identical under both samplers (they must all be).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import jsonschema

from earmark.llm.client import extract_json, response_format
from earmark.llm.models import DEFAULT_MODEL_ID
from earmark.llm.sampling import FULL_GRAMMAR_ENV
from earmark.llm.server import LocalLLMServer

HERE = Path(__file__).parent


def start(full_grammar: bool, core: int) -> LocalLLMServer:
    os.environ[FULL_GRAMMAR_ENV] = "1" if full_grammar else "0"  # read by the server process at its start
    return LocalLLMServer(DEFAULT_MODEL_ID, n_threads=1, cpus=(core,)).start()


def replay(srv: LocalLLMServer, requests: list[dict], greedy: int) -> dict:
    out = {"seconds": 0.0, "completion_tokens": 0, "prompt_tokens": 0, "json": 0, "schema": 0, "greedy": []}
    with httpx.Client(timeout=600) as http:
        url = srv.base_url + "/chat/completions"
        for i, req in enumerate(requests + requests[:greedy]):
            greedy_pass = i >= len(requests)
            body = {
                "model": DEFAULT_MODEL_ID,
                "messages": req["messages"],
                "max_tokens": req["max_tokens"],
                "temperature": 0.0 if greedy_pass else req["temperature"],
                "seed": req["seed"],
                "response_format": response_format(req["schema"], "llama_cpp"),
            }
            t0 = time.perf_counter()
            reply = http.post(url, json=body).raise_for_status().json()
            dt = time.perf_counter() - t0
            text = reply["choices"][0]["message"]["content"] or ""
            if greedy_pass:
                out["greedy"].append(text)
                continue
            out["seconds"] += dt
            out["completion_tokens"] += reply["usage"]["completion_tokens"]
            out["prompt_tokens"] += reply["usage"]["prompt_tokens"]
            try:
                data = extract_json(text)
            except ValueError:
                continue
            out["json"] += 1
            try:
                jsonschema.validate(data, req["schema"])
                out["schema"] += 1
            except jsonschema.ValidationError:
                pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=Path, default=HERE / "data" / "demo_requests.jsonl")
    ap.add_argument("--greedy", type=int, default=12, help="requests also sent at temperature 0 to compare tokens")
    args = ap.parse_args()
    requests = [json.loads(line) for line in args.requests.read_text().splitlines() if line.strip()]
    print(f"{len(requests)} requests, {platform.machine()}, {os.cpu_count()} CPUs; the two servers run at once")
    names = ("grammar-first", "grammar-last")
    servers = [start(name == "grammar-first", core) for core, name in enumerate(names)]
    try:
        with ThreadPoolExecutor(2) as pool:
            results = dict(zip(names, pool.map(lambda srv: replay(srv, requests, args.greedy), servers)))
    finally:
        for srv in servers:
            srv.stop()
    print(
        "| sampler | seconds | s / request | prompt tokens | completion tokens | completion tok/s | JSON | schema-valid |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        n = len(requests)
        print(
            f"| {name} | {r['seconds']:.1f} | {r['seconds'] / n:.2f} | {r['prompt_tokens']} | {r['completion_tokens']} "
            f"| {r['completion_tokens'] / r['seconds']:.1f} | {r['json']}/{n} | {r['schema']}/{n} |"
        )
    a, b = results["grammar-first"], results["grammar-last"]
    same = sum(x == y for x, y in zip(a["greedy"], b["greedy"]))
    print(f"time ratio grammar-last / grammar-first: {b['seconds'] / a['seconds']:.3f}")
    print(f"greedy (temperature 0) replies identical: {same}/{len(a['greedy'])}")


if __name__ == "__main__":
    main()
