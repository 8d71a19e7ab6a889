"""Keep native stderr (llama.cpp, ggml) off the terminal while the TUI owns it.

Textual draws on `sys.__stderr__`. llama.cpp writes to file descriptor 2 from C threads, which
would tear the screen. So: duplicate the terminal's fd 2 for Textual, and point fd 2 itself at
the log file. Python-level writes to sys.stderr go to the terminal's duplicate, as before.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TextIO

__all__ = ["divert_native_stderr"]


def divert_native_stderr(log_path: Path) -> TextIO:
    """Send fd 2 to `log_path`; return (and install as sys.stderr) a stream on the terminal."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    terminal_fd = os.dup(2)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    terminal = os.fdopen(terminal_fd, "w", buffering=1, encoding="utf-8", errors="replace")
    sys.stderr = terminal
    setattr(sys, "__stderr__", terminal)  # noqa: B010 - Textual draws on sys.__stderr__
    return terminal
