"""One rule for a handle that several threads use (a database connection above all).

    conn = SharedSQLite(sqlite3.connect(path, check_same_thread=False), "the response cache")
    with conn.use() as db:          # reads: the lock held until the rows are fetched
        rows = db.execute("SELECT …").fetchall()
    with conn.write() as db:        # writes: the lock, then BEGIN IMMEDIATE … COMMIT
        db.execute("INSERT …")
    conn.close()                    # waits for the use in progress, then closes
    conn.use()                      # from now on: StoreClosed, never a crash

**The rule.** A handle reached from more than one thread (a Textual worker, `asyncio.to_thread`,
the event loop) is used only inside `use()` or `write()`, which hold its one re-entrant lock for
the whole use — statement *and* fetch, since a cursor read after the lock is released could
race a close. `close()` takes the same lock, so it waits for the use in progress; every use after
it raises `StoreClosed`. A read racing a close therefore gets its result or `StoreClosed`, never
a connection freed under a running statement (that was a segmentation fault: SQLite's
connection closed by the main thread while a worker's `SELECT` ran on it).

The lock is re-entrant because a store's method may call another of its own inside a
transaction (`reindex` reads `meta`). Holding it costs ~0.1 µs uncontended: nothing beside a
lookup's SQL. Stores that open a file per operation (the session index, evaluation folders,
journals) share no handle and need none of this: `flock` on a file opened per call excludes
other threads as it does other processes.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from engine.errors import StoreClosed

__all__ = ["Shared", "SharedSQLite"]

H = TypeVar("H")


class Shared(Generic[H]):
    """A handle used by several threads under one lock, refused once closed."""

    def __init__(self, handle: H, name: str, close: Callable[[H], object]) -> None:
        """`name` says what the handle is for in the `StoreClosed` message ("the response
        cache"); `close` releases it (called once, under the lock)."""
        self._handle: H | None = handle
        self.name = name
        self._close = close
        self._lock = threading.RLock()

    @property
    def closed(self) -> bool:
        return self._handle is None

    @contextlib.contextmanager
    def use(self) -> Iterator[H]:
        """The handle, with the lock held until the block ends; `StoreClosed` once closed."""
        with self._lock:
            handle = self._handle
            if handle is None:
                raise StoreClosed(f"{self.name} is closed")
            yield handle

    def close(self, before: Callable[[], object] | None = None) -> None:
        """Close the handle once (later calls do nothing), after the use in progress ends;
        `before()` runs first, under the lock and with the handle still open (a last flush)."""
        with self._lock:
            handle = self._handle
            if handle is None:
                return
            try:
                if before is not None:
                    before()
            finally:
                self._handle = None
                self._close(handle)


class SharedSQLite(Shared[sqlite3.Connection]):
    """A SQLite connection opened in autocommit mode (`isolation_level=None`) and
    `check_same_thread=False`, under the rule above."""

    def __init__(self, db: sqlite3.Connection, name: str) -> None:
        super().__init__(db, name, sqlite3.Connection.close)

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: `BEGIN IMMEDIATE` (the writer takes the file's lock before
        reading, so two never deadlock upgrading) … `COMMIT`, rolled back on any error."""
        with self.use() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
