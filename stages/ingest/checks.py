"""Why an input file cannot be ingested, in words a user can act on.

Two halves: `check_source` looks at the file itself before any decoder touches it (missing, a symlink loop, a
link leading outside the allowed source roots, not a regular file, unreadable, empty), and `explain_failure`
turns a decoder's raw error into what is wrong — not audio at all, a damaged header, corrupt or truncated
data — by sniffing the file's first bytes. Every reason keeps the raw library message at its end (for a bug
report); every `UnusableInput` carries the fix. Nothing here raises anything but `UnusableInput`.
"""

from __future__ import annotations

import os
import re
import stat
import struct
from collections.abc import Sequence
from pathlib import Path

from earmark.storage.paths import within_any

HEAD_BYTES = 64

# container → how its files start; the first match names what the bytes really are
_SIGNATURES: list[tuple[str, bytes, int]] = [
    ("FLAC", b"fLaC", 0),
    ("Ogg", b"OggS", 0),
    ("MP3", b"ID3", 0),
    ("AIFF", b"FORM", 0),
    ("AU", b".snd", 0),
    ("MP4/M4A", b"ftyp", 4),
    ("WMA", bytes.fromhex("3026b2758e66cf11"), 0),
    ("Matroska/WebM", bytes.fromhex("1a45dfa3"), 0),
]
_SUFFIX_KIND = {
    ".wav": "WAV",
    ".flac": "FLAC",
    ".ogg": "Ogg",
    ".oga": "Ogg",
    ".opus": "Ogg",
    ".mp3": "MP3",
    ".aiff": "AIFF",
    ".aif": "AIFF",
    ".au": "AU",
    ".m4a": "MP4/M4A",
    ".aac": "AAC",
    ".wma": "WMA",
    ".webm": "Matroska/WebM",
    ".mka": "Matroska/WebM",
}
REEXPORT = (
    "re-encode or re-export the file from its source (e.g. `ffmpeg -i IN OUT.flac`); if it was copied, copy it again"
)


class UnusableInput(Exception):
    """An input file that cannot become clips: `reason` (what is wrong, raw error last) and `fix` (what to do)."""

    def __init__(self, reason: str, fix: str):
        super().__init__(reason)
        self.reason = reason
        self.fix = fix


def sniff(head: bytes) -> str | None:
    """The audio container the first bytes belong to, or None when they match none."""
    if head[:4] in (b"RIFF", b"RF64", b"RIFX") and head[8:12] == b"WAVE":
        return "WAV"
    for kind, magic, offset in _SIGNATURES:
        if head[offset : offset + len(magic)] == magic:
            return kind
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xF6 == 0xF0:
        return "AAC"  # ADTS frame sync
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:
        return "MP3"  # MPEG audio frame sync
    return None


def looks_like_text(head: bytes) -> bool:
    text = head.decode("utf-8", errors="replace").rstrip("\ufffd")  # a character cut at the end is fine
    return bool(text) and "\ufffd" not in text and all(c.isprintable() or c in "\r\n\t" for c in text)


def wav_sample_rate(head: bytes) -> int | None:
    """The sample rate a WAV header declares (its `fmt ` chunk right after RIFF/WAVE), None if not found."""
    if sniff(head) != "WAV" or head[12:16] != b"fmt " or len(head) < 28:
        return None
    return struct.unpack_from("<I", head, 24)[0]


def clean_raw(message: str, path: Path) -> str:
    """A library message without its boilerplate and the file's full path (the row names the file already)."""
    text = " ".join(str(message).split())
    text = re.sub(r"^Error opening '.*?': ", "", text)
    text = re.sub(r"^Error\s*:\s*", "", text)
    return text.replace(f"{path}: ", "").replace(str(path), path.name).strip().rstrip(".")


def check_source(path: Path, allowed_roots: Sequence[Path] = ()) -> bytes:
    """The file's first bytes, or UnusableInput saying why no decoder should open it."""
    try:
        link = path.lstat()
    except PermissionError:
        raise UnusableInput(
            "permission denied: this user cannot enter a folder on the file's path",
            "grant search permission on the folders (chmod a+x DIR) or run earmark as a user who can read them",
        ) from None
    except OSError:
        raise UnusableInput("file does not exist", "check the path; the file may have been moved or deleted") from None
    if stat.S_ISLNK(link.st_mode):
        try:
            path.resolve(strict=True)
        except RuntimeError:  # Python 3.11 reports a loop this way
            raise UnusableInput(
                "symbolic link loop: following the link leads back to itself",
                "point the link at a real audio file or remove it",
            ) from None
        except OSError as exc:
            if exc.errno == 40:  # ELOOP
                raise UnusableInput(
                    "symbolic link loop: following the link leads back to itself",
                    "point the link at a real audio file or remove it",
                ) from None
            raise UnusableInput(
                f"broken symbolic link: it points to {os.readlink(path)}, which does not exist",
                "fix the link's target or remove the link",
            ) from None
    if allowed_roots and not within_any(path, allowed_roots):
        raise UnusableInput(
            f"resolves to {path.resolve()}, outside the allowed source roots "
            f"({', '.join(str(r) for r in allowed_roots)}); not read",
            "copy the file under an allowed root, or add its folder to ingest.allowed_roots",
        )
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
        raise UnusableInput(
            f"not a regular file ({kind}); earmark reads audio files only", "pass the audio file itself, not a pipe"
        )
    if st.st_size == 0:
        raise UnusableInput(
            "file is empty (0 bytes)", "re-copy or re-export the file; remove it if it is a placeholder"
        )
    try:
        with open(path, "rb") as f:
            return f.read(HEAD_BYTES)
    except PermissionError as exc:
        raise UnusableInput(
            f"permission denied: this user cannot read the file ({exc.strerror})",
            "grant read permission (chmod a+r FILE) or run earmark as a user who can read it",
        ) from None
    except OSError as exc:
        raise UnusableInput(
            f"file cannot be read ({exc.strerror or exc})", "check the disk or network share; copy the file again"
        ) from None


def explain_failure(
    path: Path, head: bytes, libsndfile: str | None, ffmpeg: str | None, *, header_ok: bool
) -> UnusableInput:
    """What a decoding failure means for this file. `header_ok`: libsndfile parsed the header (the damage is in
    the audio data) — otherwise the header itself is unreadable."""
    raw = "; ".join(
        f"{name}: {clean_raw(msg, path)}" for name, msg in (("libsndfile", libsndfile), ("ffmpeg", ffmpeg)) if msg
    )
    raw = f" ({raw})" if raw else ""
    named = _SUFFIX_KIND.get(path.suffix.lower(), path.suffix.lstrip(".").upper() or "audio")
    kind = sniff(head)
    if kind is None:
        content = "text" if looks_like_text(head) else "bytes of no known audio format"
        return UnusableInput(
            f"not an audio file: its content is {content}, although its name ends in {path.suffix or '(no suffix)'}{raw}",
            "check that this is the file you meant to include; remove it or export the audio again as WAV or FLAC",
        )
    mislabeled = f" (the file is {kind}, named as {named})" if kind != named and named in _SUFFIX_KIND.values() else ""
    if header_ok:
        return UnusableInput(f"corrupt or truncated {kind} audio data{mislabeled}{raw}", REEXPORT)
    return UnusableInput(
        f"damaged or truncated {kind} header: the decoder cannot read the file's format{mislabeled}{raw}", REEXPORT
    )


def truncated_wav(extra_info: str) -> str | None:
    """A reason when libsndfile's header report says a WAV's data chunk is shorter than its header declares."""
    m = re.search(r"^data\s*:\s*(\d+)\s*\(should be (\d+)\)", extra_info, re.MULTILINE)
    rate = re.search(r"Bytes/sec\s*:\s*(\d+)", extra_info)
    if not m:
        return None
    declared, present = int(m.group(1)), int(m.group(2))
    bytes_per_second = int(rate.group(1)) if rate else 0
    if present >= declared or declared in (0, 0xFFFFFFFF) or bytes_per_second <= 0:
        return None  # longer than declared, or a streaming writer's placeholder size: not truncated
    return (
        f"truncated WAV audio data: the header declares {declared / bytes_per_second:.2f} s but the file holds "
        f"{present / bytes_per_second:.2f} s (libsndfile: data {declared} bytes, should be {present})"
    )
