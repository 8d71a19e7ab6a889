"""The PostgreSQL backend of the response cache, for a team sharing one cache (psycopg 3).

    [cache]
    url = "postgresql://user@db.example/detektiv"

Same contract as `SQLiteCacheStore` (engine/cache/contract.py), the same contract tests. Schema
created and migrated by the app (`meta.schema_version`). Candidates come from a GIN index on
the keyword array: those holding every keyword (`@>`) first, then all but one. The size cap
counts the live rows' bytes (see `size`). Writes are single transactions; `put` locks the row
it may update (`SELECT … FOR UPDATE`), and a unique violation from a concurrent insert of the
same question is retried as an update.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

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
from engine.errors import ConfigError
from engine.storage.shared import Shared

__all__ = ["PostgresCacheStore"]

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS detektiv_cache_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS detektiv_cache_entries (
        id BIGSERIAL PRIMARY KEY, entry_id TEXT NOT NULL UNIQUE, scope TEXT NOT NULL,
        normalised TEXT NOT NULL, question TEXT NOT NULL, data TEXT NOT NULL,
        keywords TEXT[] NOT NULL, last_used DOUBLE PRECISION NOT NULL,
        UNIQUE (scope, normalised))""",
    "ALTER TABLE detektiv_cache_entries ADD COLUMN IF NOT EXISTS uses BIGINT NOT NULL "
    "DEFAULT 0",
    "CREATE INDEX IF NOT EXISTS detektiv_cache_lru ON detektiv_cache_entries (last_used)",
    "CREATE INDEX IF NOT EXISTS detektiv_cache_terms ON detektiv_cache_entries "
    "USING GIN (keywords) WITH (fastupdate = off)",
    # an index made with the pending list: every query scans that list until a vacuum
    "ALTER INDEX detektiv_cache_terms SET (fastupdate = off)",
    "CREATE TABLE IF NOT EXISTS detektiv_cache_term_counts (term TEXT PRIMARY KEY, "
    "n BIGINT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS detektiv_cache_vectors (
        id BIGSERIAL PRIMARY KEY, entry_id TEXT NOT NULL UNIQUE, scope TEXT NOT NULL,
        model TEXT NOT NULL, vec BYTEA NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS detektiv_cache_vectors_scope ON detektiv_cache_vectors "
    "(scope, model, id)",
    """CREATE TABLE IF NOT EXISTS detektiv_cache_variations (
        scope TEXT NOT NULL, normalised TEXT NOT NULL, entry_id TEXT NOT NULL,
        PRIMARY KEY (scope, normalised))""",
    "CREATE INDEX IF NOT EXISTS detektiv_cache_variation_entry ON "
    "detektiv_cache_variations (entry_id)",
    "CREATE TABLE IF NOT EXISTS detektiv_cache_counters (name TEXT PRIMARY KEY, "
    "value BIGINT NOT NULL)",
]


_COLUMNS = "data, uses, last_used"


class PostgresCacheStore(CacheStore):
    """See the module docstring."""

    def __init__(self, url: str) -> None:
        import psycopg

        self._init_buffers()
        try:
            connection = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise ConfigError(f"[cache] url: cannot connect to PostgreSQL: "
                              f"{str(exc).strip().splitlines()[0]}") from None
        # shared by the app's threads: the connection is reached only through `_use()` or
        # `_tx()`, which hold its lock and hand it out (`StoreClosed` once closed:
        # engine.storage.shared); the helpers take it from them
        self._conn = Shared(connection, "the response cache (PostgreSQL)",
                            psycopg.Connection.close)
        with self._tx() as db:
            db.execute("SELECT pg_advisory_xact_lock(7461735)")  # one migrator at once
            for statement in _SCHEMA:
                db.execute(statement)
            if self._one(db, "SELECT value FROM detektiv_cache_meta WHERE key = "
                         "'schema_version'") == "1":  # keyword counts start from the entries
                db.execute(
                    "INSERT INTO detektiv_cache_term_counts SELECT term, count(*) FROM "
                    "detektiv_cache_entries, unnest(keywords || ARRAY[%s]) AS term "
                    "GROUP BY term ON CONFLICT (term) DO NOTHING", (ENTRIES,))
                db.execute("SELECT gin_clean_pending_list('detektiv_cache_terms')")
            db.execute("INSERT INTO detektiv_cache_meta VALUES ('schema_version', %s) "
                       "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                       (str(SCHEMA_VERSION),))

    def _use(self) -> contextlib.AbstractContextManager[Any]:
        return self._conn.use()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._conn.use() as db, db.transaction():
            yield db

    @staticmethod
    def _one(db: Any, query: str, params: tuple[Any, ...] = ()) -> Any:
        row = db.execute(query, params).fetchone()
        return row[0] if row is not None else None

    def put(self, entry: CacheEntry) -> CacheEntry:
        import psycopg

        self.flush()
        for _ in range(3):
            try:
                with self._tx() as db:
                    row = db.execute(
                        f"SELECT {_COLUMNS} FROM detektiv_cache_entries WHERE scope = %s AND "
                        "normalised = %s FOR UPDATE", (entry.scope, entry.normalised)).fetchone()
                    old = entry_from_row(*row) if row is not None else None
                    merged = merge(old, entry)
                    self._store(db, merged)
                return merged
            except psycopg.errors.UniqueViolation:
                continue  # another process inserted the same question: update it instead
        raise ConfigError("the cache entry could not be stored (concurrent writers)")

    def _store(self, db: Any, entry: CacheEntry) -> None:
        old = self._one(db, "SELECT keywords FROM detektiv_cache_entries WHERE entry_id = %s",
                        (entry.entry_id,))
        self._count_terms(db, old, entry.keywords)
        db.execute(
            "INSERT INTO detektiv_cache_entries (entry_id, scope, normalised, question, data, "
            "keywords, last_used) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (entry_id) "
            "DO UPDATE SET data = excluded.data, keywords = excluded.keywords, uses = 0, "
            "last_used = excluded.last_used, question = excluded.question, "
            "normalised = excluded.normalised",
            (entry.entry_id, entry.scope, entry.normalised, entry.question,
             entry.model_dump_json(), entry.keywords, entry.last_used.timestamp()))
        for variation in entry.variations:
            db.execute(
                "INSERT INTO detektiv_cache_variations VALUES (%s, %s, %s) ON CONFLICT "
                "(scope, normalised) DO UPDATE SET entry_id = excluded.entry_id",
                (entry.scope, variation, entry.entry_id))

    def _count_terms(self, db: Any, gone: list[str] | None, added: list[str] | None
                     ) -> None:
        """The keyword counts moved from an entry's old keywords (None: it is new) to its new
        ones (None: it is deleted), one word at a time in one order (two writers never
        deadlock on them)."""
        delta: Counter[str] = Counter()
        if gone is not None:
            delta.subtract({ENTRIES, *gone})
        if added is not None:
            delta.update({ENTRIES, *added})
        for word, by in sorted(delta.items()):
            if by:
                db.execute(
                    "INSERT INTO detektiv_cache_term_counts VALUES (%s, %s) ON CONFLICT "
                    "(term) DO UPDATE SET n = detektiv_cache_term_counts.n + excluded.n",
                    (word, by))

    def save(self, entry: CacheEntry) -> None:
        self.flush()
        with self._tx() as db:
            self._store(db, entry)

    def get(self, entry_id: str) -> CacheEntry | None:
        ref = entry_id.strip().lower().replace("%", "").replace("_", "")
        if not ref:
            return None
        with self._use() as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM detektiv_cache_entries WHERE "
                              "entry_id = %s", (ref,)).fetchall() or \
                db.execute(f"SELECT {_COLUMNS} FROM detektiv_cache_entries WHERE "
                           "entry_id LIKE %s LIMIT 2", (ref + "%",)).fetchall()
        return entry_from_row(*rows[0]) if len(rows) == 1 else None

    def find(self, scope: str, normalised: str) -> tuple[CacheEntry, str] | None:
        with self._use() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM detektiv_cache_entries WHERE "
                             "scope = %s AND normalised = %s",
                             (scope, normalised)).fetchone()
            if row is not None:
                return entry_from_row(*row), "exact"
            row = db.execute(
                f"SELECT {_COLUMNS.replace('data', 'e.data')} FROM detektiv_cache_variations v "
                "JOIN detektiv_cache_entries e ON e.entry_id = v.entry_id WHERE v.scope = %s "
                "AND v.normalised = %s", (scope, normalised)).fetchone()
        return (entry_from_row(*row), "variation") if row is not None else None

    def candidates(self, scope: str, keywords: list[str], limit: int = 50,
                   loose: bool = False) -> list[Candidate]:
        words = sorted(set(keywords))
        if not words:
            return []
        with self._use() as db:
            frequency: dict[str, int] = dict(db.execute(
                "SELECT term, n FROM detektiv_cache_term_counts WHERE term = ANY(%s)",
                ([ENTRIES, *words],)).fetchall())
            plan = query_plan(words, frequency, loose)
            if plan is None:
                return []
            groups, excluded = plan
            # the rarest keywords, as in the SQLite store: `@>` on the GIN index
            condition = " OR ".join("keywords @> %s::text[]" for _ in groups)
            params: list[Any] = [scope, *groups]
            if excluded is not None:
                condition = f"({condition}) AND NOT keywords @> %s::text[]"
                params.append(excluded)
            rows = db.execute(
                "SELECT entry_id, question, normalised, array_to_string(keywords, ' ') "
                f"FROM detektiv_cache_entries WHERE scope = %s AND ({condition}) LIMIT %s",
                (*params, limit)).fetchall()
        return [Candidate(*row) for row in rows]

    def put_vector(self, entry_id: str, scope: str, model: str, vector: bytes) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM detektiv_cache_vectors WHERE entry_id = %s",
                       (entry_id,))
            db.execute("INSERT INTO detektiv_cache_vectors (entry_id, scope, model, vec) "
                       "VALUES (%s, %s, %s, %s)", (entry_id, scope, model, vector))

    def vectors(self, scope: str, model: str, after: int = 0,
                ) -> list[tuple[int, str, bytes]]:
        with self._use() as db:
            rows = db.execute(
                "SELECT id, entry_id, vec FROM detektiv_cache_vectors WHERE scope = %s AND "
                "model = %s AND id > %s ORDER BY id", (scope, model, after)).fetchall()
        return [(int(i), str(e), bytes(v)) for i, e, v in rows]

    def add_variation(self, entry_id: str, scope: str, normalised: str) -> None:
        with self._tx() as db:
            data = self._one(db, "SELECT data FROM detektiv_cache_entries WHERE entry_id = %s "
                             "FOR UPDATE", (entry_id,))
            if data is None:
                return
            entry = CacheEntry.model_validate_json(data)
            if normalised not in entry.variations:
                entry = entry.model_copy(update={
                    "variations": sorted({*entry.variations, normalised})})
                db.execute("UPDATE detektiv_cache_entries SET data = %s WHERE "
                           "entry_id = %s", (entry.model_dump_json(), entry_id))
            db.execute(
                "INSERT INTO detektiv_cache_variations VALUES (%s, %s, %s) ON CONFLICT "
                "(scope, normalised) DO UPDATE SET entry_id = excluded.entry_id",
                (scope, normalised, entry_id))

    def delete(self, entry_id: str) -> bool:
        self.flush()
        with self._tx() as db:
            return self._delete(db, entry_id)

    def _delete(self, db: Any, entry_id: str) -> bool:
        words = self._one(db, "DELETE FROM detektiv_cache_entries WHERE entry_id = %s "
                          "RETURNING keywords", (entry_id,))
        db.execute("DELETE FROM detektiv_cache_vectors WHERE entry_id = %s", (entry_id,))
        gone = words is not None
        if gone:
            self._count_terms(db, words, None)
        db.execute("DELETE FROM detektiv_cache_variations WHERE entry_id = %s",
                   (entry_id,))
        return bool(gone)

    def entries(self, search: str = "", limit: int = 1000) -> list[CacheEntry]:
        self.flush()
        pattern = "%" + search.replace("%", "").replace("_", "") + "%"
        with self._use() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM detektiv_cache_entries WHERE question ILIKE %s "
                "ORDER BY last_used DESC LIMIT %s", (pattern, limit)).fetchall()
        return [entry_from_row(*r) for r in rows]

    def total(self) -> int:
        with self._use() as db:
            return int(self._one(db, "SELECT count(*) FROM detektiv_cache_entries"))

    def _write_buffered(self, counts: Counter[str], uses: dict[str, tuple[int, float]],
                        ) -> None:
        with self._tx() as db:
            for name, by in counts.items():
                db.execute(
                    "INSERT INTO detektiv_cache_counters VALUES (%s, %s) ON CONFLICT (name) "
                    "DO UPDATE SET value = detektiv_cache_counters.value + excluded.value",
                    (name, by))
            for entry_id, (times, when) in uses.items():
                db.execute(
                    "UPDATE detektiv_cache_entries SET uses = uses + %s, "
                    "last_used = greatest(last_used, %s) WHERE entry_id = %s",
                    (times, when, entry_id))

    def counters(self) -> dict[str, int]:
        self.flush()
        with self._use() as db:
            rows = db.execute("SELECT name, value FROM detektiv_cache_counters").fetchall()
        return {str(name): int(value) for name, value in rows}

    def meta(self, key: str) -> str | None:
        with self._use() as db:
            value = self._one(db, "SELECT value FROM detektiv_cache_meta WHERE key = %s", (key,))
        return str(value) if value is not None else None

    def reindex(self, key: str, value: str, rewrite: Callable[[CacheEntry], CacheEntry],
                ) -> int:
        self.flush()
        with self._tx() as db:
            db.execute("SELECT pg_advisory_xact_lock(7461735)")
            if self._one(db, "SELECT value FROM detektiv_cache_meta WHERE key = %s",
                         (key,)) == value:
                return 0  # another process did it meanwhile
            rows = db.execute(f"SELECT {_COLUMNS} FROM detektiv_cache_entries "
                              "ORDER BY last_used DESC").fetchall()
            db.execute("DELETE FROM detektiv_cache_variations")
            # every old form out of the way first: a new form may be another entry's old one
            db.execute("UPDATE detektiv_cache_entries SET normalised = chr(1) || entry_id")
            seen: set[tuple[str, str]] = set()
            done = 0
            for row in rows:
                entry = rewrite(entry_from_row(*row)).model_copy(update={"variations": []})
                if (entry.scope, entry.normalised) in seen:
                    self._delete(db, entry.entry_id)
                    continue
                seen.add((entry.scope, entry.normalised))
                self._store(db, entry)
                done += 1
            db.execute("INSERT INTO detektiv_cache_meta VALUES (%s, %s) ON CONFLICT "
                       "(key) DO UPDATE SET value = excluded.value", (key, value))
        return done

    def size(self) -> int:
        """The bytes of the live rows. PostgreSQL keeps a table's files after a DELETE (the
        space is reused, not returned), so the files' size could never come down to the cap;
        the rows' size does."""
        with self._use() as db:
            total = self._one(db, "SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM "
                              "detektiv_cache_entries t")
        return int(total or 0)

    def evict_to(self, target: int) -> int:
        self.flush()
        removed = 0
        while self.size() > target:
            with self._tx() as db:
                ids = [r[0] for r in db.execute(
                    "SELECT entry_id FROM detektiv_cache_entries ORDER BY last_used "
                    "LIMIT 50").fetchall()]
                if not ids:
                    break
                for entry_id in ids:
                    removed += self._delete(db, entry_id)
        return removed

    def close(self) -> None:
        """Write what is buffered and close; a use after this raises `StoreClosed`."""
        self._conn.close(before=self.flush)
