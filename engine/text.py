"""Model output is data: the one function that makes it safe to put on a terminal."""

from __future__ import annotations

import re

__all__ = ["strip_control"]

# Every C0 control except TAB and LF, DEL, and every C1 control (U+0080–U+009F). Removing ESC
# and CSI/OSC introducers character by character is enough to defuse any escape sequence, and it
# works on a stream cut at arbitrary points: no state is carried between chunks. CR is removed
# too: on its own it lets text overwrite what a terminal line already shows.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_control(text: str) -> str:
    """Return `text` without terminal control characters (newlines and tabs are kept)."""
    return _CONTROL.sub("", text)
