"""Shared fixtures: an isolated home per test and one real llama.cpp server per session."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import Paths
from engine.lifeline import ENV as LIFELINE
from tests.support.faults import FaultProxy
from tests.support.servers import (
    FALLBACK_SCORES,
    GUARD_SCORES,
    ROOT,
    HangingServer,
    LlamaServer,
    closed_port,
    local_server,
)

_SCORES = {"guard": GUARD_SCORES, "fallback": FALLBACK_SCORES}

# No test ever starts a model download by itself (the app would fetch the capable model when a
# demonstration model plays the detective); the tests of that fetch lift it for themselves.
os.environ["DETEKTIV_NO_DOWNLOAD"] = "1"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    for key in _SCORES.values():
        line = config.stash.get(key, None)
        if line:
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked `heavy` (a minute or more of a busy machine) go first, so that the
    two workers of `make test` end together instead of one finishing a long test alone."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """Under pytest-xdist (`make test` runs two workers) the figures a worker measured come
    back to the process that prints the summary."""
    config: pytest.Config = node.config
    for name, value in getattr(node, "workeroutput", {}).get("scores", {}).items():
        config.stash[_SCORES[name]] = value




@pytest.fixture(autouse=True)
def _in_a_temporary_directory(tmp_path_factory: pytest.TempPathFactory,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs in a working directory of its own: nothing a test (or the app under
    it: an export, a log) writes to the current directory lands in the repository."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def _servers_learned_anew() -> None:
    """What a process learned of a server (its window, its token ratio) is kept under the
    provider's name and configuration, its address included; the suite's servers reuse the
    operating system's ports, so a test's "det" on a port another test used must not inherit
    that server's window (a 2,048-token server read as the earlier one's 32,768)."""
    from engine.context import measure, windows

    windows._windows.clear()
    measure._ratios.clear()
    measure._reported.clear()
    measure._unanswered.clear()


_STRAY = pytest.StashKey[set[str]]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STRAY] = {p.name for p in ROOT.iterdir()}
    # every `detektiv` the suite starts dies with the suite, however the suite dies (a
    # segfault, kill -9): tied to this process by pid (engine.lifeline); the servers it
    # starts are spawned with a lifeline pipe of their own
    os.environ[LIFELINE] = str(os.getpid())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A file that appeared at the top of the repository during the run fails it."""
    output = getattr(session.config, "workeroutput", None)  # an xdist worker's
    if output is not None:
        output["scores"] = {name: session.config.stash[key] for name, key in _SCORES.items()
                            if key in session.config.stash}
    before = session.config.stash.get(_STRAY, None)
    if before is None:
        return
    new = sorted({p.name for p in ROOT.iterdir()} - before
                 - {".pytest_cache", "snapshot_report.html", ".hypothesis"})
    if new:
        print(f"\nthe tests wrote into the repository: {', '.join(new)}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty DETEKTIV_HOME, and no provider keys or hosts from the developer's shell."""
    root = tmp_path / "home"
    root.mkdir()
    monkeypatch.setenv("DETEKTIV_HOME", str(root))
    for name in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "OLLAMA_HOST",
        "OLLAMA_API_KEY",
        "LLM_TIMEOUT_SECONDS",
        "ORACLES_DIR",
        "ORACLE_PLACEHOLDER",
        "ORACLE_CACHE_TTL",
    ):
        monkeypatch.delenv(name, raising=False)
    # Ollama discovery must never find a developer's real Ollama: point it at a closed port.
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{closed_port()}")
    # an oracle edited from the app must not open a real editor in a test
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", "true")
    return root


@pytest.fixture
def paths(home: Path) -> Paths:
    return Paths.from_env()










@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The real llama.cpp server, started through our own `detektiv local-server --port 0`:
    2 slots of 2048 tokens."""
    with local_server(tmp_path_factory.mktemp("server-home"), "--parallel", "2",
                      "--ctx", "4096") as server:
        yield server


@pytest.fixture
async def proxy(llama_server: LlamaServer) -> AsyncIterator[FaultProxy]:
    """A fault-injecting proxy in front of the real server (passes everything by default)."""
    fault_proxy = FaultProxy(llama_server.base)
    await fault_proxy.start()
    try:
        yield fault_proxy
    finally:
        await fault_proxy.stop()


@pytest.fixture
def sleuth() -> Iterator[str]:
    """A scripted detective (tests/scripted.py) on loopback: usable questions and a verdict,
    whatever the tiny model answers as the witness. Its base URL (…/v1)."""
    from tests.support.scripted import ScriptedModel, detective

    with ScriptedModel(detective, pace=0.01) as server:
        yield server.url + "/v1"




@pytest.fixture
async def hanging_server() -> AsyncIterator[HangingServer]:
    server = HangingServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server of our own on 127.0.0.1 (initdb + postgres from Debian's
    `postgresql` package, which .ci/run installs), for the whole session."""
    from tests.support.postgres import installed, postgres_server

    if not installed():
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL's initdb/postgres are required in CI")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    with postgres_server() as url:
        yield url
