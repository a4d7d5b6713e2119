"""LLM outages: attempts and wall time of one request per fault mode, and of `earmark build` against faulty endpoints.

    .venv/bin/python benchmarks/llm/llm_faults.py [--timeout-s 5] [--request-budget-s 30] [--skip-builds]

Every endpoint is tests/support/fake_server.py on loopback. Part 1: one QA request (the client as a build opens it,
`[llm]` defaults except `timeout_s` and `request_budget_s`) per fault mode, then 10 requests in a row against HTTP 500 (the breaker).
Part 2: `earmark build` (the CLI, in a subprocess, against one Prefect test server) on two generated clips, one
shard each, with the same two settings, into a fresh data root per case: the endpoint refused, answering 500, hanging,
failing (500) or hanging on every QA request only (after the captions succeeded), and healthy. Prints the exit
code, wall time, chat requests the server received, the stages that registered shards, and the error line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # the fake server is a test tool

from earmark.core.config import LLMSection  # noqa: E402
from earmark.llm import LLMEndpointError  # noqa: E402
from earmark.llm.session import open_llm  # noqa: E402
from earmark.stages.synthesize import _schemas
from support.fake_server import FakeLLMServer, refused_url  # noqa: E402

QA_PROMPT = "You write question-answer pairs"  # a phrase of prompts/qa.toml's system prompt


def client_modes(timeout_s: float, budget_s: float, tmp: Path) -> None:
    cfg = LLMSection(model="fake-llm", timeout_s=timeout_s, request_budget_s=budget_s)
    print(
        f"## one request per fault mode (max_attempts {cfg.max_attempts}, timeout_s {timeout_s:g}, "
        f"request_budget_s {cfg.request_budget_s:g})\n"
    )
    print("| mode | HTTP attempts | wall s | outcome |\n|---|---|---|---|")
    messages = [{"role": "user", "content": "Ask about the clip."}]
    for mode in (
        "ok",
        "invalid_json",
        "schema_violation",
        "truncation",
        "429",
        "500",
        "hang",
        "slow_stream",
        "refused",
    ):
        with FakeLLMServer("ok" if mode == "refused" else mode, retry_after_s=2, drip_s=0.5) as srv:
            url = refused_url() if mode == "refused" else srv.base_url
            llm = open_llm(cfg.model_copy(update={"endpoint": url}), tmp / f"cache-{mode}")
            t = time.perf_counter()
            try:
                res = llm.complete_json(messages, _schemas("qa")[0], max_tokens=110)
                outcome = "reply" if res.error is None else f"row error: {res.error[:60]}"
            except LLMEndpointError as exc:
                outcome = f"LLMEndpointError after {exc.attempts} attempts"
            wall = time.perf_counter() - t
            print(f"| {mode} | {llm.stats()['calls']} | {wall:.2f} | {outcome} |")
            llm.close()
    with FakeLLMServer("500") as srv:
        llm = open_llm(cfg.model_copy(update={"endpoint": srv.base_url}), tmp / "cache-breaker")
        t = time.perf_counter()
        for i in range(10):
            try:
                llm.complete_json(messages, None, max_tokens=10, seed=i)
            except LLMEndpointError:
                pass
        print(
            f"\n10 requests in a row against HTTP 500: {srv.requests} HTTP attempts sent, "
            f"{time.perf_counter() - t:.1f} s (breaker_failures {cfg.breaker_failures})\n"
        )


def clip_inputs(root: Path) -> Path:
    from earmark.corpus import generate_corpus

    items = generate_corpus(root / "corpus", per_domain=1, seed=3)
    inputs = root / "inputs"
    inputs.mkdir()
    for item in items:
        if item.domain in ("0M0", "00A"):
            shutil.copy(item.path, inputs / item.path.name)
    return inputs


def build_case(name: str, inputs: Path, root: Path, api_url: str, timeout_s: float, budget_s: float) -> dict:
    from earmark.storage import Catalog

    mode = {"500 from the start": "500", "hanging from the start": "hang"}.get(name, "ok")
    with FakeLLMServer(mode) as srv:
        if name == "500 on every QA request":
            srv.route(QA_PROMPT, "500")
        if name == "hanging on every QA request":
            srv.route(QA_PROMPT, "hang")
        url = refused_url() if name == "refused" else srv.base_url
        data = root / name.replace(" ", "-")
        env = {
            **os.environ,
            "PREFECT_API_URL": api_url,
            "EARMARK_LLM__TIMEOUT_S": str(timeout_s),
            "EARMARK_LLM__REQUEST_BUDGET_S": str(budget_s),
            "EARMARK_INGEST__FILES_PER_SHARD": "1",
            "EARMARK_FILTER__MARGIN_BACKEND": "off",
        }
        cmd = [sys.executable, "-m", "earmark.cli.main", "build", str(inputs), "--data-root", str(data), "-d", "bench"]
        cmd += ["--llm-endpoint", url, "--llm-model", "fake-llm"]
        t = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        requests = srv.requests
    stages: list[str] = []
    before_synth = 0.0
    if (data / "bench").exists():
        cat = Catalog(data, "bench")
        got = {s for (s,) in cat.query("SELECT DISTINCT stage FROM shards")}
        stages = [
            s for s in ("ingest", "analyze", "synthesize", "filter", "publish") if any(g.startswith(s) for g in got)
        ]
        stages += ["evidence"] if "evidence" in got else []
        (stats_json,) = cat.query("SELECT stats_json FROM runs ORDER BY started_at DESC LIMIT 1")[0]
        timings = json.loads(stats_json or "{}").get("timings_s", {})
        before_synth = timings.get("ingest", 0) + timings.get("analyze", 0)
    error = next((line for line in proc.stderr.splitlines() if line.startswith("earmark: error")), "")
    if proc.returncode not in (0, 3):
        print(proc.stderr[-3000:], file=sys.stderr)
    return {
        "case": name,
        "rc": proc.returncode,
        "wall_s": round(wall, 1),
        "ingest_analyze_s": round(before_synth, 1),
        "requests": requests,
        "stages": stages,
        "error": error[:160],
    }


def builds(timeout_s: float, budget_s: float, tmp: Path, only: list[str] | None = None) -> None:
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    inputs = clip_inputs(tmp)
    cases = only or (
        "refused",
        "500 from the start",
        "hanging from the start",
        "500 on every QA request",
        "hanging on every QA request",
        "healthy",
    )
    print(
        f"## earmark build, 2 clips (2 shards), timeout_s {timeout_s:g}, request_budget_s {budget_s:g}, "
        "other [llm] settings default\n"
    )
    print(
        "| endpoint | rc | wall s | of which ingest + analyze | chat requests | stages with shards | error (first line) |\n"
        "|---|---|---|---|---|---|---|"
    )
    with prefect_test_harness(server_startup_timeout=120):
        api = PREFECT_API_URL.value()
        for name in cases:
            r = build_case(name, inputs, tmp, api, timeout_s, budget_s)
            print(
                f"| {r['case']} | {r['rc']} | {r['wall_s']} | {r['ingest_analyze_s']} | {r['requests']} | {', '.join(r['stages']) or '-'} | "
                f"{r['error'] or '-'} |",
                flush=True,
            )
            print(json.dumps(r), file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout-s", type=float, default=5.0, help="[llm] timeout_s (the issue measured with 5 s)")
    ap.add_argument("--request-budget-s", type=float, default=30.0, help="[llm] request_budget_s")
    ap.add_argument("--skip-builds", action="store_true")
    ap.add_argument("--skip-client", action="store_true")
    ap.add_argument("--case", action="append", help="only these build cases (by name)")
    args = ap.parse_args()
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores\n")
    with tempfile.TemporaryDirectory(prefix="earmark-llm-faults-") as tmp:
        if not args.skip_client:
            client_modes(args.timeout_s, args.request_budget_s, Path(tmp))
        if not args.skip_builds:
            builds(args.timeout_s, args.request_budget_s, Path(tmp), args.case)


if __name__ == "__main__":
    main()
