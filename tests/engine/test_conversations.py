"""Conversations (SPEC §5): one contract for both backends, load_recent's rules, the policy
file, last_reference, and `detektiv ask -c` on the real server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import Workspace
from engine.context.conversations import (
    ConversationsError,
    ConversationStore,
    ConversationTurn,
    MemoryConversations,
    SQLiteConversations,
    conversation_prompt,
    load_recent,
    select_recent,
)
from engine.context.policy import ContextPolicy, Limits, ReferencePolicy, load_policy
from engine.context.reference import (
    LastReference,
    Mention,
    find_mentions,
    remember,
    resolve_reference,
)
from engine.context.tokens import MESSAGE_OVERHEAD, estimate
from engine.providers import StreamRequest
from tests.support.servers import ROOT, LlamaServer, cli

NOW = 1_800_000_000.0
LIMITS = Limits(enabled=True, max_turns=100, ttl_seconds=0, max_chars=1_000_000)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ConversationStore]:
    backend: ConversationStore = (MemoryConversations() if request.param == "memory"
                                  else SQLiteConversations(tmp_path / "c.sqlite3"))
    yield backend
    backend.close()


def turns(*contents: str, start: float = NOW - 100) -> list[ConversationTurn]:
    return [ConversationTurn("user" if i % 2 == 0 else "assistant", text, start + i, index=i)
            for i, text in enumerate(contents)]


# ---- the contract -----------------------------------------------------------------------------

def test_turns_come_back_in_order_with_their_fields(store: ConversationStore) -> None:
    assert store.turns("cli", "a") == []
    first = store.append("cli", "a", ConversationTurn("user", "Is tea caffeinated?", NOW,
                                                      {"n": 1}))
    second = store.append("cli", "a", ConversationTurn("assistant", "Yes.", NOW + 1))
    store.append("cli", "b", ConversationTurn("user", "Other", NOW + 2))
    store.append("app", "a", ConversationTurn("user", "Another client", NOW + 3))
    assert (first, second) == (0, 1)
    got = store.turns("cli", "a")
    assert [(t.role, t.content, t.created_at, t.meta, t.index) for t in got] == [
        ("user", "Is tea caffeinated?", NOW, {"n": 1}, 0),
        ("assistant", "Yes.", NOW + 1, {}, 1),
    ]


def test_conversations_are_listed_newest_first_per_client(store: ConversationStore) -> None:
    store.append("cli", "old", ConversationTurn("user", "first question", NOW))
    store.append("cli", "old", ConversationTurn("assistant", "answer", NOW + 1))
    store.append("cli", "new", ConversationTurn("user", "second question", NOW + 5))
    store.append("app", "x", ConversationTurn("user", "not mine", NOW + 9))
    listed = store.conversations("cli")
    assert [(c.conversation_id, c.turns, c.first_question) for c in listed] == [
        ("new", 1, "second question"), ("old", 2, "first question")]
    assert len(store.conversations()) == 3


def test_last_reference_is_kept_per_conversation(store: ConversationStore) -> None:
    assert store.reference("cli", "a") is None
    ref = LastReference("3fa2b1c0", "session", "compare", NOW, 4)
    store.set_reference("cli", "a", ref)
    assert store.reference("cli", "a") == ref and store.reference("cli", "b") is None
    store.set_reference("cli", "a", None)
    assert store.reference("cli", "a") is None


def test_load_recent_reads_the_store_under_the_limits(store: ConversationStore) -> None:
    for turn in turns("q1", "a1", "q2", "a2", "q3"):
        store.append("cli", "c", turn)
    recent = load_recent(store, "cli", "c", Limits(True, 3, 0, 10_000), now=NOW)
    assert [t.content for t in recent.turns] == ["q2", "a2", "q3"]
    assert [(d.turn.content, d.reason) for d in recent.dropped] == [
        ("q1", "max_turns"), ("a1", "max_turns")]
    assert load_recent(store, "cli", "c", Limits(False, 3, 0, 10_000)).turns == []


def test_two_processes_appending_to_one_conversation_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    SQLiteConversations(path).close()
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from engine.context.conversations import ConversationTurn, SQLiteConversations
        store = SQLiteConversations(Path({str(path)!r}))
        for i in range(60):
            store.append("cli", "shared", ConversationTurn("user", f"{{sys.argv[1]}}-{{i}}"))
        store.close()
    """)
    processes = [subprocess.Popen([sys.executable, "-c", script, name], cwd=ROOT)
                 for name in ("left", "right")]
    assert [p.wait(timeout=60) for p in processes] == [0, 0]
    store = SQLiteConversations(path)
    got = store.turns("cli", "shared")
    store.close()
    assert [t.index for t in got] == list(range(120))
    for name in ("left", "right"):  # each writer's turns all there, in its own order
        assert [t.content for t in got if t.content.startswith(name)] == [
            f"{name}-{i}" for i in range(60)]


def test_a_damaged_database_is_a_clear_error_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConversationsError, match="c.sqlite3"):
        SQLiteConversations(path).turns("cli", "a")
    assert path.read_bytes() == b"this is not a database" * 100


# ---- select_recent ----------------------------------------------------------------------------

def test_expired_turns_go_first() -> None:
    history = turns("old q", "old a", start=NOW - 1000) + [
        ConversationTurn("user", "new q", NOW - 5, index=2)]
    recent = select_recent(history, Limits(True, 10, 600, 10_000), now=NOW)
    assert [t.content for t in recent.turns] == ["new q"]
    assert [(d.turn.content, d.reason) for d in recent.dropped] == [
        ("old q", "expired"), ("old a", "expired")]


def test_max_chars_keeps_the_newest_whole_turns() -> None:
    history = turns("a" * 50, "b" * 50, "c" * 50, "d" * 50)
    recent = select_recent(history, Limits(True, 10, 0, 120), now=NOW)
    assert [t.content[0] for t in recent.turns] == ["c", "d"]  # 100 chars; never half a turn
    assert {d.reason for d in recent.dropped} == {"max_chars"}


def test_the_token_budget_drops_oldest_and_never_opens_with_an_answer() -> None:
    history = turns("question one " * 5, "answer one " * 5, "question two " * 5,
                    "answer two " * 5)
    cost = estimate("answer two " * 5) + MESSAGE_OVERHEAD
    recent = select_recent(history, LIMITS, now=NOW, budget=cost * 3 - 1)
    # three turns do not fit; two do, and a history never starts with an orphaned answer
    assert [t.index for t in recent.turns] == [2, 3]
    reasons = {d.turn.index: d.reason for d in recent.dropped}
    assert reasons == {0: "token_budget", 1: "token_budget"}
    tighter = select_recent(history, LIMITS, now=NOW, budget=cost)
    assert tighter.turns == [] and {d.turn.index: d.reason for d in tighter.dropped}[3] == \
        "orphaned_answer"


def test_a_conversation_prompt_fits_history_to_the_window() -> None:
    history = turns(*[f"turn {i} " + "word " * 40 for i in range(10)])
    request = StreamRequest.of("the new question", max_tokens=50)
    prompt = conversation_prompt(request, history, LIMITS)
    assert len(prompt.request.messages) == 11  # unfitted: everything
    messages, trim = prompt.messages(200, estimate)
    assert messages[-1].content == "the new question"
    assert trim.omitted and list(trim.omitted) == sorted(trim.omitted)
    assert messages[0].role == "user"
    kept = [m.content for m in messages[:-1]]
    assert kept == [t.content for t in history[-len(kept):]]  # the newest, whole


# ---- the policy -------------------------------------------------------------------------------

def test_a_missing_policy_is_the_defaults(tmp_path: Path) -> None:
    policy, warnings = load_policy(tmp_path / "context.toml")
    assert policy == ContextPolicy() and warnings == []


def test_a_policy_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "context.toml"
    path.write_bytes("\ufeffmax_turns = 3\n".encode())
    policy, warnings = load_policy(path)
    assert warnings == [] and policy.limits("ask").max_turns == 3


def test_consumer_blocks_override_the_top_level(tmp_path: Path) -> None:
    path = tmp_path / "context.toml"
    path.write_text("max_turns = 8\nmax_chars = 500\n[ask]\nmax_turns = 2\n"
                    "[witness]\nenabled = false\n")
    policy, warnings = load_policy(path)
    assert warnings == []
    assert policy.limits("ask") == Limits(True, 2, ContextPolicy().ttl_seconds, 500)
    assert policy.limits("oracle").max_turns == 8
    assert policy.limits("witness").enabled is False


@pytest.mark.parametrize(("content", "field"), [
    ("max_turns = -3\n", "max_turns"),
    ("[ask]\nmax_chars = 'lots'\n", "ask.max_chars"),
    ("[last_reference]\nmax_age_turns = 5\ncolour = 'red'\n", "last_reference.colour"),
    ("max_turns = [\n", "invalid TOML"),
])
def test_an_invalid_policy_is_the_defaults_with_a_warning_naming_file_and_field(
    tmp_path: Path, content: str, field: str
) -> None:
    path = tmp_path / "context.toml"
    path.write_text(content)
    policy, warnings = load_policy(path)
    assert policy == ContextPolicy()
    assert len(warnings) == 1 and str(path) in warnings[0] and field in warnings[0]


# ---- last_reference ---------------------------------------------------------------------------

SESSIONS = {"3fa2b1c0-1111-2222-3333-444455556666": "session",
            "9bc1d2e3-1111-2222-3333-444455556666": "session"}
POLICY = ReferencePolicy(enabled=True, allowed_entities=("session",), max_age_turns=3)
STORED = LastReference("3fa2b1c0-1111-2222-3333-444455556666", "session", "summary", NOW, 5)


def test_an_entity_named_in_the_text_always_wins() -> None:
    mentions = find_mentions("and in 9bc1d2e3, what did the witness say?", SESSIONS)
    assert mentions == [Mention("9bc1d2e3-1111-2222-3333-444455556666", "session")]
    resolved = resolve_reference(mentions, STORED, POLICY, 6)
    assert (resolved.entity, resolved.source) == (mentions[0].entity, "text")


def test_the_stored_reference_fills_in_only_when_allowed_and_recent() -> None:
    resolved = resolve_reference([], STORED, POLICY, 7)
    assert (resolved.entity, resolved.source) == (STORED.entity, "context")
    assert resolve_reference([], STORED, POLICY, 9).source == "none"  # 4 turns old: too old
    assert "4 turns old" in resolve_reference([], STORED, POLICY, 9).reason
    off = ReferencePolicy(enabled=False)
    assert resolve_reference([], STORED, off, 6).entity is None
    other = ReferencePolicy(allowed_entities=("file",))
    assert resolve_reference([], STORED, other, 6).entity is None
    assert resolve_reference([], None, POLICY, 6).entity is None


def test_an_ambiguous_text_resolves_to_nothing() -> None:
    mentions = find_mentions("compare 3fa2b1c0 with 9bc1d2e3", SESSIONS)
    resolved = resolve_reference(mentions, STORED, POLICY, 6)
    assert resolved.entity is None and resolved.source == "none"
    assert "ambiguous" in resolved.reason
    # a prefix shared by two known entities names neither
    assert find_mentions("the 1111-2222 one", {"1111-2222-a": "session",
                                               "1111-2222-b": "session"}) == []


def test_remember_keeps_the_entity_the_turn_was_about() -> None:
    resolved = resolve_reference([], STORED, POLICY, 7)
    kept = remember(STORED, resolved, 7, NOW + 10, "follow-up")
    assert kept is not None and (kept.turn_index, kept.entity) == (7, STORED.entity)
    nothing = resolve_reference([], None, POLICY, 1)
    assert remember(None, nothing, 1, NOW) is None


# ---- the workspace and `detektiv ask -c` ------------------------------------------------------

def test_the_users_turn_is_stored_before_any_provider_is_called(paths) -> None:
    workspace = Workspace(paths)
    asked = workspace.ask.prepare(StreamRequest.of("Is the sky green?"))
    assert asked.conversation_id is not None
    stored = workspace.conversations.turns("cli", asked.conversation_id)
    assert [(t.role, t.content) for t in stored] == [("user", "Is the sky green?")]
    asked.answered("No.", "p:m")
    again = workspace.ask.prepare(StreamRequest.of("Why not?"), continue_last=True)
    assert again.conversation_id == asked.conversation_id
    assert [t.content for t in again.history] == ["Is the sky green?", "No."]
    workspace.conversations.close()


def test_conversations_off_in_the_policy_keep_nothing(paths) -> None:
    (paths.config_file.parent / "context.toml").write_text("[ask]\nenabled = false\n")
    workspace = Workspace(paths)
    asked = workspace.ask.prepare(StreamRequest.of("hello"))
    assert asked.conversation_id is None
    from engine import ConfigError

    with pytest.raises(ConfigError, match="conversations are off"):
        workspace.ask.prepare(StreamRequest.of("hello"), continue_last=True)


def _write_config(home: Path, url: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[providers.srv]\nkind = "openai"\nmodel = "gemma"\nbase_url = "{url}"\n'
        "priority = 1\n")


def _ask(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DETEKTIV_HOME": str(home)}
    return subprocess.run(cli("ask", "-p", "srv", "--temperature", "0", "--max-tokens", "24",
                              *args), capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)


async def _ask_async(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`_ask` without blocking the event loop (the proxy in front of the server runs on it)."""
    return await asyncio.to_thread(_ask, home, *args)


async def test_ask_c_sends_the_previous_question_and_answer(tmp_path: Path, proxy) -> None:
    home = tmp_path / "home"
    _write_config(home, proxy.url)
    # the answers are scripted (what is tested is what the server is sent), the wire is real
    proxy.scripts |= {"hello": ("Hello, Ziggurat-7!", "stop"), "cat": ("Ziggurat-7.", "stop"),
                      "topic": ("Sure, a new topic.", "stop")}
    proxy.plan = ["script:hello", "script:cat", "script:topic"]
    first = await _ask_async(home, "My cat is called Ziggurat-7. Say hello.")
    assert first.returncode == 0, first.stderr
    conversation = first.stderr.split("conversation ", 1)[1].split()[0]
    second = await _ask_async(home, "-c", "What is my cat called?")
    assert second.returncode == 0, second.stderr
    assert f"conversation {conversation}" in second.stderr
    sent = json.loads(proxy.requests[-1])["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert "Ziggurat-7" in sent[0]["content"] and sent[1]["content"] == first.stdout.strip()
    assert sent[2]["content"] == "What is my cat called?"
    fresh = await _ask_async(home, "A new topic.")
    assert json.loads(proxy.requests[-1])["messages"] == [
        {"role": "user", "content": "A new topic."}]
    listed = subprocess.run(cli("conversations", "--json"), capture_output=True, text=True,
                            env={**os.environ, "DETEKTIV_HOME": str(home)}, cwd=ROOT)
    rows = json.loads(listed.stdout)
    assert [row["turns"] for row in rows] == [2, 4]
    assert rows[1]["id"] == conversation and fresh.returncode == 0


def test_a_corrupt_policy_warns_and_ask_still_answers(tmp_path: Path,
                                                     llama_server: LlamaServer) -> None:
    home = tmp_path / "home"
    _write_config(home, llama_server.url)
    (home / "context.toml").write_text("max_turns = 'many'\n")
    result = _ask(home, "Say hello.")
    assert result.returncode == 0, result.stderr
    assert "context.toml: max_turns" in result.stderr and "using the defaults" in result.stderr
    assert "conversation " in result.stderr


def test_a_fitted_call_shows_a_line_only_when_rounds_were_trimmed() -> None:
    from engine import ContextFitted
    from engine.models.trail import ContextFit
    from engine.report.words import context_summary, note

    whole = ContextFit(role="witness", sequence=2, provider="srv:gemma", used=300,
                       window=8192, window_source="server", counted="exact", reply=1024)
    trimmed = whole.model_copy(update={"digested": [2, 3, 4], "omitted": [5],
                                       "reply": 341, "asked_reply": 1024})
    assert note(ContextFitted(fit=whole)) is None
    line = note(ContextFitted(fit=trimmed))
    assert line is not None
    assert "300/8192 tokens" in line and "rounds 2–4 digested" in line
    assert "round 5 left out" in line and "reply 341 of 1024 tokens" in line
    summary = context_summary([whole, trimmed])
    assert summary is not None and "2 model calls" in summary and "1 with rounds trimmed" in summary
