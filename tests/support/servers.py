"""What tests share about servers and the repository: the root, loopback ports, the real
llama.cpp server started with our own `detektiv local-server`, a server that hangs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine import ProviderConfig, release_tied, spawn_tied

GUARD_SCORES = pytest.StashKey[str]()
"""The meaning guard's precision and recall, printed at the end of a run."""


FALLBACK_SCORES = pytest.StashKey[str]()
"""The agent's fallback classifier's agreement with its labelled set, printed likewise."""


ROOT = Path(__file__).resolve().parents[2]


LONG_PROMPT = ("The quick brown fox jumps over the lazy dog, and then the lazy dog sleeps under "
               "the old oak tree by the river bank at dawn while the birds sing their songs.")
"""A prompt the tiny bundled model answers at length (to its token limit). Most short prompts
it answers with an immediate end of turn, now that the server stops there."""


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

    @staticmethod
    def _busy(slots: list[dict[str, object]]) -> int:
        return sum(1 for slot in slots if slot.get("is_processing"))

    def busy_slots(self) -> int:
        return self._busy(httpx.get(f"{self.base}/slots", timeout=5).json())

    async def wait_idle(self, timeout: float = 5.0) -> float:
        """Seconds until no slot is generating; raises if still busy after `timeout`. Waits
        without blocking the event loop: a fault proxy on the same loop must go on passing
        the client's hang-up to the server meanwhile."""
        start = time.monotonic()
        async with httpx.AsyncClient(timeout=5) as client:
            while True:
                if not self._busy((await client.get(f"{self.base}/slots")).json()):
                    return time.monotonic() - start
                if time.monotonic() - start > timeout:
                    raise AssertionError(f"the server still generates after {timeout} s")
                await asyncio.sleep(0.02)


def stop(process: subprocess.Popen[str], timeout: float) -> None:
    """SIGTERM, then SIGKILL if it has not ended within `timeout` seconds; its stdout closed
    and its lifeline (if `spawn_tied` gave it one) let go."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    release_tied(process.pid)
    if process.stdout is not None:
        process.stdout.close()


@contextlib.contextmanager
def local_server(home: Path, *args: str) -> Iterator[LlamaServer]:
    """`detektiv local-server --port 0 ARGS…` running, stopped on exit."""
    env = {**os.environ, "DETEKTIV_HOME": str(home)}
    home.mkdir(parents=True, exist_ok=True)
    stderr_path = home / "stderr.txt"
    with stderr_path.open("w") as stderr:
        if "--model" not in args:  # the suite's server runs the bundled Gemma, whatever the
            args = ("--model", "gemma-3-270m", *args)  # embedded default is
        process = spawn_tied(  # dies with the suite, however the suite dies
            cli("local-server", "--port", "0", "--json", *args),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
            cwd=ROOT,
        )
    assert process.stdout is not None
    try:
        line = process.stdout.readline()  # printed once the model is loaded and the port is open
        try:
            started = json.loads(line)
        except ValueError:
            raise RuntimeError(
                f"local-server did not start: {line!r} {stderr_path.read_text()[-2000:]!r}"
            ) from None
        assert started["pid"] == process.pid and started["url"].startswith("http://127.0.0.1:")
        base = started["url"].removesuffix("/v1")
        yield LlamaServer(process, base)
    finally:
        stop(process, timeout=15)


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


@contextlib.contextmanager
def tmux_server(env: dict[str, str]) -> Iterator[list[str]]:
    """A tmux server of its own, in the foreground (`tmux -D`) under a lifeline, so that it —
    and the apps in its panes, which lose their terminal — die with the suite however the
    suite dies (a daemonised server would outlive it); the `tmux -L NAME` command prefix."""
    import uuid

    tmux = ["tmux", "-L", f"detektiv-test-{uuid.uuid4().hex[:8]}"]
    server = spawn_tied([*tmux, "-D"], foreign=True, env=env, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while subprocess.run([*tmux, "list-sessions"], capture_output=True, env=env,
                             ).returncode != 0:
            if server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("tmux -D did not start")
            time.sleep(0.02)
        yield tmux
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        release_tied(server.pid)
