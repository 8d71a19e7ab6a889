"""The response cache (SQLite) at 1k, 10k and 100k entries: lookups by tier, p50 and p95.

    exact      the same question, normalised
    fuzzy      a new rewording each call: FTS5 keyword candidates, rapidfuzz, the meaning guard
    miss       a question sharing keywords with many entries but matching none
    baseline   rapidfuzz `extractOne` over every entry (no candidate index), same run

Also: the per-answer insert rate, the size cap holding, and precision and recall on the
labelled set. Goals: exact ≤ 1 ms p95, fuzzy ≤ 5 ms p95. The entries of the lookup runs are
bulk-loaded (1,000 a transaction).
Run: .venv/bin/python bench/cache.py [--sizes 1000,10000,100000] [--repeat R]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rapidfuzz import fuzz, process  # noqa: E402

from bench import percentiles  # noqa: E402
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


def load(store: SQLiteCacheStore, entries: int) -> float:
    """Bulk-load `entries` (1,000 a transaction); seconds."""
    begin = time.perf_counter()
    batch = []
    for i in range(entries):
        q = question(i)
        entry = CacheEntry(question=q, normalised=normalise(q), keywords=keywords(q),
                           payload=f"answer {i}")
        batch.append(entry.model_copy(update={"validation_metadata": validate(entry),
                                              "validated": True}))
        if len(batch) == 1000 or i == entries - 1:
            with store._write() as db:
                for item in batch:
                    store._store(db, item)
            batch = []
    return time.perf_counter() - begin


def at_size(entries: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteCacheStore(Path(tmp) / "cache.sqlite3")
        cache = ResponseCache(store, max_bytes=10**12)
        seconds = load(store, entries)
        every = [normalise(question(i)) for i in range(entries)]
        rng = random.Random(7)
        probes = rng.sample(range(entries), min(entries, repeat * 2))
        exact_probes = iter(probes)
        fuzzy_probes = iter(question(i).replace("What are the", "tell me the") + " please"
                            for i in reversed(probes))  # a new wording each call
        exact = percentiles(lambda: cache.lookup(question(next(exact_probes))), repeat)
        hits = []
        fuzzy = percentiles(lambda: hits.append(cache.lookup(next(fuzzy_probes))[0].hit),
                            repeat)
        miss = percentiles(lambda: cache.lookup("What are the benefits of coffee?"), repeat)
        probe = question(entries // 2).replace("What are the", "tell me the")
        base = percentiles(lambda: process.extractOne(normalise(probe), every,
                                                      scorer=fuzz.token_set_ratio),
                           max(3, repeat // 10))
        size = store.size()
        store.close()
    print(f"{entries:>7,} entries ({size / 1e6:.1f} MB, bulk-loaded in {seconds:.1f} s); "
          f"fuzzy hits {sum(hits)}/{len(hits)}:")
    for name, (p50, p95) in (("exact", exact), ("fuzzy (index + guard)", fuzzy),
                             ("miss", miss), ("baseline: extractOne over all", base)):
        print(f"  {name:30} p50 {p50:8.2f} ms  p95 {p95:8.2f} ms  "
              f"{base[0] / p50:8.1f}× faster than the baseline")


def inserts_and_cap(count: int) -> None:
    """The per-answer path (`put`: validate, index, cap check) and the cap holding."""
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteCacheStore(Path(tmp) / "cache.sqlite3")
        cache = ResponseCache(store, max_bytes=2 * 1024 * 1024)
        begin = time.perf_counter()
        for i in range(count):
            cache.put(question(i), f"answer {i} " + random.Random(i).randbytes(600).hex())
        rate = count / (time.perf_counter() - begin)
        size, kept = store.size(), len(store.entries(limit=10**7))
        store.close()
    print(f"put: {rate:,.0f} answers/s; {count:,} answers of ~1.2 KB under a 2 MB cap: "
          f"{size / 1024:.0f} KB kept ({kept:,} entries; the cap "
          f"{'holds' if size <= 2 * 1024 * 1024 else 'is exceeded'})")


def labelled() -> None:
    from engine.cache.guard import check_meaning

    rows = [line.split("\t") for line in
            (ROOT / "tests" / "data" / "cache_pairs.tsv").read_text().splitlines()
            if line and not line.startswith("#")]
    results = [(c == "1", check_meaning(a, b).passed) for a, b, c in rows]
    tp = sum(1 for same, hit in results if same and hit)
    fp = sum(1 for same, hit in results if not same and hit)
    fn = sum(1 for same, hit in results if same and not hit)
    print(f"labelled set: {len(rows)} pairs, precision {tp / max(1, tp + fp):.3f}, recall "
          f"{tp / max(1, tp + fn):.3f}, wrong hits {fp}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=100)
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        at_size(size, args.repeat)
    inserts_and_cap(3000)
    labelled()


if __name__ == "__main__":
    main()
