"""Processes detektiv starts die with what started them, however it dies.

    process = spawn_tied([sys.executable, "-m", "tui", "local-server", …], stdout=PIPE)
    …                                   # the parent is killed with SIGKILL, or segfaults
                                        # → the child's lifeline reads end-of-file → it is gone

**The lifeline** is a pipe. `spawn_tied` starts the child in a process group of its own (so a
signal to the group reaches whatever it started in turn) and hands it the pipe's read end; the
parent holds the write end and never writes. When the parent ends, in any way at all, the
kernel closes its end and the child's read returns end-of-file: the child then kills its own
process group with SIGKILL. Nothing is left to chance on the parent's side: no handler, no
`atexit`, no signal it could miss. The same works on every POSIX system (`PR_SET_PDEATHSIG`
would be Linux only, and tied to the *thread* that forked: a child started from a worker thread
would die with that thread).

**The child's side** is `hold_lifeline()`, called first thing by `detektiv` (`tui.cli.main`).
It reads `DETEKTIV_LIFELINE` (`FD:PID`), removes it from the environment (a grandchild must not
take its parent's lifeline for its own) and watches the pipe on a daemon thread. A child whose
parent is already gone when it starts finds the pipe closed and ends at once.

**Foreign programs** (PostgreSQL, tmux) cannot call `hold_lifeline()`:
`spawn_tied(..., foreign=True)` runs them under `python -m engine.lifeline -- ARGV…`, a small
keeper that holds the lifeline, passes SIGTERM/SIGINT/SIGHUP on, exits with the program's code,
and on Linux also gives the program `PR_SET_PDEATHSIG` (set before the keeper starts a second
thread, so forking is safe).

A process that did not come from `spawn_tied` may still be tied to its parent: with
`DETEKTIV_LIFELINE=PID`, a `detektiv` whose parent is PID watches that pid instead (polled
four times a second). The test suite sets it, so every `detektiv` it runs dies with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ENV", "Lifeline", "hold_lifeline", "release_tied", "spawn_tied"]

ENV = "DETEKTIV_LIFELINE"
"""`FD:PID` (a lifeline pipe from PID) or `PID` (watch that parent)."""

POLL_SECONDS = 0.25
"""How often a child tied by pid looks at whether its parent is still there."""

_held: dict[int, int] = {}
"""pid of a child → the write end of its lifeline (closed by `release_tied`)."""
_held_lock = threading.Lock()


class Lifeline:
    """A child's lifeline, made before it starts: give the child `env` and `pass_fds`, in a
    session of its own, then call `started(pid)` (or `abandon()` if it did not start). For
    a child started some other way than `spawn_tied` (asyncio's subprocesses)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._read, self._write = os.pipe()
        self.env = {**(os.environ if env is None else env), ENV: f"{self._read}:{os.getpid()}"}
        self.pass_fds = (self._read,)

    def started(self, pid: int) -> None:
        os.close(self._read)
        with _held_lock:
            _held[pid] = self._write

    def abandon(self) -> None:
        os.close(self._read)
        os.close(self._write)


def spawn_tied(argv: Sequence[str], *, foreign: bool = False,
               env: Mapping[str, str] | None = None, **popen: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(argv, **popen)` in a process group of its own, tied to this process
    by a lifeline (see the module docstring). `foreign`: argv is not `detektiv`, so it runs
    under the keeper. Call `release_tied(process.pid)` once the child ended (or never: the
    lifeline goes when this process does)."""
    command = list(argv)
    if foreign:
        command = [sys.executable, "-m", "engine.lifeline", "--", *command]
    lifeline = Lifeline(env)
    pass_fds = (*popen.pop("pass_fds", ()), *lifeline.pass_fds)
    try:
        process = subprocess.Popen(command, env=lifeline.env, pass_fds=pass_fds,
                                   start_new_session=True, **popen)
    except BaseException:
        lifeline.abandon()
        raise
    lifeline.started(process.pid)
    return process


def release_tied(pid: int) -> None:
    """Let go of a child's lifeline (after it ended: closing it ends a child still running)."""
    with _held_lock:
        write_end = _held.pop(pid, None)
    if write_end is not None:
        os.close(write_end)


def _end_everything() -> None:
    """Kill this process's group if it leads one (what it started goes too), else itself."""
    with contextlib.suppress(OSError):
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _watch_pipe(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 64):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    _end_everything()


def _watch_pid(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    _end_everything()


def hold_lifeline() -> None:
    """Watch this process's lifeline, if it was given one (see the module docstring)."""
    fd_text, _, pid_text = os.environ.get(ENV, "").rpartition(":")
    try:
        parent = int(pid_text)
        fd = int(fd_text) if fd_text else None
    except ValueError:
        return
    if parent != os.getppid():
        return  # meant for another process, inherited: not ours (nor is that fd number)
    del os.environ[ENV]  # ours: what this process starts gets lifelines of its own
    if fd is not None:
        os.set_inheritable(fd, False)
        threading.Thread(target=_watch_pipe, args=(fd,), name="detektiv-lifeline",
                         daemon=True).start()
    else:
        threading.Thread(target=_watch_pid, args=(parent,), name="detektiv-lifeline",
                         daemon=True).start()


def _die_with_the_keeper() -> None:
    """In the program's process, before exec (Linux): SIGKILL when the keeper dies."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def _keep(argv: list[str]) -> int:
    """The keeper: hold the lifeline, run `argv` in this process group, pass signals on."""
    preexec = _die_with_the_keeper if sys.platform.startswith("linux") else None
    child = subprocess.Popen(argv, preexec_fn=preexec)  # forked while this is one thread
    hold_lifeline()  # a keeper whose parent is gone already kills its group: the program with it
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, lambda sig, _frame: child.send_signal(sig))
    while True:
        try:
            return child.wait()
        except InterruptedError:
            continue


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments[:1] == ["--"]:
        arguments = arguments[1:]
    if not arguments:
        sys.exit("usage: python -m engine.lifeline -- PROGRAM [ARG…]")
    code = _keep(arguments)
    sys.exit(code if code >= 0 else 128 - code)
