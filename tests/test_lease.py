"""One writer per dataset (the lease row in the catalog) and interrupts that stop a build within seconds.

Real processes: racing writers are separate Python processes on one SQLite catalog; the refused and the
interrupted builds are the real `earmark` command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from earmark.core.config import load_config
from earmark.schemas import to_table
from earmark.schemas.records import Caption
from earmark.storage import Catalog, ShardMeta
from earmark.storage.lease import DatasetBusyError, held, released, utc_now, write_lease
from support.records import tone_clips


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "EARMARK_LLM__N_THREADS": "1", **extra}


def _set_holder(cat: Catalog, run_id: str, host: str, pid: int, beat_age_s: float) -> None:
    beat = utc_now() - timedelta(seconds=beat_age_s)
    cat._transaction(
        lambda con: con.execute(
            "UPDATE main.lease SET run_id = ?, command = 'build', host = ?, pid = ?, acquired_at = ?, "
            "heartbeat_at = ? WHERE id = 1",
            [run_id, host, pid, beat, beat],
        )
    )


def test_a_second_writer_is_refused_naming_the_holder_then_takes_over_when_it_is_gone(tmp_path):
    cat = Catalog(tmp_path, "ds")
    cat.start_run("build", {}, run_id="run-a")
    _set_holder(cat, "run-a", "node-7", 4242, beat_age_s=1.0)  # a live holder on another node
    with pytest.raises(DatasetBusyError) as err:
        cat.lease("run-b", "build", stale_after_s=30, heartbeat_s=5).acquire()
    assert "run run-a" in str(err.value) and "host node-7" in str(err.value) and "pid 4242" in str(err.value)
    assert "lease_stale_s" in str(err.value)

    _set_holder(cat, "run-a", "node-7", 4242, beat_age_s=31.0)  # node-7 went silent: stale
    lease = cat.lease("run-b", "build", stale_after_s=30, heartbeat_s=5).acquire()
    try:
        assert lease.took_over is not None and lease.took_over.run_id == "run-a"
        assert cat.query("SELECT status FROM runs WHERE run_id = 'run-a'") == [("interrupted",)]
        assert cat.query("SELECT run_id FROM lease") == [("run-b",)]
    finally:
        lease.release()
    assert cat.query("SELECT run_id FROM lease") == [(None,)]
    # the lease row lives inline in the catalog database: no Parquet file per heartbeat
    assert not [p for p in (tmp_path / "ds" / "lake").rglob("*.parquet") if "lease" in str(p)]


def test_a_holder_killed_on_this_host_is_recognised_at_once(tmp_path):
    Catalog(tmp_path, "ds")
    code = textwrap.dedent(f"""
        import sys, time
        from earmark.storage import Catalog
        cat = Catalog({str(tmp_path)!r}, "ds")
        cat.lease("doomed", "build", stale_after_s=3600, heartbeat_s=60).acquire()
        print("held", flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        cat = Catalog(tmp_path, "ds")
        with pytest.raises(DatasetBusyError, match="run doomed"):
            cat.lease("next", "build", stale_after_s=3600, heartbeat_s=60).acquire()
        proc.kill()  # kill -9: no release, no last heartbeat
        proc.wait()
        lease = cat.lease("next", "build", stale_after_s=3600, heartbeat_s=60).acquire()  # no hour-long wait
        assert lease.took_over is not None and lease.took_over.run_id == "doomed"
        lease.release()
    finally:
        proc.kill()


def test_racing_processes_exactly_one_takes_the_lease(tmp_path):
    """Four processes try at once; the winner holds the lease until every other one has tried (files, not a
    wall-clock schedule: a racer that started late on a busy machine once found the lease already released)."""
    Catalog(tmp_path, "ds")
    sync = tmp_path / "sync"
    sync.mkdir()
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from earmark.storage import Catalog
        from earmark.storage.lease import DatasetBusyError
        sync, me = Path({str(sync)!r}), sys.argv[1]
        cat = Catalog({str(tmp_path)!r}, "ds")
        (sync / f"ready-{{me}}").touch()
        while not (sync / "go").exists():
            time.sleep(0.01)
        try:
            lease = cat.lease(me, "build", stale_after_s=60, heartbeat_s=1).acquire()
        except DatasetBusyError as exc:
            print("busy", exc, flush=True)
            (sync / f"tried-{{me}}").touch()
        else:
            print("took", flush=True)
            (sync / f"tried-{{me}}").touch()
            while len(list(sync.glob("tried-*"))) < 4:
                time.sleep(0.01)
            lease.release()
    """)
    procs = [
        subprocess.Popen([sys.executable, "-c", code, f"racer-{i}"], env=_env(), stdout=subprocess.PIPE, text=True)
        for i in range(4)
    ]
    while len(list(sync.glob("ready-*"))) < 4 and all(p.poll() is None for p in procs):
        time.sleep(0.01)
    (sync / "go").touch()
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    firsts = [o.splitlines()[0] if o.strip() else "" for o in outs]
    assert firsts.count("took") == 1, "\n---\n".join(outs)
    assert all("is being written by run racer-" in o for o, f in zip(outs, firsts) if f != "took"), outs


def test_heartbeats_keep_a_long_hold_and_a_waiting_writer_gets_it_after_release(tmp_path):
    cat = Catalog(tmp_path, "ds")
    stale = 4.0
    first = cat.lease("long", "build", stale_after_s=stale, heartbeat_s=0.5).acquire()
    # held longer than stale_after, and a heartbeat fresh now: only the heartbeats keep it. Observed rather than
    # slept: on a busy machine a fixed sleep raced the heartbeat thread (a late beat let the lease go stale).
    deadline = time.monotonic() + 300  # only if the heartbeats stopped altogether
    while time.monotonic() < deadline:
        ((acquired, beat),) = cat.query("SELECT acquired_at, heartbeat_at FROM main.lease")
        if (beat - acquired).total_seconds() > stale and (utc_now() - beat).total_seconds() < 1.0:
            break
        time.sleep(0.1)
    with pytest.raises(DatasetBusyError, match="run long"):
        cat.lease("impatient", "rerun", stale_after_s=stale, heartbeat_s=0.5).acquire()
    threading.Timer(1.0, first.release).start()
    second = cat.lease("patient", "rerun", stale_after_s=2.0, heartbeat_s=0.5, wait_s=30).acquire()
    assert second.took_over is None  # released, not taken over
    assert held("ds") is second
    second.release()


def test_nested_steps_reenter_and_a_paused_review_lets_others_write(tmp_path):
    cat = Catalog(tmp_path, "ds")
    outer = cat.lease("build-1", "build", stale_after_s=60, heartbeat_s=5).acquire()
    with cat.lease(None, "publish", stale_after_s=60, heartbeat_s=5):  # the publish inside the build
        assert cat.query("SELECT run_id FROM lease") == [("build-1",)]
    assert cat.query("SELECT run_id FROM lease") == [("build-1",)]  # still the build's
    with released(held("ds")):  # the review waits for a person: someone else may write meanwhile
        assert cat.query("SELECT run_id FROM lease") == [(None,)]
    assert cat.query("SELECT run_id FROM lease") == [("build-1",)]  # and the build has it back
    outer.release()


def test_a_flow_inside_a_command_holding_the_lease_reenters_it_under_the_commands_run_id(tmp_path):
    """The command takes the lease before Prefect starts; the flow's envelope (a fresh run id of its own) finds
    this process holding it and writes under the command's run id instead of being refused by its own command."""
    cfg = load_config(None, {"data_root": str(tmp_path), "dataset": "ds"})
    cat = Catalog(tmp_path, "ds")
    with write_lease(cfg, cat, "cli-run", "build"):
        inner = write_lease(cfg, cat, "flow-run", "build").acquire()  # what run_envelope does
        assert inner.run_id == "cli-run"
        inner.release()  # the flow ends: the command's lease stays
        assert cat.query("SELECT run_id FROM lease") == [("cli-run",)] and held("ds") is not None
    assert cat.query("SELECT run_id FROM lease") == [(None,)] and held("ds") is None


# ---------------------------------------------------------------------------------- real commands


def _published(data_root: Path, dataset: str) -> Catalog:
    """A dataset with one published version (one caption), enough for rerun's and review import's checks."""
    cat = Catalog(data_root, dataset)
    row = Caption(
        clip_id="c1",
        domain="S00",
        prompt_name="p",
        prompt_sha="s",
        model="m",
        confidence=0.9,
        item_id="c1:short:0",
        kind="short",
        ref_index=0,
        text="a caption",
    )
    cat.write_shard(
        "k1", {"captions": to_table(Caption, [row])}, ShardMeta(stage="t", stage_version="1", inputs=[]), None
    )
    assert cat.publish({"captions": ["k1"]}, None) == ("v0001", True)
    return cat


def _legacy(root: Path) -> None:
    """An empty pre-DuckLake catalog file: what `earmark migrate` moves."""
    con = duckdb.connect(str(root / "catalog.duckdb"))
    con.execute(
        "CREATE TABLE versions (version VARCHAR, created_at TIMESTAMP, run_id VARCHAR, parent VARCHAR, note VARCHAR,"
        " stats_json VARCHAR); CREATE TABLE version_shards (version VARCHAR, key VARCHAR, table_name VARCHAR)"
    )
    con.close()


WRITERS = {  # a writing command's arguments after `earmark`, given the inputs folder and a sheet
    "build": lambda inputs, sheet: ["build", str(inputs), "--until", "analyze"],
    "demo": lambda inputs, sheet: ["demo"],
    "rerun": lambda inputs, sheet: ["rerun", "--stage", "filter"],
    "review import": lambda inputs, sheet: ["review", "import", str(sheet)],
    "migrate": lambda inputs, sheet: ["migrate"],
}


@pytest.mark.parametrize("command", list(WRITERS))
def test_a_writing_command_on_a_busy_dataset_is_refused_with_one_line_before_prefect_starts(tmp_path, command):
    """The lease is taken by the command before it starts Prefect: refused with one line naming the holder, no
    traceback (a refusal inside the flow came after the server's start-up, behind Prefect's logged traceback),
    no Prefect server started, nothing written (a demo's corpus included)."""
    data = tmp_path / "data"
    cat = _published(data, "held")
    _set_holder(cat, "run-a", "node-7", 4242, beat_age_s=1.0)  # alive elsewhere: heartbeat 1 s old
    if command == "migrate":
        _legacy(data / "held")
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("item_table,item_id,decision,new_text\n")
    home = tmp_path / "prefect"  # this command's own local Prefect server home: started or not
    args = [*WRITERS[command](tone_clips(tmp_path / "in"), sheet), "-d", "held", "--data-root", str(data)]
    env = _env(EARMARK_PREFECT__HOME=str(home), PREFECT_LOGGING_LEVEL="INFO")
    env.pop("PREFECT_API_URL", None)  # the local server, whose start would show under `home`
    try:
        out = subprocess.run(
            [sys.executable, "-m", "earmark.cli.main", *args], env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        from earmark.flows.local_server import stop

        stop(home)  # a server the command should not have started
    assert out.returncode == 4, out.stderr[-3000:]
    assert out.stderr.splitlines() == [out.stderr.strip()], out.stderr[-3000:]  # one line, no traceback
    assert out.stderr.startswith("earmark: error: dataset 'held' is being written by run run-a (`earmark build`, ")
    assert "host node-7, pid 4242" in out.stderr and "wait for it to finish" in out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert not (home / "server.json").exists() and not (home / "server.log").exists()
    assert not (data / "held-input").exists()  # demo: no corpus generated under the busy dataset
    assert cat.query("SELECT run_id FROM lease") == [("run-a",)] and cat.versions() == ["v0001"]
    assert cat.query("SELECT count(*) FROM runs") == [(0,)]


def test_a_second_build_of_a_dataset_being_built_is_refused_and_nothing_is_duplicated(tmp_path):
    inputs = tone_clips(tmp_path / "in")
    cmd = [sys.executable, "-m", "earmark.cli.main", "build", str(inputs), "-d", "busy"]
    cmd += ["--data-root", str(tmp_path / "data"), "--until", "analyze"]
    first = subprocess.Popen(
        cmd, env=_env(PREFECT_LOGGING_LEVEL="INFO"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines = []
    for line in first.stdout:  # the first build holds the lease once its ingest runs
        lines.append(line)
        if "Task run 'ingest/" in line:
            break
    # Paused (alive, its heartbeat well within lease_stale_s), the first build cannot finish and release the
    # lease while the second one starts up: without this the test raced the second's import time.
    os.kill(first.pid, signal.SIGSTOP)
    try:
        second = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    rest, _ = first.communicate(timeout=600)
    assert first.returncode == 0, ("".join(lines) + rest)[-3000:]
    assert second.returncode == 4, second.stderr[-2000:]
    assert "dataset 'busy' is being written by run " in second.stderr and "`earmark build`" in second.stderr
    assert "Traceback" not in second.stderr
    cat = Catalog(tmp_path / "data", "busy")
    assert cat.query("SELECT count(*) FROM runs") == [(1,)] and cat.versions() == ["v0001"]
    # the lease the first build's command took is the one its flow wrote under (re-entered, not taken twice),
    # its heartbeats kept it through the build, and it is free again
    ((run_id,),) = cat.query("SELECT run_id FROM runs")
    assert f"is being written by run {run_id} " in second.stderr
    assert cat.query("SELECT status FROM runs") == [("ok",)] and cat.query("SELECT run_id FROM lease") == [(None,)]
    assert cat.query("SELECT count(*) FROM (SELECT key, table_name FROM shards GROUP BY ALL HAVING count(*) > 1)") == [
        (0,)
    ]


@pytest.mark.parametrize("sig", [signal.SIGINT])
def test_ctrl_c_stops_a_build_leaving_a_state_the_same_command_resumes(tmp_path, sig):
    inputs = tone_clips(tmp_path / "in", n=3)
    cmd = [sys.executable, "-m", "earmark.cli.main", "build", str(inputs), "-d", "stop"]
    cmd += ["--data-root", str(tmp_path / "data"), "--until", "analyze", "--files-per-shard", "1"]
    proc = subprocess.Popen(
        cmd,
        env=_env(PREFECT_LOGGING_LEVEL="INFO"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        for line in proc.stdout:  # interrupt once the analyze stage is under way
            lines.append(line)
            if "analyze/" in line and "computed" in line:
                break
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = "".join(lines) + rest
    assert proc.returncode == 130, text[-3000:]
    assert "to resume, run the same command again: earmark build" in text
    # no orphans left running; an exited child the build did not wait for is a zombie until PID 1 reaps it,
    # which some machines' init does only after a while (seen: firecracker's process_api)
    ps = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-s", str(proc.pid)], capture_output=True, text=True)
    left = [line for line in ps.stdout.splitlines() if line.split()[1][0] != "Z"]
    assert left == [], left

    again = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "skipped (already in catalog)" in again.stdout and "version v0001" in again.stdout
    cat = Catalog(tmp_path / "data", "stop")
    statuses = sorted(s for (s,) in cat.query("SELECT status FROM runs"))
    assert statuses in (["interrupted", "ok"], ["failed", "ok"]), statuses
