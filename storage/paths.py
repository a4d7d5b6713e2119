"""Paths earmark builds from names (dataset, version, table, model, clip id): they must stay inside their root.

Every file earmark writes under `<data_root>/<dataset>/` is named from parts that may come from outside — a
version or model name on the command line, a domain code or clip id read from data. `inside` joins such
parts and refuses any result that would leave the root (`..`, an absolute part, a separator in a name, a
symlink pointing out), so a hostile name is a clear error, never a file written elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

VERSION_NAME = re.compile(r"v[0-9]{4,9}")
# a single path component that is safe everywhere: no separator, no leading dot, no control characters
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+=-]{0,199}")


def inside(root: Path, *parts: str) -> Path:
    """`root / part / …`, or ValueError when any part is not a plain name or the result resolves outside root.

    Parts may contain `/` to name sub-folders (e.g. "exports/v0001"), but no component may be empty, `.`,
    `..` or absolute, and the joined path — symlinks resolved — must lie inside `root`.
    """
    base = Path(root)
    for part in parts:
        text = str(part)
        pieces = text.split("/")
        if not text or "\x00" in text or "\\" in text or any(p in ("", ".", "..") for p in pieces):
            raise ValueError(
                f"refusing path part {text!r} under {base}: names must not be empty, absolute, or contain "
                "'..', '\\' or NUL (is a version, table, model or clip name malformed?)"
            )
    path = base.joinpath(*map(str, parts))
    real_root = base.resolve()
    if not path.resolve().is_relative_to(real_root):
        raise ValueError(f"refusing path {path}: it resolves to {path.resolve()}, outside {real_root}")
    return path


def plain_name(value: str, what: str) -> str:
    """`value` when it is one safe path component (letters, digits, `_ . @ + = -`), else a ValueError naming `what`."""
    if not _NAME.fullmatch(str(value)) or ".." in str(value):
        raise ValueError(
            f"{what} {value!r}: use 1-200 letters, digits, '_', '.', '-', '@', '+', '=' starting with a letter or "
            "digit (no '/', '..' or spaces)"
        )
    return value


def version_name(value: str) -> str:
    """A dataset version name (`vNNNN`), the only form a version takes in SQL identifiers and folder names."""
    if not VERSION_NAME.fullmatch(str(value)):
        raise ValueError(f"version {value!r}: versions are named v0001, v0002, … (see `earmark sql 'FROM versions'`)")
    return value


def within_any(path: Path, roots: Iterable[Path]) -> bool:
    """Whether `path`, fully resolved (symlinks followed), lies inside one of `roots` (also resolved)."""
    try:
        real = Path(path).resolve()
    except (OSError, RuntimeError):  # a symlink loop (Python 3.11 raises RuntimeError) leads nowhere allowed
        return False
    return any(real.is_relative_to(Path(r).expanduser().resolve()) for r in roots)
