"""The vault index over real stored sessions: every kind of text found, kept current as
sessions change, damaged sessions and a damaged index survived, hostile queries harmless, and
`detektiv vault search` on the command line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from engine import Workspace
from engine.agent.vault import Vault
from engine.storage.layout import METADATA
from engine.storage.sessions import SessionStore
from tests.support.factory import case_session
from tests.support.servers import cli


@pytest.fixture
def store(paths) -> SessionStore:  # type: ignore[no-untyped-def]
    return SessionStore.of(paths)


@pytest.fixture
def vault(paths, store):  # type: ignore[no-untyped-def]
    index = Vault(paths.data_dir / "vault.sqlite3", store)
    yield index
    index.close()


def _kinds(vault: Vault, query: str) -> set[tuple[str, str]]:
    return {(h.short_id, h.kind) for h in vault.search(query, limit=50, per_session=10)}


def test_every_kind_of_text_of_a_session_is_found(store, vault, paths) -> None:
    name = case_session(
        store, "Vitamin B3 lowers cholesterol",
        [("What dose did you take?", "About 500 mg of niacin daily."),
         ("And in March?", "I never took niacin.")],
        gaps=["the flushing side effect is unexplained"],
        audit="The witness is inconsistent about niacin.",
        contradiction="daily niacin in round 1, never in round 2",
        answer=("sceptic", "The alibi of the cholesterol test is thin."))
    Workspace(paths).cases.add_note(name, "Call with Dr. Okafor about flushing.", "call.txt")
    short = store.load(name).short_id
    assert _kinds(vault, "B3") == {(short, "hypothesis")}
    assert (short, "round") in _kinds(vault, "dose")
    assert (short, "gaps") in _kinds(vault, "unexplained")
    assert (short, "audit") in _kinds(vault, "inconsistent")
    assert (short, "audit") in _kinds(vault, "daily")
    assert (short, "note") in _kinds(vault, "Okafor")
    assert (short, "oracle") in _kinds(vault, "alibi")
    hit = vault.search("Okafor")[0]
    assert hit.ref == "note 1: call.txt" and "[Okafor]" in hit.snippet
    assert hit.name == "Vitamin B3 lowers cholesterol"


def test_a_hand_edit_is_seen_after_full_every_seconds(store, vault, monkeypatch) -> None:
    import engine.agent.vault as module

    name = case_session(store, "Grenoble", [("q", "a")])
    assert vault.search("Grenoble")
    path = store.root / name / METADATA
    path.write_text(path.read_text().replace("Grenoble", "Annecy"))
    assert vault.search("Annecy") == []  # not yet: nothing told the store
    monkeypatch.setattr(module, "FULL_EVERY", 0.0)
    assert [h.session for h in vault.search("Annecy")] == [name]


def test_results_are_ranked_and_bounded_per_session(store, vault) -> None:
    strong = case_session(store, "Paris Paris Paris", [("Paris?", "Paris, in Paris.")])
    case_session(store, "A trip", [("Where?", "Maybe Paris once, or Lyon.")])
    for n in range(5):
        case_session(store, f"Other {n}", [("q", f"Paris mention {n}")] * 4)
    hits = vault.search("Paris", limit=8, per_session=2)
    assert len(hits) == 8 and hits[0].session == strong
    assert all(sum(h.session == s.session for h in hits) <= 2 for s in hits)
    assert hits == sorted(hits, key=lambda h: -h.score)


def test_the_index_follows_the_sessions_as_they_change(store, vault, paths) -> None:
    name = case_session(store, "Tea contains caffeine", [("q", "a")])
    assert vault.search("theanine") == []
    Workspace(paths).cases.add_note(name, "Green tea has theanine.", "tea.txt")
    assert [h.kind for h in vault.search("theanine")] == ["note"]
    other = case_session(store, "Coffee and theanine", [("q", "a")])
    assert {h.session for h in vault.search("theanine")} == {name, other}
    Workspace(paths).sessions.delete(other)
    assert {h.session for h in vault.search("theanine")} == {name}
    assert vault.sync() is None  # the store says nothing changed: no session looked at
    report = vault.sync(force=True)
    assert (report.sessions, report.indexed, report.removed) == (1, 0, 0)  # nothing changed


def test_a_damaged_session_is_left_out_and_taken_in_once_repaired(store, vault,
                                                                  monkeypatch) -> None:
    import engine.agent.vault as module

    monkeypatch.setattr(module, "FULL_EVERY", 0.0)  # hand edits: seen at the next look
    good = case_session(store, "Lyon alibi", [("q", "a")])
    bad = case_session(store, "Lyon station", [("q", "a")])
    path = store.root / bad / METADATA
    saved = path.read_bytes()
    path.write_text("{ not json")
    hits = vault.search("Lyon")
    assert {h.session for h in hits} == {good}
    assert vault.sync(force=True).damaged == 0  # not read again while it stays the same
    path.write_bytes(saved)
    assert {h.session for h in vault.search("Lyon")} == {good, bad}


@pytest.mark.parametrize("garbage", [b"not a database at all" * 100, b""])
def test_a_damaged_index_is_set_aside_and_rebuilt(store, paths, garbage) -> None:
    case_session(store, "Nantes harbour", [("q", "a")])
    target = paths.data_dir / "vault.sqlite3"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(garbage)
    vault = Vault(target, store)
    try:
        assert [h.kind for h in vault.search("Nantes")] == ["hypothesis"]
    finally:
        vault.close()
    if garbage:
        assert (paths.data_dir / "vault.sqlite3.damaged").read_bytes() == garbage


@pytest.mark.parametrize("query", ['Paris" OR x', "NEAR(a b)", "*", "col:Paris", "a AND",
                                   "'); DROP TABLE entries; --", "", "   ", "\x00", "ü" * 500])
def test_hostile_queries_are_words_not_operators(store, vault, query) -> None:
    case_session(store, "Paris trip", [("q", "a")])
    hits = vault.search(query)
    assert all(h.short_id for h in hits)
    assert vault.count()[0] == 1  # the index is intact


def test_two_indexes_of_the_same_file_share_the_work(store, paths) -> None:
    for n in range(3):
        case_session(store, f"Marseille {n}", [("q", "a")])
    first = Vault(paths.data_dir / "vault.sqlite3", store)
    second = Vault(paths.data_dir / "vault.sqlite3", store)
    try:
        assert first.sync(force=True).indexed == 3
        assert second.sync(force=True).indexed == 0
        assert len(second.search("Marseille", sync=False)) == 3
    finally:
        first.close()
        second.close()


def test_vault_search_on_the_command_line(home: Path, paths) -> None:
    store = SessionStore.of(paths)
    case_session(store, "Bordeaux wine was tested", [("Which year?", "The 2019 vintage.")])
    done = subprocess.run(cli("vault", "search", "vintage", "--json"), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["query"] == "vintage" and data["hits"][0]["kind"] == "round"
    assert "[vintage]" in data["hits"][0]["snippet"]
    plain = subprocess.run(cli("vault", "search", "nothing-like-this"), capture_output=True,
                           text=True, timeout=60)
    assert plain.returncode == 0 and "no matches" in plain.stderr
    shutil.rmtree(paths.data_dir / "sessions")
    gone = subprocess.run(cli("vault", "search", "vintage", "--json"), capture_output=True,
                          text=True, timeout=60)
    assert json.loads(gone.stdout)["hits"] == []
