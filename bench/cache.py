"""The response cache at 1k, 10k and 100k entries (SQLite; PostgreSQL too when it is
installed): lookups by tier, p50 and p95.

    hit: exact      the same question, normalised
    hit: fuzzy      a new wording each call (a filler word, "please"): keyword candidates,
                    rapidfuzz, the meaning guard, the wording recorded
    miss: crowded   a question sharing keywords with many entries but matching none
    miss: near      a question holding all but one keyword of one entry (another number)
    miss: new       a question sharing no keyword with any entry
    baseline        rapidfuzz `extractOne` over every entry (no candidate index), same run

Also: the per-answer insert rate, the size cap holding, and precision and recall on both
labelled sets (tests/data). Goals: hit and miss ≤ 1 ms p95 at 100k entries. The entries of the
lookup runs are bulk-loaded (1,000 a transaction).
Run: .venv/bin/python bench/cache.py [--sizes 1000,10000,100000] [--repeat R] [--no-postgres]
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
from engine.cache.cache import ResponseCache, _keywords  # noqa: E402
from engine.cache.models import CacheEntry  # noqa: E402
from engine.cache.normalise import normalise  # noqa: E402
from engine.cache.store import CacheStore, SQLiteCacheStore  # noqa: E402
from engine.cache.validate import validate  # noqa: E402
from tests.support.cache_sets import by_kind, measure, pairs, scores  # noqa: E402

TOPICS = ["coffee", "tea", "vitamin", "jupiter", "saturn", "python", "rust", "paris", "tokyo",
          "insulin", "bitcoin", "mortgage", "cholesterol", "volcano", "glacier", "orchid",
          "violin", "marathon", "satellite", "enzyme"]
ASPECTS = ["benefits", "risks", "history", "trade history", "size", "origin", "effects",
           "structure", "uses", "future", "chemistry", "economics", "geography", "safety"]


def question(i: int) -> str:
    rng = random.Random(i)
    return (f"What are the {rng.choice(ASPECTS)} of {rng.choice(TOPICS)} model {i} "
            f"in region {rng.randrange(500)}?")


def entry(i: int) -> CacheEntry:
    q = question(i)
    item = CacheEntry(question=q, normalised=normalise(q), keywords=_keywords(q),
                      payload=f"answer {i}")
    return item.model_copy(update={"validation_metadata": validate(item), "validated": True})


def load(store: CacheStore, entries: int) -> float:
    """Bulk-load `entries` (1,000 a transaction); seconds."""
    begin = time.perf_counter()
    for start in range(0, entries, 1000):
        batch = [entry(i) for i in range(start, min(entries, start + 1000))]
        if isinstance(store, SQLiteCacheStore):
            with store._write() as db:
                for item in batch:
                    store._store(db, item)
        else:
            from engine.cache.postgres import PostgresCacheStore

            assert isinstance(store, PostgresCacheStore)
            with store._tx():
                for item in batch:
                    store._store(item)
    return time.perf_counter() - begin


def at_size(store: CacheStore, entries: int, repeat: int, label: str) -> None:
    cache = ResponseCache(store, max_bytes=10**12)
    seconds = load(store, entries)
    every = [normalise(question(i)) for i in range(entries)]
    rng = random.Random(7)
    probes = rng.sample(range(entries), min(entries, repeat * 2))
    exact_probes = iter(probes)
    fuzzy_probes = iter(question(i).replace("What are the", "what are actually the")
                        + " please" for i in reversed(probes))  # a new wording each call
    near_probes = iter(question(i).replace(" model ", " model 9") for i in probes)
    exact = percentiles(lambda: cache.lookup(question(next(exact_probes))), repeat)
    hits = []
    fuzzy = percentiles(lambda: hits.append(cache.lookup(next(fuzzy_probes))[0].hit),
                        repeat)
    crowded = percentiles(lambda: cache.lookup("What are the benefits of coffee?"), repeat)
    near = percentiles(lambda: cache.lookup(next(near_probes)), repeat)
    new = percentiles(lambda: cache.lookup("Who painted the ceiling of the Sistine Chapel?"),
                      repeat)
    probe = question(entries // 2).replace("What are the", "what are actually the")
    base = percentiles(lambda: process.extractOne(normalise(probe), every,
                                                  scorer=fuzz.token_set_ratio),
                       max(3, repeat // 10))
    size = store.size()
    print(f"{label} {entries:>7,} entries ({size / 1e6:.1f} MB, bulk-loaded in {seconds:.1f} "
          f"s); fuzzy hits {sum(hits)}/{len(hits)}:")
    for name, (p50, p95) in (("hit: exact", exact), ("hit: fuzzy (index + guard)", fuzzy),
                             ("miss: crowded", crowded), ("miss: near", near),
                             ("miss: new", new), ("baseline: extractOne over all", base)):
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
    """Both labelled sets, each pair through `put` and `lookup` (tests/support/cache_sets)."""
    for name in ("cache_pairs.tsv", "cache_heldout.tsv"):
        outcomes = measure(pairs(name))
        print(scores(outcomes).line(name))
        if name == "cache_heldout.tsv":
            for kind, result in by_kind(outcomes).items():
                print(result.line(f"  {kind}"))


def semantic(entries: int, repeat: int) -> None:
    """The semantic tier with the bundled model as embedding model (mean-pooled in llama.cpp):
    both labelled sets, the time to embed one question, and the nearest-neighbour search over
    `entries` vectors of its width (random ones: the search costs the same)."""
    import numpy as np

    from engine import Paths
    from engine.cache.cache import Semantic
    from engine.cache.embeddings import open_embedder
    from engine.config.models import EmbeddingsConfig

    embedder = open_embedder(EmbeddingsConfig(kind="gguf"), Paths.from_env())
    for name in ("cache_pairs.tsv", "cache_heldout.tsv"):
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLiteCacheStore(Path(tmp) / "cache.sqlite3")
            cache = ResponseCache(store, semantic=Semantic(embedder))
            begin = time.perf_counter()
            outcomes = measure(pairs(name), cache)
            seconds = time.perf_counter() - begin
            store.close()
        print(scores(outcomes).line(f"semantic tier on, {name}") + f" ({seconds:.0f} s)")
        if name == "cache_heldout.tsv":
            for kind in ("surface", "paraphrase", "opposite"):
                print(by_kind(outcomes)[kind].line(f"  {kind}"))
    questions = iter(question(i) for i in range(repeat + 1))
    embed = percentiles(lambda: embedder.embed([next(questions)]), repeat)
    width = embedder.embed(["width"]).shape[1]
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((entries, width)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    probe = matrix[0]
    search = percentiles(lambda: np.argsort(-(matrix @ probe))[:5], repeat)
    embedder.close()
    print(f"semantic tier ({embedder.name}, {width} dimensions): embedding one question p50 "
          f"{embed[0]:.1f} ms p95 {embed[1]:.1f} ms; nearest neighbours among {entries:,} "
          f"p50 {search[0]:.1f} ms p95 {search[1]:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-semantic", action="store_true")
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLiteCacheStore(Path(tmp) / "cache.sqlite3")
            at_size(store, size, args.repeat, "SQLite    ")
            store.close()
    from tests.support.postgres import installed, postgres_server

    if not args.no_postgres and installed():
        import psycopg

        from engine.cache.postgres import PostgresCacheStore

        with postgres_server() as url:
            for number, size in enumerate(int(s) for s in args.sizes.split(",")):
                with psycopg.connect(url, autocommit=True) as admin:
                    admin.execute(f"CREATE DATABASE bench{number}")
                pg = PostgresCacheStore(url.rsplit("/", 1)[0] + f"/bench{number}")
                at_size(pg, size, args.repeat, "PostgreSQL")
                pg.close()
    inserts_and_cap(3000)
    labelled()
    if not args.no_semantic:
        semantic(max(int(s) for s in args.sizes.split(",")), args.repeat)


if __name__ == "__main__":
    main()
