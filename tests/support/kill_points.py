"""kill -9 a build or an evaluation at chosen points, then resume and compare: the machinery of benchmarks/pipeline/kill_points.py, which interrupt.py, load.py and orchestration_overhead.py reuse, and tests/test_kill_points.py's smoke version."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

DATASET = "kp"
BUILT = "ref0-built"  # the first reference's data root after its build, before its evaluation
_LOG_RUN = re.compile(r"(?:Flow run|Task run) '([^']+)'")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def fake_llm(port: int = 0):
    """`tests/support/fake_server.py --mode ok` in its own session; its URL once it listens. Port 0 (the
    default): the server binds a port the kernel picks and prints its URL, so no other process (a test beside this
    one under pytest-xdist) can take the port between a check and the bind; waited for as long as it lives."""
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("fake_server.py")), "--port", str(port), "--mode", "ok"],
        env={**os.environ},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # "fake LLM server on http://127.0.0.1:PORT/v1 (mode ok); ...", once bound
        match = re.search(r"on (http://\S+/v1) ", first)
        if match is None:
            raise RuntimeError(f"the fake LLM server exited (rc {proc.wait()}) before listening: {first!r}")
        proc.stdout.close()  # it prints nothing more
        yield match.group(1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def prefect_server(home: Path):
    """One real Prefect server on loopback for every command (no ephemeral server per command), waited for as long
    as it takes to start while it lives; on a port found free, tried again on another when that port was taken
    before the server bound it (another process, or a test beside this one under pytest-xdist)."""
    from earmark.cli.commands import wait_healthy

    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    home.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        port = free_port()
        with open(home / "server.log", "ab") as log:  # a file, not a pipe nobody reads (it would fill and block)
            proc = subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        url = f"http://127.0.0.1:{port}/api"
        try:
            wait_healthy(url, proc, timeout_s=None)
            break
        except RuntimeError:  # it exited: its port was taken meanwhile (server.log says so)
            continue
    else:
        log_tail = (home / "server.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the Prefect server exited at start three times:\n{log_tail}")
    try:
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


@contextlib.contextmanager
def local_server(home: Path):
    """The local Prefect server under `home` (earmark.flows.local_server, started when none runs there), held for
    the block as a command holds it: the test session's shared server, instead of one more server's start."""
    from earmark.flows.local_server import attach

    att = attach(home, idle_minutes=10).wait_ready()
    try:
        yield att.url
    finally:
        att.detach()


@dataclass
class Setup:
    inputs: Path
    llm_url: str
    api_url: str
    predictions: Path | None = None

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PREFECT_API_URL": self.api_url,
            "PREFECT_LOGGING_LEVEL": "INFO",
            "EARMARK_LLM__N_THREADS": "1",
            "HF_HUB_OFFLINE": "1",
        }

    def build(self, root: Path) -> list[str]:
        cmd = [sys.executable, "-m", "earmark.cli.main", "build", str(self.inputs), "-d", DATASET]
        cmd += ["--data-root", str(root), "--files-per-shard", "3"]
        return cmd + ["--llm-endpoint", self.llm_url, "--llm-model", "fake-llm"]

    def evaluate(self, root: Path) -> list[str]:
        assert self.predictions is not None
        cmd = [sys.executable, "-m", "earmark.cli.main", "evaluate", "-d", DATASET, "--data-root", str(root)]
        return cmd + ["-p", str(self.predictions), "--subtask", "long", "--model-name", "echo"]


def run(cmd: list[str], env: dict[str, str], log: Path, timeout: float = 1800) -> float:
    t0 = time.perf_counter()
    with log.open("a") as fh:
        rc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout).returncode
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd[2:4])} failed (rc {rc}); see {log}")
    return time.perf_counter() - t0


def run_killed(cmd: list[str], env: dict[str, str], log: Path, after_s: float, on: str | None = None) -> str:
    """Start `cmd`, SIGKILL its process group after `after_s` (counted from the first log line containing
    `on`, when given); returns where it was (the last run named in its log)."""
    start = log.stat().st_size if log.exists() else 0
    with log.open("a") as fh:
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        if on is not None:
            while proc.poll() is None and on not in log.read_bytes()[start:].decode(errors="replace"):
                time.sleep(0.05)
        try:
            proc.wait(timeout=after_s)
            return "finished before the kill"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with log.open("rb") as fh:
        fh.seek(start)
        names = _LOG_RUN.findall(fh.read().decode(errors="replace"))
    return names[-1] if names else "start-up (no run yet)"


# ------------------------------------------------------------------------------------------- checks
def content_hashes(root: Path) -> dict[str, dict[str, str]]:
    """{table: {column: sha of the column's sorted values}} of the published views and the scores."""
    from earmark.schemas import TABLES
    from earmark.storage import Catalog

    cat = Catalog(root, DATASET, create=False)
    tables: dict[str, tuple[list[str], list[tuple]]] = {t: cat.cursor_query(f"FROM {t}") for t in TABLES}
    keys = [k for (k,) in cat.query("SELECT key FROM shards WHERE table_name = 'scores' ORDER BY key")]
    if keys:
        data = cat.read("scores", keys)
        tables["scores"] = (data.column_names, [tuple(r.values()) for r in data.to_pylist()])
    out: dict[str, dict[str, str]] = {}
    for table, (cols, rows) in tables.items():
        out[table] = {
            col: hashlib.sha256(
                json.dumps(sorted(json.dumps(r[j], sort_keys=True, default=str) for r in rows)).encode()
            ).hexdigest()[:16]
            for j, col in enumerate(cols)
        }
    return out


def integrity(root: Path) -> list[str]:
    """What is wrong with a dataset after a resume (empty when nothing is)."""
    from earmark.schemas import TABLES
    from earmark.storage import Catalog

    cat = Catalog(root, DATASET, create=False)
    problems = []
    registered = {(t, k): p for t, k, p in cat.query("SELECT table_name, key, path FROM shards")}
    dupes = cat.query("SELECT table_name, key, count(*) FROM shards GROUP BY ALL HAVING count(*) > 1")
    problems += [f"duplicate registration {t}/{k} ×{n}" for t, k, n in dupes]
    problems += [f"registered shard missing on disk: {p}" for p in registered.values() if not (cat.root / p).exists()]
    for table in TABLES:
        for f in (cat.root / table).glob("*.parquet"):
            if f.name != "_empty.parquet" and (table, f.stem) not in registered:
                problems.append(f"orphaned shard file {f.relative_to(cat.root)}")
        problems += [f"temp file left: {f}" for f in (cat.root / table).glob(".*.tmp")]
    versions = cat.versions()
    if len(versions) != 1:
        problems.append(f"expected one version, found {versions}")
    for v in versions:
        if cat.version_snapshot(v) is None:
            problems.append(f"{v} has no snapshot row")
        views = {n for (n,) in cat.query("SELECT view_name FROM duckdb_views() WHERE schema_name = ?", [v])}
        problems += [f"{v}.{t} view missing" for t in TABLES if t not in views]
    if cat.query("SELECT run_id FROM lease") != [(None,)]:
        problems.append(f"lease still held: {cat.query('SELECT run_id, command FROM lease')}")
    running = cat.query("SELECT run_id, flow FROM runs WHERE status = 'running'")
    problems += [f"run {r} ({f}) left 'running'" for r, f in running]
    return problems


@dataclass
class Point:
    index: int
    kill_at_s: float
    command: str
    where: str
    resume_s: float = 0.0
    tables_equal: bool = False
    differing: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def compare(ref: dict[str, dict[str, str]], got: dict[str, dict[str, str]], volatile: set[str]) -> list[str]:
    diffs = []
    for table in sorted(set(ref) | set(got)):
        for col in sorted(set(ref.get(table, {})) | set(got.get(table, {}))):
            if f"{table}.{col}" in volatile:
                continue
            if ref.get(table, {}).get(col) != got.get(table, {}).get(col):
                diffs.append(f"{table}.{col}")
    return diffs


def reference(setup: Setup, work: Path, runs: int = 2) -> tuple[Path, list[float], dict[str, dict[str, str]], set[str]]:
    """`runs` uninterrupted runs: the expected hashes, the command times, and the columns that vary by run (none
    can be found with one run: a column that varies then shows as a difference at the kill points). The first
    run's data root is also kept as it was between its build and its evaluation (`BUILT`), for the points that
    kill an evaluation."""
    roots, times, hashes = [], [], []
    for i in range(runs):
        root = work / f"ref{i}"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        if i == 1:  # the same LLM answers as the first (a real model's sampling need not repeat)
            shutil.copytree(work / "ref0" / ".llm_cache", root / ".llm_cache")
        t_build = run(setup.build(root), setup.env(), root / "log.txt")
        if i == 0:
            setup.predictions = write_predictions(root, work / "predictions.jsonl")
            shutil.rmtree(work / BUILT, ignore_errors=True)
            shutil.copytree(root, work / BUILT)
        t_eval = run(setup.evaluate(root), setup.env(), root / "log.txt")
        roots.append(root)
        times.append([t_build, t_eval])
        hashes.append(content_hashes(root))
    volatile = {
        f"{t}.{c}"
        for other in hashes[1:]
        for t in hashes[0]
        for c in hashes[0][t]
        if other.get(t, {}).get(c) != hashes[0][t][c]
    }
    return roots[0], [min(col) for col in zip(*times)], hashes[0], volatile


def write_predictions(root: Path, path: Path) -> Path:
    """The long captions of the first reference as a model's answers (an evaluation to kill and resume)."""
    from earmark.storage import Catalog

    if path.exists():
        return path
    cat = Catalog(root, DATASET, create=False)
    rows = cat.query("SELECT clip_id, text FROM captions WHERE kind = 'long' AND ref_index = 0 ORDER BY clip_id")
    path.write_text("".join(json.dumps({c: t}) + "\n" for c, t in rows))
    return path


def kill_point(
    setup: Setup, work: Path, ref_root: Path, i: int, at_s: float, t_build: float, on: str | None = None
) -> Point:
    root = work / f"point{i:02d}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    shutil.copytree(ref_root / ".llm_cache", root / ".llm_cache")
    build, evaluate = setup.build(root), setup.evaluate(root)
    log = root / "log.txt"
    if on is not None:  # at_s after the build's log first shows `on`
        where = run_killed(build, setup.env(), log, at_s, on)
        point = Point(i, round(at_s, 1), f"build, {at_s:.1f} s after `{on}`", where)
        t0 = time.perf_counter()
        run(build, setup.env(), log)
        run(evaluate, setup.env(), log)
    elif at_s < t_build:
        where = run_killed(build, setup.env(), log, at_s)
        point = Point(i, round(at_s, 1), "build", where)
        t0 = time.perf_counter()
        run(build, setup.env(), log)
        run(evaluate, setup.env(), log)
    else:  # the build is the reference's (a copied data root opens: its lake's paths are relative)
        shutil.rmtree(root)
        shutil.copytree(work / BUILT, root)
        where = run_killed(evaluate, setup.env(), log, at_s - t_build)
        point = Point(i, round(at_s, 1), "evaluate", where)
        t0 = time.perf_counter()
        run(evaluate, setup.env(), log)
    point.resume_s = round(time.perf_counter() - t0, 1)
    point.problems = integrity(root)
    return point


def run_points(
    work: Path,
    n_points: int,
    seed: int,
    per_domain: int,
    fractions: list[float] | None = None,
    events: list[str] | None = None,
    event_delay_s: float = 3.0,
    references: int = 2,
    domains: set[str] | None = None,
    server_home: Path | None = None,
) -> tuple[list[Point], dict]:
    """`fractions`: kill at these fractions of the build + evaluate timeline instead of `n_points` random ones;
    `events`: kill a build 0–`event_delay_s` s (random) after its log first shows each of these strings;
    `references`: uninterrupted runs to compare (two find the columns that vary by run, reported as `volatile`);
    `domains`: build only the generated clips of these MECAT domains (all eight when None); `server_home`: the
    commands use the local Prefect server of that folder (a test session's) instead of a server of their own."""
    from earmark.corpus import generate_corpus

    work.mkdir(parents=True, exist_ok=True)
    inputs = work / "input"
    if not inputs.exists():
        items = generate_corpus(work / "corpus", per_domain=per_domain, seed=seed, duration_s=4.0, hostile=False)
        inputs.mkdir()
        for item in items:
            if domains is None or item.domain in domains:
                shutil.copy(item.path, inputs / item.path.name)
    server = local_server(server_home) if server_home is not None else prefect_server(work / "prefect-home")
    with server as api, fake_llm() as llm:
        setup = Setup(inputs, llm, api)
        ref_root, (t_build, t_eval), ref_hashes, volatile = reference(setup, work, references)
        rng = random.Random(seed)
        total = t_build + t_eval
        times = [f * total for f in fractions] if fractions else [rng.uniform(0.5, total) for _ in range(n_points)]
        points = []
        plan: list[tuple[float, str | None]] = [(at, None) for at in times]
        plan += [(rng.uniform(0.0, event_delay_s), event) for event in events or []]
        for i, (at, on) in enumerate(plan):
            point = kill_point(setup, work, ref_root, i, at, t_build, on)
            diffs = compare(ref_hashes, content_hashes(work / f"point{i:02d}"), volatile)
            point.tables_equal, point.differing = not diffs, diffs
            points.append(point)
            print(
                f"point {i:2d}: kill at {point.kill_at_s:6.1f} s ({point.command}: {point.where}); resumed in "
                f"{point.resume_s} s; tables {'equal' if point.tables_equal else 'DIFFER ' + str(diffs)}; "
                f"problems {point.problems or 'none'}",
                flush=True,
            )
    meta = {"t_build_s": round(t_build, 1), "t_evaluate_s": round(t_eval, 1), "volatile": sorted(volatile)}
    meta["tables"] = sorted(ref_hashes)
    return points, meta
