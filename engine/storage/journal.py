"""A running session's journal: events appended as they happen, metadata.json replaced at
each milestone, the session's lock held until it closes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import SessionCorrupt
from engine.models.events import InterrogationEvent
from engine.models.session import InterrogationSession
from engine.storage.atomic import atomic_write_text
from engine.storage.eventlog import EventLogWriter
from engine.storage.index import summarize
from engine.storage.layout import CASE_FIELDS, EVENTS, METADATA, case_locked, load_metadata, stamp

if TYPE_CHECKING:
    from engine.storage.sessions import SessionStore

__all__ = ["SessionJournal"]


class SessionJournal:
    """Writes one session while it runs: events as they happen, metadata at each milestone.

    Holds the session's lock until `close`. Milestones (`save`) flush pending events first, so
    metadata.json never refers to an event the log does not have.
    """

    def __init__(
        self,
        store: SessionStore,
        directory: Path,
        session: InterrogationSession,
        lock_fd: int,
        log: EventLogWriter,
    ) -> None:
        self.store = store
        self.directory = directory
        self.session = session
        self._lock_fd = lock_fd
        self._log = log
        self._written: tuple[int, int] | None = None

    @property
    def events_path(self) -> Path:
        """This session's events.jsonl."""
        return self.directory / EVENTS

    def record(self, event: InterrogationEvent) -> None:
        """Append `event` to events.jsonl (deltas batched)."""
        self._log.append(event)

    def save(self) -> None:
        """Flush events, replace metadata.json atomically, and update the index."""
        self._log.flush()
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
