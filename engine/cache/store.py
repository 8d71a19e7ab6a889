"""The response cache's SQLite backend (SPEC §3), keeping the contract of
`engine.cache.contract`.

SQLite: one file in the data directory, WAL, a 30 s busy timeout, every write in
`BEGIN IMMEDIATE` (a writer takes the lock before reading, so two never deadlock upgrading),
an FTS5 table of keywords as the candidate index, `auto_vacuum = INCREMENTAL` so eviction gives
space back.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from engine.cache.contract import (
    ENTRIES,
    SCHEMA_VERSION,
    CacheStore,
    Candidate,
    entry_from_row,
    merge,
    query_plan,
)
from engine.cache.models import CacheEntry
from engine.storage.shared import SharedSQLite

__all__ = ["CacheStore", "Candidate", "SQLiteCacheStore", "merge"]

_SCHEMA = """
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS entries (
                    id INTEGER PRIMARY KEY, entry_id TEXT NOT NULL UNIQUE, scope TEXT NOT NULL,
                    normalised TEXT NOT NULL, question TEXT NOT NULL, data TEXT NOT NULL,
                    last_used REAL NOT NULL, uses INTEGER NOT NULL DEFAULT 0,
                    UNIQUE (scope, normalised));
                CREATE INDEX IF NOT EXISTS entries_lru ON entries (last_used);
                CREATE TABLE IF NOT EXISTS variations (
                    scope TEXT NOT NULL, normalised TEXT NOT NULL, entry_id TEXT NOT NULL,
                    PRIMARY KEY (scope, normalised));
                CREATE INDEX IF NOT EXISTS variations_entry ON variations (entry_id);
                CREATE VIRTUAL TABLE IF NOT EXISTS terms USING fts5(
                    keywords, scope UNINDEXED, entry_id UNINDEXED, question UNINDEXED,
                    normalised UNINDEXED, detail = none);
                CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY,
                                                     value INTEGER NOT NULL);
                CREATE TABLE IF NOT EXISTS term_counts (term TEXT PRIMARY KEY,
                                                        n INTEGER NOT NULL);
                CREATE TABLE IF NOT EXISTS vectors (
                    id INTEGER PRIMARY KEY AUTOINCREMENT, entry_id TEXT NOT NULL UNIQUE,
                    scope TEXT NOT NULL, model TEXT NOT NULL, vec BLOB NOT NULL);
                CREATE INDEX IF NOT EXISTS vectors_scope ON vectors (scope, model, id);
            """
class SQLiteCacheStore(CacheStore):
    """The default backend: `cache.sqlite3` in the data directory."""

    def __init__(self, path: Path) -> None:
        self._init_buffers()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA busy_timeout = 30000")
        if _empty(db):  # only before the first table: eviction then frees the file
            db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        db.execute("PRAGMA journal_mode = WAL")
        # a cache may lose its last writes to a power cut, never its consistency: in WAL mode
        # NORMAL syncs at checkpoints, not at every commit
        db.execute("PRAGMA synchronous = NORMAL")
        # lookups read a few pages of a large file: mapped, they cost no read() each
        db.execute("PRAGMA mmap_size = 1073741824")
        # the connection is shared by the app's threads: every use under its lock, refused
        # once closed (engine.storage.shared)
        self._conn = SharedSQLite(db, "the response cache")
        with self._write() as db:
            # schema 1's keyword index held the keywords only: candidates then read the
            # entries' rows, whose answers make them large (the index now holds what a lookup
            # scores and checks)
            old_index = {row[1] for row in db.execute("PRAGMA table_info(terms)")}
            if old_index and "entry_id" not in old_index:
                db.execute("ALTER TABLE terms RENAME TO terms_1")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            if old_index and "entry_id" not in old_index:
                db.execute("INSERT INTO terms (rowid, keywords, scope, entry_id, question, "
                           "normalised) SELECT t.rowid, t.keywords, t.scope, e.entry_id, "
                           "e.question, e.normalised FROM terms_1 t JOIN entries e "
                           "ON e.id = t.rowid")
                db.execute("DROP TABLE terms_1")
            columns = {row[1] for row in db.execute("PRAGMA table_info(entries)")}
            if "uses" not in columns:  # schema 1
                db.execute("ALTER TABLE entries ADD COLUMN uses INTEGER NOT NULL DEFAULT 0")
                counts: Counter[str] = Counter()
                for (words,) in db.execute("SELECT keywords FROM terms"):
                    counts.update({ENTRIES, *words.split()})
                db.executemany("INSERT INTO term_counts VALUES (?, ?)", counts.items())
            db.execute("INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT (key) DO "
                       "UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))

    def _write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._conn.write()

    def _read(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._conn.use()

    _COLUMNS = "e.data, e.uses, e.last_used"

    def _row(self, data: str, uses: int = 0, last_used: float = 0.0) -> CacheEntry:
        return entry_from_row(data, uses, last_used)

    def put(self, entry: CacheEntry) -> CacheEntry:
        self.flush()
        with self._write() as db:
            row = db.execute(f"SELECT {self._COLUMNS} FROM entries e WHERE scope = ? AND "
                             "normalised = ?", (entry.scope, entry.normalised)).fetchone()
            entry = merge(self._row(*row) if row is not None else None, entry)
            self._store(db, entry)
        return entry

    def _store(self, db: sqlite3.Connection, entry: CacheEntry) -> None:
        db.execute(
            "INSERT INTO entries (entry_id, scope, normalised, question, data, last_used, uses) "
            "VALUES (?, ?, ?, ?, ?, ?, 0) ON CONFLICT (entry_id) DO UPDATE "
            "SET data = excluded.data, last_used = excluded.last_used, uses = 0, "
            "question = excluded.question, normalised = excluded.normalised",
            (entry.entry_id, entry.scope, entry.normalised, entry.question,
             entry.model_dump_json(), entry.last_used.timestamp()))
        rowid = db.execute("SELECT id FROM entries WHERE entry_id = ?",
                           (entry.entry_id,)).fetchone()[0]
        _forget_terms(db, rowid)
        db.execute("INSERT INTO terms (rowid, keywords, scope, entry_id, question, normalised) "
                   "VALUES (?, ?, ?, ?, ?, ?)", (rowid, " ".join(entry.keywords), entry.scope,
                                                 entry.entry_id, entry.question,
                                                 entry.normalised))
        db.executemany("INSERT INTO term_counts VALUES (?, 1) ON CONFLICT (term) DO UPDATE "
                       "SET n = n + 1", [(w,) for w in {ENTRIES, *entry.keywords}])
        for variation in entry.variations:
            db.execute("INSERT OR REPLACE INTO variations VALUES (?, ?, ?)",
                       (entry.scope, variation, entry.entry_id))

    def save(self, entry: CacheEntry) -> None:
        self.flush()
        with self._write() as db:
            self._store(db, entry)

    def get(self, entry_id: str) -> CacheEntry | None:
        ref = entry_id.strip().lower()
        if not ref:
            return None
        with self._read() as db:
            row = db.execute(f"SELECT {self._COLUMNS} FROM entries e WHERE entry_id = ?",
                             (ref,)).fetchone()
            if row is not None:
                return self._row(*row)
            rows = db.execute(f"SELECT {self._COLUMNS} FROM entries e WHERE entry_id "
                              "LIKE ? LIMIT 2",
                              (ref.replace("%", "").replace("_", "") + "%",)).fetchall()
        return self._row(*rows[0]) if len(rows) == 1 else None

    def find(self, scope: str, normalised: str) -> tuple[CacheEntry, str] | None:
        with self._read() as db:
            row = db.execute(f"SELECT {self._COLUMNS} FROM entries e WHERE scope = ? AND "
                             "normalised = ?", (scope, normalised)).fetchone()
            if row is not None:
                return self._row(*row), "exact"
            row = db.execute(
                f"SELECT {self._COLUMNS} FROM variations v JOIN entries e ON "
                "e.entry_id = v.entry_id WHERE v.scope = ? AND v.normalised = ?",
                (scope, normalised)).fetchone()
        return (self._row(*row), "variation") if row is not None else None

    def candidates(self, scope: str, keywords: list[str], limit: int = 50,
                   loose: bool = False) -> list[Candidate]:
        words = sorted({k for k in keywords if k.isalnum()})
        if not words:
            return []
        with self._read() as db:
            frequency = dict(db.execute(
                "SELECT term, n FROM term_counts WHERE term IN "
                f"({', '.join('?' * (len(words) + 1))})", [ENTRIES, *words]).fetchall())
        plan = query_plan(words, frequency, loose)
        if plan is None:
            return []
        groups, excluded = plan

        def every(terms: list[str]) -> str:
            return "(" + " AND ".join(f'"{w}"' for w in terms) + ")"

        # unranked: rapidfuzz scores them all, and bm25 over 100k entries costs 30x the query
        query = " OR ".join(every(group) for group in groups)
        if excluded is not None:
            query = f"({query}) NOT {every(excluded)}"
        with self._read() as db:
            rows = db.execute(
                "SELECT entry_id, question, normalised, keywords FROM terms WHERE terms MATCH ? "
                "AND scope = ? LIMIT ?", (query, scope, limit)).fetchall()
        return [Candidate(*row) for row in rows]

    def put_vector(self, entry_id: str, scope: str, model: str, vector: bytes) -> None:
        with self._write() as db:
            db.execute("DELETE FROM vectors WHERE entry_id = ?", (entry_id,))
            db.execute("INSERT INTO vectors (entry_id, scope, model, vec) VALUES (?, ?, ?, ?)",
                       (entry_id, scope, model, vector))

    def vectors(self, scope: str, model: str, after: int = 0,
                ) -> list[tuple[int, str, bytes]]:
        with self._read() as db:
            rows = db.execute(
                "SELECT id, entry_id, vec FROM vectors WHERE scope = ? AND model = ? AND id > ? "
                "ORDER BY id", (scope, model, after)).fetchall()
        return [(int(i), str(e), bytes(v)) for i, e, v in rows]

    def add_variation(self, entry_id: str, scope: str, normalised: str) -> None:
        with self._write() as db:
            row = db.execute("SELECT data FROM entries WHERE entry_id = ?",
                             (entry_id,)).fetchone()
            if row is None:
                return
            entry = CacheEntry.model_validate_json(row[0])
            if normalised not in entry.variations:
                entry = entry.model_copy(update={
                    "variations": sorted({*entry.variations, normalised})})
                db.execute("UPDATE entries SET data = ? WHERE entry_id = ?",
                           (entry.model_dump_json(), entry_id))
            db.execute("INSERT OR REPLACE INTO variations VALUES (?, ?, ?)",
                       (scope, normalised, entry_id))

    def delete(self, entry_id: str) -> bool:
        self.flush()
        with self._write() as db:
            return _delete(db, entry_id)

    def entries(self, search: str = "", limit: int = 1000) -> list[CacheEntry]:
        self.flush()
        pattern = "%" + search.replace("%", "").replace("_", "") + "%"
        with self._read() as db:
            rows = db.execute(
                f"SELECT {self._COLUMNS} FROM entries e WHERE question LIKE ? "
                "ORDER BY last_used DESC LIMIT ?", (pattern, limit)).fetchall()
        return [self._row(*r) for r in rows]

    def total(self) -> int:
        with self._read() as db:
            return int(db.execute("SELECT count(*) FROM entries").fetchone()[0])

    def _write_buffered(self, counts: Counter[str], uses: dict[str, tuple[int, float]],
                        ) -> None:
        with self._write() as db:
            for name, by in counts.items():
                db.execute("INSERT INTO counters VALUES (?, ?) ON CONFLICT (name) DO UPDATE "
                           "SET value = value + excluded.value", (name, by))
            for entry_id, (times, when) in uses.items():
                db.execute("UPDATE entries SET uses = uses + ?, last_used = max(last_used, ?) "
                           "WHERE entry_id = ?", (times, when, entry_id))

    def counters(self) -> dict[str, int]:
        self.flush()
        with self._read() as db:
            rows = db.execute("SELECT name, value FROM counters").fetchall()
        return {str(name): int(value) for name, value in rows}

    def meta(self, key: str) -> str | None:
        with self._read() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row is not None else None

    def reindex(self, key: str, value: str, rewrite: Callable[[CacheEntry], CacheEntry],
                ) -> int:
        self.flush()
        with self._write() as db:
            if self.meta(key) == value:  # another process did it meanwhile
                return 0
            rows = db.execute(f"SELECT {self._COLUMNS} FROM entries e "
                              "ORDER BY last_used DESC").fetchall()
            db.execute("DELETE FROM variations")
            # every old form out of the way first: a new form may be another entry's old one
            db.execute("UPDATE entries SET normalised = char(0) || entry_id")
            seen: set[tuple[str, str]] = set()
            done = 0
            for row in rows:
                entry = rewrite(self._row(*row)).model_copy(update={"variations": []})
                if (entry.scope, entry.normalised) in seen:
                    _delete(db, entry.entry_id)
                    continue
                seen.add((entry.scope, entry.normalised))
                self._store(db, entry)
                done += 1
            db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                       "SET value = excluded.value", (key, value))
        return done

    def size(self) -> int:
        with self._read() as db:
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            free = db.execute("PRAGMA freelist_count").fetchone()[0]
            page = db.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * page)

    def evict_to(self, target: int) -> int:
        self.flush()
        removed = 0
        while self.size() > target:
            with self._write() as db:
                ids = [r[0] for r in db.execute(
                    "SELECT entry_id FROM entries ORDER BY last_used LIMIT 50").fetchall()]
                if not ids:
                    break
                for entry_id in ids:
                    removed += _delete(db, entry_id)
        with self._read() as db:
            db.execute("PRAGMA incremental_vacuum")
        return removed

    def close(self) -> None:
        """Write what is buffered and close; a use after this raises `StoreClosed`."""
        self._conn.close(before=self.flush)


def _empty(db: sqlite3.Connection) -> bool:
    return bool(db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0)


def _forget_terms(db: sqlite3.Connection, rowid: int) -> None:
    """Take an entry's keywords out of the index and of the keyword counts."""
    row = db.execute("SELECT keywords FROM terms WHERE rowid = ?", (rowid,)).fetchone()
    if row is None:
        return
    db.executemany("UPDATE term_counts SET n = n - 1 WHERE term = ?",
                   [(w,) for w in {ENTRIES, *row[0].split()}])
    db.execute("DELETE FROM terms WHERE rowid = ?", (rowid,))


def _delete(db: sqlite3.Connection, entry_id: str) -> bool:
    row = db.execute("SELECT id FROM entries WHERE entry_id = ?", (entry_id,)).fetchone()
    if row is None:
        return False
    db.execute("DELETE FROM entries WHERE id = ?", (row[0],))
    db.execute("DELETE FROM vectors WHERE entry_id = ?", (entry_id,))
    _forget_terms(db, row[0])
    db.execute("DELETE FROM variations WHERE entry_id = ?", (entry_id,))
    return True
