"""Open a file in the user's editor ($VISUAL, $EDITOR, else vi) with the app suspended."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from textual.app import App, SuspendNotSupported

__all__ = ["edit_file"]


def edit_file(app: App[Any], path: Path) -> str | None:
    """Run the editor on `path`; None when it ended well, else what went wrong (one line).
    Without a real terminal to give it (a test), the editor runs detached from the screen."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    command = [*shlex.split(editor), str(path)]
    try:
        try:
            with app.suspend():
                result = subprocess.run(command, check=False)
        except SuspendNotSupported:
            result = subprocess.run(command, check=False, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError as exc:
        return f"Cannot run the editor {editor!r} ({exc.strerror}); set $EDITOR."
    if result.returncode != 0:
        return f"The editor exited with {result.returncode}."
    return None
