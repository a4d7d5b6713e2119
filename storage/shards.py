"""Crash-safe Parquet shards: written to a temp file, fsynced, renamed into place.

A reader therefore sees either no file or a complete one; the catalog registers a shard only after its
file is in place, so a crash between the two leaves an orphan file that the next run overwrites.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


@dataclass(frozen=True)
class ShardFile:
    path: Path
    rows: int
    bytes: int
    sha256: str


def shard_key(
    stage: str,
    stage_version: str,
    inputs: list[str],
    prompt_sha: str | None = None,
    model: str | None = None,
    config: dict[str, Any] | None = None,
) -> str:
    """Content identity of a shard: everything that can change its rows, and nothing else."""
    payload = {
        "stage": stage,
        "stage_version": stage_version,
        "inputs": sorted(inputs),
        "prompt_sha": prompt_sha,
        "model": model,
        "config": config or {},
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class _HashingSink:
    """A file opened for writing that hashes every byte written through it: a shard's sha256 without reading
    the file back (pyarrow writes through any object with write / tell / flush / close)."""

    closed = False

    def __init__(self, f: Any) -> None:
        self.f, self.sha256, self.size = f, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self.f.write(data)

    def tell(self) -> int:
        return self.size

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        self.f.flush()

    def close(self) -> None:  # the caller closes the file after its fsync
        pass


def compression(schema: pa.Schema) -> dict[str, str]:
    """zstd for every column except binary ones: those hold already-compressed media (the clips' FLAC), which
    zstd cannot shrink (measured: 52.0 MB either way for a 256-clip shard) and took 3× as long to write."""
    return {
        f.name: "none" if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type) else "zstd" for f in schema
    }


def write_shard(path: Path, table: pa.Table) -> ShardFile:
    """Atomically write `table` to `path` (temp → fsync → rename → fsync dir)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as f:
            sink = _HashingSink(f)
            pq.write_table(table, sink, compression=compression(table.schema) or "zstd")
            f.flush()
            os.fsync(f.fileno())
        sha = sink.sha256.hexdigest()
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    finally:
        if tmp.exists():
            tmp.unlink()
    return ShardFile(path=path, rows=table.num_rows, bytes=path.stat().st_size, sha256=sha)


def read_shard(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    return pq.read_table(path, columns=list(columns) if columns is not None else None)


def remove_stale_temp_files(root: Path) -> int:
    """Delete temp files left by a crashed writer; returns how many were removed."""
    removed = 0
    if root.exists():
        for tmp in root.rglob(".*.tmp"):
            tmp.unlink(missing_ok=True)
            removed += 1
    return removed
