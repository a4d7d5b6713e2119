"""Issue 14: bad input is quarantined with a reason a user can act on, never a crash; paths stay inside their
roots; an API key never reaches a file, the catalog or Prefect.

The corpus (support.bad_input) is generated in tmp_path: empty, truncated and corrupt files, NaN/inf
samples, a 0 Hz header, text and random bytes named as audio, symlink loops, a link out of the allowed roots,
a FIFO, a socket, a file over max_file_s — next to good but unusual files (8 kHz, 192 kHz, 8 channels,
unicode / spaces / quotes in names).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import soundfile as sf

from earmark.core.config import IngestSection, load_config
from earmark.stages import ingest
from earmark.storage import Catalog
from earmark.storage.paths import inside, plain_name, version_name
from support.bad_input import MAX_FILE_S, write_bad_input_corpus

RAW_PREFIXES = ("Error", "decoding failed", "not decodable", "unexpected")


def _ingest(root: Path, cfg: IngestSection) -> dict[str, list]:
    """The corpus through ingest, rows named as in the corpus (without the input folder's name)."""
    out = ingest.run(ingest.discover([root / "inputs"], cfg.allowed_roots).sources, cfg)

    def in_corpus(row):  # every row is shown under its input folder's name
        assert row.source_path.startswith("inputs/"), row.source_path
        return row.model_copy(update={"source_path": row.source_path.removeprefix("inputs/")})

    return {table: [in_corpus(row) for row in rows] for table, rows in out.items()}


def test_every_bad_input_is_quarantined_with_a_readable_reason(tmp_path: Path) -> None:
    cases, skipped = write_bad_input_corpus(tmp_path)
    cfg = IngestSection(max_file_s=MAX_FILE_S, allowed_roots=[tmp_path / "inputs"])
    out = _ingest(tmp_path, cfg)  # must not raise, hang on the FIFO or follow the loops
    clips = {c.source_path for c in out["clips"]}
    rows = {q.source_path: q for q in out["quarantine"]}
    assert clips == {c.name for c in cases if c.expect == "clip"}, rows
    assert set(rows) == {c.name for c in cases if c.expect == "quarantine"}
    for case in cases:
        if case.expect != "quarantine":
            continue
        row = rows[case.name]
        for word in case.reason_has:
            assert word in row.reason.lower(), (case.name, row.reason)
        assert not row.reason.startswith(RAW_PREFIXES), (case.name, row.reason)  # words first, raw error last
        assert row.fix and row.stage == "ingest", case.name
    # decoder failures keep the raw library message at the end, for a bug report
    assert "libsndfile:" in rows["truncated.flac"].reason and "ffmpeg:" in rows["notes.flac"].reason
    # the file behind the escaping link was not read: no clip of it, no hash of it
    assert rows["escape.wav"].source_sha256 is None and not any("secret" in p for p in clips)
    assert str(tmp_path / "outside") in rows["escape.wav"].reason
    assert set(skipped) <= {"unreadable.wav", "socket.wav"}


def test_good_but_unusual_files_are_standardised(tmp_path: Path) -> None:
    write_bad_input_corpus(tmp_path)
    out = _ingest(tmp_path, IngestSection(max_file_s=MAX_FILE_S))
    good = {c.source_path: c for c in out["clips"]}
    for name in ("rate_8k.wav", "rate_192k.flac", "eight_channels.wav", "ünïcödé 音声.wav", 'it\'s "quoted".ogg'):
        audio = ingest.decode_clip(good[name])
        assert audio.sample_rate == 16000 and audio.samples.ndim == 1 and good[name].duration_s == 2.0, name
    # no root configured: the link out of the input folder is followed, shown under its own name
    assert ingest.decode_clip(good["escape.wav"]).sample_rate == 16000


def _as_nobody(fn):
    """fn() in a forked child that dropped root to uid/gid 65534 (chmod 000 does not stop root); its result."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery from here on, always exit
        try:
            os.setgid(65534)
            os.setuid(65534)
            result = repr(fn())
        except BaseException as exc:  # noqa: BLE001 -- reported to the parent, which asserts
            result = f"child failed: {exc!r}"
        os.write(write, result.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        out = f.read()
    os.waitpid(pid, 0)
    return out


def test_unreadable_file_is_quarantined() -> None:
    folder = Path(tempfile.mkdtemp(prefix="earmark-locked-"))  # not under tmp_path: its parents are 0700
    try:
        folder.chmod(0o755)
        path = folder / "locked.wav"
        sf.write(path, [0.1] * 32000, 16000)
        path.chmod(0)
        run = lambda: [(q.reason, q.fix) for q in ingest.ingest_file(path, IngestSection(), "locked.wav")[1]]
        if os.access(path, os.R_OK):  # root reads it anyway
            if not hasattr(os, "fork"):
                pytest.skip("running as root without fork(): chmod 000 does not stop root from reading")
            rows = _as_nobody(run)
        else:
            rows = repr(run())
        assert "permission denied: this user cannot read the file" in rows and "chmod a+r" in rows, rows
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_unreadable_folders_are_quarantined() -> None:
    """Issue 45: a sub-folder this user cannot list, and an input folder itself, are rows (reason and fix), not
    files that silently vanish from the build."""
    top = Path(tempfile.mkdtemp(prefix="earmark-locked-"))  # not under tmp_path: its parents are 0700
    inputs, locked, closed = top / "inputs", top / "inputs" / "locked", top / "closed"
    try:
        top.chmod(0o755)
        for folder in (locked, closed):
            folder.mkdir(parents=True)
            sf.write(folder / "inside.wav", [0.1] * 32000, 16000)
        sf.write(inputs / "open.wav", [0.1] * 32000, 16000)
        locked.chmod(0)
        closed.chmod(0)

        def run() -> list:
            found = ingest.discover([inputs, closed])
            rows = [ingest.not_read(s) for s in found.sources]
            return [(s.shown, row and (row.reason, row.fix)) for s, row in zip(found.sources, rows, strict=True)]

        if os.access(locked, os.R_OK):  # root lists it anyway
            if not hasattr(os, "fork"):
                pytest.skip("running as root without fork(): chmod 000 does not stop root from listing a folder")
            listed = _as_nobody(run)
        else:
            listed = repr(run())
        denied = (
            "('permission denied: this user cannot list the folder, so none of its files was read', "
            "'grant read and search permission (chmod a+rx DIR) or run earmark as a user who can read it')"
        )
        assert listed == f"[('closed/', {denied}), ('inputs/locked/', {denied}), ('inputs/open.wav', None)]", listed
    finally:
        for folder in (locked, closed):
            folder.chmod(0o755)
        shutil.rmtree(top, ignore_errors=True)


def test_allowed_roots_apply_to_named_files_too(tmp_path: Path) -> None:
    """Inputs named one by one (not found in a folder) are checked the same way, before anything reads them."""
    write_bad_input_corpus(tmp_path)
    cfg = IngestSection(allowed_roots=[tmp_path / "inputs"])
    named = [
        tmp_path / "outside" / "secret.wav",
        tmp_path / "inputs" / "escape.wav",
        tmp_path / "inputs" / "rate_8k.wav",
    ]
    files = ingest.discover(named, cfg.allowed_roots).sources
    clips, rows = ingest.ingest_files(files, cfg)
    assert [c.source_path for c in clips] == ["inputs/rate_8k.wav"]
    assert sorted(q.source_path for q in rows) == ["inputs/escape.wav", "outside/secret.wav"]
    assert all("outside the allowed source roots" in q.reason for q in rows)
    assert ingest.spec(cfg).plan([])[0] != ingest.spec(IngestSection()).plan([])[0]  # roots enter the shard key


# ------------------------------------------------------------------------------------------- paths
def test_paths_built_from_names_stay_inside_their_root(tmp_path: Path) -> None:
    assert inside(tmp_path, "exports", "v0001") == tmp_path / "exports" / "v0001"
    for bad in ("../x", "a/../../x", "/etc/passwd", "", "a\\b", "a\x00b"):
        with pytest.raises(ValueError):
            inside(tmp_path, "exports", bad)
    (tmp_path / "link").symlink_to("/")
    with pytest.raises(ValueError, match="outside"):
        inside(tmp_path, "link", "etc")
    for bad in ("v1", "v0001; DROP TABLE runs", "../v0001", "main"):
        with pytest.raises(ValueError):
            version_name(bad)
    with pytest.raises(ValueError):
        plain_name("../../model", "model name")
    cat = Catalog(tmp_path / "data", "ds")
    assert cat.shard_path("clips", "abc123").parent == cat.root / "clips"
    for table, key in (("../clips", "k"), ("clips", "../../k"), ("clips", "a/b"), ("nope", "k")):
        with pytest.raises(ValueError):
            cat.shard_path(table, key)
    with pytest.raises(ValueError):
        Catalog(tmp_path / "data", "../escape")


# ------------------------------------------------------------------ one real run, and the API key
MARKER = "sk-earmark-test-4f1d9c0e7b2a"


class _FakeLLM(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_POST(self) -> None:  # noqa: N802
        _FakeLLM.seen.append(self.headers.get("Authorization", ""))
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps(
            {
                "choices": [{"message": {"content": '{"ok": true}'}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_one_build_over_the_mixed_corpus_and_no_api_key_anywhere(
    tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import FlowRunSort, LogSort

    from earmark.flows.build import run_build
    from earmark.llm.session import open_llm

    cases, _ = write_bad_input_corpus(tmp_path)
    server = HTTPServer(("127.0.0.1", 0), _FakeLLM)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("EARMARK_TEST_KEY", MARKER)
    data = tmp_path / "data"
    cfg = load_config(
        overrides={
            "data_root": str(data),
            "dataset": "badinput",
            "inputs": [str(tmp_path / "inputs")],
            "ingest.max_file_s": MAX_FILE_S,
            "ingest.allowed_roots": [str(tmp_path / "inputs")],
            "llm.endpoint": f"http://127.0.0.1:{server.server_port}/v1",
            "llm.api_key_env": "EARMARK_TEST_KEY",
            "run.task_runner": "sequential",
        }
    )
    try:
        out = run_build(cfg, until="ingest")  # ingest → publish: one run over good and bad files, nothing raises
        # the key is read and sent where it belongs: to the LLM endpoint, in a header
        with open_llm(cfg.llm, data / ".llm_cache") as client:
            assert client.complete_json([{"role": "user", "content": "hi"}], None, max_tokens=4).data == {"ok": True}
    finally:
        server.shutdown()
    assert _FakeLLM.seen == [f"Bearer {MARKER}"]

    cat = Catalog(data, "badinput")
    quarantined = dict(cat.query("SELECT source_path, reason FROM quarantine"))
    clipped = {p for (p,) in cat.query("SELECT DISTINCT source_path FROM clips")}
    assert clipped == {f"inputs/{c.name}" for c in cases if c.expect == "clip"}
    assert set(quarantined) == {f"inputs/{c.name}" for c in cases if c.expect == "quarantine"}
    assert out["version"] == "v0001"

    # ... and nowhere else: no file under the data root (Parquet, catalog, exports, cache, logs) holds it
    leaks = [p for p in data.rglob("*") if p.is_file() and MARKER.encode() in p.read_bytes()]
    assert leaks == []
    assert MARKER not in json.dumps(cfg.model_dump(mode="json"), default=str)

    with get_client(sync_client=True) as client:  # flow parameters, logs and artifacts of every run so far
        runs = client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=200)
        logs = client.read_logs(limit=200, offset=0, sort=LogSort.TIMESTAMP_ASC)
        artifacts = client.request("POST", "/artifacts/filter", json={"limit": 200, "offset": 0}).json()
    prefect = json.dumps([[r.parameters for r in runs], [x.message for x in logs], artifacts], default=str)
    assert "badinput" in prefect and MARKER not in prefect  # the runs are there; the key is not
