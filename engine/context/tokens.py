"""Token estimates: what a prompt costs when the provider cannot count it for us.

`estimate` reads text the way subword tokenizers cut it: a common word is one token, a long
word a few, every digit and every symbol one, a character outside ASCII about one (two when it
is outside the basic plane, as emoji are). Measured against Gemma 3's tokenizer on the
transcripts `bench/context.py` generates, it stays within a few percent on average; the margin
a `Budget` keeps when it estimates covers the worst case. Providers that can count exactly
(llama.cpp's `/tokenize`) are counted exactly instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from engine.providers import Message

__all__ = ["MESSAGE_OVERHEAD", "estimate", "estimate_messages"]

MESSAGE_OVERHEAD = 4
"""Tokens a chat template adds around each message (role markers, separators)."""
_REPLY_PRIMER = 3
"""Tokens of the assistant header that opens the reply."""

_PIECES = re.compile(
    r"(?P<word>[A-Za-z]+)|(?P<digit>[0-9])|(?P<space>\s+)|(?P<run>(?P<sym>[^\w\s])(?P=sym){2,})"
    r"|(?P<wide>[^\x00-\x7f])|(?P<other>.)",
    re.DOTALL,
)
_WORD_CHARS = 7
"""Letters one token covers in a long word (common words are whole tokens)."""


@lru_cache(maxsize=4096)
def estimate(text: str) -> int:
    """About how many tokens `text` is (see the module docstring). Kept for the texts seen
    last: a transcript is measured again for every call of an interrogation."""
    if text.isascii():
        total = 0
        for match in _PIECES.finditer(text):
            kind = match.lastgroup
            if kind == "word":
                total += 1 + (match.end() - match.start() - 1) // _WORD_CHARS
            elif kind == "space":
                total += match.end() - match.start() > 1 or match.group() != " "
            elif kind == "run":
                total += 1 + (match.end() - match.start()) // 8
            else:
                total += 1
        return total
    total = 0
    for match in _PIECES.finditer(text):
        kind = match.lastgroup
        if kind == "word":
            total += 1 + (match.end() - match.start() - 1) // _WORD_CHARS
        elif kind == "space":
            total += match.end() - match.start() > 1 or match.group() != " "
        elif kind == "run":
            total += 1 + (match.end() - match.start()) // 8
        elif kind == "wide":
            total += 2 if ord(match.group()) > 0xFFFF else 1
        else:
            total += 1
    return total


def estimate_messages(messages: Iterable[Message]) -> int:
    """About how many tokens a chat prompt of `messages` is, template included."""
    return sum(estimate(m.content) + MESSAGE_OVERHEAD for m in messages) + _REPLY_PRIMER
