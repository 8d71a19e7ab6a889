"""JSON from outside (a server, a model, a file someone edited), read so that anything that is
not readable JSON is a `ValueError`.

Python's `json` raises `RecursionError`, not `ValueError`, for values nested past ~1,000
levels: a hostile server's `[[[[…` or a corrupt file would get past every `except ValueError`
and end a run with a traceback. `read_json` and `raw_decode` say it as the malformed JSON it is.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["TOO_DEEP", "raw_decode", "read_json"]

TOO_DEEP = "JSON nested too deeply to read"


def read_json(text: str | bytes | bytearray) -> Any:
    """`json.loads(text)`; a `ValueError` for anything unreadable, nesting too deep included."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None


def raw_decode(decoder: json.JSONDecoder, text: str, start: int) -> tuple[Any, int]:
    """`decoder.raw_decode(text, start)`, with nesting too deep a `ValueError` too."""
    try:
        return decoder.raw_decode(text, start)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
