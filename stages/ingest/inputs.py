"""Which paths a build's inputs name, and the name each is shown, stored and keyed under.

Every path under an input is accounted for. An audio file (by suffix) is a `Source` that ingest reads. A folder
that cannot be listed, a folder link that leads back into the tree it is in (a loop) or out of the allowed source
roots, and a link that leads nowhere are `Source`s too, carrying their problem or meeting it when ingest checks
them: each becomes a quarantine row with a reason and a fix, never a silent gap. Hidden files and other suffixes
are counted as skipped. Folders are listed in name order and folder links are followed (`Path.rglob` neither
followed them nor reported a folder it could not list), so the list is the same on every run.

A source is shown as `<input>/<path under it>`: `<input>` is the last component of the input argument as given
(a symlink's own name, not its target's), and a file named on the command line is shown under its folder's
name. The name depends on nothing but its own input, so adding an input folder to a build renames no other
file, and the manifest and the shard keys that hash it stay as they were.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from earmark.storage.paths import within_any

AUDIO_SUFFIXES = {
    ".wav",
    ".flac",
    ".ogg",
    ".oga",
    ".opus",
    ".mp3",
    ".aiff",
    ".aif",
    ".au",
    ".m4a",
    ".aac",
    ".wma",
    ".webm",
    ".mka",
}
Problem = tuple[str, str]  # (reason, fix)


@dataclass(frozen=True)
class Source:
    """One input path as ingest sees it."""

    path: Path  # where it is read: the input argument joined with the names walked (links left unresolved)
    shown: str  # its name in rows, the manifest and shard keys; a folder's ends with "/"
    problem: Problem | None = None  # found while listing: nothing is read from it
    same_as: str | None = None  # the shown name of an earlier source with the same bytes: not ingested again


@dataclass(frozen=True)
class Discovery:
    """What the inputs hold: every source in shown-name order, and how many paths were skipped."""

    sources: list[Source]
    skipped: int  # hidden files and files without an audio suffix

    @property
    def files(self) -> list[Source]:
        """The sources ingest will try to read (those without a problem found while listing)."""
        return [s for s in self.sources if s.problem is None]


def discover(inputs: Iterable[Path], allowed_roots: Sequence[Path] = ()) -> Discovery:
    """Every source under the given files and folders (see the module doc); FileNotFoundError for an input
    that does not exist, ValueError when two inputs would show different files under one name."""
    found: dict[str, Source] = {}
    skipped = 0
    for arg in map(Path, inputs):
        if not _exists(arg):
            raise FileNotFoundError(f"input {arg} does not exist: pass audio files or directories that contain them")
        absolute = Path(os.path.abspath(arg))
        if _is_dir(arg):
            sources, n = _walk(arg, absolute.name, allowed_roots)
            skipped += n
        else:
            sources = [Source(arg, _join(absolute.parent.name, absolute.name))]
        for source in sources:
            _add(found, source)
    return Discovery(sorted(found.values(), key=lambda s: s.shown), skipped)


def nothing_to_read(inputs: Iterable[Path], found: Discovery) -> str:
    """The error for a build whose inputs hold no audio file it could try, with the problems that hid them."""
    msg = f"no audio files found under {', '.join(map(str, inputs)) or '(no inputs given)'}"
    problems = [f"{s.shown}: {s.problem[0]} ({s.problem[1]})" for s in found.sources if s.problem]
    return "; ".join([msg, *problems])


# ------------------------------------------------------------------------------------------ walking
def _walk(top: Path, name: str, allowed_roots: Sequence[Path]) -> tuple[list[Source], int]:
    """The sources under folder `top` (shown under `name`) and how many files were skipped."""
    out: list[Source] = []
    skipped = 0
    above = _ancestors(top)
    if problem := _not_followed(top, above, allowed_roots):
        return [Source(top, f"{name}/", problem)], 0
    # (folder, its shown name, the folders it is inside of by (device, inode) → their shown names)
    stack = [(top, name, {**above, _inode(top): name or str(top)})]
    while stack:
        folder, shown, inside = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            out.append(Source(folder, f"{shown}/", _unlistable(exc)))
            continue
        subfolders = []
        for entry in entries:
            path, child = folder / entry.name, _join(shown, entry.name)
            try:
                st: os.stat_result | None = entry.stat()  # follows links
            except OSError:
                st = None
            suffix = Path(entry.name).suffix.lower()
            if st is not None and stat.S_ISDIR(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if problem := _not_followed(path, inside, allowed_roots):
                    out.append(Source(path, f"{child}/", problem))
                else:
                    subfolders.append((path, child, {**inside, key: child}))
            elif entry.name.startswith("."):
                skipped += 1
            elif suffix in AUDIO_SUFFIXES or (st is None and not suffix):
                out.append(Source(path, child))  # ingest's checks name what is wrong with it, if anything
            else:
                skipped += 1
        stack.extend(reversed(subfolders))
    return out, skipped


def _not_followed(folder: Path, inside: dict[tuple[int, int], str], allowed_roots: Sequence[Path]) -> Problem | None:
    """Why the folder is not walked (a link back to a folder it is inside of, outside the allowed roots, gone),
    or None."""
    try:
        key = _inode(folder)
    except OSError as exc:
        return _unlistable(exc)
    if key in inside:
        return (
            f"symbolic link loop: this folder link leads back to {inside[key]}, a folder it is inside of; not followed",
            "remove the link, or point it at a folder outside its own tree",
        )
    if allowed_roots and not within_any(folder, allowed_roots):
        return (
            f"folder resolves to {folder.resolve()}, outside the allowed source roots "
            f"({', '.join(str(r) for r in allowed_roots)}); not read",
            "copy the folder under an allowed root, or add it to ingest.allowed_roots",
        )
    return None


def _unlistable(exc: OSError) -> Problem:
    if isinstance(exc, PermissionError):
        return (
            "permission denied: this user cannot list the folder, so none of its files was read",
            "grant read and search permission (chmod a+rx DIR) or run earmark as a user who can read it",
        )
    if isinstance(exc, FileNotFoundError):
        return ("the folder vanished while the inputs were being listed", "rerun once the folder is back in place")
    return (
        f"the folder cannot be listed ({exc.strerror or exc})",
        "check the folder (a failing disk or network mount?) and rerun",
    )


def _ancestors(top: Path) -> dict[tuple[int, int], str]:
    """The real folders above `top` (a link to one of them would walk `top` again): (device, inode) → path."""
    out: dict[tuple[int, int], str] = {}
    try:
        real = top.resolve(strict=True)
    except (OSError, RuntimeError):
        return out
    for parent in real.parents:
        try:
            out[_inode(parent)] = str(parent)
        except OSError:
            continue
    return out


def _inode(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _exists(path: Path) -> bool:
    """Whether the input names anything at all (a link that leads nowhere, or a path this user may not look
    at, counts: ingest's checks explain it)."""
    try:
        os.lstat(path)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _add(found: dict[str, Source], source: Source) -> None:
    """Add `source` unless it is already there (an input named twice); two different paths under one shown
    name are an error, for the name would stand for either."""
    other = found.get(source.shown)
    if other is None:
        found[source.shown] = source
    elif os.path.realpath(other.path) != os.path.realpath(source.path):
        raise ValueError(
            f"two inputs show different files under one name, {source.shown!r}: {other.path} and {source.path}. "
            "A file is shown under the name of the input folder it was found in; rename one of the folders "
            "or pass it through a symlink with another name (ln -s FOLDER NEW-NAME)"
        )
