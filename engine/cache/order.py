"""Word order: is one question another's words in another order that keeps its meaning?

The meaning guard's last check (`engine.cache.guard`): two questions with the same content words
in another order are one question only when one block of words moved as a whole, apart from
the rest ("On Ubuntu, how do I…" / "How do I … on Ubuntu", `rent or buy` / `buy or rent`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

__all__ = ["MOST_WORDS", "one_block_moved", "ordered"]

MOST_WORDS = 200
"""Words beyond which a different order is never looked at as a moved block."""
_COORDINATORS = frozenset("or and oder und ou e".split())
"""What stands between two words that trade places and stay one question (`rent or buy`)."""


def one_block_moved(a: list[str], b: list[str], gaps_a: list[frozenset[str]],
                    gaps_b: list[frozenset[str]]) -> bool:
    """Whether `b` is `a` with one contiguous block of words moved elsewhere, the two blocks
    apart (a stopword or a filler between them) in at least one of the questions: `rent or
    buy` / `buy or rent` is one question, `milk chocolate` / `chocolate milk` is not. Two
    single words apart in both questions trade places only across `or` / `and` ("The bride
    is leaving the groom" is not "The bride and the groom are leaving"); side by side in one
    only, with the same `and` / `or` elsewhere, a word moved behind its noun stays (`acoustic
    guitar` / `guitar that is acoustic`, `bread slices` / `slices of bread`). `gaps_*[i]`: the
    words left out before word i."""
    if len(a) != len(b) or len(a) > MOST_WORDS or Counter(a) != Counter(b):
        return False  # a long text in another order is not a rewording of a question
    start = 0
    while start < len(a) and a[start] == b[start]:
        start += 1
    end = len(a)
    while end > start and a[end - 1] == b[end - 1]:
        end -= 1
    x, y = a[start:end], b[start:end]
    # y is x rotated: x = P + Q, y = Q + P
    for cut in range(1, len(x)):
        if y != x[cut:] + x[:cut]:
            continue
        here, there = gaps_a[start + cut], gaps_b[start + len(x) - cut]
        if len(x) == 2 and not (here | there) & _COORDINATORS and (
                bool(here) == bool(there) or _joining(gaps_a) != _joining(gaps_b)):
            continue  # apart in both or in neither, or `and` joins other words: no `or` here
        if here or there:
            return True
    return False


def _joining(gaps: list[frozenset[str]]) -> Counter[str]:
    """The `and` / `or` a question has between its words."""
    return Counter(word for gap in gaps for word in gap if word in _COORDINATORS)


def ordered(sequence: list[str], gaps: list[frozenset[str]], left_out: set[str],
            name: Callable[[str], str]) -> tuple[list[str], list[frozenset[str]]]:
    """The words of `sequence` in order, named by `name`, without `left_out`, and the words
    left out before each (`gaps`: those before each word of `sequence`)."""
    words: list[str] = []
    kept: list[frozenset[str]] = []
    gap: set[str] = set()
    for word, before in zip(sequence, gaps, strict=True):
        gap |= before
        if word in left_out:
            gap.add(word)
            continue
        words.append(name(word))
        kept.append(frozenset(gap))
        gap = set()
    return words, kept
