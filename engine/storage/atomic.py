"""Replace a file so that a crash at any moment leaves either the old or the new file whole."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text", "file_sha256", "write_new_synced",
           "TEMP_PREFIX"]

#: Temporary files start with this, so a sweep after a crash can find and remove them.
TEMP_PREFIX = ".detektiv-tmp-"


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` atomically: temp file, fsync, rename, fsync the directory.

    The temp file gets `mode` before any byte is written, so a private file (0600) is never
    readable by others, not even for a moment.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_folder(path.parent)


def write_new_synced(path: Path, data: bytes) -> None:
    """A new file with `data` (`FileExistsError` if there is one), on the disk, and its
    folder's entry too: for a file in a folder that appears whole or not at all (renamed into
    place), where a temp file and a rename of its own would add nothing."""
    with path.open("xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str, mode: int = 0o644) -> None:
    """`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, in hex (read a MiB at a time)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
