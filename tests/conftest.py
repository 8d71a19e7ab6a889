"""Shared fixtures: an isolated home per test and one real llama.cpp server per session."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from engine import Paths, ProviderConfig
from tests.faults import FaultProxy

GUARD_SCORES = pytest.StashKey[str]()
"""The meaning guard's precision and recall, printed at the end of a run."""
FALLBACK_SCORES = pytest.StashKey[str]()
"""The agent's fallback classifier's agreement with its labelled set, printed likewise."""


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    for key in (GUARD_SCORES, FALLBACK_SCORES):
        line = config.stash.get(key, None)
        if line:
            terminalreporter.write_line(line)

ROOT = Path(__file__).resolve().parent.parent

LONG_PROMPT = ("The quick brown fox jumps over the lazy dog, and then the lazy dog sleeps under "
               "the old oak tree by the river bank at dawn while the birds sing their songs.")
"""A prompt the tiny bundled model answers at length (to its token limit). Most short prompts
it answers with an immediate end of turn, now that the server stops there."""


@pytest.fixture(autouse=True)
def _in_a_temporary_directory(tmp_path_factory: pytest.TempPathFactory,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs in a working directory of its own: nothing a test (or the app under
    it: an export, a log) writes to the current directory lands in the repository."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


_STRAY = pytest.StashKey[set[str]]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STRAY] = {p.name for p in ROOT.iterdir()}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A file that appeared at the top of the repository during the run fails it."""
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


def closed_port() -> int:
    """A loopback port with nothing listening (bound then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cli(*args: str) -> list[str]:
    """The console script as a subprocess command line."""
    return [sys.executable, "-m", "tui", *args]


class LlamaServer:
    """A running `detektiv local-server` (the real llama.cpp server with the bundled Gemma)."""

    def __init__(self, process: subprocess.Popen[str], base: str) -> None:
        self.process = process
        self.base = base  # http://127.0.0.1:PORT
        self.url = f"{base}/v1"

    def provider_config(self, **overrides: object) -> ProviderConfig:
        values: dict[str, object] = {"kind": "openai", "model": "gemma", "base_url": self.url}
        values.update(overrides)
        return ProviderConfig.model_validate(values)

    def busy_slots(self) -> int:
        slots = httpx.get(f"{self.base}/slots", timeout=5).json()
        return sum(1 for slot in slots if slot.get("is_processing"))

    def wait_idle(self, timeout: float = 5.0) -> float:
        """Seconds until no slot is generating; raises if still busy after `timeout`."""
        start = time.monotonic()
        while self.busy_slots():
            if time.monotonic() - start > timeout:
                raise AssertionError(f"the server still generates after {timeout} s")
            time.sleep(0.02)
        return time.monotonic() - start


@contextlib.contextmanager
def local_server(home: Path, *args: str) -> Iterator[LlamaServer]:
    """`detektiv local-server --port 0 ARGS…` running, stopped on exit."""
    env = {**os.environ, "DETEKTIV_HOME": str(home)}
    stderr_path = home / "stderr.txt"
    with stderr_path.open("w") as stderr:
        if "--model" not in args:  # the suite's server runs the bundled Gemma, whatever the
            args = ("--model", "gemma-3-270m", *args)  # embedded default is
        process = subprocess.Popen(
            cli("local-server", "--port", "0", *args),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
            cwd=ROOT,
        )
    assert process.stdout is not None
    try:
        line = process.stdout.readline()  # printed once the model is loaded and the port is open
        if " at http://127.0.0.1:" not in line:
            raise RuntimeError(
                f"local-server did not start: {line!r} {stderr_path.read_text()[-2000:]!r}"
            )
        base = line.rsplit(" at ", 1)[1].strip().removesuffix("/v1")
        yield LlamaServer(process, base)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


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
    from tests.scripted import ScriptedModel, detective

    with ScriptedModel(detective, pace=0.01) as server:
        yield server.url + "/v1"


class HangingServer:
    """Accepts connections and never answers a byte; counts what it accepted."""

    def __init__(self) -> None:
        self.accepted = 0
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._writers.append(writer)
        await reader.read(65536)  # take the request, answer nothing

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._hold, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()


@pytest.fixture
async def hanging_server() -> AsyncIterator[HangingServer]:
    server = HangingServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _pg_bin(name: str) -> str | None:
    """A PostgreSQL server program: Debian's packages keep them off PATH."""
    import glob
    import shutil

    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server of our own on 127.0.0.1 (initdb + pg_ctl from Debian's
    `postgresql` package, which .ci/run installs), for the whole session."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL's initdb/pg_ctl are required in CI")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    import shutil
    import tempfile

    # pytest's temp dirs are private to their owner: the server's user could not enter them
    root = Path(tempfile.mkdtemp(prefix="detektiv-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
        shutil.chown(root, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data = root / "data"
    subprocess.run([*as_user, initdb, "-D", str(data), "-A", "trust", "-U", "detektiv",
                    "--no-sync"], check=True, capture_output=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off "
               "-c synchronous_commit=off -c full_page_writes=off")
    subprocess.run([*as_user, pg_ctl, "-D", str(data), "-o", options, "-l",
                    str(root / "log.txt"), "-w", "start"], check=True, capture_output=True)
    try:
        yield f"postgresql://detektiv@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
