"""The vault: one full-text index over every session's words (SQLite FTS5), for the case agent
and `detektiv vault search`.

    vault = Vault(data_dir / "vault.sqlite3", store)
    vault.sync()                      # re-index the sessions that changed, drop deleted ones
    hits = vault.search("Paris")      # ranked (bm25), with session ids and snippets

What is indexed, per session: its title and hypothesis, each round's question and answer, each
round's gaps, the audit (summary, contradictions, remaining gaps), every note and every oracle
answer. A session is re-indexed when its metadata.json changes (every change to a session
replaces that file atomically: a round, a note, an answer, a status), found by one `stat` per
session. `search` syncs first; the stats are taken only when the store's session index or the
sessions folder changed (every write of the app touches one of them), or 10 s after the last
look, so a search sees every change made through detektiv at once and a hand edit within 10 s.

The index is derived data: a damaged index file is set aside and rebuilt, never a failure, and
a damaged session is left out (and tried again when it changes).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.errors import SessionCorrupt
from engine.models.session import InterrogationSession
from engine.report.claims import claim_line
from engine.storage.layout import EVENTS, METADATA, NOTES_DIR, RESPONSES_DIR
from engine.storage.sessions import SessionStore
from engine.storage.shared import SharedSQLite

__all__ = ["MAX_DOC_CHARS", "SyncReport", "Vault", "VaultHit", "documents", "search_words"]

SCHEMA_VERSION = 1
FULL_EVERY = 10.0
"""Seconds after which a sync looks at every session even when the store says nothing
changed (catches a metadata.json edited or copied in by hand)."""
MAX_DOC_CHARS = 200_000
"""Characters of one document indexed (a longer note is indexed by its beginning)."""
_DIR = re.compile(r"^\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_[0-9a-f]{8}$")


@dataclass(frozen=True, slots=True)
class VaultHit:
    """One matching piece of a session."""

    session: str
    """The session's folder name."""
    short_id: str
    name: str
    kind: str
    """hypothesis, round, gaps, audit, note or oracle."""
    ref: str
    """Where in the session: "round 3", "note 1: call.vtt", "oracle sceptic #2"."""
    snippet: str
    score: float

    def to_json(self) -> dict[str, object]:
        return {"session": self.short_id, "folder": self.session, "name": self.name,
                "kind": self.kind, "ref": self.ref, "snippet": self.snippet,
                "score": round(self.score, 3)}


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What one sync did."""

    sessions: int
    indexed: int
    removed: int
    damaged: int


def documents(session: InterrogationSession, note_texts: dict[str, str],
              answer_texts: dict[int, str]) -> Iterator[tuple[str, str, str]]:
    """(kind, ref, text) of every indexed piece of a session."""
    head = "\n".join(t for t in (session.title, session.hypothesis.text if session.hypothesis
                                 else None) if t)
    if head:
        yield "hypothesis", "hypothesis", head
    for pair in session.qa_pairs:
        yield "round", f"round {pair.sequence}", f"{pair.question}\n{pair.answer}"
        gaps = "\n".join(g.description for g in pair.gap_analysis.gaps)
        if gaps:
            yield "gaps", f"round {pair.sequence} gaps", gaps
    audit = session.audit_result
    if audit is not None:
        parts = [audit.summary, *(c.description for c in audit.contradictions),
                 *(g.description for g in audit.remaining_gaps)]
        yield "audit", f"audit ({audit.consistency_score}/100)", "\n".join(parts)
    if session.testimony is not None and session.testimony.claims:
        yield "claims", "claims", "\n".join(claim_line(c) for c in session.testimony.claims)
    for note in session.notes:
        text = note_texts.get(note.filename)
        if text:
            yield "note", f"note {note.sequence}: {note.source}", text
    for entry in session.llm_entries:
        text = answer_texts.get(entry.sequence)
        if text:
            yield "oracle", f"oracle {entry.oracle_name} #{entry.sequence}", text


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS sessions(dir TEXT PRIMARY KEY, signature TEXT NOT NULL,
                                    short_id TEXT NOT NULL, name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries(id INTEGER PRIMARY KEY, dir TEXT NOT NULL,
                                   kind TEXT NOT NULL, ref TEXT NOT NULL, text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS entries_dir ON entries(dir);
CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5(
    text, content='entries', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
"""


def _match_expression(query: str) -> str | None:
    """An FTS5 query from free text: every word quoted (no operator of the user's is
    interpreted), any of them matching; ranking puts the documents with more of them first."""
    words = list(dict.fromkeys(w.lower() for w in re.findall(r"\w+", query)))[:16]
    if not words:
        return None
    return " OR ".join(f'"{w}"' for w in words)


_STOPWORDS = frozenset("""
a about after all also an and any are as at be been before but by can could did do does for
from had has have how i if in into is it its me mention mentioned mentions my of on or our
session sessions said say says show tell that the their them then there these they this those
to was were what when where which while who whom why will with would you your
""".split())


def search_words(question: str) -> str:
    """The words of a question worth searching the vault for (question words and the
    vault's own nouns left out)."""
    words = re.findall(r"\w+", question.lower())
    return " ".join(dict.fromkeys(w for w in words if w not in _STOPWORDS and len(w) > 1))


class Vault:
    """The index (see the module docstring). Thread-safe; one connection per instance."""

    def __init__(self, path: Path, store: SessionStore) -> None:
        self.path = path
        self.store = store
        # the agent's tools search from worker threads while the app may close it: the
        # connection is reached only through `_conn.use()` or `_conn.write()`, which hold its
        # lock and hand it out (engine.storage.shared); the helpers take it from them
        self._conn = SharedSQLite(self._open(), "the vault")
        self._last_signal: tuple[int, ...] | None = None
        self._last_scan = 0.0

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(2):
            db = sqlite3.connect(self.path, timeout=30, check_same_thread=False,
                                 isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(_SCHEMA)
                row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                if row is None:
                    db.execute("INSERT OR REPLACE INTO meta VALUES('schema', ?)",
                               (str(SCHEMA_VERSION),))
                elif row[0] != str(SCHEMA_VERSION):
                    raise sqlite3.DatabaseError("another schema version")
                return db
            except sqlite3.DatabaseError:
                db.close()
                if attempt:
                    raise
                self._set_aside()
        raise AssertionError("unreachable")  # pragma: no cover

    def _set_aside(self) -> None:
        """A damaged or foreign index is derived data: move it away and start afresh."""
        for suffix in ("", "-wal", "-shm"):
            path = Path(f"{self.path}{suffix}")
            with contextlib.suppress(FileNotFoundError):
                path.replace(Path(f"{self.path}.damaged{suffix}"))

    def close(self) -> None:
        """Close the index; a use after this raises `StoreClosed`."""
        self._conn.close()

    # ---- keeping it current --------------------------------------------------------------

    def _signatures_on_disk(self) -> dict[str, str]:
        root = self.store.root
        found: dict[str, str] = {}
        try:
            entries = list(os.scandir(root))
        except FileNotFoundError:
            return found
        for entry in entries:
            if not _DIR.match(entry.name):
                continue
            try:
                stat = os.stat(os.path.join(entry.path, METADATA))
            except OSError:
                found[entry.name] = "missing"
                continue
            try:  # a running session's rounds are in its log (the journal's rule)
                size = os.stat(os.path.join(entry.path, EVENTS)).st_size
            except OSError:
                size = 0
            found[entry.name] = f"{stat.st_mtime_ns}:{stat.st_size}:{stat.st_ino}:{size}"
        return found

    def _signal(self) -> tuple[int, ...]:
        """What changes whenever a session does (`SessionStore.version`): every write of the
        app appends to the store's session index (or rewrites it), and adding or removing a
        folder changes the sessions folder."""
        return self.store.version()

    def sync(self, force: bool = False) -> SyncReport | None:
        """Bring the index in line with the sessions on disk (see the module docstring).
        Without `force`, the sessions are looked at (one stat each) only when the store says
        something changed, or `FULL_EVERY` seconds after the last look (a file edited by
        hand); None when nothing was looked at."""
        signal = self._signal()
        now = time.monotonic()
        if not force and signal == self._last_signal and now - self._last_scan < FULL_EVERY:
            return None
        self._last_signal, self._last_scan = signal, now
        return self._scan()

    def _scan(self) -> SyncReport:
        on_disk = self._signatures_on_disk()
        with self._conn.use() as db:
            indexed = dict(db.execute("SELECT dir, signature FROM sessions").fetchall())
        changed = [name for name, signature in on_disk.items()
                   if indexed.get(name) != signature]
        removed = [name for name in indexed if name not in on_disk]
        damaged = 0
        prepared: list[tuple[str, str, str, str, list[tuple[str, str, str]]]] = []
        for name in changed:
            try:
                session = self.store.load(name)
            except SessionCorrupt:
                damaged += 1
                prepared.append((name, on_disk[name], name[-8:], "(damaged)", []))
                continue
            prepared.append((name, on_disk[name], session.short_id, session.name[:200],
                             list(self._documents(name, session))))
        if prepared or removed:
            with self._conn.write() as db:
                for name in removed:
                    self._drop(db, name)
                for name, signature, short_id, title, docs in prepared:
                    self._drop(db, name)
                    db.execute("INSERT INTO sessions VALUES(?,?,?,?)",
                               (name, signature, short_id, title))
                    for kind, ref, text in docs:
                        cursor = db.execute(
                            "INSERT INTO entries(dir, kind, ref, text) VALUES(?,?,?,?)",
                            (name, kind, ref, text[:MAX_DOC_CHARS]))
                        db.execute("INSERT INTO entries_fts(rowid, text) VALUES(?,?)",
                                   (cursor.lastrowid, text[:MAX_DOC_CHARS]))
        return SyncReport(len(on_disk), len(prepared) - damaged, len(removed), damaged)

    def _documents(self, name: str, session: InterrogationSession
                   ) -> Iterator[tuple[str, str, str]]:
        notes: dict[str, str] = {}
        for note in session.notes:
            with contextlib.suppress(SessionCorrupt):
                notes[note.filename] = self.store.case_text(name, NOTES_DIR, note.filename)
        answers: dict[int, str] = {}
        for entry in session.llm_entries:
            with contextlib.suppress(SessionCorrupt):
                answers[entry.sequence] = self.store.case_text(name, RESPONSES_DIR,
                                                               entry.response_filename)
        return documents(session, notes, answers)

    @staticmethod
    def _drop(db: sqlite3.Connection, name: str) -> None:
        rows = db.execute("SELECT id, text FROM entries WHERE dir=?", (name,)).fetchall()
        for rowid, text in rows:
            db.execute("INSERT INTO entries_fts(entries_fts, rowid, text) "
                       "VALUES('delete', ?, ?)", (rowid, text))
        db.execute("DELETE FROM entries WHERE dir=?", (name,))
        db.execute("DELETE FROM sessions WHERE dir=?", (name,))

    # ---- searching -----------------------------------------------------------------------

    def search(self, query: str, limit: int = 8, per_session: int = 3,
               sync: bool = True) -> list[VaultHit]:
        """The best matches for the words of `query`, ranked by bm25, at most `per_session`
        from one session. Syncs first unless told not to (see `sync`)."""
        if sync:
            self.sync()
        expression = _match_expression(query)
        if expression is None:
            return []
        # rank first, cheaply (FTS5 sorts by bm25 and stops at the limit); snippets only for
        # the rows kept: computed for every match, they cost more than the search
        with self._conn.use() as db:
            ranked = db.execute(
                "SELECT e.id, e.dir, s.short_id, s.name, e.kind, e.ref, f.rank "
                "FROM (SELECT rowid, rank FROM entries_fts WHERE entries_fts MATCH ? "
                "      ORDER BY rank LIMIT ?) f "
                "JOIN entries e ON e.id = f.rowid JOIN sessions s ON s.dir = e.dir "
                "ORDER BY f.rank", (expression, limit * per_session * 4)).fetchall()
            kept = []
            taken: dict[str, int] = {}
            for row in ranked:
                if taken.get(row[1], 0) >= per_session:
                    continue
                taken[row[1]] = taken.get(row[1], 0) + 1
                kept.append(row)
                if len(kept) >= limit:
                    break
            marks = ",".join("?" * len(kept))
            snippets = dict(db.execute(
                "SELECT rowid, snippet(entries_fts, 0, '[', ']', '…', 14) FROM entries_fts "
                f"WHERE entries_fts MATCH ? AND rowid IN ({marks})",
                (expression, *(row[0] for row in kept))).fetchall()) if kept else {}
        return [VaultHit(folder, short_id, name, kind, ref,
                         " ".join(str(snippets.get(rowid, "")).split()), -float(rank))
                for rowid, folder, short_id, name, kind, ref, rank in kept]

    def count(self) -> tuple[int, int]:
        """(sessions, documents) in the index."""
        with self._conn.use() as db:
            sessions = db.execute("SELECT count(*) FROM sessions").fetchone()[0]
            docs = db.execute("SELECT count(*) FROM entries").fetchone()[0]
        return int(sessions), int(docs)
