"""Questions in a canonical form for the response cache (SPEC §3, seed 003): loose on surface.

    normalise("What's the   Café's PRICE?!")  →  "what is the cafe s price"

NFKC, case-folded, accents folded, English contractions expanded (`won't` → `will not`, so a
negation is always the word `not`), punctuation and whitespace collapsed to one space. Digits,
decimal points and signs inside numbers are kept (`3.5`, `-2`), as is `%`. `stem` and
`keywords` give the content of a question for the candidate index and the meaning guard.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["STOPWORDS", "keywords", "normalise", "stem", "tokens"]

_IRREGULAR = {
    "won't": "will not", "can't": "can not", "cannot": "can not", "shan't": "shall not",
    "ain't": "is not", "let's": "let us", "y'all": "you all",
}
_PRONOUN_IS = ("it", "that", "what", "there", "here", "who", "where", "how", "when", "why",
               "he", "she", "this")
_CONTRACTION = re.compile(r"\b(\w+)'(s|re|ve|ll|d|m|t)\b")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)*%?")
_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*%?|%")

STOPWORDS = frozenset("""
a an the is are was were be been being am do does did doing have has had having of to in on
at by for with from as into about over under than then that this these those it its it's i me
my we our you your he him his she her they them their what which who whom whose when where why
how please tell me can could would should will shall may might must just really very so and
or but if also there here s
""".split()) - {"not", "no", "never", "without", "with", "than", "over", "under", "before",
                "after", "more", "less", "from", "to", "in", "on", "off"}
"""Words that carry no content of their own. Negations, comparisons, relations and scope words
(some, any, one…) are not stopwords: they change what a question means."""


def _expand(match: re.Match[str]) -> str:
    word, tail = match.group(1), match.group(2)
    if tail == "t" and word.endswith("n"):  # isn't, doesn't, wouldn't
        return f"{word[:-1]} not"
    if tail == "s":
        return f"{word} is" if word in _PRONOUN_IS else f"{word} s"  # possessive otherwise
    return {"re": f"{word} are", "ve": f"{word} have", "ll": f"{word} will",
            "d": f"{word} would", "m": f"{word} am"}.get(tail, match.group(0))


@lru_cache(maxsize=65536)
def normalise(text: str) -> str:
    """The canonical form of `text` (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(ch for ch in unicodedata.normalize("NFD", text)
                   if unicodedata.category(ch) != "Mn")
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    for word, expanded in _IRREGULAR.items():
        text = re.sub(rf"\b{re.escape(word)}\b", expanded, text)
    text = _CONTRACTION.sub(_expand, text)
    text = re.sub(r"(\d)\s+%", r"\1%", text)  # "15 %" is "15%"
    return " ".join(_WORD.findall(text))


def tokens(text: str) -> list[str]:
    """The words of the normalised `text`."""
    return normalise(text).split()


def stem(word: str) -> str:
    """A light English stem: plural, `-ing`, `-ed`, `-ly` and a final `e` taken off
    (`risks` → `risk`, `studies` → `study`, `increases`/`increased` → `increas`); enough to
    let inflections match, never to merge different words."""
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
    """The content words of `text`, in order, normalised and stemmed (no stopwords)."""
    return [stem(t) for t in tokens(text) if t not in STOPWORDS]
