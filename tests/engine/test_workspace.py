"""The workspace: the one door the CLI and the app share; its rules hold before anything is
stored."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from engine import (
    ConfigError,
    Paths,
    SessionError,
    Workspace,
)
from tests.support.factory import stored_session
from tests.support.servers import ROOT


@pytest.mark.parametrize(("hypothesis", "limit", "says"), [
    ("   ", 8, "the hypothesis is empty"),
    ("Tea has caffeine", 4, r"between 5 and 20 \(got 4\)"),
    ("Tea has caffeine", 21, r"between 5 and 20 \(got 21\)"),
    ("A" * 50_001, 8, r"the hypothesis is too long: 50,001 characters, at most 50,000"),
])
def test_a_bad_start_is_refused_before_anything_is_stored(
    paths: Paths, hypothesis: str, limit: int, says: str
) -> None:
    workspace = Workspace(paths)
    with pytest.raises(ConfigError, match=says):
        workspace.sessions.start(hypothesis, limit)
    assert workspace.store.list() == []


def test_a_pasted_answer_of_thousands_of_words_is_a_hypothesis(paths: Paths) -> None:
    text = ("Niacin is vitamin B3. " * 2_300)[:50_000]  # 7,000 words, at the limit
    run = Workspace(paths).sessions.start(text, 8)
    run.journal.close()
    assert run.session.hypothesis_text == text.strip()


def test_an_unknown_provider_is_refused_before_anything_is_stored(paths: Paths) -> None:
    workspace = Workspace(paths)
    with pytest.raises(ConfigError):
        workspace.sessions.start("Tea has caffeine", 8, detective=["nonsense"])
    assert workspace.store.list() == []


def test_the_default_limit_comes_from_the_config(home: Path, paths: Paths) -> None:
    (home / "config.toml").write_text("[interrogation]\niteration_limit = 7\n")
    workspace = Workspace(paths)
    run = workspace.sessions.start("  Tea has caffeine  ")
    try:
        assert run.session.iteration_limit == 7
        assert run.session.hypothesis.text == "Tea has caffeine"
        # its lock is held
        assert workspace.sessions.status(run.journal.directory.name) == "running"
    finally:
        run.journal.close()
    assert workspace.sessions.status(run.journal.directory.name) == "interrupted"
    assert "- Status: interrupted" in workspace.sessions.export(run.journal.directory.name, "md")


def test_an_ended_session_cannot_be_resumed_and_exports_agree(paths: Paths) -> None:
    workspace = Workspace(paths)
    name = stored_session(workspace.store, "Bees sleep")
    with pytest.raises(SessionError, match="already ended"):
        workspace.sessions.resume(name)
    assert '"status": "completed"' in workspace.sessions.export(name, "json")
    assert "- Status: completed" in workspace.sessions.export(name, "md")
    workspace.sessions.delete(name)
    assert workspace.store.list() == []


def test_the_front_ends_build_no_engine_internals() -> None:
    """`tui/` asks the workspace; it constructs no Router, Interrogation or SessionStore."""
    built: list[str] = []
    for path in (ROOT / "tui").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("Router", "Interrogation", "SessionStore"):
                built.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.func.id}")
    assert built == []
