"""The meaning guard: may a cached answer to one question be served for another? (SPEC §3)

Surface similarity cannot tell a question from its opposite ("Is coffee bad for the heart?"
vs "…good…" scores higher than a true paraphrase), so every fuzzy candidate must pass every
check here; the first that fails rejects it, and the result says which and why. Reject when in
doubt: a miss costs one model call, a wrong hit costs the user's trust.

Checks, in order:

    negation       a negation in one and not the other (`not`, `never`, `no`, `without`…)
    antonyms       a word in one whose opposite is in the other (good/bad, on/off, risks/…)
    quantities     any differing number, date, month, weekday, unit or quantity word
    content        a content word in one but not the other (Jupiter/Saturn, benefits/risks)
    order          the same content words in another order around a relation
                   ("A bigger than B" vs "B bigger than A")
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from engine.cache.normalise import STOPWORDS, stem, tokens

__all__ = ["CHECKS", "Check", "GuardResult", "check_meaning"]

NEGATIONS = frozenset({"not", "no", "never", "none", "nothing", "nobody", "neither", "nor",
                       "without", "nowhere", "non"})
_PAIRS = """
good bad; better worse; best worst; benefit risk; benefit harm; advantage disadvantage;
pro con; strength weakness; increase decrease; rise fall; more less; more fewer; most least;
big small; bigger smaller; biggest smallest; large small; larger smaller; high low;
higher lower; highest lowest; long short; longer shorter; on off; true false; safe dangerous;
safe unsafe; healthy unhealthy; before after; above below; over under; with without; cheap
expensive; cheaper dearer; hot cold; warm cold; win lose; won lost; buy sell; open close;
start stop; start end; begin end; enable disable; allow deny; allow forbid; max min;
maximum minimum; add remove; import export; input output; up down; in out; first last; early
late; earlier later; fast slow; faster slower; young old; younger older; light heavy; light
dark; rich poor; strong weak; stronger weaker; success failure; succeed fail; love hate;
like dislike; agree disagree; legal illegal; possible impossible; accept reject; include
exclude; positive negative; male female; north south; east west; left right; yesterday
tomorrow; past future; always never; all none; everyone nobody; everything nothing; same
different; pass fail; valid invalid; right wrong; correct incorrect; inside outside; push
pull; send receive; give take; lend borrow; upper lower; wet dry; full empty; happy sad;
rise drop; gain loss; profit loss; cause prevent; help hurt; friend enemy; asleep awake;
odd even; sweet sour; soft hard; easy hard; easy difficult; simple complex; deep shallow;
wide narrow; thick thin; clean dirty; near far; top bottom; front back; inner outer; min max;
encrypt decrypt; upload download; login logout; mount unmount; install uninstall; lock unlock;
""".replace("\n", " ")
ANTONYMS: dict[str, set[str]] = {}
for _pair in _PAIRS.split(";"):
    _words = _pair.split()
    if len(_words) == 2:
        _a, _b = (stem(w) for w in _words)
        ANTONYMS.setdefault(_a, set()).add(_b)
        ANTONYMS.setdefault(_b, set()).add(_a)

_NUMBER_WORDS = frozenset("""
zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety
hundred thousand million billion trillion dozen half quarter third twice double triple
single couple few several many first second fourth fifth
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday tonight
""".split())
_UNITS = frozenset("""
km kilometer kilometre mile meter metre cm mm inch foot feet yard kg kilogram gram g lb pound
ounce oz ton tonne liter litre ml gallon celsius fahrenheit kelvin degree percent % dollar
euro pound yen usd eur gbp second minute hour day week month year decade century kwh watt
volt amp mph kmh byte kb mb gb tb
""".split())
_DIGITS = re.compile(r"\d")
RELATIONS = frozenset({"than", "vs", "versus", "before", "after", "over", "beat", "beats",
                       "defeat", "defeated", "to", "from", "into", "against", "above", "below",
                       "more", "less", "bigger", "smaller", "larger", "higher", "lower",
                       "older", "younger", "faster", "slower", "better", "worse", "cause",
                       "causes", "caused", "owns", "own", "pay", "pays", "paid", "sent",
                       "send", "sends", "married", "follows", "precede", "precedes", "north",
                       "south", "east", "west", "left", "right", "behind", "inside",
                       "outside", "near", "beside", "under"})


@dataclass(frozen=True, slots=True)
class Check:
    """One check of the guard: its name, whether it passed, and why not."""

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


CHECKS = ("negation", "antonyms", "quantities", "content", "order")


def _quantity(word: str) -> bool:
    return bool(_DIGITS.search(word)) or word in _NUMBER_WORDS or stem(word) in _UNITS \
        or word in _UNITS


def _content(words: list[str]) -> list[str]:
    return [stem(w) for w in words
            if w not in STOPWORDS and w not in NEGATIONS and not _quantity(w)]


def _listing(words: Iterable[str]) -> str:
    return ", ".join(sorted(words)) or "nothing"


def check_meaning(question: str, candidate: str) -> GuardResult:
    """Whether `candidate`'s cached answer may serve `question`; stops at the first failure."""
    a, b = tokens(question), tokens(candidate)
    checks: list[Check] = []

    def add(name: str, ok: bool, detail: str = "") -> bool:
        checks.append(Check(name, ok, "" if ok else detail))
        return ok

    neg_a, neg_b = Counter(w for w in a if w in NEGATIONS), Counter(w for w in b if w in NEGATIONS)
    if not add("negation", neg_a == neg_b,
               f"negation differs: {_listing(neg_a)} vs {_listing(neg_b)}"):
        return GuardResult(tuple(checks))
    stems_a, stems_b = {stem(w) for w in a}, {stem(w) for w in b}
    clash = sorted(f"{x}/{y}" for x in stems_a - stems_b
                   for y in ANTONYMS.get(x, ()) if y in stems_b - stems_a)
    if not add("antonyms", not clash, f"opposites: {', '.join(clash)}"):
        return GuardResult(tuple(checks))
    qty_a = Counter(stem(w) for w in a if _quantity(w))
    qty_b = Counter(stem(w) for w in b if _quantity(w))
    if not add("quantities", qty_a == qty_b,
               f"numbers, dates or units differ: {_listing(qty_a)} vs {_listing(qty_b)}"):
        return GuardResult(tuple(checks))
    content_a, content_b = _content(a), _content(b)
    only_a, only_b = set(content_a) - set(content_b), set(content_b) - set(content_a)
    if not add("content", not only_a and not only_b,
               f"words in one only: {_listing(only_a)} | {_listing(only_b)}"):
        return GuardResult(tuple(checks))
    # a comparative (-er) or a relation word makes the order of the entities matter
    related = any(w in RELATIONS or (w.endswith("er") and len(w) > 4) for w in (*a, *b))
    seq_a = [stem(w) for w in a if w not in STOPWORDS and w not in NEGATIONS]
    seq_b = [stem(w) for w in b if w not in STOPWORDS and w not in NEGATIONS]
    order_a = [w for w in seq_a if seq_a.count(w) == 1]
    order_b = [w for w in seq_b if seq_b.count(w) == 1]
    add("order", not related or order_a == order_b,
        f"the same words in another order around a relation: {' '.join(order_a)} vs "
        f"{' '.join(order_b)}")
    return GuardResult(tuple(checks))
