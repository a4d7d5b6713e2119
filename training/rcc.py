"""Read files out of a Qt resource bundle (`.rcc`, as GCompris ships its activities' images and sounds).

Format (Qt's rcc, versions 1-3): "qres", u32 version, u32 tree / data / names offsets (+ u32 flags from v3);
tree nodes of 14 bytes (v1) or 22 bytes (v2+, a trailing u64 modification time): u32 name offset, u16 flags,
then for a folder u32 child count + u32 first child index, for a file u16 territory + u16 language + u32 data
offset. A name is u16 length, u32 hash, UTF-16BE text; a file's data is u32 size + bytes, zlib-compressed
(a u32 uncompressed size first) when flags & 1. Zstandard-compressed entries (flags & 4) are skipped.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path


def rcc_files(path: Path | str) -> Iterator[tuple[str, bytes]]:
    """Yield (resource path, bytes) for every file in the bundle."""
    b = Path(path).read_bytes()
    if b[:4] != b"qres":
        raise ValueError(f"{path}: not a Qt resource bundle")
    version, tree, data, names = struct.unpack(">IIII", b[4:20])
    node = 22 if version >= 2 else 14

    def name(off: int) -> str:
        (n,) = struct.unpack(">H", b[names + off : names + off + 2])
        return b[names + off + 6 : names + off + 6 + 2 * n].decode("utf-16-be")

    def walk(i: int, prefix: str) -> Iterator[tuple[str, bytes]]:
        o = tree + i * node
        name_off, flags = struct.unpack(">IH", b[o : o + 6])
        nm = name(name_off) if i else ""
        full = f"{prefix}/{nm}" if nm else prefix
        if flags & 2:
            count, first = struct.unpack(">II", b[o + 6 : o + 14])
            for k in range(count):
                yield from walk(first + k, full)
            return
        (doff,) = struct.unpack(">I", b[o + 10 : o + 14])
        (size,) = struct.unpack(">I", b[data + doff : data + doff + 4])
        raw = b[data + doff + 4 : data + doff + 4 + size]
        if flags & 4:
            return
        yield full.lstrip("/"), zlib.decompress(raw[4:]) if flags & 1 else raw

    yield from walk(0, "")
