"""A session folder's lock file, read without loading anything else: whether a live process
holds it (`is_locked`). Kept apart so the session list's first rows need no pydantic."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["LOCK", "is_locked"]

LOCK = "lock"
"""The lock file in a session folder, held (flock) by the process that runs the session."""


def is_locked(directory: Path) -> bool:
    """True while a live process holds the session's lock."""
    try:
        fd = os.open(directory / LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
