"""Running `detektiv` as a subprocess, to the end or in the background."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from typing import IO, Any

from tests.support.servers import ROOT, cli


def _ctrl_c_as_in_a_terminal() -> None:
    """SIGINT as a terminal gives it: a suite started in the background by a shell (`make test
    &`) inherits SIGINT ignored, and so would every `detektiv` it starts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def on_a_terminal(*args: str, timeout: float = 120) -> tuple[int, list[tuple[float, bytes]]]:
    """Run `detektiv ARGS` with stdout on a pseudo-terminal, as a user's is: its exit code and
    what it wrote, piece by piece, each with when it was read (monotonic seconds)."""
    import os
    import pty

    leader, follower = pty.openpty()
    process = subprocess.Popen(cli(*args), stdout=follower, stderr=subprocess.DEVNULL,
                               cwd=ROOT)
    os.close(follower)
    pieces: list[tuple[float, bytes]] = []
    try:
        while True:
            try:
                piece = os.read(leader, 4096)
            except OSError:  # EIO: the process closed the terminal
                break
            if not piece:
                break
            pieces.append((time.monotonic(), piece))
        code = process.wait(timeout=timeout)
    finally:
        os.close(leader)
    return code, pieces


def detektiv(*args: str, timeout: float = 120, stdin: str | None = None
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, input=stdin)


class Running:
    """A `detektiv` process whose stdout lines are collected as they come."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(cli(*args), stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                        preexec_fn=_ctrl_c_as_in_a_terminal)
        self.started = time.monotonic()
        self.lines: list[str] = []
        self.err = ""
        self._threads = [threading.Thread(target=self._read, args=(self.process.stdout,)),
                         threading.Thread(target=self._read_err, args=(self.process.stderr,))]
        for thread in self._threads:
            thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)

    def _read_err(self, stream: IO[str]) -> None:
        self.err = stream.read()

    def wait_for(self, text: str, timeout: float = 90, quiet: bool = False) -> None:
        """Until a stdout line holds `text`; `quiet`: also stop when the process ends."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if time.monotonic() > deadline or self.process.poll() is not None:
                if quiet and self.process.poll() is not None:
                    return
                raise AssertionError(f"never saw {text!r}: {self.lines[-5:]} {self.err}")
            time.sleep(0.005)

    def finish(self, timeout: float = 120) -> int:
        code = self.process.wait(timeout=timeout)
        for thread in self._threads:
            thread.join()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return code

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines if line.endswith("\n")]
