"""Survive invalid UTF-8 on stdin.

Textual's Linux driver decodes stdin with a strict incremental UTF-8 decoder, so a single bad
byte (a mis-set terminal, a binary paste, line noise over SSH) raises UnicodeDecodeError in the
input thread and takes the app down. We give the driver a decoder that replaces bad bytes with
U+FFFD instead: the key is lost, the session is not.
"""

from __future__ import annotations

import codecs
import functools
from typing import Any

__all__ = ["harden_input_decoder"]


def _lenient(encoding: str) -> Any:
    return functools.partial(codecs.getincrementaldecoder(encoding), errors="replace")


def harden_input_decoder() -> None:
    """Make Textual's Linux driver replace invalid input bytes instead of crashing."""
    from textual.drivers import linux_driver

    linux_driver.getincrementaldecoder = _lenient  # type: ignore[attr-defined]
