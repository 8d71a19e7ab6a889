"""Questions in a canonical form for the response cache (SPEC §3, seed 003): loose on surface,
never on meaning.

    normalise("What's the   Café's PRICE?!")     →  "what is the cafe s price"
    normalise("Is x >= -5 for vitamin B-3?")     →  "is x atleast -5 for vitamin b 3"

- NFKC, case-folded; German `ä ö ü` written `ae oe ue` (as users without the keys type them),
  other accents dropped; English contractions expanded (`won't` → `will not`, so a negation is
  always a word); punctuation and whitespace collapsed to one space.
- **What carries meaning is kept as a word**: arithmetic operators and comparison signs
  (`12+4` → `12 plus 4`, `x<5` → `x lessthan 5`, `7 mal 8` → `7 times 8`), as words no
  language uses otherwise, the sign of a number
  (`-5`), decimal points, `%`, degrees (`°C` → `celsius`).
- Identifiers are split where letters meet digits, so `B-3`, `B3` and `b 3` are one `b 3`.
- Portuguese `o que`, `por que`, `do que` become one word each (`oque`, `porque`, `doque`).

`tokens` gives the words; `keywords` the content words of a question for the candidate index
(stopwords and fillers of its language left out, see `engine.cache.lexicon`).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from engine.cache.lexicon import detect, lexicon

__all__ = ["VERSION", "fold", "keywords", "normalise", "stem", "tokens"]

VERSION = "2"
"""Bump when a change makes a question normalise differently: stores are reindexed on open."""

_IRREGULAR = {
    "won't": "will not", "can't": "can not", "cannot": "can not", "shan't": "shall not",
    "ain't": "is not", "let's": "let us", "y'all": "you all",
}
_PRONOUN_IS = ("it", "that", "what", "there", "here", "who", "where", "how", "when", "why",
               "he", "she", "this")
_CONTRACTION = re.compile(r"\b(\w+)'(s|re|ve|ll|d|m|t)\b")
_GERMAN = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss"})
_NUM = r"\d+(?:[.,]\d+)*"
_SIGN = "\u2212"  # a number's sign while hyphens are dropped
_SYMBOLS = [  # in order: the longer sign first
    (re.compile(r"°\s*c\b"), " celsius "), (re.compile(r"°\s*f\b"), " fahrenheit "),
    (re.compile(r"°"), " degree "), (re.compile(r"<=|≤|=<"), " atmost "),
    (re.compile(r">=|≥|=>"), " atleast "), (re.compile(r"!=|≠|<>|=/="), " notequals "),
    (re.compile(r"==|="), " equals "), (re.compile(r"<"), " lessthan "),
    (re.compile(r">"), " greaterthan "),
    (re.compile(r"\^|\*\*"), " pow "), (re.compile(r"\+"), " plus "),
    (re.compile(r"[*×·]"), " times "), (re.compile(r"÷"), " divided "),
    (re.compile(r"√"), " sqrt "),
    (re.compile(r"(?<=\d)\s*[/⁄]\s*(?=\d)"), " divided "),
    (re.compile(rf"(?<![\w.])({_NUM})\s+x\s+(?=\d)"), r"\1 times "),
    (re.compile(r"\b(?:divided|dividido|geteilt)\s+(?:by|por|durch)\b"), " divided "),
    (re.compile(r"\b(?:multiplied|multiplicado|multipliziert)\s+(?:by|por|mit)\b"), " times "),
    (re.compile(r"\b(?:percent|per\s+cent|prozent|por\s+cento)\b"), " % "),
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), r"\1 \2 \3"),  # a date, not a subtraction
    (re.compile(rf"({_NUM})\s*-\s*(?=\d)"), r"\1 minus "),
    (re.compile(r"(?<![\w.])-(?=\d)"), _SIGN),
    (re.compile(r"\bdo que\b"), " doque "), (re.compile(r"\bo que\b"), " oque "),
    (re.compile(r"\bpor ?que\b"), " porque "), (re.compile(r"\bwieviel"), "wie viel"),
]
# operator words of German and Portuguese, only between two numbers (`mal`, `mais` and `menos`
# mean other things elsewhere)
_BETWEEN = re.compile(rf"(?<=\d)\s+(mal|durch|mais|menos|vezes)\s+(?=[{_SIGN}]?\d)")
_BETWEEN_WORD = {"mal": "times", "durch": "divided", "mais": "plus", "menos": "minus",
                 "vezes": "times"}
_SPLIT = re.compile(r"(?<=[a-z])(?=\d)|(?<=\d)(?=[a-z])")
_WORD = re.compile(rf"{_SIGN}?{_NUM}%?|[a-z0-9]+|%")


def _expand(match: re.Match[str]) -> str:
    word, tail = match.group(1), match.group(2)
    if tail == "t" and word.endswith("n"):  # isn't, doesn't, wouldn't
        return f"{word[:-1]} not"
    if tail == "s":
        return f"{word} is" if word in _PRONOUN_IS else f"{word} s"  # possessive otherwise
    return {"re": f"{word} are", "ve": f"{word} have", "ll": f"{word} will",
            "d": f"{word} would", "m": f"{word} am"}.get(tail, match.group(0))


def fold(text: str) -> str:
    """Case, width, German umlauts and accents folded (no other change)."""
    text = unicodedata.normalize("NFKC", text).casefold().translate(_GERMAN)
    if text.isascii():
        return text
    return "".join(ch for ch in unicodedata.normalize("NFD", text)
                   if unicodedata.category(ch) != "Mn")


@lru_cache(maxsize=65536)
def normalise(text: str) -> str:
    """The canonical form of `text` (see the module docstring)."""
    text = fold(text).replace("\u2019", "'").replace("\u2018", "'").replace("\u2212", "-")
    for word, expanded in _IRREGULAR.items():
        if word in text:
            text = re.sub(rf"\b{re.escape(word)}\b", expanded, text)
    text = _CONTRACTION.sub(_expand, text)
    for pattern, replacement in _SYMBOLS:
        text = pattern.sub(replacement, text)
    text = _BETWEEN.sub(lambda m: f" {_BETWEEN_WORD[m.group(1)]} ", text)
    text = _SPLIT.sub(" ", text)
    text = re.sub(r"(\d)\s+%", r"\1%", text)  # "15 %" is "15%"
    return " ".join(_WORD.findall(text)).replace(_SIGN, "-")


def tokens(text: str) -> list[str]:
    """The words of the normalised `text`."""
    return normalise(text).split()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light stem: plural, `-ing`, `-ed`, `-ly` and a final `e` taken off (`risks` → `risk`,
    `studies` → `study`, `increases`/`increased` → `increas`, `vitaminas` → `vitamina`);
    enough to let inflections match, never to merge different words."""
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("xes", "x"), ("ches", "ch"),
                                ("shes", "sh"), ("zes", "z"), ("ing", ""), ("ed", ""),
                                ("ly", ""), ("s", "")):
        shortest = 2 if suffix in ("xes", "ches", "shes", "zes") else 3
        if word.endswith(suffix) and len(word) - len(suffix) >= shortest:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                break
            word = word[: len(word) - len(suffix)] + replacement
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def keywords(text: str) -> list[str]:
    """The content words of `text`, in order, normalised and stemmed (the stopwords and fillers
    of its language left out; negations, interrogatives, operators and numbers kept)."""
    words = tokens(text)
    lex = lexicon(detect(words))
    return [stem(w) for w in words if not lex.silent(w)]
