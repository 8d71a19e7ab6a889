"""The vault: one full-text index over every session's words (SQLite FTS5), for the case agent
and `detektiv vault search`.

    vault = Vault(data_dir / "vault.sqlite3", store)
    vault.sync()                      # re-index the sessions that changed, drop deleted ones
    hits = vault.search("Paris")      # ranked (bm25), with session ids and snippets

What is indexed, per session: its title and hypothesis, each round's question and answer, each
round's gaps, the audit (summary, contradictions, remaining gaps), every note and every oracle
answer. A session is re-indexed when its metadata.json changes (every change to a session
replaces that file atomically: a round, a note, an answer, a status), found by one `stat` per
session; `search` syncs first, so results are never older than the sessions on disk.

The index is derived data: a damaged index file is set aside and rebuilt, never a failure, and
a damaged session is left out (and tried again when it changes).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.errors import SessionCorrupt
from engine.models.session import InterrogationSession
from engine.storage.sessions import METADATA, NOTES_DIR, RESPONSES_DIR, SessionStore

__all__ = ["MAX_DOC_CHARS", "SyncReport", "Vault", "VaultHit", "documents"]

SCHEMA_VERSION = 1
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


class Vault:
    """The index (see the module docstring). Thread-safe; one connection per instance."""

    def __init__(self, path: Path, store: SessionStore) -> None:
        self.path = path
        self.store = store
        self._lock = threading.RLock()
        self._db = self._open()

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
        with self._lock:
            self._db.close()

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
            found[entry.name] = f"{stat.st_mtime_ns}:{stat.st_size}:{stat.st_ino}"
        return found

    def sync(self) -> SyncReport:
        """Bring the index in line with the sessions on disk (see the module docstring)."""
        on_disk = self._signatures_on_disk()
        with self._lock:
            indexed = dict(self._db.execute("SELECT dir, signature FROM sessions").fetchall())
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
            with self._lock, self._transaction():
                for name in removed:
                    self._drop(name)
                for name, signature, short_id, title, docs in prepared:
                    self._drop(name)
                    self._db.execute("INSERT INTO sessions VALUES(?,?,?,?)",
                                     (name, signature, short_id, title))
                    for kind, ref, text in docs:
                        cursor = self._db.execute(
                            "INSERT INTO entries(dir, kind, ref, text) VALUES(?,?,?,?)",
                            (name, kind, ref, text[:MAX_DOC_CHARS]))
                        self._db.execute("INSERT INTO entries_fts(rowid, text) VALUES(?,?)",
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

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _drop(self, name: str) -> None:
        rows = self._db.execute("SELECT id, text FROM entries WHERE dir=?", (name,)).fetchall()
        for rowid, text in rows:
            self._db.execute("INSERT INTO entries_fts(entries_fts, rowid, text) "
                             "VALUES('delete', ?, ?)", (rowid, text))
        self._db.execute("DELETE FROM entries WHERE dir=?", (name,))
        self._db.execute("DELETE FROM sessions WHERE dir=?", (name,))

    # ---- searching -----------------------------------------------------------------------

    def search(self, query: str, limit: int = 8, per_session: int = 3,
               sync: bool = True) -> list[VaultHit]:
        """The best matches for the words of `query`, ranked by bm25, at most `per_session`
        from one session. Syncs first unless told not to."""
        if sync:
            self.sync()
        expression = _match_expression(query)
        if expression is None:
            return []
        sql = ("SELECT e.dir, s.short_id, s.name, e.kind, e.ref, "
               "snippet(entries_fts, 0, '[', ']', '…', 14), bm25(entries_fts) AS score "
               "FROM entries_fts JOIN entries e ON e.id = entries_fts.rowid "
               "JOIN sessions s ON s.dir = e.dir "
               "WHERE entries_fts MATCH ? ORDER BY score LIMIT ?")
        with self._lock:
            rows = self._db.execute(sql, (expression, limit * per_session * 4)).fetchall()
        hits: list[VaultHit] = []
        taken: dict[str, int] = {}
        for folder, short_id, name, kind, ref, snippet, score in rows:
            if taken.get(folder, 0) >= per_session:
                continue
            taken[folder] = taken.get(folder, 0) + 1
            hits.append(VaultHit(folder, short_id, name, kind, ref,
                                 " ".join(snippet.split()), -float(score)))
            if len(hits) >= limit:
                break
        return hits

    def count(self) -> tuple[int, int]:
        """(sessions, documents) in the index."""
        with self._lock:
            sessions = self._db.execute("SELECT count(*) FROM sessions").fetchone()[0]
            docs = self._db.execute("SELECT count(*) FROM entries").fetchone()[0]
        return int(sessions), int(docs)
