"""Where a session's files are, and the small rules about them: the folder name, the lock
files, reading metadata.json, the temp files a killed write leaves. The store
(`engine.storage.sessions`) and the journal (`engine.storage.journal`) both use them."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from engine.errors import SessionCorrupt
from engine.models.session import InterrogationSession
from engine.storage.atomic import TEMP_PREFIX
from engine.storage.locks import LOCK, is_locked

__all__ = ["CASE_FIELDS", "CASE_LOCK", "DIR_NAME", "EVENTS", "LOCK", "METADATA", "NOTES_DIR",
           "RESPONSES_DIR", "case_locked", "is_locked", "load_metadata", "stamp",
           "sweep_temp_files"]

DIR_NAME = re.compile(r"^\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_[0-9a-f]{8}$")
METADATA = "metadata.json"
EVENTS = "events.jsonl"
CASE_LOCK = "case.lock"
NOTES_DIR = "transcripts"
RESPONSES_DIR = "llm_responses"
#: The fields a case-file update owns; everything else belongs to the interrogation's journal.
CASE_FIELDS = ("title", "notes", "llm_entries", "ui_preferences")



@contextlib.contextmanager
def case_locked(directory: Path) -> Iterator[None]:
    """Hold the session's `case.lock` (blocking; held only while metadata.json is replaced)."""
    fd = os.open(directory / CASE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def load_metadata(path: Path) -> InterrogationSession:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SessionCorrupt(path, "missing") from None
    except OSError as exc:
        raise SessionCorrupt(path, f"unreadable: {exc.strerror}") from None
    try:
        return InterrogationSession.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(root)"
        kind = "not valid JSON" if first["type"] == "json_invalid" else "not a valid session"
        raise SessionCorrupt(path, f"{kind} ({where}: {first['msg']}); left as it is") from None


STAGED_AGE = 60.0
"""Seconds after which a temp folder is taken for one a killed `SessionStore.create` left half
built (a younger one may be under way in another process)."""


def sweep_temp_files(directory: Path) -> None:
    """Remove temp files a killed atomic write left behind, and temp folders a killed
    session creation left (older than `STAGED_AGE`)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            if not entry.name.startswith(TEMP_PREFIX):
                continue
            with contextlib.suppress(OSError):
                if not entry.is_dir(follow_symlinks=False):
                    os.unlink(entry.path)
                elif time.time() - entry.stat(follow_symlinks=False).st_mtime > STAGED_AGE:
                    shutil.rmtree(entry.path, ignore_errors=True)
