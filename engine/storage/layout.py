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
from engine.models.events import (
    AnswerDrawn,
    Checkpoint,
    ClaimExamined,
    ClaimRead,
    ClaimsSplit,
    ContextFitted,
    PairCompleted,
    Record,
    TrailAdded,
)
from engine.models.session import InterrogationSession
from engine.storage.atomic import TEMP_PREFIX
from engine.storage.eventlog import read_events
from engine.storage.locks import LOCK, is_locked

__all__ = ["CASE_FIELDS", "DIR_NAME", "EVENTS", "LOCK", "METADATA", "NOTES_DIR",
           "RESPONSES_DIR", "case_locked", "check_length", "fold", "is_locked", "load_metadata",
           "load_session", "stamp", "sweep_temp_files"]

DIR_NAME = re.compile(r"^\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_[0-9a-f]{8}$")
METADATA = "metadata.json"
EVENTS = "events.jsonl"
NOTES_DIR = "transcripts"
RESPONSES_DIR = "llm_responses"
#: The fields a case-file update owns; everything else belongs to the interrogation's journal.
CASE_FIELDS = ("title", "notes", "llm_entries", "ui_preferences")



@contextlib.contextmanager
def case_locked(directory: Path) -> Iterator[None]:
    """Hold the session's case lock (blocking; held only while metadata.json is replaced): a
    `flock` on the session's folder itself, so taking it creates no file."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
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


def load_session(directory: Path) -> InterrogationSession:
    """The session in `directory` as it stands: metadata.json, and for a running (or killed)
    one the rounds its event log completed since (`fold`; the journal's rule 2)."""
    session = load_metadata(directory / METADATA)
    if session.status == "running":
        records = read_events(directory / EVENTS)
        check_length(directory, len(records), session)
        fold(session, records)
    return session


def fold(session: InterrogationSession, records: list[Record]) -> InterrogationSession:
    """Fold into `session` (as metadata.json had it) the checkpoints `records` hold after it
    was written: each `PairCompleted` (and a testimony's `ClaimsSplit` and `ClaimExamined`)
    with the trail entries and context fits before it, and the running totals the last one
    carries. What follows the last checkpoint is a round cut short: it is left out, as a
    resume asks it again. Returns `session`, changed."""
    last = max((i for i, r in enumerate(records)
                if r.n > session.events_recorded and isinstance(r.event, Checkpoint)),
               default=None)
    if last is None:
        return session
    for record in records[:last + 1]:
        event = record.event
        if record.n <= session.events_recorded:
            continue
        if isinstance(event, TrailAdded):
            session.audit_trail.append(event.entry)
        elif isinstance(event, ContextFitted):
            session.context_fits.append(event.fit)
        elif isinstance(event, AnswerDrawn):
            session.drawing[str(event.claim or 0)] = event.drawing.model_copy(deep=True)
        elif isinstance(event, PairCompleted) and \
                event.pair.sequence == len(session.qa_pairs) + 1:  # an older log's pair is
            session.qa_pairs.append(event.pair)                    # in metadata.json already
            if not event.pair.testimony:  # its claim's round under way is this one
                session.drawing.pop(str(event.pair.claim or 0), None)
            session.current_iteration = len(session.qa_pairs)
            if event.tokens is not None:
                session.tokens = event.tokens.model_copy(deep=True)
            if event.repairs is not None:
                session.repairs = event.repairs
        elif isinstance(event, ClaimsSplit):
            session.testimony = event.testimony.model_copy(deep=True)
        elif isinstance(event, ClaimRead):
            if event.single:
                session.claim = event.claim.model_copy(deep=True)
            elif session.testimony is not None:
                session.testimony.put(event.claim.model_copy(deep=True))
        elif isinstance(event, ClaimExamined) and event.single:
            session.claim = event.claim.model_copy(deep=True)
        elif isinstance(event, ClaimExamined) and session.testimony is not None:
            session.testimony.put(event.claim.model_copy(deep=True))
            if event.tokens is not None:
                session.tokens = event.tokens.model_copy(deep=True)
            if event.repairs is not None:
                session.repairs = event.repairs
    session.events_recorded = records[last].n
    return session


def check_length(directory: Path, events: int, session: InterrogationSession) -> None:
    """A log shorter than metadata.json says it was when saved has lost its end."""
    if events < session.events_recorded:
        raise SessionCorrupt(
            directory / EVENTS,
            f"truncated: it ends at event {events} but {METADATA} was saved after event "
            f"{session.events_recorded}",
        )


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
