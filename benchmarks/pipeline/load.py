"""Load: thousands of short clips through ingest, analyze (embedded experts) and synthesis against a fast fake
LLM, measuring earmark itself — peak memory, throughput per stage over time, catalog size, no-op re-run.

    .venv/bin/python benchmarks/pipeline/load.py --clips 5000 [--until publish] [--analyze-clips N] [--llm-concurrency K]
        [--work-dir DIR]

Generates `--clips` 2 s clips (seeded noise, tones and pulses; 16 kHz PCM), then runs the real `earmark
build` command line — 64 files per shard, the embedded profile, the threads runner — reporting to one Prefect
server on loopback, with the LLM replaced by the fault-injecting server in its well-behaved mode
(`tests/support/fake_server.py --mode ok`: instant schema-valid replies), so the figures are earmark's, not a
model's. `--analyze-clips N` runs analyze and later stages on the first N clips only (a second dataset),
when the whole set cannot be analysed in one sitting on this machine: say so where the figures are quoted.

Measured: wall time per stage (from the build's own timings), peak RSS of the command and all its children
(sampled every 0.5 s), shards per stage finished per minute over the run (from the catalog's registration
times: a slowdown shows as falling rates), the catalog's size (catalog database, lake data, shard files), and
the wall time of an immediate re-run of the same command (everything already in the catalog). Prints markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # support: not installed
from support.kill_points import fake_llm, free_port, prefect_server  # noqa: E402

SR = 16_000


def make_clips(out: Path, n: int, seconds: float = 2.0, seed: int = 0) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    t = np.arange(int(SR * seconds)) / SR
    for i in range(n):
        path = out / f"clip-{i:05d}.wav"
        if path.exists():
            continue
        x = 0.02 * rng.standard_normal(t.size)
        for _ in range(rng.integers(1, 4)):
            f0 = rng.uniform(100, 2000)
            on = (t > rng.uniform(0, seconds - 0.5)) & (t < rng.uniform(0.5, seconds))
            x += 0.1 * np.sin(2 * np.pi * f0 * t) * on
        x *= 10 ** (rng.uniform(-20, 0) / 20)
        sf.write(path, np.clip(x, -1, 1).astype(np.float32), SR, subtype="PCM_16")
    return out


class PeakRSS:
    """Peak resident memory of a process and its descendants, sampled."""

    def __init__(self, pid: int, every_s: float = 0.5):
        import psutil

        self.proc, self.every_s, self.peak = psutil.Process(pid), every_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.wait(self.every_s):
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
                total = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)
            except psutil.Error:
                return

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def run_build(cmd: list[str], env: dict[str, str], log: Path) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    with log.open("a") as fh:
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
        rss = PeakRSS(proc.pid)
        rc = proc.wait()
    return time.perf_counter() - t0, rss.stop(), rc


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def rates(root: Path, dataset: str) -> dict[str, list[int]]:
    """Shards registered per minute since the first registration, per stage."""
    from earmark.storage import Catalog

    cat = Catalog(root, dataset, create=False)
    rows = cat.query(
        "SELECT stage, created_at FROM (SELECT DISTINCT key, stage, min(created_at) AS created_at FROM shards "
        "GROUP BY key, stage) ORDER BY created_at"
    )
    if not rows:
        return {}
    t0 = rows[0][1]
    out: dict[str, list[int]] = {}
    for stage, at in rows:
        minute = int((at - t0).total_seconds() // 60)
        series = out.setdefault(stage.split(":")[0] if stage.startswith("analyze") else stage, [])
        series.extend([0] * (minute + 1 - len(series)))
        series[minute] += 1
    return out


def measure(name: str, inputs: Path, root: Path, until: str, env: dict[str, str], llm_url: str) -> dict:
    cmd = [sys.executable, "-m", "earmark.cli.main", "build", str(inputs), "-d", name, "--data-root", str(root)]
    cmd += ["--until", until, "--llm-endpoint", llm_url, "--llm-model", "fake-llm"]
    root.mkdir(parents=True, exist_ok=True)
    log = root / f"{name}.log"
    wall, peak, rc = run_build(cmd, env, log)
    if rc != 0:
        raise RuntimeError(f"build {name} failed (rc {rc}); see {log}")
    noop_wall, noop_peak, rc = run_build(cmd, env, log)
    if rc != 0:
        raise RuntimeError(f"re-run of {name} failed (rc {rc}); see {log}")
    from earmark.storage import Catalog

    cat = Catalog(root, name, create=False)
    # the measured run: the second-to-last ok run (the last is the no-op re-run)
    ok = cat.query("SELECT stats_json FROM runs WHERE status = 'ok' ORDER BY started_at DESC LIMIT 2")
    stats = json.loads(ok[-1][0])
    clips = cat.query("SELECT count(*) FROM clips")[0][0]
    ds = root / name
    return {
        "dataset": name,
        "until": until,
        "clips": clips,
        "wall_s": round(wall, 1),
        "timings_s": stats["timings_s"],
        "peak_rss_mb": round(peak / 2**20),
        "noop_rerun_s": round(noop_wall, 1),
        "noop_peak_rss_mb": round(noop_peak / 2**20),
        "catalog_db_mb": round(sum(f.stat().st_size for f in ds.glob("catalog.sqlite*")) / 2**20, 1),
        "lake_mb": round(dir_size(ds / "lake") / 2**20, 1),
        "all_mb": round(dir_size(ds) / 2**20, 1),
        "shards_per_minute": rates(root, name),
        "llm": stats.get("llm"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clips", type=int, default=5000)
    ap.add_argument("--analyze-clips", type=int, help="analyze + later stages on the first N clips only")
    ap.add_argument("--until", default="publish", choices=["ingest", "analyze", "synthesize", "filter", "publish"])
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/earmark-load"))
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--llm-concurrency",
        type=int,
        default=1,
        help="[llm] max_concurrency for the build (requests in flight to the fake server; default 1)",
    )
    args = ap.parse_args()
    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    inputs = make_clips(work / "clips", args.clips)
    print(f"{args.clips} clips of 2 s in {inputs} ({time.perf_counter() - t0:.0f} s)", flush=True)
    results = []
    with prefect_server(work / "prefect-home") as api, fake_llm(free_port()) as llm:
        env = {**os.environ, "PREFECT_API_URL": api, "PREFECT_LOGGING_LEVEL": "INFO"}
        env["EARMARK_LLM__MAX_CONCURRENCY"] = str(args.llm_concurrency)
        root = work / "data"
        if args.analyze_clips:
            results.append(measure(f"load{args.clips}", inputs, root, "ingest", env, llm))
            print(json.dumps(results[-1]), flush=True)
            subset = work / f"clips-{args.analyze_clips}"
            subset.mkdir(exist_ok=True)
            for f in sorted(inputs.glob("*.wav"))[: args.analyze_clips]:
                if not (subset / f.name).exists():
                    (subset / f.name).symlink_to(f)
            results.append(measure(f"load{args.analyze_clips}", subset, root, args.until, env, llm))
        else:
            results.append(measure(f"load{args.clips}", inputs, root, args.until, env, llm))
        print(json.dumps(results[-1]), flush=True)
    print(f"\nmachine: {platform.node()}, {os.cpu_count()} cores; python {platform.python_version()}\n")
    print(
        "| dataset | until | clips | wall s | stage s | peak RSS MB | no-op re-run s | catalog db MB | lake MB | all MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        stages = ", ".join(f"{k} {v}" for k, v in r["timings_s"].items())
        print(
            f"| {r['dataset']} | {r['until']} | {r['clips']} | {r['wall_s']} | {stages} | {r['peak_rss_mb']} | "
            f"{r['noop_rerun_s']} | {r['catalog_db_mb']} | {r['lake_mb']} | {r['all_mb']} |"
        )
    print("\nshards registered per minute, per stage (a slowdown shows as falling rates):")
    for r in results:
        for stage, series in r["shards_per_minute"].items():
            print(f"- {r['dataset']} {stage}: {series}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
