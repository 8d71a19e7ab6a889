"""Conversations: turns kept per (client_id, conversation_id), two backends, one contract.

    store = SQLiteConversations(paths.data_dir / "conversations.sqlite3")
    store.append("cli", "a1b2c3d4", ConversationTurn("user", "Is water wet?"))
    recent = load_recent(store, "cli", "a1b2c3d4", policy.limits("ask"))
    recent.turns, recent.dropped            # and why each dropped turn was dropped

`MemoryConversations` keeps them in the process (tests, a one-off run); `SQLiteConversations`
in a file (WAL, a busy timeout, each append one `BEGIN IMMEDIATE` transaction, so two processes
appending to one conversation both land, numbered in order). The caller stores the user's turn
before it calls a provider: a failed call loses nothing the user typed.

`select_recent` is the pure rule: expired turns (older than `ttl_seconds`) go first; then the
newest turns are kept within `max_turns`, `max_chars` and a token budget, never splitting a
turn, and a history never opens with an answer whose question was dropped.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from engine.context.budget import Prompt
from engine.context.fit import DoesNotFit, Trim
from engine.context.policy import Limits
from engine.context.reference import LastReference
from engine.context.tokens import MESSAGE_OVERHEAD, estimate
from engine.errors import DetektivError
from engine.jsondata import read_json
from engine.providers import Message, StreamRequest
from engine.storage.shared import SharedSQLite

__all__ = [
    "ConversationInfo",
    "ConversationStore",
    "ConversationTurn",
    "ConversationsError",
    "Dropped",
    "MemoryConversations",
    "Recent",
    "SQLiteConversations",
    "conversation_prompt",
    "load_recent",
    "select_recent",
]

TurnRole = Literal["user", "assistant", "system"]
DropReason = Literal["expired", "max_turns", "max_chars", "token_budget", "orphaned_answer"]


class ConversationsError(DetektivError):
    """The conversation store cannot be used (names the file; changes nothing)."""


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One turn of a conversation."""

    role: TurnRole
    content: str
    created_at: float = field(default_factory=time.time)
    meta: dict[str, Any] = field(default_factory=dict)
    index: int = -1
    """Its number in the conversation (0, 1, …), set by the store."""


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    """A conversation in a listing."""

    client_id: str
    conversation_id: str
    turns: int
    created_at: float
    updated_at: float
    first_question: str


@dataclass(frozen=True, slots=True)
class Dropped:
    """A turn left out of a history, and why."""

    turn: ConversationTurn
    reason: DropReason


@dataclass(frozen=True, slots=True)
class Recent:
    """The turns to send, oldest first, and the ones left out."""

    turns: list[ConversationTurn]
    dropped: list[Dropped]


def select_recent(
    turns: Sequence[ConversationTurn],
    limits: Limits,
    now: float | None = None,
    budget: int | None = None,
    count: Callable[[str], int] = estimate,
) -> Recent:
    """The newest turns within the limits (see the module docstring); pure."""
    if not limits.enabled:
        return Recent([], [])
    now = time.time() if now is None else now
    dropped: list[Dropped] = []
    live: list[ConversationTurn] = []
    for turn in turns:
        if limits.ttl_seconds and now - turn.created_at > limits.ttl_seconds:
            dropped.append(Dropped(turn, "expired"))
        else:
            live.append(turn)
    kept: list[ConversationTurn] = []
    chars = tokens = 0
    stop: DropReason | None = None
    for turn in reversed(live):
        if stop is None:
            cost = count(turn.content) + MESSAGE_OVERHEAD
            if len(kept) >= limits.max_turns:
                stop = "max_turns"
            elif chars + len(turn.content) > limits.max_chars:
                stop = "max_chars"
            elif budget is not None and tokens + cost > budget:
                stop = "token_budget"
            else:
                kept.append(turn)
                chars += len(turn.content)
                tokens += cost
                continue
        dropped.append(Dropped(turn, stop))
    kept.reverse()
    while kept and kept[0].role == "assistant":
        dropped.append(Dropped(kept.pop(0), "orphaned_answer"))
    dropped.sort(key=lambda d: d.turn.index)
    return Recent(kept, dropped)


class ConversationStore(Protocol):
    """What every backend does; `tests/test_conversations.py` holds them to one contract."""

    def append(self, client_id: str, conversation_id: str, turn: ConversationTurn) -> int:
        """Store `turn` at the end of the conversation; returns its index."""

    def turns(self, client_id: str, conversation_id: str) -> list[ConversationTurn]:
        """Every turn, oldest first (empty for an unknown conversation)."""

    def conversations(self, client_id: str | None = None) -> list[ConversationInfo]:
        """Conversations, most recently updated first."""

    def reference(self, client_id: str, conversation_id: str) -> LastReference | None:
        """The conversation's `last_reference`, if any."""

    def set_reference(
        self, client_id: str, conversation_id: str, reference: LastReference | None
    ) -> None:
        """Replace (or clear) the conversation's `last_reference`."""

    def close(self) -> None:
        """Release the backend."""


def load_recent(
    store: ConversationStore,
    client_id: str,
    conversation_id: str,
    limits: Limits,
    now: float | None = None,
    budget: int | None = None,
) -> Recent:
    """`select_recent` over a stored conversation."""
    if not limits.enabled:
        return Recent([], [])
    return select_recent(store.turns(client_id, conversation_id), limits, now, budget)


def _first_question(turns: Sequence[ConversationTurn]) -> str:
    return next((t.content for t in turns if t.role == "user"), "")


class MemoryConversations:
    """Conversations in this process only."""

    def __init__(self) -> None:
        self._turns: dict[tuple[str, str], list[ConversationTurn]] = {}
        self._refs: dict[tuple[str, str], LastReference] = {}
        self._lock = threading.Lock()

    def append(self, client_id: str, conversation_id: str, turn: ConversationTurn) -> int:
        with self._lock:
            turns = self._turns.setdefault((client_id, conversation_id), [])
            index = len(turns)
            turns.append(ConversationTurn(turn.role, turn.content, turn.created_at,
                                          dict(turn.meta), index))
            return index

    def turns(self, client_id: str, conversation_id: str) -> list[ConversationTurn]:
        with self._lock:
            return list(self._turns.get((client_id, conversation_id), []))

    def conversations(self, client_id: str | None = None) -> list[ConversationInfo]:
        with self._lock:
            found = [
                ConversationInfo(c, k, len(t), t[0].created_at, t[-1].created_at,
                                 _first_question(t))
                for (c, k), t in self._turns.items()
                if t and (client_id is None or c == client_id)
            ]
        return sorted(found, key=lambda info: info.updated_at, reverse=True)

    def reference(self, client_id: str, conversation_id: str) -> LastReference | None:
        with self._lock:
            return self._refs.get((client_id, conversation_id))

    def set_reference(
        self, client_id: str, conversation_id: str, reference: LastReference | None
    ) -> None:
        with self._lock:
            if reference is None:
                self._refs.pop((client_id, conversation_id), None)
            else:
                self._refs[(client_id, conversation_id)] = reference

    def close(self) -> None:
        pass


_SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    client_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at REAL NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (client_id, conversation_id, idx)
);
CREATE TABLE IF NOT EXISTS last_reference (
    client_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    entity TEXT NOT NULL,
    kind TEXT NOT NULL,
    intent TEXT,
    updated_at REAL NOT NULL,
    turn_index INTEGER NOT NULL,
    PRIMARY KEY (client_id, conversation_id)
);
"""


class SQLiteConversations:
    """Conversations in one SQLite file (see the module docstring)."""

    BUSY_TIMEOUT = 10.0

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path, timeout=self.BUSY_TIMEOUT, isolation_level=None,
                                 check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA busy_timeout={int(self.BUSY_TIMEOUT * 1000)}")
            db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise ConversationsError(
                f"{path}: cannot open the conversation store ({exc}); the file is left as it is"
            ) from None
        # used from `ask`'s threads and the app's workers (engine.storage.shared)
        self._conn = SharedSQLite(db, "the conversation store")

    def _fail(self, exc: sqlite3.Error) -> ConversationsError:
        return ConversationsError(f"{self.path}: {exc}")

    def append(self, client_id: str, conversation_id: str, turn: ConversationTurn) -> int:
        meta = json.dumps(turn.meta, ensure_ascii=False, default=str)
        try:
            with self._conn.write() as db:
                (index,) = db.execute(
                    "SELECT COALESCE(MAX(idx) + 1, 0) FROM turns "
                    "WHERE client_id = ? AND conversation_id = ?",
                    (client_id, conversation_id),
                ).fetchone()
                db.execute(
                    "INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (client_id, conversation_id, index, turn.role, turn.content,
                     turn.created_at, meta),
                )
        except sqlite3.Error as exc:
            raise self._fail(exc) from None
        return int(index)

    def turns(self, client_id: str, conversation_id: str) -> list[ConversationTurn]:
        with self._conn.use() as db:
            try:
                rows = db.execute(
                    "SELECT role, content, created_at, meta, idx FROM turns "
                    "WHERE client_id = ? AND conversation_id = ? ORDER BY idx",
                    (client_id, conversation_id),
                ).fetchall()
            except sqlite3.Error as exc:
                raise self._fail(exc) from None
        found = []
        for role, content, created_at, meta, index in rows:
            try:
                extra = read_json(meta)
            except ValueError:
                extra = {}
            found.append(ConversationTurn(role, content, created_at,
                                          extra if isinstance(extra, dict) else {}, index))
        return found

    def conversations(self, client_id: str | None = None) -> list[ConversationInfo]:
        query = (
            "SELECT client_id, conversation_id, COUNT(*), MIN(created_at), MAX(created_at), "
            "(SELECT content FROM turns AS f WHERE f.client_id = t.client_id AND "
            " f.conversation_id = t.conversation_id AND f.role = 'user' ORDER BY idx LIMIT 1) "
            "FROM turns AS t" + (" WHERE client_id = ?" if client_id is not None else "")
            + " GROUP BY client_id, conversation_id ORDER BY MAX(created_at) DESC"
        )
        with self._conn.use() as db:
            try:
                rows = db.execute(query, () if client_id is None else (client_id,))
                return [ConversationInfo(c, k, n, first, last, question or "")
                        for c, k, n, first, last, question in rows.fetchall()]
            except sqlite3.Error as exc:
                raise self._fail(exc) from None

    def reference(self, client_id: str, conversation_id: str) -> LastReference | None:
        with self._conn.use() as db:
            try:
                row = db.execute(
                    "SELECT entity, kind, intent, updated_at, turn_index FROM last_reference "
                    "WHERE client_id = ? AND conversation_id = ?", (client_id, conversation_id),
                ).fetchone()
            except sqlite3.Error as exc:
                raise self._fail(exc) from None
        return LastReference(*row) if row else None

    def set_reference(
        self, client_id: str, conversation_id: str, reference: LastReference | None
    ) -> None:
        with self._conn.use() as db:
            try:
                if reference is None:
                    db.execute(
                        "DELETE FROM last_reference WHERE client_id = ? AND conversation_id = ?",
                        (client_id, conversation_id))
                else:
                    db.execute(
                        "INSERT OR REPLACE INTO last_reference VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (client_id, conversation_id, reference.entity, reference.kind,
                         reference.intent, reference.updated_at, reference.turn_index))
            except sqlite3.Error as exc:
                raise self._fail(exc) from None

    def close(self) -> None:
        """Close the file; a use after this raises `StoreClosed`."""
        self._conn.close()


def conversation_prompt(
    request: StreamRequest, history: Sequence[ConversationTurn], limits: Limits
) -> Prompt:
    """`request` (its messages: an optional system message, then the new user message) with
    the conversation's history between, fitted to each provider's window: the oldest turns
    give way first, never half a turn."""
    *head, question = request.messages
    full = (*head, *(Message(t.role, t.content) for t in history), question)

    def compose(limit: int, count: Callable[[str], int]) -> tuple[list[Message], Trim]:
        fixed = sum(count(m.content) + MESSAGE_OVERHEAD for m in (*head, question))
        recent = select_recent(history, limits, budget=limit - fixed, count=count)
        if fixed > limit:
            raise DoesNotFit(fixed, limit)
        omitted = tuple(d.turn.index for d in recent.dropped)
        sent = [Message(t.role, t.content) for t in recent.turns]
        return [*head, *sent, question], Trim(omitted=omitted)

    return Prompt(request=replace(request, messages=full), compose=compose)
