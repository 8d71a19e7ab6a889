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
from collections.abc import Callable
from functools import lru_cache

from engine.cache.lexicon import detect, lexicon

__all__ = ["VERSION", "fold", "keywords", "normalise", "stem", "stem_de", "stemmer", "tokens"]

VERSION = "5"
"""Bump when a change makes a question normalise differently: stores are reindexed on open."""

_IRREGULAR = {
    "won't": "will not", "can't": "can not", "cannot": "can not", "shan't": "shall not",
    "ain't": "is not", "let's": "let us", "y'all": "you all",
    # typed without the apostrophe
    "dont": "do not", "doesnt": "does not", "didnt": "did not", "isnt": "is not",
    "arent": "are not", "wasnt": "was not", "werent": "were not", "cant": "can not",
    "couldnt": "could not", "wouldnt": "would not", "shouldnt": "should not",
    "havent": "have not", "hasnt": "has not", "whats": "what is", "wheres": "where is",
    "hows": "how is", "thats": "that is", "youre": "you are", "ive": "i have",
}
_PRONOUN_IS = ("it", "that", "what", "there", "here", "who", "where", "how", "when", "why",
               "he", "she", "this")
_CONTRACTION = re.compile(r"\b(\w+)'(s|re|ve|ll|d|m|t)\b")
_GERMAN = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss"})
_NUM = r"\d+(?:[.,]\d+)*"
_SIGN = "\u2212"  # a number's sign while hyphens are dropped
_CURRENCIES = {r"\$": "usd", "€": "eur", "£": "gbp", "¥": "jpy", "₹": "inr", "₽": "rub"}
_SYMBOLS = [  # in order: the longer sign first
    (re.compile(r"°\s*c\b"), " celsius "), (re.compile(r"°\s*f\b"), " fahrenheit "),
    (re.compile(r"°"), " degree "), (re.compile(r"<=|≤|=<"), " atmost "),
    (re.compile(r">=|≥|=>"), " atleast "), (re.compile(r"!=|≠|<>|=/="), " notequals "),
    (re.compile(r"==|="), " equals "), (re.compile(r"<"), " lessthan "),
    (re.compile(r">"), " greaterthan "),
    (re.compile(r"\^|\*\*"), " pow "), (re.compile(r"\+"), " plus "),
    (re.compile(r"[*×·]"), " times "), (re.compile(r"÷"), " divided "),
    (re.compile(r"√"), " sqrt "),
    *[(re.compile(rf"{sign}\s*(\d[\d.,]*)"), rf" \1 {code} ")  # "$100" is "100 dollars"
      for sign, code in _CURRENCIES.items()],
    *[(re.compile(sign), f" {code} ") for sign, code in _CURRENCIES.items()],
    (re.compile(r"(?<=[a-z])#"), " sharp "),  # C# is not C
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
_VOWEL = re.compile(r"[aeiouy]")
_PERCENT = re.compile(r"(\d)\s+%")
_SPLIT = re.compile(r"(?<=[a-z])(?=\d)|(?<=\d)(?=[a-z])")
# polite frames around a question, taken off: "Can you tell me the capital…" asks what "the
# capital…" asks; "How do I…" and "How can you…" ask how to
_ASK = r"(?:what|which|why|how|who|whom|whose|where|when|if|whether)"
_FRAMES = [
    (re.compile(r"\b(?:please\s+)?(?:can|could|would|will)\s+you\s+(?:please\s+)?"
                r"(?:tell|show)\s+(?:me|us)\b"), " "),
    (re.compile(r"\b(?:please\s+)?(?:can|could|would|will)\s+you\s+(?:please\s+)?"
                r"(?=(?:explain|give|list|describe|define|summari[sz]e|recommend|name)\b)"), " "),
    (re.compile(r"\b(?:please\s+)?tell\s+(?:me|us)\b"), " "),
    (re.compile(rf"\b(?:do|does)\s+(?:you|anyone|anybody)\s+know\s+(?={_ASK}\b)"), " "),
    (re.compile(rf"\bi\s+(?:wonder|was\s+wondering|want\s+to\s+know|would\s+like\s+to\s+know|"
                rf"am\s+curious)\s+(?={_ASK}\b)"), " "),
    (re.compile(r"\bhow\s+(?:do|can|could|should|would|does|might)\s+(?:i|you|we|one|someone"
                r"|people)\s+"), " how to "),
    (re.compile(r"\b(?:kannst\s+du|koennen\s+sie|koenntest\s+du|koennten\s+sie)\s+mir\s+"
                r"(?:sagen|erklaeren)\s*,?"), " "),
    (re.compile(r"\b(?:weisst\s+du|wissen\s+sie)\s*,?\s+(?=(?:was|wie|wer|wo|wann|warum|"
                r"wieso|welche\w*|ob)\b)"), " "),
    (re.compile(r"\bsag\s+mir\b"), " "),
    (re.compile(r"\bwie\s+(?:kann|koennte)\s+(?:ich|man)\s+"), " wie "),
    (re.compile(r"\b(?:voce|voces)\s+(?:sabe|sabem)\s+(?=(?:o que|por ?que|como|quem|onde|"
                r"quando|qual|quais|quanto|quanta|quantos|quantas|se)\b)"), " "),
    (re.compile(r"\b(?:pode|poderia|podes)\s+(?:me\s+)?(?:dizer|explicar)(?:\s+me)?\b"), " "),
    (re.compile(r"\bme\s+(?:diga|diz|explique|explica)\b"), " "),
    (re.compile(r"\bcomo\s+(?:eu\s+)?(?:faco|posso|consigo|devo)\s+(?:para\s+)?"), " como "),
]
# most questions hold none of these: one search first spares the dozens of substitutions
_ANY_FRAME = re.compile("|".join(f"(?:{p.pattern})" for p, _ in _FRAMES))
_ANY_SYMBOL = re.compile("|".join(f"(?:{p.pattern})" for p, _ in _SYMBOLS))
_SYMBOL_HINT = re.compile(r"""[^a-z0-9\s?,.!'":;()]|divid|geteilt|multipl|cent|prozent|que"""
                          r"|wieviel|\sx\s")
"""What every one of `_SYMBOLS` needs (a sign, or one of its words): a cheap first look, as
`_ANY_SYMBOL` tries each pattern at each position (18 µs on a question with none)."""
_NUMBER_WORDS = {
    **{w: str(n) for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()) if n != 1},
    "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70",
    "eighty": "80", "ninety": "90", "hundred": "100", "thousand": "1000",
    **{w: str(n + 2) for n, w in enumerate(
        "zwei drei vier fuenf sechs sieben acht neun zehn elf zwoelf".split())},
    "zwanzig": "20", "dreissig": "30", "hundert": "100", "tausend": "1000",
    **{w: str(n + 2) for n, w in enumerate("dois tres quatro cinco seis sete oito nove dez "
                                           "onze doze".split())},
    "duas": "2", "vinte": "20", "trinta": "30", "cem": "100",
}
"""Numbers written as words, as digits ("two eggs" is "2 eggs"). `one`, `ein`, `um` stay words:
they are as often an article or a pronoun ("which one")."""
_UNIT_WORDS = {
    **dict.fromkeys("kilometer kilometers kilometre kilometres kilometern quilometro "
                    "quilometros".split(), "km"),
    **dict.fromkeys("kilogram kilograms kilogramm kilogramme kilogrammes kilos kilo quilo "
                    "quilos".split(), "kg"),
    **dict.fromkeys("gram grams gramm gramme grammes grama gramas".split(), "g"),
    **dict.fromkeys("milligram milligrams milligramm miligrama miligramas".split(), "mg"),
    **dict.fromkeys("meter meters metre metres metern metro metros".split(), "m"),
    **dict.fromkeys("centimeter centimeters centimetre centimetres zentimeter centimetro "
                    "centimetros".split(), "cm"),
    **dict.fromkeys("mile miles meile meilen milha milhas".split(), "mi"),
    **dict.fromkeys("liter liters litre litres litro litros".split(), "l"),
    **dict.fromkeys("milliliter milliliters millilitre millilitres mililitro "
                    "mililitros".split(), "ml"),
    **dict.fromkeys("lbs".split(), "lb"),
    **dict.fromkeys("mins".split(), "min"),
    **dict.fromkeys("hrs hr".split(), "hour"),
    **dict.fromkeys("dollar dollars".split(), "usd"),
    **dict.fromkeys("euro euros".split(), "eur"),
    **dict.fromkeys("yen".split(), "jpy"),
    **dict.fromkeys("rupee rupees".split(), "inr"),
}
"""Units written out, as their symbol ("5 kilometres" is "5 km")."""
_DEGREES = re.compile(r"\b(?:degrees?|grad|graus?)\s+(celsius|fahrenheit|kelvin)\b")
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
    if _ANY_FRAME.search(text):
        for pattern, replacement in _FRAMES:
            text = pattern.sub(replacement, text)
    if _SYMBOL_HINT.search(text) and _ANY_SYMBOL.search(text):
        for pattern, replacement in _SYMBOLS:
            text = pattern.sub(replacement, text)
    text = _BETWEEN.sub(lambda m: f" {_BETWEEN_WORD[m.group(1)]} ", text)
    text = _DEGREES.sub(r"\1", text)  # "5 degrees Celsius" is "5 °C"
    text = _SPLIT.sub(" ", text)
    text = _PERCENT.sub(r"\1%", text)  # "15 %" is "15%"
    words = [_NUMBER_WORDS.get(w) or _UNIT_WORDS.get(w) or w for w in _WORD.findall(text)]
    return " ".join(words).replace(_SIGN, "-")


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
            if suffix == "s" and (word.endswith(("ss", "us", "is"))
                                  or not _VOWEL.search(word[:-1])):
                break  # "class", "https" (not "http")
            word = word[: len(word) - len(suffix)] + replacement
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


_GERMAN_ENDINGS = ("en", "em", "es", "e", "n", "s")


@lru_cache(maxsize=65536)
def stem_de(word: str) -> str:
    """A light German stem: declension and plural endings taken off (`Katzen`/`Katze` →
    `katz`, `kleinen`/`kleine` → `klein`), never the comparative `-er` (`größer` is not
    `groß`)."""
    if not word.isalpha():
        return word
    for ending in _GERMAN_ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 4:
            return word[: len(word) - len(ending)]
    return word


def stemmer(languages: tuple[str, ...]) -> Callable[[str], str]:
    """The stem of a question read as German alone is German; else the light English one
    (which also takes a Portuguese plural off)."""
    return stem_de if languages == ("de",) else stem


def keywords(text: str) -> list[str]:
    """The content words of `text`, in order, normalised and stemmed (the stopwords and fillers
    of its language left out; negations, interrogatives, operators and numbers kept)."""
    words = tokens(text)
    languages = detect(words)
    lex, stem_of = lexicon(languages), stemmer(languages)
    return [stem_of(w) for w in words if not lex.silent(w)]
