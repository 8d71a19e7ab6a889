"""Processes as /proc shows them: is one alive, what did one start, what is in its
environment, which still carry a mark."""

from __future__ import annotations

import contextlib
from pathlib import Path

__all__ = ["alive", "children", "environment_of", "marked"]


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every descendant of `pid`, read from /proc."""
    found: list[tuple[int, str]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == pid:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append((int(entry.name), line))
                found += children(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie waiting to be reaped does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def environment_of(pid: int) -> dict[str, str]:
    pairs = (Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))
    return dict(p.decode().split("=", 1) for p in pairs if b"=" in p)


def marked(mark: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment holds `mark` (a
    `NAME=value` pair): what a run that set it started, however deep, and still running."""
    found: list[tuple[int, str]] = []
    needle = mark.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0") and alive(
                    int(entry.name)):
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append((int(entry.name), line))
    return found
