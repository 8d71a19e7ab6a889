"""Token estimates: what a prompt costs when the provider cannot count it for us.

`estimate` reads text the way subword tokenizers cut it: a common word is one token, a long
word a few, every digit and every symbol one, a character outside ASCII about one (two when
it is outside the basic plane, as emoji are), a run of one repeated symbol a few, a run of
whitespace a token each time its character changes (" \t \t" is a token a character on
all three tokenizers measured: a small model's broken output is full of them). Measured
against Gemma 3's tokenizer on the prompts `bench/context.py` sends, the mean error is a few
percent, but a smaller vocabulary makes up to a quarter more: where nobody counts, a prompt
is measured by `bound`, an upper bound of every tokenizer measured, never by the estimate
alone. Providers that can count exactly (llama.cpp's `/tokenize`) are counted exactly instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from itertools import groupby

from engine.providers import Message

__all__ = ["BOUND_RATIO", "MESSAGE_OVERHEAD", "bound", "bound_messages", "estimate",
           "estimate_messages"]

MESSAGE_OVERHEAD = 12
"""Tokens a chat template adds around each message (role markers, separators). Measured:
ChatML on a model whose vocabulary lacks its markers (the bundled Gemma) costs 11; templates
with special tokens (OpenAI's, Qwen's) about 4. The larger figure is kept: it is safe."""
_REPLY_PRIMER = 10
"""Tokens of the assistant header that opens the reply."""

_PIECES = re.compile(r"[A-Za-z]{1,7}|[^\sA-Za-z]|\s{2,}|[^\S ]| (?=\d)")
"""One token each: up to 7 letters of a word (a common word is one piece, a long one a few),
a digit, a symbol, a character outside ASCII, a run of whitespace, a newline or tab, or a
space before a digit (a token of its own on Qwen2.5, Gemma 3 and SmolLM2 alike: "7 7 7" is
five tokens); a single space joins the next word for free."""
_RUNS = re.compile(r"([^\w\s])\1{2,}")
_COMMON_RUNS = ("---", "===", "___", "***", "###", "...", "~~~", "───", "━━━", "═══")
"""The runs worth looking for (other runs count a token a character: an overestimate)."""
_ASTRAL = re.compile(r"[\U00010000-\U0010FFFF]")
_SPACES = re.compile(r"\s{3,}")
"""Whitespace runs worth a closer look (`_PIECES` counts each run one token)."""
_SPACE_SPAN = {"\n": 4, " ": 16}
"""Of one whitespace character repeated, how many a token holds at least: 4 newlines
(SmolLM2-135M: 13 tokens for 50), 8 of the others (SmolLM2: 7 for 50 tabs; Gemma 3: 4 for 100
spaces)."""
_LETTER_RUNS = re.compile(r"([A-Za-z])\1{7,}")
"""One letter repeated: a token for 2 of them (SmolLM2: 481 for 900 "h", 25 for 100 "x"), not
one for 7 as a word's letters."""


def _space_tokens(run: str) -> int:
    """About how many tokens a run of whitespace is: a token each time its character changes
    (the first change, a newline into an indentation, merges), and a long stretch of one
    character a token for each `_SPACE_SPAN` of it. Measured on Qwen2.5, Gemma 3 and SmolLM2:
    " \t" 50 times is 49 to 100 tokens; "\n" and four spaces is one."""
    groups = [(char, len(list(same))) for char, same in groupby(run)]
    spans = sum((size - 1) // _SPACE_SPAN.get(char, 8) for char, size in groups)
    return max(1, len(groups) - 1) + spans


@lru_cache(maxsize=4096)
def estimate(text: str) -> int:
    """About how many tokens `text` is (see the module docstring). One C-level scan; kept for
    the texts seen last: a transcript is measured again for every call of an interrogation."""
    total = len(_PIECES.findall(text))
    if not text.isascii():
        total += len(_ASTRAL.findall(text))  # emoji and the like: two tokens or more
    if any(run in text for run in _COMMON_RUNS):  # a few substring searches, not a scan
        for match in _RUNS.finditer(text):  # `-----` is a few tokens, not one a dash
            length = match.end() - match.start()
            total -= length - (1 + length // 8)
    for run in _SPACES.findall(text):  # counted one token by `_PIECES`
        total += _space_tokens(run) - 1
    for match in _LETTER_RUNS.finditer(text):  # counted a token for 7 by `_PIECES`
        length = match.end() - match.start()
        total += max(0, length // 2 + 1 - math.ceil(length / 7))
    return total


def estimate_messages(messages: Iterable[Message]) -> int:
    """About how many tokens a chat prompt of `messages` is, template included."""
    return sum(estimate(m.content) + MESSAGE_OVERHEAD for m in messages) + _REPLY_PRIMER


BOUND_RATIO = 1.35
"""The most tokens a real tokenizer makes of ASCII text, per estimated token. Measured
(`tests/engine/test_context.py` keeps checking it against both bundled models): over the 121
texts of more than 150 tokens among 170 (detektiv's prompts, its docs and code, HaluEval
rows, a table of numbers), the text's own tokens (the template's left out: `BOUND_PRIMER`
holds it) were at most 1.24 times the estimate on SmolLM2-135M (49k vocabulary), 1.15 on
Qwen2.5-1.5B and on Gemma 3 (262k); 1.35 keeps 8 % over the worst. The test also holds it to
a small model's broken output (whitespace of every kind, one letter repeated, digits spaced
apart), which the estimate once took for a token a run: " \t" 300 times is 600 tokens on
Gemma 3, and the bound said 2."""


def bound(text: str) -> int:
    """At least as many tokens as any tokenizer measured makes of `text`: its ASCII at
    `BOUND_RATIO` times the estimate, every other character at its UTF-8 bytes (a small
    vocabulary cuts CJK into bytes: 1.66 tokens a character measured, 3 bytes each). Never more
    than the text's bytes, which no tokenizer exceeds. C-level scans only (`estimate` keeps
    the texts seen last)."""
    guess = estimate(text)
    if text.isascii():
        return min(len(text), math.ceil(guess * BOUND_RATIO))
    size = len(text.encode("utf-8"))
    narrow = len(text.encode("ascii", "ignore"))
    wide = len(text) - narrow
    guess = max(0, guess - wide - len(_ASTRAL.findall(text)))
    return min(size, math.ceil(guess * BOUND_RATIO) + size - narrow)


BOUND_PRIMER = 32
"""Tokens a template adds once, at most, as measured: the reply's header, a BOS, and a
default system prompt where none is sent (SmolLM2's: a one-token question is 31 tokens)."""


def bound_messages(messages: Iterable[Message],
                   measure: Callable[[str], int] = bound) -> int:
    """An upper bound of a chat prompt of `messages`, template included: each text by
    `measure` (`bound`, or what a server's replies measured), `MESSAGE_OVERHEAD` a message,
    `BOUND_PRIMER` once."""
    return sum(measure(m.content) + MESSAGE_OVERHEAD for m in messages) + BOUND_PRIMER
