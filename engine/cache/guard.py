"""The meaning guard: may a cached answer to one question be served for another? (SPEC §3)

Surface similarity cannot tell a question from its opposite ("Is coffee bad for the heart?"
vs "…good…" scores higher than a true paraphrase), so every candidate, whichever tier found it,
must pass every check here; the first that fails rejects it, and the result says which and
why. Reject when in doubt: a miss costs one model call, a wrong hit costs the user's trust.

The pair is read in the language its words show (`engine.cache.lexicon`). Checks, in order:

    negation       a negation in one and not the other (`not`, `nicht`, `não`, `without`…),
                   or one applying to another word ("people who don't smoke get…" /
                   "people who smoke don't get…": the next word of its clause)
    interrogative  another question word (when / why / how / who / where / what)
    operators      another arithmetic operator or comparison sign (`+ - * / ^ = < >`…)
    person         another person asked about, in a question about little else ("Who am I?" /
                   "Who are you?", "What is my name?" / "What is your name?"; a polite frame
                   and the generic "you" of "Can you freeze rice?" aside)
    modality       another of can / must / will ("Can I take it?" / "Must I take it?")
    tense          the past in one only ("Was he king?" / "Is he king?"), also as written
                   (`peeled` / `peeling`, `schälte` / `schält`: the stems agree)
    antonyms       a word in one whose opposite is in the other (good/bad, gut/schlecht…)
    quantities     any differing number (with its sign), date, month, weekday or unit
    content        a content word in one but not the other (Jupiter/Saturn, benefits/risks);
                   a mistyped word matches its word (`engine.cache.spelling`), never a name,
                   a number or a word of its own, unless a word both share beside it tells
                   (`my oder number` / `my order number`, English only)
    order          the content words in another order, unless one block of them moved as a
                   whole ("On Ubuntu, how do I…" / "How do I … on Ubuntu"): two words
                   swapped around another ("A bigger than B" / "B bigger than A", "from A
                   to B" / "from B to A") are another question

Stopwords and fillers ("actually", "eigentlich", "afinal") are left out of every check.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from engine.cache.lexicon import OPERATORS, Lexicon, detect, lexicon
from engine.cache.normalise import fold, stemmer, tokens
from engine.cache.order import one_block_moved, ordered
from engine.cache.spelling import is_typo, known, slip

__all__ = ["CHECKS", "Check", "GuardResult", "check_meaning", "names"]

CHECKS = ("negation", "interrogative", "operators", "person", "modality", "tense", "antonyms",
          "quantities", "content", "order")


@dataclass(frozen=True, slots=True)
class Check:
    """One check of the guard: its name, whether it passed, and why not (or, passed, what it
    let through: a typo)."""

    name: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class GuardResult:
    """Every check run, in order; `passed` only when all did."""

    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def rejected_by(self) -> Check | None:
        """The check that failed, or None."""
        return next((c for c in self.checks if not c.passed), None)


PERSONAL = 2
"""Content words a question has at most for the person it names to be what it asks about."""
MOST_TYPOS = 8
"""Mistyped words beyond which two texts are not one question typed twice."""
_SENTENCE = re.compile(r"[.!?:;]\s+|^")
_LETTERS = re.compile(r"[^\W\d_]+")


@lru_cache(maxsize=4096)
def names(text: str) -> frozenset[str]:
    """The words `text` writes with a capital inside a sentence (folded): names of things,
    never taken for a typo of another word."""
    found: set[str] = set()
    for sentence in _SENTENCE.split(unicodedata.normalize("NFKC", text)):
        for word in _LETTERS.findall(sentence)[1:]:
            if word[0].isupper():
                found.add(fold(word))
    return frozenset(found)


def _listing(words: Iterable[str]) -> str:
    return ", ".join(sorted(words)) or "nothing"


_CLAUSE = re.compile(r"[,;:!?()]|\.(?=\s|$)")
"""Where a clause ends, for what a negation applies to (decimal points and dates aside)."""
_SUBORDINATORS = frozenset("""
who whom whose which that where when because although though unless while whereas if whether
weil dass ob obwohl wenn wer welche welcher welches waehrend
que quem cujo cuja onde quando embora se enquanto
""".split())
"""Words that open a clause of their own: a negation applies within its clause."""
_PAST_ENDINGS = {"en": ("ed",), "de": ("te", "ten", "test", "tet"), "pt": ("ou", "eu", "iu")}
"""The regular past on the surface: `peeled`, `schälte`, `descascou` (`engine.cache.normalise`
stems `peeled` and `peeling` alike, so the tense check reads the words as written)."""
SHORTEST_PAST = 5
"""Letters a word has at least for its ending to be read as the past (`need`, `gute` are not)."""


def _scopes(clauses: list[list[str]], lex: Lexicon, stem: Callable[[str], str]) -> Counter[str]:
    """What each negation applies to: the next word of its clause that is neither silent nor a
    negation nor a question word (the one before it when none follows: "rauchen nicht"), so
    "people who don't smoke get…" (smoke) is not "people who smoke don't get…" (get)."""
    found: Counter[str] = Counter()
    split: list[list[str]] = []
    for words in clauses:
        split.append([])
        for word in words:
            if word in _SUBORDINATORS and split[-1]:
                split.append([])
            split[-1].append(word)
    for words in split:
        meaningful = [i for i, w in enumerate(words) if not lex.silent(w)
                      and w not in lex.negations and w not in lex.interrogatives]
        for i, word in enumerate(words):
            if word in lex.negations:
                after = [j for j in meaningful if j > i]
                before = [j for j in meaningful if j < i]
                target = after[0] if after else before[-1] if before else None
                found[stem(words[target]) if target is not None else ""] += 1
    return found


def _past(word: str, languages: tuple[str, ...]) -> bool:
    return len(word) >= SHORTEST_PAST and word.isalpha() and any(
        word.endswith(_PAST_ENDINGS[language]) for language in languages)


class _Reading:
    """One question's words, sorted by what they do."""

    def __init__(self, words: list[str], lex: Lexicon,
                 clauses: list[list[str]] | None = None) -> None:
        stem = stemmer(lex.languages)
        self.words = words
        self.silent = {w for w in words if lex.silent(w)}
        kept = [w for w in words if w not in self.silent]
        self.negations = Counter(w for w in kept if w in lex.negations)
        self.scopes = _scopes(clauses if clauses is not None else [words], lex, stem) \
            if self.negations else Counter()
        self.forms: dict[str, set[str]] = {}
        """The surfaces of each content stem (the tense of `peeled` / `peeling`)."""
        for word in kept:
            self.forms.setdefault(stem(word), set()).add(word)
        self.asks = lex.asks(words)
        self.persons = {lex.persons[w] for w in words if w in lex.persons}
        self.modals = {lex.modals[w] for w in words if w in lex.modals}
        self.past = any(w in lex.past for w in words)
        self.how_to = "how to" in " ".join(words)
        self.operators = Counter(w for w in kept if w in OPERATORS)
        amounts = {w for w in kept if lex.quantity(w)}
        self.quantities = Counter(stem(w) for w in kept if w in amounts)
        self.stems = {stem(w) for w in words} | set(words)
        self.content = [w for w in kept if w not in lex.negations
                        and w not in lex.interrogatives and w not in OPERATORS
                        and w not in amounts]
        self.sequence: list[str] = []
        self.gaps: list[frozenset[str]] = []  # the words left out before each of `sequence`
        gap: list[str] = []
        for word in words:
            if word in self.silent or word in lex.interrogatives:
                gap.append(word)
                continue
            self.sequence.append(word)
            self.gaps.append(frozenset(gap))
            gap = []


def check_meaning(question: str, candidate: str, normalised: str | None = None) -> GuardResult:
    """Whether `candidate`'s cached answer may serve `question`; stops at the first failure.
    `normalised`: the candidate's normal form when the caller has it (a store keeps it), to
    save working it out again."""
    said = normalised.split() if normalised is not None else tokens(candidate)
    languages = detect(tokens(question) + said)
    lex = lexicon(languages)
    a, b = _read(question, languages), _read(candidate, languages, normalised)
    checks: list[Check] = []

    def add(name: str, ok: bool, detail: str = "", note: str = "") -> bool:
        checks.append(Check(name, ok, note if ok else detail))
        return ok

    # "you" is as often anyone ("Can you freeze rice?", "bad for your heart"): the person
    # counts when the question is about little else ("Who are you?", "What is my name?")
    about_person = min(len(a.content), len(b.content)) <= PERSONAL
    clash = sorted(f"{x}/{y}" for x in a.stems - b.stems
                   for y in lex.antonyms.get(x, ()) if y in b.stems - a.stems)

    def tense(reading: _Reading) -> str:
        return "past" if reading.past else "present"

    moved = _tense_apart(a, b, languages) if a.past == b.past else []

    # (check, passed, why not): each reason is worded only when its check fails
    words: list[tuple[str, bool, Callable[[], str]]] = [
        ("negation", a.negations == b.negations and a.scopes == b.scopes, lambda: (
            f"negation differs: {_listing(a.negations)} vs {_listing(b.negations)}"
            if a.negations != b.negations else "the negation applies to another word: "
            f"{_listing(a.scopes)} vs {_listing(b.scopes)}")),
        ("interrogative", a.asks == b.asks, lambda: "asks another question: "
         f"{_listing(a.asks)} vs {_listing(b.asks)}"),
        ("operators", a.operators == b.operators, lambda: "operators or comparison signs "
         f"differ: {_listing(a.operators)} vs {_listing(b.operators)}"),
        ("person", a.persons == b.persons or not about_person or (a.how_to and b.how_to),
         lambda: f"asks about another person: {_listing(a.persons)} vs "
         f"{_listing(b.persons)}"),
        ("modality", a.modals == b.modals, lambda: "can / must / will differ: "
         f"{_listing(a.modals)} vs {_listing(b.modals)}"),
        ("tense", a.past == b.past and not moved, lambda: (
            f"the past in one only: {tense(a)} vs {tense(b)}" if a.past != b.past else
            f"the past in one only: {', '.join(moved)}")),
        ("antonyms", not clash, lambda: f"opposites: {', '.join(clash)}"),
        ("quantities", a.quantities == b.quantities, lambda: "numbers, dates or units "
         f"differ: {_listing(a.quantities)} vs {_listing(b.quantities)}"),
    ]
    for name, passed, why in words:
        if not add(name, passed, "" if passed else why()):
            return GuardResult(tuple(checks))
    typos = _typos(a, b, names(question) | names(candidate), lex)
    stem = stemmer(languages)
    content_a = {stem(typos.get(w, w)) for w in a.content}
    content_b = {stem(w) for w in b.content}
    slips: set[str] = set()
    if content_a != content_b:  # a stopword mistyped (`teh`) is no content word after all
        slips = mistyped_stopwords(a, b, lex) | mistyped_stopwords(b, a, lex)
        if slips:
            content_a = {stem(typos.get(w, w)) for w in a.content if w not in slips}
            content_b = {stem(w) for w in b.content if w not in slips}
    only_a, only_b = content_a - content_b, content_b - content_a
    note = "typed differently: " + ", ".join(f"{x} ~ {y}" for x, y in sorted(typos.items())) \
        if typos else ""
    if not add("content", not only_a and not only_b,
               f"words in one only: {_listing(only_a)} | {_listing(only_b)}", note):
        return GuardResult(tuple(checks))
    seq_a, gaps_a = ordered(a.sequence, a.gaps, slips, lambda w: stem(typos.get(w, w)))
    seq_b, gaps_b = ordered(b.sequence, b.gaps, slips, stem)
    add("order", seq_a == seq_b or one_block_moved(seq_a, seq_b, gaps_a, gaps_b),
        f"the same words in another order: {' '.join(seq_a)} vs {' '.join(seq_b)}")
    return GuardResult(tuple(checks))


@lru_cache(maxsize=4096)
def _read(text: str, languages: tuple[str, ...], normalised: str | None = None) -> _Reading:
    """`text` read in `languages` (the same question is checked against many candidates)."""
    words = normalised.split() if normalised is not None else tokens(text)
    lex = lexicon(languages)
    clauses = None
    if any(w in lex.negations for w in words):
        parts = [part for part in _CLAUSE.split(text) if part.strip()]
        clauses = [tokens(part) for part in parts] if len(parts) > 1 else [words]
    return _Reading(words, lex, clauses)


def _tense_apart(a: _Reading, b: _Reading, languages: tuple[str, ...]) -> list[str]:
    """The words written in the past in one and not in the other (`peeled` / `peeling`)."""
    apart = []
    for root in a.forms.keys() & b.forms.keys():
        if a.forms[root] == b.forms[root]:
            continue
        for x in a.forms[root]:
            for y in b.forms[root]:
                if x != y and _past(x, languages) != _past(y, languages):
                    apart.append(f"{x}/{y}")
    return sorted(apart)


def _typos(a: _Reading, b: _Reading, proper: frozenset[str], lex: Lexicon,
           ) -> dict[str, str]:
    """{a word of `a`: the word of `b` it is a mistyping of (or that is its mistyping)}."""
    stem = stemmer(lex.languages)
    stems_b = {stem(w) for w in b.content}
    stems_a = {stem(w) for w in a.content}
    lonely_a = [w for w in a.content if stem(w) not in stems_b]
    lonely_b = [w for w in b.content if stem(w) not in stems_a]
    # typos pair one to one: a different number of lonely words, or many, is another question
    if not lonely_a or len({stem(w) for w in lonely_a}) != len({stem(w) for w in lonely_b}) \
            or len(lonely_a) > MOST_TYPOS:
        return {}
    # in German every noun has a capital: there, only the dictionary tells a name apart
    if "de" not in lex.languages:
        lonely_a = [w for w in lonely_a if w not in proper]
        lonely_b = [w for w in lonely_b if w not in proper]
    found: dict[str, str] = {}
    taken: set[str] = set()
    for word in lonely_a:
        match = next((w for w in lonely_b if w not in taken
                      and (is_typo(word, w, lex.languages) or _swapped(word, w, lex)
                           or slip(word, w, _beside(a, word) & _beside(b, w),
                                   lex.languages))), None)
        if match is not None:
            found[word] = match
            taken.add(match)
    return found


def _beside(reading: _Reading, word: str) -> set[tuple[str, str]]:
    """The words just before ("<") and after (">") `word` that are words of their own (no
    stopword, number or sign): what a word typed as another is read beside (`slip`)."""
    found = set()
    words = reading.words
    for i, w in enumerate(words):
        if w == word:
            for side, j in (("<", i - 1), (">", i + 1)):
                if 0 <= j < len(words) and words[j].isalpha() and words[j] not in reading.silent:
                    found.add((side, words[j]))
    return found


def _swapped(a: str, b: str, lex: Lexicon) -> bool:
    """Two letters of a short word swapped (`ie` / `ei`): a word too short for `is_typo`'s
    edit, taken for a typo only when exactly one of the two is a word."""
    if len(a) != len(b) or not 2 <= len(a) <= 3 or a == b or not a.isalpha():
        return False
    differ = [i for i in range(len(a)) if a[i] != b[i]]
    if len(differ) != 2 or differ[1] != differ[0] + 1 or a[differ[0]] != b[differ[1]] \
            or a[differ[1]] != b[differ[0]]:
        return False
    known_a, known_b = known(a, lex.languages), known(b, lex.languages)
    return known_a is not None and known_b is not None and known_a != known_b


def mistyped_stopwords(a: _Reading, b: _Reading, lex: Lexicon) -> set[str]:
    """Words of `a` that are a stopword of `b` with two letters swapped (`teh` / `the`): no
    content of their own."""
    return {w for w in a.content if not known(w, lex.languages) and any(
        _swapped(w, s, lex) for s in b.silent)}
