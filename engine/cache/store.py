"""Where cache entries live: the `CacheStore` contract and its SQLite backend (SPEC §3).

The contract, for every backend (the same contract tests run against each):

- one entry per (scope, normalised question): `put` of a duplicate updates it in place;
- `find` by normalised question or by a recorded variation, within one scope;
- `candidates` returns at most `limit` entries sharing a keyword with the question, those
  holding every keyword first (unranked: the caller scores them), from an index (never a
  scan of every entry), so a lookup stays fast at 100k entries;
- writes are atomic and safe from several processes at once: none is lost, none fails with
  "database is locked";
- `size` is the database's real size in bytes; `evict_to` removes least-recently-used entries.

SQLite: one file in the data directory, WAL, a 30 s busy timeout, every write in
`BEGIN IMMEDIATE` (a writer takes the lock before reading, so two never deadlock upgrading),
an FTS5 table of keywords as the candidate index, `auto_vacuum = INCREMENTAL` so eviction gives
space back.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path

from engine.cache.models import CacheEntry

__all__ = ["CacheStore", "SQLiteCacheStore", "merge"]

SCHEMA_VERSION = 1
_SCHEMA = """
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS entries (
                    id INTEGER PRIMARY KEY, entry_id TEXT NOT NULL UNIQUE, scope TEXT NOT NULL,
                    normalised TEXT NOT NULL, question TEXT NOT NULL, data TEXT NOT NULL,
                    last_used REAL NOT NULL, UNIQUE (scope, normalised));
                CREATE INDEX IF NOT EXISTS entries_lru ON entries (last_used);
                CREATE TABLE IF NOT EXISTS variations (
                    scope TEXT NOT NULL, normalised TEXT NOT NULL, entry_id TEXT NOT NULL,
                    PRIMARY KEY (scope, normalised));
                CREATE INDEX IF NOT EXISTS variations_entry ON variations (entry_id);
                CREATE VIRTUAL TABLE IF NOT EXISTS terms USING fts5(keywords, scope UNINDEXED);
                CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY,
                                                     value INTEGER NOT NULL);
            """


class CacheStore(ABC):
    """See the module docstring for the contract."""

    @abstractmethod
    def put(self, entry: CacheEntry) -> CacheEntry:
        """Store `entry`, or update the one with its scope and normalised question (keeping
        that one's id, creation time and usage); the stored entry."""

    @abstractmethod
    def save(self, entry: CacheEntry) -> None:
        """Write back an entry read from the store (usage, variations, validation)."""

    @abstractmethod
    def get(self, entry_id: str) -> CacheEntry | None:
        """The entry with this id or unique id prefix."""

    @abstractmethod
    def find(self, scope: str, normalised: str) -> tuple[CacheEntry, str] | None:
        """(entry, "exact" | "variation") for a normalised question in `scope`."""

    @abstractmethod
    def candidates(self, scope: str, keywords: list[str], limit: int = 50) -> list[CacheEntry]:
        """Entries of `scope` that share a keyword, best first."""

    @abstractmethod
    def delete(self, entry_id: str) -> bool:
        """Remove an entry; False when there was none."""

    @abstractmethod
    def entries(self, search: str = "", limit: int = 1000) -> list[CacheEntry]:
        """Entries, most recently used first, whose question contains `search`."""

    @abstractmethod
    def total(self) -> int:
        """How many entries there are."""

    @abstractmethod
    def count(self, name: str, by: int = 1) -> None:
        """Add to a counter (hit, miss, near_miss, guard_reject)."""

    @abstractmethod
    def counters(self) -> dict[str, int]:
        """Every counter."""

    @abstractmethod
    def size(self) -> int:
        """Bytes the database takes."""

    @abstractmethod
    def evict_to(self, target: int) -> int:
        """Remove least-recently-used entries until `size() <= target`; how many."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection."""


def merge(old: CacheEntry | None, new: CacheEntry) -> CacheEntry:
    """`new` stored over `old` (the same scope and question): `old`'s id, creation time and
    usage kept, variations joined."""
    if old is None:
        return new
    return new.model_copy(update={
        "entry_id": old.entry_id, "created_at": old.created_at,
        "usage_count": old.usage_count,
        "variations": sorted({*old.variations, *new.variations}),
    })


class SQLiteCacheStore(CacheStore):
    """The default backend: `cache.sqlite3` in the data directory."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None,
                                   check_same_thread=False)
        self._db.execute("PRAGMA busy_timeout = 30000")
        if _empty(self._db):  # only before the first table: eviction then frees the file
            self._db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        self._db.execute("PRAGMA journal_mode = WAL")
        # a cache may lose its last writes to a power cut, never its consistency: in WAL mode
        # NORMAL syncs at checkpoints, not at every commit (a lookup writes twice)
        self._db.execute("PRAGMA synchronous = NORMAL")
        with self._write() as db:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                       (str(SCHEMA_VERSION),))


    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _row(self, data: str) -> CacheEntry:
        return CacheEntry.model_validate_json(data)

    def put(self, entry: CacheEntry) -> CacheEntry:
        with self._write() as db:
            row = db.execute("SELECT data FROM entries WHERE scope = ? AND normalised = ?",
                             (entry.scope, entry.normalised)).fetchone()
            entry = merge(self._row(row[0]) if row is not None else None, entry)
            self._store(db, entry)
        return entry

    def _store(self, db: sqlite3.Connection, entry: CacheEntry) -> None:
        db.execute(
            "INSERT INTO entries (entry_id, scope, normalised, question, data, last_used) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (entry_id) DO UPDATE "
            "SET data = excluded.data, last_used = excluded.last_used, "
            "question = excluded.question",
            (entry.entry_id, entry.scope, entry.normalised, entry.question,
             entry.model_dump_json(), entry.last_used.timestamp()))
        rowid = db.execute("SELECT id FROM entries WHERE entry_id = ?",
                           (entry.entry_id,)).fetchone()[0]
        db.execute("DELETE FROM terms WHERE rowid = ?", (rowid,))
        db.execute("INSERT INTO terms (rowid, keywords, scope) VALUES (?, ?, ?)",
                   (rowid, " ".join(entry.keywords), entry.scope))
        for variation in entry.variations:
            db.execute("INSERT OR REPLACE INTO variations VALUES (?, ?, ?)",
                       (entry.scope, variation, entry.entry_id))

    def save(self, entry: CacheEntry) -> None:
        with self._write() as db:
            self._store(db, entry)

    def get(self, entry_id: str) -> CacheEntry | None:
        ref = entry_id.strip().lower()
        if not ref:
            return None
        rows = self._db.execute("SELECT data FROM entries WHERE entry_id LIKE ? LIMIT 2",
                                (ref.replace("%", "").replace("_", "") + "%",)).fetchall()
        return self._row(rows[0][0]) if len(rows) == 1 else None

    def find(self, scope: str, normalised: str) -> tuple[CacheEntry, str] | None:
        row = self._db.execute("SELECT data FROM entries WHERE scope = ? AND normalised = ?",
                               (scope, normalised)).fetchone()
        if row is not None:
            return self._row(row[0]), "exact"
        row = self._db.execute(
            "SELECT e.data FROM variations v JOIN entries e ON e.entry_id = v.entry_id "
            "WHERE v.scope = ? AND v.normalised = ?", (scope, normalised)).fetchone()
        return (self._row(row[0]), "variation") if row is not None else None

    def candidates(self, scope: str, keywords: list[str], limit: int = 50) -> list[CacheEntry]:
        words = sorted({k for k in keywords if k.isalnum()})
        if not words:
            return []
        # entries holding every keyword first (the only ones the meaning guard can accept),
        # then others sharing one, to explain a miss. Unranked: rapidfuzz scores them all,
        # and bm25 over 100k entries costs 30× the query (7.8 ms against 0.26 ms)
        found: dict[int, str] = {}
        for query in (" AND ".join(f'"{w}"' for w in words),
                      " OR ".join(f'"{w}"' for w in words)):
            if len(found) >= limit:
                break
            rows = self._db.execute(
                "SELECT e.id, e.data FROM terms t JOIN entries e ON e.id = t.rowid "
                "WHERE terms MATCH ? AND t.scope = ? LIMIT ?",
                (query, scope, limit)).fetchall()
            for rowid, data in rows:
                if len(found) < limit:
                    found.setdefault(rowid, data)
        return [self._row(data) for data in found.values()]

    def delete(self, entry_id: str) -> bool:
        with self._write() as db:
            return _delete(db, entry_id)

    def entries(self, search: str = "", limit: int = 1000) -> list[CacheEntry]:
        pattern = "%" + search.replace("%", "").replace("_", "") + "%"
        rows = self._db.execute(
            "SELECT data FROM entries WHERE question LIKE ? ORDER BY last_used DESC LIMIT ?",
            (pattern, limit)).fetchall()
        return [self._row(r[0]) for r in rows]

    def total(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM entries").fetchone()[0])

    def count(self, name: str, by: int = 1) -> None:
        with self._write() as db:
            db.execute("INSERT INTO counters VALUES (?, ?) ON CONFLICT (name) DO UPDATE "
                       "SET value = value + excluded.value", (name, by))

    def counters(self) -> dict[str, int]:
        return {str(name): int(value) for name, value in
                self._db.execute("SELECT name, value FROM counters").fetchall()}

    def size(self) -> int:
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
        page = self._db.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * page)

    def evict_to(self, target: int) -> int:
        removed = 0
        while self.size() > target:
            with self._write() as db:
                ids = [r[0] for r in db.execute(
                    "SELECT entry_id FROM entries ORDER BY last_used LIMIT 50").fetchall()]
                if not ids:
                    break
                for entry_id in ids:
                    removed += _delete(db, entry_id)
        with self._lock:
            self._db.execute("PRAGMA incremental_vacuum")
        return removed

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _empty(db: sqlite3.Connection) -> bool:
    return bool(db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0)


def _delete(db: sqlite3.Connection, entry_id: str) -> bool:
    row = db.execute("SELECT id FROM entries WHERE entry_id = ?", (entry_id,)).fetchone()
    if row is None:
        return False
    db.execute("DELETE FROM entries WHERE id = ?", (row[0],))
    db.execute("DELETE FROM terms WHERE rowid = ?", (row[0],))
    db.execute("DELETE FROM variations WHERE entry_id = ?", (entry_id,))
    return True
