"""Handles shared between threads (engine.storage.shared): a store closed while eight threads
read it gives each read its result or `StoreClosed`, never a crash (a SQLite connection closed
under a running statement was a segmentation fault), and a closed workspace opens nothing
again. The suite runs under faulthandler: a crash names its threads."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine import Paths, Workspace
from engine.agent.vault import Vault
from engine.cache.cache import ResponseCache
from engine.cache.contract import CacheStore
from engine.cache.store import SQLiteCacheStore
from engine.context.conversations import ConversationTurn, SQLiteConversations
from engine.errors import StoreClosed
from engine.storage.sessions import SessionStore
from engine.storage.shared import Shared, SharedSQLite
from tests.engine.test_cache import fresh_database
from tests.support.factory import stored_session

READERS = 8


def _cache_readers(store: CacheStore) -> list[Callable[[], object]]:
    cache = ResponseCache(store)
    for i in range(200):
        cache.put(f"What is the boiling point of liquid number {i}?", f"{i} degrees")
    return [store.total, lambda: store.entries("liquid", limit=50), cache.stats,
            lambda: cache.lookup("What is the boiling point of liquid number 7?"),
            lambda: store.candidates("", ["boiling", "liquid"]), store.counters]


@pytest.fixture(params=["sqlite cache", "postgres cache", "vault", "conversations"])
def opened(request: pytest.FixtureRequest, tmp_path: Path,
           ) -> Iterator[Callable[[], tuple[Callable[[], None], list[Callable[[], object]]]]]:
    """A factory: a freshly opened store, as (close, readers)."""
    kind = request.param
    database = fresh_database(request) if kind == "postgres cache" else ""
    sessions = SessionStore(tmp_path / "sessions")
    if kind == "vault":
        for n in range(5):
            stored_session(sessions, f"Hypothesis {n} about Paris", 2)

    def open_one() -> tuple[Callable[[], None], list[Callable[[], object]]]:
        if kind == "sqlite cache":
            store: CacheStore = SQLiteCacheStore(tmp_path / "cache.sqlite3")
            return store.close, _cache_readers(store)
        if kind == "postgres cache":
            from engine.cache.postgres import PostgresCacheStore

            store = PostgresCacheStore(database)
            return store.close, _cache_readers(store)
        if kind == "vault":
            vault = Vault(tmp_path / "vault.sqlite3", sessions)
            vault.sync(force=True)
            return vault.close, [lambda: vault.search("Paris", sync=False), vault.count]
        talks = SQLiteConversations(tmp_path / "talks.sqlite3")
        for n in range(20):
            talks.append("c", "k", ConversationTurn("user", f"turn {n}", time.time()))
        return talks.close, [lambda: talks.turns("c", "k"), talks.conversations,
                             lambda: talks.reference("c", "k")]

    yield open_one


def close_during_reads(close: Callable[[], None], readers: list[Callable[[], object]],
                       after: int) -> tuple[list[bool], list[BaseException]]:
    """Eight threads read in a loop; `close()` once they made `after` reads between them.
    Which of them ended refused (`StoreClosed`), and any other exception they met."""
    results: list[int] = [0] * READERS
    refused: list[bool] = [False] * READERS
    other: list[BaseException] = []
    started = threading.Barrier(READERS + 1)

    def read(slot: int) -> None:
        started.wait()
        try:
            while True:
                readers[(slot + results[slot]) % len(readers)]()
                results[slot] += 1
        except StoreClosed as exc:
            assert "closed" in exc.message
            refused[slot] = True
        except BaseException as exc:  # anything else is the defect under test
            other.append(exc)

    threads = [threading.Thread(target=read, args=(n,)) for n in range(READERS)]
    for thread in threads:
        thread.start()
    started.wait()
    while sum(results) < after:
        time.sleep(0.0005)
    close()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    return refused, other


def test_a_store_closed_while_eight_threads_read_it(
        opened: Callable[[], tuple[Callable[[], None], list[Callable[[], object]]]]) -> None:
    rng = random.Random(32)
    for _ in range(12):
        close, readers = opened()
        refused, other = close_during_reads(close, readers, after=rng.randrange(1, 40))
        assert other == [], other
        assert all(refused), "every reader ends refused once the store is closed"
        close()  # closing twice is harmless


def test_a_use_after_close_is_store_closed_and_close_waits_for_the_use(tmp_path: Path) -> None:
    conn = SharedSQLite(sqlite3.connect(tmp_path / "x.sqlite3", check_same_thread=False,
                                        isolation_level=None), "the test store")
    inside, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def slow_reader() -> None:
        with conn.use() as db:
            inside.set()
            release.wait(30)
            seen.append(db.execute("SELECT 41 + 1").fetchone()[0])

    reader = threading.Thread(target=slow_reader)
    reader.start()
    assert inside.wait(30)
    closer = threading.Thread(target=conn.close)
    closer.start()
    closer.join(0.05)
    assert closer.is_alive() and not conn.closed  # close waits for the use in progress
    release.set()
    reader.join(30)
    closer.join(30)
    assert seen == [42] and conn.closed
    with pytest.raises(StoreClosed, match="the test store is closed"), conn.use():
        pass
    with pytest.raises(StoreClosed), conn.write():
        pass


def test_close_runs_its_last_flush_before_the_handle_goes() -> None:
    closed: list[str] = []
    handle = Shared(["data"], "a list", lambda h: closed.append("closed"))
    handle.close(before=lambda: closed.append("flushed"))
    handle.close(before=lambda: closed.append("again"))
    assert closed == ["flushed", "closed"]


async def test_a_closed_workspace_opens_no_store_again(paths: Paths) -> None:
    workspace = Workspace(paths)
    cache = workspace.cache
    cache.put("What colour is the sky?", "blue")
    conversations = workspace.conversations
    vault = workspace.agent.vault
    await workspace.aclose()
    assert workspace.closed
    for what in (lambda: workspace.cache, lambda: workspace.conversations,
                 lambda: workspace.agent.vault, cache.store.total,
                 lambda: conversations.turns("a", "b"), vault.count):
        with pytest.raises(StoreClosed):
            what()
    await workspace.aclose()  # twice is harmless
    # what was written is there for the next process
    again = Workspace(paths)
    try:
        assert again.cache.store.total() == 1
    finally:
        await again.aclose()
