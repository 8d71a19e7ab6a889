"""The response cache's labelled sets, measured the way a user meets the cache: each pair's
first question put in, the second looked up (one scope per pair, so pairs never meet).

    cache_pairs.tsv     question, candidate, same (1/0): written alongside the rules
    cache_heldout.tsv   kind, language, question, candidate, served (1/0): written before the
                        rules of issue 23 changed, never used while changing one
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from engine.cache.cache import ResponseCache
from engine.cache.store import SQLiteCacheStore

DATA = Path(__file__).resolve().parent.parent / "data"


@dataclass(frozen=True, slots=True)
class Pair:
    kind: str
    language: str
    question: str
    candidate: str
    served: bool


@dataclass(frozen=True, slots=True)
class Outcome:
    pair: Pair
    hit: bool
    reason: str


def pairs(name: str) -> list[Pair]:
    """The pairs of `tests/data/<name>` (either layout)."""
    found = []
    for line in (DATA / name).read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) == 3:
            cells = ["labelled", "en", *cells]
        kind, language, question, candidate, served = cells
        found.append(Pair(kind, language, question, candidate, served == "1"))
    return found


def measure(items: list[Pair], cache: ResponseCache | None = None) -> list[Outcome]:
    """Every pair through `put` and `lookup` (a temporary SQLite cache unless one is given)."""
    if cache is None:
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLiteCacheStore(Path(tmp) / "cache.sqlite3")
            try:
                return measure(items, ResponseCache(store))
            finally:
                store.close()
    outcomes = []
    for number, pair in enumerate(items):
        scope = f"pair-{number}"
        cache.put(pair.question, "an answer", scope=scope)
        explanation, entry = cache.lookup(pair.candidate, scope)
        outcomes.append(Outcome(pair, entry is not None, explanation.reason))
    return outcomes


@dataclass(frozen=True, slots=True)
class Scores:
    pairs: int
    precision: float
    recall: float
    wrong: int

    def line(self, label: str) -> str:
        return (f"{label}: {self.pairs} pairs, precision {self.precision:.3f}, recall "
                f"{self.recall:.3f}, wrong answers served {self.wrong}")


def scores(outcomes: list[Outcome]) -> Scores:
    """A hit is a positive; a wrong answer served is a hit on a pair labelled 0."""
    tp = sum(1 for o in outcomes if o.hit and o.pair.served)
    fp = sum(1 for o in outcomes if o.hit and not o.pair.served)
    fn = sum(1 for o in outcomes if not o.hit and o.pair.served)
    return Scores(len(outcomes), tp / (tp + fp) if tp + fp else 1.0,
                  tp / (tp + fn) if tp + fn else 1.0, fp)


def by_kind(outcomes: list[Outcome]) -> dict[str, Scores]:
    """Scores per kind of pair (surface, paraphrase, opposite, realtime) and per language."""
    groups: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        groups.setdefault(outcome.pair.kind, []).append(outcome)
        groups.setdefault(outcome.pair.language, []).append(outcome)
    return {name: scores(group) for name, group in sorted(groups.items())}
