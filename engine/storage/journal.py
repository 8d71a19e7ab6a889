"""A running session's journal, and the one rule of what reaches the disk when.

**The journal rule** (docs/architecture.md states it; nothing else writes a running session):

1. Every event is written to events.jsonl (one `write` on an O_APPEND descriptor) before it
   is shown; token deltas are batched, and flushed before any other event. A kill -9 at any
   moment loses nothing anyone was shown.
2. A completed round's `PairCompleted` is the round's checkpoint: it carries the pair and the
   session's running totals, and it is on the disk (`fsync`) before anyone is told the round
   is complete. metadata.json is *not* rewritten for it: for a running session the event log
   is the truth, and reading one (`layout.load_session`, a resume) folds the rounds its log
   has beyond its metadata.json back in (`layout.fold`).
3. metadata.json is replaced whole (temp file, fsync, rename, fsync the folder) when the
   session is made, when a run of it starts again, and when it ends: each time after the log
   is on the disk, so it never counts an event the log could lose.
4. The session index gets a row at each of these and at each completed round (it is a cache).

So a round costs one `fsync`, where it cost three and a file replaced.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import SessionCorrupt
from engine.models.events import Checkpoint, InterrogationEvent
from engine.models.session import InterrogationSession
from engine.storage.atomic import atomic_write_text
from engine.storage.eventlog import EventLogWriter
from engine.storage.index import summarize
from engine.storage.layout import CASE_FIELDS, EVENTS, METADATA, case_locked, load_metadata, stamp

if TYPE_CHECKING:
    from engine.storage.sessions import SessionStore

__all__ = ["SessionJournal"]


class SessionJournal:
    """Writes one session while it runs, by the rule above.

    Holds the session's lock until `close`.
    """

    def __init__(
        self,
        store: SessionStore,
        directory: Path,
        session: InterrogationSession,
        lock_fd: int,
        log: EventLogWriter,
        *,
        fresh: bool = False,
    ) -> None:
        """`fresh`: metadata.json was written from `session` just now (a note added since is
        noticed by its stamp); otherwise the case-file fields are taken from the disk at the
        first `save`."""
        self.store = store
        self.directory = directory
        self.session = session
        self._lock_fd = lock_fd
        self._log = log
        self._written = stamp(directory / METADATA) if fresh else None

    @property
    def events_path(self) -> Path:
        """This session's events.jsonl."""
        return self.directory / EVENTS

    def record(self, event: InterrogationEvent) -> None:
        """Append `event` to events.jsonl (deltas batched); a checkpoint (`PairCompleted`, a
        testimony's `ClaimsSplit` and `ClaimExamined`) is synced to the disk and indexed before
        this returns (rule 2)."""
        self._log.append(event)
        if isinstance(event, Checkpoint):
            self._log.sync()
            self.store.index.append(summarize(self.directory.name, self.session))

    def save(self) -> None:
        """Sync the log, replace metadata.json atomically, and update the index (rule 3)."""
        self._log.flush()
        self._log.sync()
        self.session.events_recorded = self._log.last_n
        path = self.directory / METADATA
        with case_locked(self.directory):
            written = stamp(path)
            if written is not None and written != self._written:  # a note or answer came in
                try:
                    disk = load_metadata(path)
                except SessionCorrupt:
                    disk = None
                if disk is not None:
                    for name in CASE_FIELDS:
                        setattr(self.session, name, getattr(disk, name))
            atomic_write_text(path, self.session.model_dump_json(indent=1))
            self._written = stamp(path)
        self.store.index.append(summarize(self.directory.name, self.session))

    def close(self) -> None:
        """Flush, close the log and release the lock (idempotent)."""
        self._log.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
