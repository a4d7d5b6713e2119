"""kill -9 at random points of a small build + evaluate, then resume: is every result identical?

    .venv/bin/python benchmarks/pipeline/kill_points.py [--points 20] [--seed 0] [--per-domain 1] [--work-dir DIR]
        [--event "Task run 'evidence/" ...] [--event-delay 3]   # also kill 0-3 s after the log shows this

A small corpus (the demo generator, `--per-domain` clips of each MECAT domain, 4 s each, 3 files per shard)
is built with the real `earmark` command line against the fault-injecting OpenAI-compatible server in its
well-behaved mode (`tests/support/fake_server.py --mode ok`: schema-valid replies, so this measures
earmark's crash safety, not a model), then evaluated (`earmark evaluate`, similarity of the long captions).
Two uninterrupted reference runs fix the expected content and which columns legitimately differ between runs
(run ids, timestamps). Then, for each point, a fresh data root — sharing the reference's LLM request cache —
runs the same commands, is sent SIGKILL (the whole process group) at a random instant of the build +
evaluate timeline, and the same commands are run again to completion. Checked after each resume:

- every table's content hash (published views of every table, and the evaluation's `scores`) equals the
  reference's, volatile columns excepted;
- no orphaned shards (a Parquet shard file on disk that the catalog does not register, or a registered
  shard whose file is missing) and no duplicate registrations;
- every version complete (one version; its snapshot row and a `vNNNN.<table>` view for every table), the
  lease free, and the killed run's row not left `running`.

Where the kill landed is read from the command's Prefect log (the last flow or task run named). All
commands report to one Prefect server started for the benchmark. Prints a markdown table; `--json FILE`
writes the raw results. `tests/test_kill_points.py` runs the same code at 2 points.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # support: not installed
from support.kill_points import run_points  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-domain", type=int, default=1)
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/earmark-kill-points"))
    ap.add_argument(
        "--event",
        action="append",
        default=[],
        help='also kill a build 0-3 s after its log first shows this text, e.g. "Task run \'synthesize/"',
    )
    ap.add_argument("--event-delay", type=float, default=3.0, help="kill 0 to this many s after an --event")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    t0 = time.perf_counter()
    points, meta = run_points(
        args.work_dir, args.points, args.seed, args.per_domain, events=args.event, event_delay_s=args.event_delay
    )
    ok = [p for p in points if p.tables_equal and not p.problems]
    print(
        f"\nreference: build {meta['t_build_s']} s, evaluate {meta['t_evaluate_s']} s; volatile columns "
        f"(differ between two uninterrupted runs, not compared): {', '.join(meta['volatile']) or 'none'}\n"
    )
    print("| # | killed at | command | where (last run named in its log) | resume s | tables equal | problems |")
    print("|---|---|---|---|---|---|---|")
    for p in points:
        problems = "; ".join(p.problems) or "none"
        print(
            f"| {p.index} | {p.kill_at_s} s | {p.command} | `{p.where}` | {p.resume_s} | "
            f"{'yes' if p.tables_equal else 'NO: ' + ', '.join(p.differing)} | {problems} |"
        )
    print(f"\n{len(ok)}/{len(points)} points resumed to identical, complete results ({time.perf_counter() - t0:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "points": [asdict(p) for p in points]}, indent=1))
    return 0 if len(ok) == len(points) else 1


if __name__ == "__main__":
    sys.exit(main())
