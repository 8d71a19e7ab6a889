"""events.jsonl: the append-only, numbered log of everything a run did.

The writer batches token deltas so a stream costs at most about ten writes a second, and never
reorders events: anything that is not a delta first flushes the pending text. Lines are written
with one `write` on an O_APPEND descriptor, so a kill leaves at most one torn line at the end;
the writer cuts such a tail off before it appends again. It syncs to the disk only when told:
when is the journal's rule (`engine.storage.journal`). Readers follow the file by offset, which
is how another process watches a run live without any server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from engine.errors import SessionCorrupt
from engine.models.events import Delta, InterrogationEvent, Record, decode_record, encode_record

__all__ = ["EventLogWriter", "EventTail", "read_events"]

FLUSH_INTERVAL = 0.1
"""Seconds token deltas may wait before they are written (≈ 10 writes a second at most)."""


def _cut_torn_tail(path: Path) -> None:
    """Drop a last line without its newline (what a kill during a write leaves)."""
    try:
        with path.open("rb+") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return
            keep = max(0, size - 65536)
            handle.seek(keep)
            tail = handle.read()
            cut = tail.rfind(b"\n")
            handle.truncate(keep + cut + 1 if cut >= 0 else keep)
            handle.flush()
            os.fsync(handle.fileno())
    except FileNotFoundError:
        return


class EventLogWriter:
    """Appends numbered records; deltas are merged and written at most every FLUSH_INTERVAL."""

    def __init__(
        self,
        path: Path,
        next_n: int = 1,
        on_record: Callable[[Record], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        _cut_torn_tail(path)
        self.path = path
        self.next_n = next_n
        self._on_record = on_record
        self._clock = clock
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._pending: Delta | None = None
        self._pending_key: tuple[object, ...] = ()
        self._parts: list[str] = []
        self._last_write = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._synced = next_n
        self.writes = 0

    @property
    def last_n(self) -> int:
        """The number of the last record written."""
        return self.next_n - 1

    def append(self, event: InterrogationEvent) -> None:
        """Record `event`, in order; deltas may wait up to FLUSH_INTERVAL."""
        if isinstance(event, Delta):
            key = event.merge_key()
            if self._pending is not None and self._pending_key != key:
                self.flush()
            if self._pending is None:
                self._pending, self._pending_key = event, key
                self._parts = []
            self._parts.append(event.text)
            if self._clock() - self._last_write >= FLUSH_INTERVAL:
                self.flush()
            elif self._timer is None:
                with contextlib.suppress(RuntimeError):  # no loop: the next event flushes
                    loop = asyncio.get_running_loop()
                    self._timer = loop.call_later(FLUSH_INTERVAL, self.flush)
            return
        self.flush()
        self._write(event)

    def sync(self) -> None:
        """Put what was written on the disk (`fsync`), unless it is there already."""
        if self._fd >= 0 and self._synced != self.next_n:
            os.fsync(self._fd)
            self._synced = self.next_n

    def flush(self) -> None:
        """Write the pending delta text now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, None
        if pending is not None and self._fd >= 0:
            merged = pending.model_copy(update={"text": "".join(self._parts)})
            self._write(cast(InterrogationEvent, merged))  # a Delta is always one of them
            self._parts = []

    def _write(self, event: InterrogationEvent) -> None:
        record = Record(self.next_n, self._clock(), event)
        os.write(self._fd, encode_record(record))
        self.next_n += 1
        self.writes += 1
        self._last_write = record.at
        if self._on_record is not None:
            self._on_record(record)

    def close(self) -> None:
        """Flush and close (idempotent)."""
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1


class EventTail:
    """Reads the records of a log as they are appended (by another process or this one)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.last_n = 0
        self._rest = b""
        self._line = 0

    def poll(self) -> list[Record]:
        """The complete records appended since the last poll (a torn last line waits)."""
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        records: list[Record] = []
        for line in lines:
            self._line += 1
            try:
                record = decode_record(line)
            except ValueError as exc:
                raise SessionCorrupt(
                    self.path, f"line {self._line} is not a valid event ({_first_line(exc)})"
                ) from None
            if record.n != self.last_n + 1:
                raise SessionCorrupt(
                    self.path,
                    f"line {self._line} is event {record.n}, expected {self.last_n + 1}",
                )
            self.last_n = record.n
            records.append(record)
        return records


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def read_events(path: Path) -> list[Record]:
    """Every complete record of a log (a torn last line is left out)."""
    return EventTail(path).poll()
