"""The response cache: matching tiers, the guard on fuzzy hits, explanations, validation,
time-sensitive questions, the size cap, and four processes writing at once: the same contract
tests on SQLite and on a real PostgreSQL server started by the suite on 127.0.0.1."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.cache.cache import ResponseCache
from engine.cache.guard import CHECKS
from engine.cache.normalise import keywords
from engine.cache.store import CacheStore, SQLiteCacheStore
from engine.cache.validate import requires_realtime
from tests.support.servers import ROOT, closed_port

BACKENDS = ["sqlite", "postgres"]


def fresh_database(request: pytest.FixtureRequest) -> str:
    """The URL of a new, empty database on the suite's PostgreSQL server."""
    import uuid

    import psycopg

    url: str = request.getfixturevalue("postgres_url")
    name = f"t{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + f"/{name}"


def open_store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> CacheStore:
    """A fresh, empty store of `backend` (on PostgreSQL: a database of its own)."""
    if backend == "sqlite":
        return SQLiteCacheStore(tmp_path / "cache.sqlite3")
    from engine.cache.postgres import PostgresCacheStore

    return PostgresCacheStore(fresh_database(request))


@pytest.fixture(params=BACKENDS)
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(backend, where): a path for SQLite, a fresh database's URL for PostgreSQL."""
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "shared.sqlite3")
        return
    yield "postgres", fresh_database(request)


@pytest.fixture(params=BACKENDS)
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ResponseCache]:
    store = open_store(request.param, request, tmp_path)
    yield ResponseCache(store)
    store.close()


def test_exact_variation_and_fuzzy_tiers_each_explain_themselves(cache: ResponseCache) -> None:
    entry = cache.put("Is coffee bad for the heart?", "Not in moderation.")
    assert entry.validated and entry.keywords == keywords("coffee bad heart")
    why, served = cache.lookup("IS COFFEE BAD FOR THE HEART")
    assert why.hit and why.tier == "exact" and served is not None
    assert served.payload == "Not in moderation." and served.usage_count == 1
    why, served = cache.lookup("Is coffee bad for your heart?")
    assert why.hit and why.tier == "fuzzy" and why.score is not None and why.score >= 85
    assert [c.name for c in why.checks] == list(CHECKS) and all(c.passed for c in why.checks)
    why, _ = cache.lookup("Is coffee bad for your heart?")
    assert why.tier == "variation"  # the accepted wording was recorded
    why, served = cache.lookup("Is coffee good for the heart?")
    assert not why.hit and served is None
    assert why.rejected and why.rejected[0][2].startswith("antonyms: opposites: good/bad")
    why, _ = cache.lookup("What is the boiling point of water?")
    assert not why.hit and why.reason == "no entry"
    stats = cache.stats()
    assert (stats["hit"], stats["miss"], stats["guard_reject"]) == (3, 2, 1)
    assert stats["entries"] == 1 and stats["bytes"] > 0


def test_a_duplicate_updates_its_entry(cache: ResponseCache) -> None:
    first = cache.put("Who wrote Hamlet?", "Shakespeare.")
    second = cache.put("who wrote hamlet", "William Shakespeare.")
    assert second.entry_id == first.entry_id and len(cache.store.entries()) == 1
    assert cache.lookup("Who wrote Hamlet?")[1].payload == "William Shakespeare."  # type: ignore[union-attr]


def test_only_validated_answers_are_served(cache: ResponseCache) -> None:
    cut = cache.put("Explain entropy", "Entropy is", finish_reason="length")
    refusal = cache.put("Explain gravity", "I'm sorry, I cannot help with that.")
    empty = cache.put("Explain light", "  ")
    for entry, check in ((cut, "finished"), (refusal, "not_refusal"), (empty, "non_empty")):
        assert entry.validation_metadata is not None
        assert entry.validation_metadata.status == "FAILED" and not entry.validated
        assert any(c.name == check and not c.passed for c in entry.validation_metadata.checks)
        why, served = cache.lookup(entry.question)
        assert served is None and "validation FAILED" in why.reason
    fine = cache.put("Explain heat", "Heat is energy in transfer.")
    cache.invalidate(fine.entry_id[:8])
    why, served = cache.lookup("Explain heat")
    assert served is None and "invalidated" in why.reason


def test_time_sensitive_questions_are_never_served(cache: ResponseCache) -> None:
    assert requires_realtime("What is the weather in Paris today?")
    assert not requires_realtime("What is the capital of France?")
    for now in ("Wie ist das Wetter heute?", "Qual é a cotação do dólar agora?",
                "Who is the president of France?", "Wer ist der Bundeskanzler?",
                "Quem é o presidente do Brasil?", "Is the store open this weekend?"):
        assert requires_realtime(now), now
    assert not requires_realtime("Who was the first president of the USA?")
    entry = cache.put("What is the latest Python version?", "3.14")
    assert entry.requires_realtime
    why, served = cache.lookup("What is the latest Python version?")
    assert served is None and "time-sensitive" in why.reason
    marked = cache.put("Who is the CEO of Acme?", "Jane", realtime=True)
    assert marked.requires_realtime and cache.lookup("Who is the CEO of Acme?")[1] is None


def test_scopes_never_mix(cache: ResponseCache) -> None:
    cache.put("Who wrote Hamlet?", "Shakespeare.", scope="oracle:abc")
    assert cache.lookup("Who wrote Hamlet?", scope="oracle:abc")[1] is not None
    assert cache.lookup("Who wrote Hamlet?", scope="ask:def")[1] is None
    assert cache.lookup("Who wrote Hamlet?")[1] is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_size_cap_evicts_the_least_recently_used(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = open_store(backend, request, tmp_path)
    cache = ResponseCache(store, max_bytes=400_000)
    try:
        for i in range(300):
            # random text: a server that compresses values must still count 2 KB an answer
            cache.put(f"Question number {i} about topic {i}",
                      f"answer {i} " + secrets.token_urlsafe(1500))
        assert store.size() <= 400_000
        kept = {e.question for e in store.entries(limit=10_000)}
        assert "Question number 299 about topic 299" in kept
        assert "Question number 0 about topic 0" not in kept
    finally:
        store.close()


WRITER = """
import sys
from pathlib import Path
from engine.cache.cache import ResponseCache
from engine.cache.store import SQLiteCacheStore
if sys.argv[1].startswith("postgresql://"):
    from engine.cache.postgres import PostgresCacheStore
    store = PostgresCacheStore(sys.argv[1])
else:
    store = SQLiteCacheStore(Path(sys.argv[1]))
cache = ResponseCache(store)
for i in range(150):
    cache.put(f"writer {sys.argv[2]} question {i}", f"answer {i}")
    cache.lookup(f"writer {sys.argv[2]} question {i}")
store.close()
"""


def test_four_processes_writing_at_once_lose_nothing(backend_url: tuple[str, str]) -> None:
    backend, where = backend_url
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, where, str(n)], cwd=ROOT,
                                stderr=subprocess.PIPE, text=True) for n in range(4)]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        assert "locked" not in err
    if backend == "sqlite":
        store: CacheStore = SQLiteCacheStore(Path(where))
    else:
        from engine.cache.postgres import PostgresCacheStore

        store = PostgresCacheStore(where)
    try:
        assert len(store.entries(limit=10_000)) == 600
        assert store.counters()["hit"] == 600
    finally:
        store.close()


def test_the_cache_commands(home: Path, tmp_path: Path) -> None:
    from tests.support.cli import detektiv

    put = detektiv("cache", "put", "Is coffee bad for the heart?", "--answer", "Not really.")
    assert put.returncode == 0 and "stored (PASSED)" in put.stderr
    entry_id = put.stdout.strip()
    hit = detektiv("cache", "match", "is coffee bad for your heart")
    assert hit.returncode == 0 and hit.stdout.startswith("HIT: score")
    assert "✓ negation" in hit.stdout and "Not really." in hit.stdout
    served = json.loads(detektiv("cache", "match", "is coffee bad for your heart",
                                 "--json").stdout)
    assert served["served"] == {"entry_id": entry_id, "question": "Is coffee bad for the heart?",
                                "answer_first_line": "Not really."}
    assert served["explanation"]["entry_id"] == entry_id
    miss = detektiv("cache", "match", "Is coffee good for the heart?", "--json")
    data = json.loads(miss.stdout)
    assert miss.returncode == 1 and data["answer"] is None and data["served"] is None
    assert data["explanation"]["rejected"][0][2].startswith("antonyms")
    assert entry_id[:8] in detektiv("cache", "list").stdout
    exported = tmp_path / "cache.json"
    assert detektiv("cache", "export", "-o", str(exported)).returncode == 0
    assert detektiv("cache", "delete", entry_id[:8]).returncode == 0
    assert detektiv("cache", "list", "--json").stdout.strip() == "[]"
    assert detektiv("cache", "import", str(exported)).returncode == 0
    assert detektiv("cache", "match", "Is coffee bad for the heart?").returncode == 0
    bad = detektiv("cache", "import", str(ROOT / "README.md"))
    assert bad.returncode == 2 and "not a cache export" in bad.stderr
    gone = detektiv("cache", "invalidate", "ffffffff")
    assert gone.returncode == 2 and "no cache entry matches" in gone.stderr
    stats = json.loads(detektiv("cache", "stats", "--json").stdout)
    assert stats["entries"] == 1 and stats["guard_reject"] == 1


def test_the_cache_commands_on_postgresql(home: Path, postgres_url: str,
                                          request: pytest.FixtureRequest) -> None:
    from tests.support.cli import detektiv

    url = fresh_database(request)
    (home / "config.toml").write_text(f'[cache]\nurl = "{url}"\nthreshold = 80\n')
    assert detektiv("cache", "put", "Who wrote Hamlet?", "--answer", "Shakespeare.")\
        .returncode == 0
    hit = detektiv("cache", "match", "who wrote hamlet")
    assert hit.returncode == 0 and "threshold 80" in hit.stdout
    from engine.cache.postgres import PostgresCacheStore

    store = PostgresCacheStore(url)
    try:
        assert [e.question for e in store.entries()] == ["Who wrote Hamlet?"]
    finally:
        store.close()
    (home / "config.toml").write_text('[cache]\nurl = "mysql://x"\n')
    bad = detektiv("cache", "stats")
    assert bad.returncode == 2 and "cache.url" in bad.stderr and "postgresql://" in bad.stderr
    dead = f"postgresql://detektiv@127.0.0.1:{closed_port()}/x"
    (home / "config.toml").write_text(f'[cache]\nurl = "{dead}"\n')
    down = detektiv("cache", "stats")
    assert down.returncode == 2 and "cannot connect to PostgreSQL" in down.stderr


async def test_the_router_serves_a_repeated_ask_from_the_cache_and_no_cache_bypasses_it(
    home: Path, llama_server: object
) -> None:
    from tests.support.cli import detektiv
    from tests.support.faults import FaultProxy
    from tests.support.servers import LlamaServer

    assert isinstance(llama_server, LlamaServer)
    proxy = FaultProxy(llama_server.base)
    await proxy.start()
    try:
        (home / "config.toml").write_text(
            f'[providers.llama]\nkind = "openai"\nmodel = "gemma"\nbase_url = "{proxy.url}"\n'
            "priority = 1\n")
        import asyncio

        def ask(*extra: str) -> subprocess.CompletedProcess[str]:
            return detektiv("ask", "--temperature", "0", "--max-tokens", "128", *extra,
                            "Name a colour.")

        first = await asyncio.to_thread(ask)
        assert first.returncode == 0 and first.stdout.strip(), first.stderr
        assert proxy.connections == 1
        second = await asyncio.to_thread(ask)
        assert second.returncode == 0 and second.stdout == first.stdout
        assert "served from the cache (the same question" in second.stderr
        assert proxy.connections == 1  # no call went to the provider
        third = await asyncio.to_thread(ask, "--no-cache")
        assert third.returncode == 0 and proxy.connections == 2
        assert "served from the cache" not in third.stderr
        (home / "config.toml").write_text((home / "config.toml").read_text()
                                          + "\n[cache]\nask = false\n")
        fourth = await asyncio.to_thread(ask)
        assert fourth.returncode == 0 and proxy.connections == 3
    finally:
        await proxy.stop()


async def test_the_witness_role_is_cached_only_when_configured(
    home: Path, llama_server: object
) -> None:
    from engine import Paths, Workspace
    from engine.providers import StreamRequest, TokenDelta
    from engine.routing.events import ProviderEvent
    from tests.support.servers import LlamaServer

    assert isinstance(llama_server, LlamaServer)
    base = (f'[providers.llama]\nkind = "openai"\nmodel = "gemma"\n'
            f'base_url = "{llama_server.url}"\npriority = 1\n')
    request = StreamRequest.of("Name a colour.", temperature=0, max_tokens=128)
    for witness in (False, True):
        (home / "config.toml").write_text(base + f"\n[cache]\nwitness = {str(witness).lower()}\n")
        workspace = Workspace(Paths.from_env())
        router = await workspace.new_router(discover=False)
        try:
            runs = []
            for _ in range(2):
                events = [e async for e in router.stream(request, role="witness")]
                runs.append(events)
            hits = [e for e in runs[1] if isinstance(e, ProviderEvent) and e.type == "cache_hit"]
            assert bool(hits) == witness
            texts = ["".join(e.text for e in run if isinstance(e, TokenDelta)) for run in runs]
            assert texts[0] == texts[1]
        finally:
            await router.aclose()
            await workspace.aclose()


def test_a_new_validator_version_validates_again_before_serving(
    cache: ResponseCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.cache.cache as cache_module
    import engine.cache.validate as validate_module

    entry = cache.put("Who painted the Mona Lisa?", "Leonardo da Vinci.")
    assert entry.validation_metadata is not None
    current = entry.validation_metadata.validator_version
    assert current == validate_module.VALIDATOR_VERSION
    monkeypatch.setattr(cache_module, "VALIDATOR_VERSION", current + 1)
    monkeypatch.setattr(validate_module, "VALIDATOR_VERSION", current + 1)
    why, served = cache.lookup("Who painted the Mona Lisa?")
    assert why.hit and why.validator_version == current + 1 and served is not None
    stored = cache.store.get(entry.entry_id)
    assert stored is not None and stored.validation_metadata is not None
    assert stored.validation_metadata.validator_version == current + 1


def test_a_changed_normaliser_reindexes_the_store_before_any_lookup(
    cache: ResponseCache
) -> None:
    """An entry stored under an older normaliser ("12+4" then read "12 4") must not be found
    by that form: the store is reindexed when it opens under a new one."""
    from engine.cache.contract import merge

    stale = cache.put("What is 12+4?", "16.")
    cache.store.save(merge(None, stale.model_copy(update={"normalised": "what is 12 4",
                                                          "keywords": ["what", "12", "4"]})))
    assert cache.store.meta("normaliser") is not None
    import engine.cache.cache as cache_module

    old = cache_module.VERSION
    try:
        cache.store.reindex("normaliser", "old", lambda e: e)  # as an older release left it
        cache_module.VERSION = "next"
        again = ResponseCache(cache.store)
        assert again.lookup("What is 12 4")[1] is None
        why, served = again.lookup("What is 12 + 4?")
        assert served is not None and served.payload == "16." and why.tier == "exact"
        assert cache.store.meta("normaliser") == "next"
    finally:
        cache_module.VERSION = old


def test_uses_and_counters_are_written_in_batches_and_never_lost(cache: ResponseCache) -> None:
    entry = cache.put("Who wrote Hamlet?", "Shakespeare.")
    for _ in range(5):
        assert cache.lookup("Who wrote Hamlet?")[1] is not None
    assert cache.stats()["hit"] == 5  # a read that shows them writes what is buffered
    (listed,) = cache.store.entries()
    assert listed.entry_id == entry.entry_id and listed.usage_count == 5
    assert listed.last_used > entry.last_used


def test_a_schema_1_sqlite_cache_is_migrated_and_still_served(tmp_path: Path) -> None:
    """The cache file of the previous release: a keywords-only index, no use counts, the old
    normaliser. Opened, it is migrated in place, and its entries are found by their words."""
    import sqlite3

    from engine.cache.models import CacheEntry

    path = tmp_path / "cache.sqlite3"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE entries (id INTEGER PRIMARY KEY, entry_id TEXT NOT NULL UNIQUE,
            scope TEXT NOT NULL, normalised TEXT NOT NULL, question TEXT NOT NULL,
            data TEXT NOT NULL, last_used REAL NOT NULL, UNIQUE (scope, normalised));
        CREATE TABLE variations (scope TEXT NOT NULL, normalised TEXT NOT NULL,
            entry_id TEXT NOT NULL, PRIMARY KEY (scope, normalised));
        CREATE VIRTUAL TABLE terms USING fts5(keywords, scope UNINDEXED);
        CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
    """)
    for number, (question, old_form) in enumerate((
            ("What are the side effects of vitamin B-3?", "what are the side effects of "
             "vitamin b 3"), ("What is 12+4?", "what is 12 4"))):
        entry = CacheEntry(question=question, normalised=old_form, payload=f"answer {number}",
                           keywords=old_form.split()[2:])
        db.execute("INSERT INTO entries VALUES (?, ?, '', ?, ?, ?, ?)",
                   (number + 1, entry.entry_id, old_form, question, entry.model_dump_json(),
                    entry.last_used.timestamp()))
        db.execute("INSERT INTO terms (rowid, keywords, scope) VALUES (?, ?, '')",
                   (number + 1, " ".join(entry.keywords)))
    db.commit()
    db.close()
    store = SQLiteCacheStore(path)
    try:
        cache = ResponseCache(store)
        assert store.meta("schema_version") == "2"
        why, served = cache.lookup("what are actually the side effects of vitamin B3")
        assert served is not None and served.payload == "answer 0", why.reason
        assert cache.lookup("What is 12 4")[1] is None
        assert cache.lookup("what is 12 + 4")[1] is not None
    finally:
        store.close()


def test_the_candidate_query_asks_for_the_rarest_words_only() -> None:
    from engine.cache.contract import ENTRIES, query_plan

    frequency = {ENTRIES: 100_000, "what": 100_000, "coffee": 5_000, "heart": 2_000,
                 "bad": 30_000, "1990": 20}
    assert query_plan(["what", "coffee", "heart"], frequency, loose=False) == \
        ([["heart", "coffee", "what"]], None)
    assert query_plan(["what", "1990", "coffee"], frequency, loose=False) == \
        ([["1990"]], None)  # 20 entries at most: one word is enough
    assert query_plan(["cofee", "heart", "bad"], frequency, loose=False) is None
    assert query_plan(["cofee", "heart", "bad"], frequency, loose=True) == \
        ([["heart", "bad"]], None)  # the mistyped word held by no entry is the one missing
    groups, excluded = query_plan(["heart", "coffee", "1990"], frequency, loose=True) or ([], [])
    assert excluded == ["1990", "heart"] and groups == [["heart"], ["1990"]]
    assert query_plan(["cofee", "hart"], frequency, loose=True) is None
