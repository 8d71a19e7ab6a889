"""Is a differing word a typo, or another word? The meaning guard's typo tolerance.

Two words count as one typed twice only when

- both are words of letters, the shorter at least 4 long (`cat`/`bat` never are);
- their edit distance (optimal string alignment: a swapped pair of letters is one edit) is at
  most 1, or 2 from 9 letters on;
- exactly one of them is a word of the language (a dictionary, folded as the normaliser folds):
  `bad`/`bat` and `Gambia`/`Zambia` are both words, so neither is a typo of the other;
  `cofee` is no word, `coffee` is; or neither is, both are long (a German compound) and one
  writes a doubled letter once (`Lieferadrese`/`Lieferadresse`);
- neither is a name (the caller leaves out words written with a capital inside a sentence);
- they start with the same letter, and not with two prefixes of opposite meaning
  (`hypo`/`hyper`, `inter`/`intra`, `pre`/`post`…).

The dictionaries are pyspellchecker's word-frequency lists (English, German, Portuguese: the
languages the normaliser folds), read on first use, one language at a time. Without them no
word is a typo: the guard then asks for the same words, as it did before.
"""

from __future__ import annotations

import logging
import threading

from rapidfuzz.distance import OSA

__all__ = ["bound", "is_typo", "known"]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_words: dict[str, frozenset[str] | None] = {}


def _dictionary(language: str) -> frozenset[str] | None:
    with _lock:
        if language not in _words:
            _words[language] = _load(language)
        return _words[language]


def _load(language: str) -> frozenset[str] | None:
    from engine.cache.normalise import fold

    try:
        from spellchecker import SpellChecker

        words = SpellChecker(language=language, distance=1).word_frequency.dictionary
    except Exception as exc:  # noqa: BLE001 — no dictionary: no typo tolerance, never an error
        log.warning("no %s dictionary for typo tolerance: %s", language, exc)
        return None
    return frozenset(w if w.isascii() else fold(w) for w in words)


def known(word: str, languages: tuple[str, ...]) -> bool | None:
    """Whether `word` (folded) is a word of any of `languages`; None without a dictionary."""
    found = False
    for language in languages:
        words = _dictionary(language)
        if words is None:
            return None
        found = found or word in words
    return found


_OPPOSITE_PREFIXES = [("hypo", "hyper"), ("inter", "intra"), ("pre", "post"), ("over", "under"),
                      ("micro", "macro"), ("sub", "super"), ("infra", "ultra"), ("in", "ex"),
                      ("im", "ex"), ("en", "de"), ("hetero", "homo"), ("endo", "exo"),
                      ("mono", "poly"), ("uni", "multi"), ("up", "down")]


def _opposite_prefixes(a: str, b: str) -> bool:
    return any((a.startswith(x) and b.startswith(y)) or (a.startswith(y) and b.startswith(x))
               for x, y in _OPPOSITE_PREFIXES)


def bound(length: int) -> int:
    """The edits a word of `length` letters may have and still be the same word."""
    return 0 if length < 4 else 1 if length < 9 else 2


def is_typo(a: str, b: str, languages: tuple[str, ...]) -> bool:
    """Whether `a` and `b` are one word, one of them mistyped (see the module docstring)."""
    if a == b:
        return True
    if not (a.isalpha() and b.isalpha()):
        return False
    limit = bound(min(len(a), len(b)))
    if limit == 0 or abs(len(a) - len(b)) > limit or a[0] != b[0] \
            or _opposite_prefixes(a, b) or OSA.distance(a, b) > limit:
        return False
    known_a, known_b = known(a, languages), known(b, languages)
    if known_a is None or known_b is None:
        return False
    return known_a != known_b or (not known_a and _doubled(a, b))


LONG_COMPOUND = 10
"""Letters from which two words no dictionary knows may still be one word typed twice."""


def _doubled(a: str, b: str) -> bool:
    """One doubled letter written once (`Lieferadrese` / `Lieferadresse`) in a long word: a
    German compound is in no dictionary, and a name that long rarely differs only so."""
    short, long = sorted((a, b), key=len)
    if len(long) != len(short) + 1 or len(short) < LONG_COMPOUND:
        return False
    return any(long[i] == long[i - 1] and long[:i] + long[i + 1:] == short
               for i in range(1, len(long)))
