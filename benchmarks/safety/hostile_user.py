"""Issue 45's "Must show": every attempt a hostile new user made, run again from scratch, expected beside observed.

    .venv/bin/python benchmarks/safety/hostile_user.py [--only 1,4] [--work-dir DIR] [--keep] [--json PATH]

Everything happens in a fresh temp dir through the real `earmark` command line (`python -m earmark.cli.main`,
the installed `earmark`), with a local Prefect server of its own (`EARMARK_PREFECT__HOME` under the temp dir,
stopped at the end) and the fake LLM endpoint (`tests/support/fake_server.py --mode ok`) for the builds that write
items. Only attempt 7 calls library code: the QC checks (`stages/filter/qc.run_checks`), which no command runs
on a hand-written item. The attempts:

1. `earmark sql` writes (DROP, DELETE, ATTACH, COPY over the catalog, DuckLake's expire / cleanup, INSTALL,
   EXPORT): exit 2 and one line each, every file under the data root byte-identical (sha256), no new file;
   reads and time travel still work; `earmark maintain expire --dry-run` changes nothing.
2. Input paths (a build run as root without the capabilities that let root read any file, `setpriv
   --bounding-set -dac_override,-dac_read_search`, so a chmod 000 folder is unreadable as for any user): an
   unreadable sub-folder and input folder, a folder link, a link loop, a dangling link; `build` accounts for
   every path ("N paths seen, T taken, Q quarantined").
3. SIGTERM to a build once ingest has written a shard, and to the same command resumed once synthesis has
   written one (LLM requests in flight): the moment is a shard file appearing, not a fixed sleep. Seconds to
   exit, exit code, no retry and no closed-client error; the same command then finishes, and its tables equal
   an uninterrupted build's in every column (benchmarks/pipeline/behaviour_diff.py, floats exact). SIGTERM to
   `earmark view`.
4. Two fresh builds of one input into two data roots: 0 rows differ in any column.
5. `build A` then `build A B`: 0 of A's shards computed again, A's rows unchanged between the versions.
6. A second writer while a helper process holds the dataset's lease: refused in ≤ 5 s, exit 4, one line. The
   view server: half a request is disconnected after its idle timeout (`IDLE_TIMEOUT_S`, the default a user
   gets), and 70 idle connections (`MAX_CONNECTIONS` = 64) do not keep a real request out.
7. QC: "…sounding lik. Recorded at 4K resolution." and "Marta's husband" (transcript "My brother, Marta") are
   rejected, naming the word; true items beside them are kept.

Prints one markdown row per attempt (`| # | attempt | expected | observed | ok |`), each attempt's wall time,
"N of M as expected"; writes the rows as JSON; exits 1 if any attempt is not as expected.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import platform
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # support: not installed
sys.path.insert(0, str(REPO / "benchmarks" / "pipeline"))
import behaviour_diff  # noqa: E402

from support.kill_points import fake_llm, free_port  # noqa: E402

EARMARK = [sys.executable, "-m", "earmark.cli.main"]
DATASET = "ds"
SMALL = ["--until", "analyze", "--experts", "levels"]  # attempts that need no items
CORPUS_FILES = ("S00_00.wav", "SMA_00.flac", "0M0_00.wav", "SM0_00.ogg", "tiny.wav")  # 4 clips + 1 too short
READ_ONLY = "earmark: error: earmark sql is read-only"


@dataclass
class Row:
    n: str
    attempt: str
    expected: str
    observed: str
    ok: bool
    details: dict = field(default_factory=dict)


@dataclass
class Ran:
    """A finished command: exit code, output, and its wall time."""

    rc: int
    out: str
    err: str
    seconds: float

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------------ the user
class User:
    """A new user in an empty folder: the command line, its inputs, and the builds attempts share."""

    def __init__(self, work: Path, llm_url: str):
        self.work = work
        self.llm_url = llm_url
        self.prefect_home = work / "prefect"
        self._builds: dict[str, Path] = {}
        self._corpus: Path | None = None

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # the CLI's own local server
        env.update(
            HF_HUB_OFFLINE="1",
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            DO_NOT_TRACK="1",
            EARMARK_PREFECT__HOME=str(self.prefect_home),
        )
        return env

    def earmark(self, *args: str, prefix: tuple[str, ...] = (), timeout: float = 900) -> Ran:
        t0 = time.perf_counter()
        out = subprocess.run(
            [*prefix, *EARMARK, *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd=self.work,
        )
        return Ran(out.returncode, out.stdout, out.stderr, time.perf_counter() - t0)

    def popen(self, *args: str, output: Any = subprocess.PIPE) -> subprocess.Popen:
        return subprocess.Popen(
            [*EARMARK, *args],
            env=self.env(),
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=self.work,
            start_new_session=True,  # its children can be found (and none should outlive it)
        )

    def sql(self, root: Path, query: str, dataset: str = DATASET) -> Ran:
        return self.earmark("sql", "-d", dataset, "--data-root", str(root), query)

    def corpus(self) -> Path:
        """`earmark corpus --per-domain 1`, of which a few files: speech, music, both, a too-short file."""
        if self._corpus is None:
            full = self.work / "corpus"
            ran = self.earmark("corpus", str(full), "--per-domain", "1")
            assert ran.rc == 0, ran.err[-2000:]
            self._corpus = self.work / "input"
            self._corpus.mkdir()
            for name in CORPUS_FILES:
                shutil.copy(full / name, self._corpus / name)
        return self._corpus

    def build_args(self, root: Path) -> list[str]:
        return [
            "build",
            str(self.corpus()),
            "-d",
            DATASET,
            "--data-root",
            str(root),
            "--llm-endpoint",
            self.llm_url,
            "--llm-model",
            "fake",
            "--llm-schema-mode",
            "json_schema",
        ]

    def full_build(self, name: str) -> Path:
        """A whole build (every stage, fake LLM) of the corpus into its own data root, made once per name."""
        if name not in self._builds:
            root = self.work / name
            ran = self.earmark(*self.build_args(root))
            if ran.rc != 0:
                raise RuntimeError(f"build {name} failed (rc {ran.rc}): {ran.err[-1500:]}")
            self._builds[name] = root
        return self._builds[name]


def files(root: Path) -> dict[str, str]:
    """Every file under `root` with its sha256."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def changes(before: dict[str, str], after: dict[str, str]) -> tuple[int, int, int]:
    """(files changed, new, gone)."""
    changed = sum(1 for k in before.keys() & after.keys() if before[k] != after[k])
    return changed, len(after.keys() - before.keys()), len(before.keys() - after.keys())


def tone(path: Path, freq: float, seconds: float = 2.0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * 16_000)) / 16_000
    sf.write(path, (0.2 * np.sin(2 * np.pi * freq * t)).astype(np.float32), 16_000)


def last_value(ran: Ran) -> str:
    """The single value `earmark sql` printed (header, then one row of one column)."""
    lines = ran.out.splitlines()
    return lines[-1] if ran.rc == 0 and len(lines) >= 2 else f"(rc {ran.rc}: {ran.err.strip()[:120]})"


# --------------------------------------------------------------------------------- 1. earmark sql writes
SQL_WRITES = [
    "DROP TABLE published.captions",
    "DELETE FROM versions",
    "DROP TABLE versions",
    "ATTACH '{work}/x.duckdb' AS x",
    "COPY (SELECT 42) TO '{root}/" + DATASET + "/catalog.sqlite' (FORMAT csv)",
    "CALL ducklake_expire_snapshots('lake', older_than => now())",
    "INSTALL httpfs",
    "SELECT * FROM ducklake_cleanup_old_files('lake', cleanup_all => true)",
    "EXPORT DATABASE '{work}/dump'",
    "SELECT 1; DELETE FROM captions",
]


def attempt_sql(user: User) -> list[Row]:
    root = user.work / "sql-root"
    shutil.copytree(user.full_build("build-a"), root, symlinks=True)
    before = files(root)
    old = {v: last_value(user.sql(root, f"SELECT count(*) FROM {v}")) for v in ("v0001.captions", "captions")}
    rows = []
    for i, template in enumerate(SQL_WRITES, 1):
        query = template.format(work=user.work, root=root)
        ran = user.sql(root, query)
        strays = [p.name for p in user.work.iterdir() if p.name.startswith(("x.duckdb", "dump"))]
        changed, new, gone = changes(before, files(root))
        one = len(ran.err_lines) == 1 and ran.err_lines[0].startswith(READ_ONLY)
        ok = ran.rc == 2 and one and "Traceback" not in ran.err and not (changed or new or gone or strays)
        shown = ran.err_lines[0][len("earmark: error: ") :] if ran.err_lines else "(nothing on stderr)"
        rows.append(
            Row(
                f"1.{i}",
                f'`earmark sql "{template.format(work="<tmp>", root="<data-root>")}"`',
                'exit 2, one stderr line "earmark sql is read-only…", 0 files of the data root changed, none new',
                f'exit {ran.rc}, {len(ran.err_lines)} stderr line(s): "{shown[:150]}"; files changed {changed}, '
                f"new {new}, gone {gone}; stray files {strays or 'none'}",
                ok,
                {"stderr": ran.err, "stdout": ran.out, "seconds": round(ran.seconds, 2)},
            )
        )
    now = {v: last_value(user.sql(root, f"SELECT count(*) FROM {v}")) for v in old}
    changed, new, gone = changes(before, files(root))
    rows.append(
        Row(
            f"1.{len(SQL_WRITES) + 1}",
            "reads and time travel after those: `SELECT count(*) FROM v0001.captions` and `FROM captions`",
            "the counts of before the attempts (> 0), no file changed",
            f"v0001.captions {old['v0001.captions']} → {now['v0001.captions']}, captions {old['captions']} → "
            f"{now['captions']}; files changed {changed}, new {new}, gone {gone}",
            now == old and old["captions"].isdigit() and int(old["captions"]) > 0 and not (changed or new or gone),
        )
    )
    dry = user.earmark("maintain", "expire", "-d", DATASET, "--data-root", str(root), "--older-than", "0", "--dry-run")
    changed, new, gone = changes(before, files(root))
    plan = next((line for line in dry.out.splitlines() if "expire" in line), dry.out.strip()[:150])
    rows.append(
        Row(
            f"1.{len(SQL_WRITES) + 2}",
            "`earmark maintain expire --older-than 0 --dry-run`",
            'exit 0, its plan and "dry run: nothing changed", no file changed',
            f'exit {dry.rc}: "{plan}"; files changed {changed}, new {new}, gone {gone}',
            dry.rc == 0 and "dry run: nothing changed" in dry.out and not (changed or new or gone),
            {"stdout": dry.out, "stderr": dry.err},
        )
    )
    asked = user.earmark("maintain", "expire", "-d", DATASET, "--data-root", str(root), "--older-than", "0")
    changed, new, gone = changes(before, files(root))
    rows.append(
        Row(
            f"1.{len(SQL_WRITES) + 3}",
            "`earmark maintain expire --older-than 0` from a script (stdin not a terminal, no --yes)",
            "refused (exit 2, one line: add --yes), no file changed",
            f'exit {asked.rc}, {len(asked.err_lines)} line(s): "{(asked.err_lines or [""])[0][:150]}"; files '
            f"changed {changed}, new {new}, gone {gone}",
            asked.rc == 2 and len(asked.err_lines) == 1 and "--yes" in asked.err and not (changed or new or gone),
        )
    )
    return rows


# ------------------------------------------------------------------------------------------ 2. input paths
def _without_root_reads(work: Path) -> tuple[str, ...] | None:
    """A command prefix under which this user cannot read a chmod 000 folder: none for a user other than root;
    for root, setpriv without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH; None when neither works here."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = (setpriv, "--bounding-set", "-dac_override,-dac_read_search")
    probe = work / "probe"
    probe.mkdir()
    probe.chmod(0)
    try:
        listed = subprocess.run([*prefix, "ls", str(probe)], capture_output=True).returncode == 0
    finally:
        probe.chmod(0o755)
        probe.rmdir()
    return None if listed else prefix


def _path_corpus(top: Path) -> tuple[Path, Path, list[Path]]:
    """in/ (good.wav, locked/ 000, linked -> ../elsewhere, loop -> ., dangling.wav -> nowhere) and closed/ (000);
    returns the two inputs and the folders to open again afterwards."""
    inputs, closed = top / "in", top / "closed"
    tone(inputs / "good.wav", 330)
    tone(inputs / "locked" / "inside.wav", 440)
    tone(top / "elsewhere" / "far.wav", 550)
    tone(closed / "inside.wav", 660)
    (inputs / "linked").symlink_to(Path("..") / "elsewhere", target_is_directory=True)
    (inputs / "loop").symlink_to(Path("."), target_is_directory=True)
    (inputs / "dangling.wav").symlink_to("nowhere.wav")
    locked = [inputs / "locked", closed]
    for folder in locked:
        folder.chmod(0)
    return inputs, closed, locked


def attempt_paths(user: User) -> list[Row]:
    top = user.work / "paths"
    prefix = _without_root_reads(user.work)
    inputs, closed, locked = _path_corpus(top)
    root = top / "data"
    try:
        if prefix is None:
            miss = "root reads every folder and setpriv could not drop that here: not run"
            return [Row("2", "input paths", "(see the issue)", miss, False)]
        ran = user.earmark(
            "build", str(inputs), str(closed), "-d", DATASET, "--data-root", str(root), *SMALL, prefix=prefix
        )
    finally:
        for folder in locked:
            folder.chmod(0o755)
    quarantine = dict(
        line.split(" | ", 1)
        for line in user.sql(root, "SELECT source_path, reason FROM quarantine ORDER BY 1").out.splitlines()[1:]
    )
    clipped = set(user.sql(root, "SELECT DISTINCT source_path FROM clips ORDER BY 1").out.splitlines()[1:])
    who = f"(run as `{' '.join(prefix)} earmark …`)" if prefix else ""
    details = {"stdout": ran.out[-4000:], "stderr": ran.err[-3000:], "quarantine": quarantine, "clips": sorted(clipped)}

    def row(i: int, what: str, shown: str, expected: str, needle: str | None) -> Row:
        """`needle` None: the path should give a clip; else its quarantine reason should contain it."""
        reason = quarantine.get(shown)
        if reason is not None:
            observed = f"quarantine row: {reason}"
        else:
            observed = "a clip" if shown in clipped else "neither a clip nor a quarantine row"
        ok = shown in clipped if needle is None else reason is not None and needle in reason
        return Row(f"2.{i}", f"{what} (`{shown}`)", expected, observed, ok)

    denied = "a quarantine row: permission denied, with the fix"

    rows = [
        row(1, "an unreadable sub-folder", "in/locked/", denied, "permission denied"),
        row(2, "an unreadable input folder", "closed/", denied, "permission denied"),
        row(3, "a symlinked folder", "in/linked/far.wav", "followed: its file becomes a clip", None),
        row(4, "a symlink loop", "in/loop/", "a quarantine row naming the loop", "loop"),
        row(5, "a dangling link", "in/dangling.wav", "a quarantine row", ""),
    ]
    line = next((x.strip() for x in ran.out.splitlines() if "paths seen" in x), "(no such line)")
    counts = re.search(r"(\d+) paths seen, (\d+) taken .*?, (\d+) quarantined", line)
    expected_counts = ("6", "2", "4")  # good.wav, linked/far.wav taken; locked/, closed/, loop/, dangling.wav
    rows.append(
        Row(
            "2.6",
            f"`earmark build in closed {' '.join(SMALL)}` {who}",
            'exit 0; prints "6 paths seen, 2 taken …, 4 quarantined"',
            f'exit {ran.rc} in {ran.seconds:.1f} s; "{line}"',
            ran.rc == 0 and counts is not None and counts.groups() == expected_counts,
            details,
        )
    )
    return rows


# ------------------------------------------------------------------------------------------------ 3. SIGTERM
def _wait_for(proc: subprocess.Popen, done: Callable[[], bool], timeout_s: float = 600) -> bool:
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.05)
    return False


def _survivors(pgid: int) -> list[str]:
    """Processes left in a command's session after it exited (killed here so nothing lingers)."""
    pids = subprocess.run(["pgrep", "-s", str(pgid)], capture_output=True, text=True).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    return pids


def _compare(old: Path, new: Path) -> tuple[int, str]:
    """behaviour_diff.compare with every column and exact floats: (rows that differ, its printed table)."""
    behaviour_diff.TOLERANCE = 0.0
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        n = behaviour_diff.compare(old / DATASET, new / DATASET, 20, lineage=frozenset())
    return n, printed.getvalue()


def _shard_written(root: Path, table: str) -> Callable[[], bool]:
    """Whether the build under `root` has written a shard of `table` (a file of its own besides `_empty`)."""
    folder = root / DATASET / table
    return lambda: any(not p.name.startswith("_") for p in folder.glob("*.parquet"))


def _sigterm_build(user: User, args: list[str], log: Path, table: str, n: str, moment: str) -> Row:
    """Start the build, SIGTERM it (its process, as `kill PID` does) once it has written a shard of `table`."""
    with log.open("w") as fh:
        proc = user.popen(*args, output=fh)
        written = _wait_for(proc, _shard_written(Path(args[args.index("--data-root") + 1]), table))
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=300)
    stop_s = time.perf_counter() - t0
    orphans = _survivors(proc.pid)
    out = log.read_text(errors="replace")
    bad = [w for w in ("Retry", "client has been closed", "Traceback") if w in out]
    raised = re.search(r"Encountered exception during execution: (.*)", out)
    if raised:
        bad.append(f"the traceback's error: {raised.group(1)[:160]}")
    return Row(
        n,
        f"SIGTERM to `earmark build` (fake LLM) {moment}",
        'exit 143 or 130 within 10 s; no "Retry", no "client has been closed", no traceback; no process left',
        f"{'signalled then' if written else f'no {table} shard appeared (the build ended first)'}: exit "
        f"{proc.returncode} {stop_s:.1f} s after the signal; found in its output: {bad or 'none of those'}; "
        f"processes left: {len(orphans)}",
        written and proc.returncode in (130, 143) and stop_s <= 10 and not bad and not orphans,
        {"output_tail": out[-5000:], "stop_s": round(stop_s, 2)},
    )


def attempt_sigterm(user: User) -> list[Row]:
    root = user.work / "interrupted"
    args = user.build_args(root)
    rows = [
        _sigterm_build(user, args, user.work / "sigterm-1.log", "clips", "3.1", "once ingest has written a shard"),
        _sigterm_build(  # the same command resumed, stopped again where the LLM requests are
            user, args, user.work / "sigterm-2.log", "evidence", "3.2", "resumed, once synthesis has written a shard"
        ),
    ]
    again = user.earmark(*args)
    n, table = _compare(user.full_build("build-a"), root) if again.rc == 0 else (-1, "")
    rows.append(
        Row(
            "3.3",
            "the same command again (resume), then its tables against an uninterrupted build's",
            "exit 0; 0 rows differ (every column, floats exact: behaviour_diff --every-column)",
            f"exit {again.rc} in {again.seconds:.1f} s; "
            + (f"{n} rows differ" if n >= 0 else f"not compared: {again.err.strip()[-200:]}"),
            again.rc == 0 and n == 0,
            {"compare": table, "stdout_tail": again.out[-3000:]},
        )
    )
    rows.append(_sigterm_view(user, user.full_build("build-a")))
    return rows


def _view(user: User, root: Path) -> tuple[subprocess.Popen, int]:
    """`earmark view --port 0` on the dataset, and the port it printed."""
    proc = user.popen("view", "-d", DATASET, "--data-root", str(root), "--port", "0")
    assert proc.stdout is not None
    deadline = time.monotonic() + 300
    seen = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
            if m := re.search(r"http://[^:]+:(\d+)/", line):
                return proc, int(m.group(1))
    proc.kill()
    raise RuntimeError(f"earmark view printed no address: {seen[-1500:]}")


def _sigterm_view(user: User, root: Path) -> Row:
    proc, _ = _view(user, root)
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    stop_s = time.perf_counter() - t0
    orphans = _survivors(proc.pid)
    return Row(
        "3.4",
        "SIGTERM to `earmark view`",
        'a clean stop as after Ctrl-C ("earmark view: stopped"), exit 143, within 5 s, no traceback',
        f'exit {proc.returncode} {stop_s:.1f} s after the signal; "stopped" printed: '
        f"{'yes' if 'earmark view: stopped' in out else 'no'}; traceback: {'yes' if 'Traceback' in out else 'no'}; "
        f"processes left: {len(orphans)}",
        proc.returncode == 143 and stop_s <= 5 and "earmark view: stopped" in out and "Traceback" not in out,
        {"output": out[-3000:]},
    )


# -------------------------------------------------------------------------------------- 4. reproducibility
def attempt_reproducible(user: User) -> list[Row]:
    a, b = user.full_build("build-a"), user.full_build("build-b")
    n, table = _compare(a, b)
    tables = sum(1 for line in table.splitlines() if line.startswith("| ") and not line.startswith("| table"))
    return [
        Row(
            "4",
            "two fresh builds of one input into two data roots (fake LLM, json_schema)",
            "0 rows differ in every column (floats exact)",
            f"{n} rows differ over {tables} tables",
            n == 0,
            {"compare": table},
        )
    ]


# ----------------------------------------------------------------------------------------- 5. build A, A B
def _grow(user: User) -> tuple[Path, Path, Path]:
    top = user.work / "grow"
    a, b = top / "A", top / "B"
    if not a.exists():
        for i, freq in enumerate((220, 330, 440)):
            tone(a / f"speech{i}.wav", freq)
        tone(b / "speech1.wav", 550)  # the name of one of A's files, other audio
    return a, b, top / "data"


def _stats(user: User, root: Path) -> list[dict]:
    out = user.sql(root, "SELECT stats_json FROM runs WHERE status = 'ok' ORDER BY started_at").out
    return [json.loads(line) for line in out.splitlines()[1:] if line.startswith("{")]


def attempt_grow(user: User) -> list[Row]:
    a, b, root = _grow(user)
    common = ["-d", DATASET, "--data-root", str(root), *SMALL, "--files-per-shard", "1"]
    first = user.earmark("build", str(a), *common)
    second = user.earmark("build", str(a), str(b), *common)
    stats = _stats(user, root)
    shards = [s["shards"] for s in stats]
    ingest = [s.get("ingest") for s in shards]
    levels = [s.get("analyze:levels") for s in shards]
    same = {
        t: last_value(user.sql(root, f"SELECT count(*) FROM (FROM v0001.{t} EXCEPT ALL FROM v0002.{t})"))
        for t in ("clips", "levels")
    }
    a_clips = last_value(user.sql(root, "SELECT count(*) FROM v0002.clips WHERE source_path LIKE 'A/%'"))
    want = {"computed": 1, "skipped": 3}
    return [
        Row(
            "5.1",
            "`build A` (3 files) then `build A B` (B: 1 file), 1 file per shard",
            "second build: ingest and levels 1 shard computed (B's), 3 skipped (A's): 0 of A's computed",
            f"exits {first.rc}, {second.rc}; ingest {ingest}, analyze:levels {levels} (first, second)",
            first.rc == 0 and second.rc == 0 and len(shards) == 2 and ingest[1] == want and levels[1] == want,
            {"stats": stats},
        ),
        Row(
            "5.2",
            "A's rows: v0001 (build A) against v0002 (build A B)",
            "every v0001 row of clips and levels is in v0002 unchanged (0 rows of v0001 EXCEPT ALL v0002); 3 A clips",
            f"v0001 rows not in v0002: clips {same['clips']}, levels {same['levels']}; A's clips in v0002: {a_clips}",
            same == {"clips": "0", "levels": "0"} and a_clips == "3",
        ),
    ]


# --------------------------------------------------------------------------------- 6. lease, view server
HOLD = """
import sys, time
from earmark.storage import Catalog
cat = Catalog(sys.argv[1], sys.argv[2])
cat.lease("hostile-holder", "build", stale_after_s=3600, heartbeat_s=60).acquire()
print("held", flush=True)
time.sleep(900)
"""


@contextlib.contextmanager
def _lease_held(user: User, root: Path) -> Iterator[None]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root), DATASET], env=user.env(), stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield
    finally:
        proc.kill()
        proc.wait()


def attempt_lease_and_view(user: User) -> list[Row]:
    a, _, root = _grow(user)
    if not (root / DATASET).exists():
        ran = user.earmark("build", str(a), "-d", DATASET, "--data-root", str(root), *SMALL)
        assert ran.rc == 0, ran.err[-2000:]
    versions = last_value(user.sql(root, "SELECT count(*) FROM versions"))
    with _lease_held(user, root):
        second = user.earmark("build", str(a), "-d", DATASET, "--data-root", str(root), *SMALL)
    after = last_value(user.sql(root, "SELECT count(*) FROM versions"))
    line = second.err_lines[0] if second.err_lines else "(nothing on stderr)"
    rows = [
        Row(
            "6.1",
            "a second `earmark build` while another process holds the dataset's lease",
            "refused in ≤ 5 s, exit 4, one line naming the holder, no traceback, nothing written",
            f'exit {second.rc} after {second.seconds:.1f} s, {len(second.err_lines)} line(s): "{line[:160]}"; '
            f"versions {versions} → {after}",
            second.rc == 4
            and second.seconds <= 5
            and len(second.err_lines) == 1
            and "hostile-holder" in line
            and "Traceback" not in second.err + second.out
            and versions == after,
            {"stderr": second.err, "seconds": round(second.seconds, 2)},
        )
    ]
    rows += _view_connections(user, root)
    return rows


def _http_get(port: int, timeout_s: float = 60) -> tuple[str, float]:
    """The status line of `GET /` (or how the connection ended), and seconds until it came."""
    t0 = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            first = sock.recv(65536)
        status = first.split(b"\r\n", 1)[0].decode(errors="replace") or "closed without an answer"
    except (ConnectionResetError, BrokenPipeError):
        status = "connection reset"
    except TimeoutError:
        status = f"no answer in {timeout_s:.0f} s"
    return status, time.perf_counter() - t0


def _view_connections(user: User, root: Path) -> list[Row]:
    from earmark.cli.view.server import IDLE_TIMEOUT_S, MAX_CONNECTIONS

    proc, port = _view(user, root)
    half: dict[str, object] = {}

    def half_request() -> None:
        t0 = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port), timeout=IDLE_TIMEOUT_S * 4) as sock:
            sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: ".encode())
            try:
                half["got"] = sock.recv(65536)
            except TimeoutError:
                half["got"] = None
        half["s"] = time.perf_counter() - t0

    idle: list[socket.socket] = []
    try:
        sender = threading.Thread(target=half_request, daemon=True)
        sender.start()
        time.sleep(0.5)  # the half request holds its connection first
        idle = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(70)]
        busy_status, busy_s = _http_get(port)
        sender.join(IDLE_TIMEOUT_S * 4 + 10)
        after_status, after_s = _http_get(port)  # the idle ones timed out meanwhile
    finally:
        for sock in idle:
            sock.close()
        proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=30)
        _survivors(proc.pid)
    got, half_s = half.get("got"), float(half.get("s", -1))  # type: ignore[arg-type]
    closed = got == b""
    return [
        Row(
            "6.2",
            f"`earmark view`: a client sends half a request and waits (IDLE_TIMEOUT_S = {IDLE_TIMEOUT_S:g} s)",
            f"disconnected without an answer after ~{IDLE_TIMEOUT_S:g} s",
            f"{'disconnected' if closed else f'not disconnected (got {got!r:.60})'} after {half_s:.1f} s",
            closed and IDLE_TIMEOUT_S - 1 <= half_s <= IDLE_TIMEOUT_S + 10,
        ),
        Row(
            "6.3",
            f"`earmark view`: 70 idle connections open (MAX_CONNECTIONS = {MAX_CONNECTIONS}), then a real GET /",
            "the GET is answered at once (503, or the page), not kept waiting; the page again once the idle close",
            f'"{busy_status}" after {busy_s:.2f} s; after the idle timeout: "{after_status}" in {after_s:.2f} s',
            (" 503 " in busy_status or " 200 " in busy_status) and busy_s <= 5 and " 200 " in after_status,
        ),
    ]


# --------------------------------------------------------------------------------------------------- 7. QC
def attempt_qc(user: User) -> list[Row]:
    from earmark.core.config import FilterSection
    from earmark.schemas.records import Caption, QAPair
    from earmark.stages.filter.qc import ClipContext, kept_ids, run_checks
    from earmark.stages.synthesize import ITEM_TYPES

    lineage = dict(clip_id="c", domain="S0A", prompt_name="p", prompt_sha="s", model="m", confidence=0.9)

    def caption(i: int, text: str) -> Caption:
        return Caption(**lineage, item_id=f"c:long:{i}", kind="long", ref_index=i, text=text)

    def qa(i: int, answer: str) -> QAPair:
        return QAPair(
            **lineage,
            item_id=f"c:qa:{i}",
            qa_index=i,
            category="direct_perception",
            difficulty="basic",
            question="Who is the speaker talking about?",
            answer=answer,
        )

    said = "My brother, Marta"
    items = {
        "captions": [
            caption(0, "A woman speaks, sounding lik. Recorded at 4K resolution."),
            caption(1, "A woman speaks, sounding like she is smiling, over a soft hum."),
        ],
        "qa": [qa(0, "Marta's husband."), qa(1, "The speaker's brother, Marta.")],
    }
    results = run_checks(items, [], FilterSection(), ITEM_TYPES, context={"c": ClipContext(said, 0.0, ())})
    kept = kept_ids(results)
    why: dict[str, list[str]] = {}
    for r in results:
        if not r.keep:
            why.setdefault(r.item_id, []).append(f"{r.check}: {r.reason}")

    def verdict(item_id: str) -> str:
        return "kept" if item_id in kept else "rejected: " + "; ".join(why[item_id])

    return [
        Row(
            "7.1",
            'QC of the caption "A woman speaks, sounding lik. Recorded at 4K resolution." (transcript "My brother, Marta")',
            "rejected, naming 'lik' (cut_word) and '4K resolution' (visual_claim)",
            verdict("c:long:0"),
            "c:long:0" not in kept and "'lik'" in verdict("c:long:0") and "'4K resolution'" in verdict("c:long:0"),
        ),
        Row(
            "7.2",
            'QC of the answer "Marta\'s husband." (transcript "My brother, Marta")',
            "rejected, naming 'husband' (unsaid_person)",
            verdict("c:qa:0"),
            "c:qa:0" not in kept and "'husband'" in verdict("c:qa:0"),
        ),
        Row(
            "7.3",
            'QC of true items beside them ("…sounding like she is smiling…", "The speaker\'s brother, Marta.")',
            "both kept",
            f"caption {verdict('c:long:1')}; answer {verdict('c:qa:1')}",
            {"c:long:1", "c:qa:1"} <= kept,
        ),
    ]


# ------------------------------------------------------------------------------------------------------ main
ATTEMPTS: dict[str, tuple[str, Callable[[User], list[Row]]]] = {
    # run in this order (4 first: its build is the reference 1 and 3 use); printed by number
    "4": ("reproducible builds", attempt_reproducible),
    "1": ("earmark sql writes", attempt_sql),
    "3": ("SIGTERM", attempt_sigterm),
    "2": ("input paths", attempt_paths),
    "5": ("build A, then A B", attempt_grow),
    "6": ("a second writer; the view server's connections", attempt_lease_and_view),
    "7": ("QC of planted items", attempt_qc),
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _machine() -> dict:
    git = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--short"], capture_output=True, text=True)
    return {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "load_avg_at_start": os.getloadavg(),
        "python": platform.python_version(),
        "euid": os.geteuid(),
        "commit": git.stdout.strip(),
        "uncommitted": [line for line in dirty.stdout.splitlines() if not line.startswith("??")],
    }


def run_attempts(user: User, only: set[str]) -> tuple[list[Row], dict[str, float]]:
    rows: list[Row] = []
    seconds: dict[str, float] = {}
    for n, (title, fn) in ATTEMPTS.items():
        if only and n not in only:
            continue
        t0 = time.perf_counter()
        try:
            got = fn(user)
        except Exception as exc:  # noqa: BLE001  a failed attempt is a row, not the end of the others
            got = [Row(n, title, "(see the issue)", f"the attempt itself failed: {type(exc).__name__}: {exc}", False)]
        seconds[n] = round(time.perf_counter() - t0, 1)
        rows += got
        print(f"attempt {n} ({title}): {sum(r.ok for r in got)} of {len(got)} as expected, {seconds[n]} s", flush=True)
    rows.sort(key=lambda r: [int(x) for x in r.n.split(".")])
    return rows, dict(sorted(seconds.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated attempt numbers (default: all seven)")
    ap.add_argument("--work-dir", type=Path, help="default: a fresh temp dir, removed afterwards")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument(
        "--json", type=Path, default=REPO / "benchmarks" / "results" / f"hostile_user_{date.today().isoformat()}.json"
    )
    args = ap.parse_args()
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="earmark-hostile-"))
    work.mkdir(parents=True, exist_ok=True)
    machine = _machine()
    t0 = time.perf_counter()
    try:
        with fake_llm(free_port()) as llm:
            user = User(work, llm)
            try:
                rows, seconds = run_attempts(user, only)
            finally:
                from earmark.flows.local_server import stop

                stop(user.prefect_home)
    finally:
        if not (args.keep or args.work_dir):
            shutil.rmtree(work, ignore_errors=True)
    total = time.perf_counter() - t0
    print("\n| # | attempt | expected | observed | ok |\n|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.n} | {_cell(r.attempt)} | {_cell(r.expected)} | {_cell(r.observed)} | {'yes' if r.ok else '**no**'} |"
        )
    good = sum(r.ok for r in rows)
    print(
        f"\n{good} of {len(rows)} as expected; wall time {total:.0f} s ("
        + ", ".join(f"attempt {n}: {s} s" for n, s in seconds.items())
        + ")"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "script": "benchmarks/safety/hostile_user.py",
                "date": date.today().isoformat(),
                "machine": machine,
                "total_s": round(total, 1),
                "attempt_s": seconds,
                "as_expected": good,
                "attempts": len(rows),
                "rows": [asdict(r) for r in rows],
            },
            indent=1,
            default=str,
        )
        + "\n"
    )
    print(f"results: {args.json}")
    return 0 if good == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
