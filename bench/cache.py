"""The response cache at 100,000 entries (SQLite): how long a lookup takes, by tier.

    exact      the same question, normalised
    fuzzy      a reworded question: keyword candidates from the FTS5 index, rapidfuzz, the guard
    miss       a question sharing keywords with many entries but matching none
    baseline   the fuzzy lookup done by scoring every entry with rapidfuzz (no candidate index)

Goal: a lookup stays in milliseconds at 100k entries. The entries are written in one
transaction per 1,000 (a bulk load, not the per-answer path).
Run: .venv/bin/python bench/cache.py [--entries N] [--repeat R]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rapidfuzz import fuzz, process  # noqa: E402

from engine.cache.cache import ResponseCache  # noqa: E402
from engine.cache.models import CacheEntry  # noqa: E402
from engine.cache.normalise import keywords, normalise  # noqa: E402
from engine.cache.store import SQLiteCacheStore  # noqa: E402
from engine.cache.validate import validate  # noqa: E402

TOPICS = ["coffee", "tea", "vitamin", "jupiter", "saturn", "python", "rust", "paris", "tokyo",
          "insulin", "bitcoin", "mortgage", "cholesterol", "volcano", "glacier", "orchid",
          "violin", "marathon", "satellite", "enzyme"]
ASPECTS = ["benefits", "risks", "history", "price history", "size", "origin", "effects",
           "structure", "uses", "future", "chemistry", "economics", "geography", "safety"]


def question(i: int) -> str:
    rng = random.Random(i)
    return (f"What are the {rng.choice(ASPECTS)} of {rng.choice(TOPICS)} model {i} "
            f"in region {rng.randrange(500)}?")


def timed(fn: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - start) * 1000)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteCacheStore(Path(tmp) / "cache.sqlite3")
        cache = ResponseCache(store, max_bytes=10**12)
        start = time.perf_counter()
        batch = []
        for i in range(args.entries):
            q = question(i)
            entry = CacheEntry(question=q, normalised=normalise(q), keywords=keywords(q),
                               payload=f"answer {i}")
            batch.append(entry.model_copy(update={"validation_metadata": validate(entry),
                                                  "validated": True}))
            if len(batch) == 1000:
                with store._write() as db:
                    for item in batch:
                        store._store(db, item)
                batch = []
        load = time.perf_counter() - start
        every = [normalise(question(i)) for i in range(args.entries)]
        probe = args.entries // 2
        reworded = question(probe).replace("What are the", "tell me the") + " please"
        fresh = iter(question(i).replace("What are the", "tell me the") + " please"
                     for i in range(args.entries))  # a new wording each call: no variation
        results = {
            "exact": timed(lambda: cache.lookup(question(probe)), args.repeat),
            "fuzzy (index + guard)": timed(lambda: cache.lookup(next(fresh)), args.repeat),
            "miss": timed(lambda: cache.lookup("What are the benefits of coffee?"),
                          args.repeat),
            "baseline: score every entry": timed(
                lambda: process.extractOne(normalise(reworded), every,
                                           scorer=fuzz.token_set_ratio), max(3, args.repeat // 10)),
        }
        hit = cache.lookup(reworded)[0]
        hits = sum(cache.lookup(next(fresh))[0].hit for _ in range(100))
        size = store.size()
        store.close()
    print(f"{args.entries:,} entries loaded in {load:.1f} s, {size / 1e6:.1f} MB; reworded "
          f"questions: {hits} of 100 hit (e.g. {hit.tier}, score {hit.score:.0f})")
    base = results["baseline: score every entry"]
    for name, ms in results.items():
        print(f"  {name:30} {ms:9.2f} ms   {base / ms:8.1f}× faster than the baseline")


if __name__ == "__main__":
    main()
