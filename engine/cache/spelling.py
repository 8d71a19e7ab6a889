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

A word typed as another word of the dictionary (`oder` for order: one edit, the same first
letter, 3 letters at least) is read in its context, in English only (`slip`), and both of these
must hold:

- the noisy channel of Mays, Damerau & Mercer (1991) prefers the commoner word: a word is
  typed as meant 99 % of the time, the rest spread evenly over the dictionary words one edit
  away, so the commoner must be more frequent than the rarer by 99 × its neighbours;
- a word both questions have beside it, on the same side and not a stopword, makes a known
  pair with the commoner word and none with the rarer (`order number`, never `oder number`).

Without such a neighbour nothing tells them apart ("What is a hart?" is not "What is a
heart?"), and a rarer word that is common enough is taken as meant ("coda section"). The known
pairs are SymSpell's English bigram list (symspellpy's 243,342 most frequent, from Google
Books), read on first use and kept as their hashes (2 MB).

The dictionaries are pyspellchecker's word-frequency lists (English, German, Portuguese: the
languages the normaliser folds), read on first use, one language at a time. Without them no
word is a typo: the guard then asks for the same words, as it did before.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Iterable
from pathlib import Path

from rapidfuzz.distance import OSA

__all__ = ["bound", "frequency", "is_typo", "known", "slip"]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_words: dict[str, dict[str, int] | None] = {}
_pairs: list[_Pairs | None] = []


class _Pairs:
    """Known word pairs, kept as their sorted hashes (2 MB, where a set of the 243,342
    strings takes 30): a pair is known when its hash is there (a false match in 10^13)."""

    def __init__(self, pairs: Iterable[str]) -> None:
        import numpy as np

        self._np = np
        self._hashes = np.unique(np.fromiter((hash(p) for p in pairs), dtype=np.int64))

    def __contains__(self, pair: str) -> bool:
        key = hash(pair)
        at = int(self._np.searchsorted(self._hashes, key))
        return at < len(self._hashes) and int(self._hashes[at]) == key


def _dictionary(language: str) -> dict[str, int] | None:
    """{word (folded): its frequency} of `language`, or None without one."""
    with _lock:
        if language not in _words:
            _words[language] = _load(language)
        return _words[language]


def frequency(word: str, language: str = "en") -> int | None:
    """How often `word` (folded) occurs in `language`'s dictionary (0: not in it), or None
    without a dictionary: how common a word is (what names a claim's subject best)."""
    words = _dictionary(language)
    return None if words is None else words.get(word.lower(), 0)


def _load(language: str) -> dict[str, int] | None:
    from engine.cache.normalise import fold

    try:
        from spellchecker import SpellChecker

        words = SpellChecker(language=language, distance=1).word_frequency.dictionary
    except Exception as exc:  # noqa: BLE001 — no dictionary: no typo tolerance, never an error
        log.warning("no %s dictionary for typo tolerance: %s", language, exc)
        return None
    folded: dict[str, int] = {}
    for word, count in words.items():
        key = word if word.isascii() else fold(word)
        folded[key] = max(count, folded.get(key, 0))
    return folded


BIGRAMS = "frequency_bigramdictionary_en_243_342.txt"
"""SymSpell's English word pairs, shipped in the symspellpy package."""


def _bigrams() -> _Pairs | None:
    """The known English word pairs ("order number"), or None without the list."""
    with _lock:
        if not _pairs:
            _pairs.append(_load_bigrams())
        return _pairs[0]


def _load_bigrams() -> _Pairs | None:
    try:  # the data file only: importing the package would load its spell checker too
        spec = importlib.util.find_spec("symspellpy")
        where = list(spec.submodule_search_locations or []) if spec else []
        lines = (Path(where[0]) / BIGRAMS).read_text(encoding="utf-8").splitlines()
    except (OSError, IndexError, ImportError) as exc:
        log.warning("no English word pairs for real-word typos: %s", exc)
        return None
    return _Pairs(" ".join(line.split()[:2]) for line in lines if line.count(" ") == 2)


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


MEANT = 0.99
"""How often a word is typed as meant (the noisy channel's one setting)."""
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _neighbours(word: str, counts: dict[str, int]) -> int:
    """How many dictionary words are one edit (optimal string alignment) from `word`."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    edits = {a + b[1:] for a, b in splits if b}
    edits |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    edits |= {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    edits |= {a + c + b for a, b in splits for c in _LETTERS}
    edits.discard(word)
    return sum(1 for w in edits if w in counts)


def slip(a: str, b: str, beside: Iterable[tuple[str, str]], languages: tuple[str, ...]) -> bool:
    """Whether `a` and `b`, both English words one edit apart, are one word typed as the other,
    read beside a word both questions share: `beside` holds ("<", word) for a word just before
    both, (">", word) for one just after (see the module docstring)."""
    if languages != ("en",) or a == b or not (a.isalpha() and b.isalpha()) \
            or min(len(a), len(b)) < 3 or not _near(a, b, 1):
        return False
    counts = _dictionary("en")
    if counts is None or not counts.get(a) or not counts.get(b):
        return False
    rare, common = sorted((a, b), key=lambda w: counts[w])
    slipped = counts[common] * (1 - MEANT) / max(1, _neighbours(common, counts))
    if slipped <= counts[rare] * MEANT:
        return False
    pairs = _bigrams()
    if pairs is None:
        return False

    def known_pair(word: str, side: str, other: str) -> bool:
        return (f"{other} {word}" if side == "<" else f"{word} {other}") in pairs

    return any(known_pair(common, side, other) and not known_pair(rare, side, other)
               for side, other in beside)


def _opposite_prefixes(a: str, b: str) -> bool:
    return any((a.startswith(x) and b.startswith(y)) or (a.startswith(y) and b.startswith(x))
               for x, y in _OPPOSITE_PREFIXES)


def _near(a: str, b: str, limit: int) -> bool:
    """At most `limit` edits apart, the same first letter, and no prefixes of opposite
    meaning: what any two words read as one typed twice have in common."""
    return abs(len(a) - len(b)) <= limit and a[0] == b[0] and not _opposite_prefixes(a, b) \
        and OSA.distance(a, b) <= limit


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
    if limit == 0 or not _near(a, b, limit):
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
