"""The case agent: the vault at 10k sessions, and the signal parser.

    index      building the index of N stored sessions from nothing
    search     a query of one or two words, p50 and p95: the FTS5 query alone, and with the
               sync that comes first in `Vault.search` (one stat per session)
    baseline   the same words found by a scan (`LIKE '%word%'` over the same rows), same run
    update     one new session added, then `search` (the sync re-indexes only it)
    signals    replies parsed per second (valid, sloppy, invalid, none), against the stdlib's
               unsafe ElementTree on the well-formed ones only

Goal: search ≤ 20 ms p95 at 10k sessions. Sessions are written as the app writes them (one
folder with metadata.json each), with 3 rounds, gaps and an audit.
Run: .venv/bin/python bench/agent.py [--sessions 10000] [--repeat 200]
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as UnsafeTree
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import percentiles  # noqa: E402
from engine.agent.signals import parse_signal  # noqa: E402
from engine.agent.vault import Vault  # noqa: E402
from engine.models.session import AuditResult, Hypothesis, InterrogationSession  # noqa: E402
from engine.storage.sessions import SessionStore  # noqa: E402
from tests.support.factory import sample_pair  # noqa: E402

TOPICS = ("paris lyon harbour shipment coffee caffeine niacin vitamin alibi train station "
          "invoice contract doctor clinic bakery river bridge ferry museum passport airport "
          "hotel letter camera garden orchard violin concert marathon volcano glacier "
          "satellite enzyme insulin").split()
COMMON = ("the witness said that it was on and in at of to a not he she they we".split())
_SYLLABLES = ["ka", "lo", "mi", "ren", "ta", "vo", "sul", "pe", "dri", "an", "os", "qui"]
VOCABULARY = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES]
"""1,728 other words, drawn Zipf-like: a few frequent, most rare (like names and places)."""
_WEIGHTS = [1 / (rank + 1) for rank in range(len(VOCABULARY))]
START = datetime(2026, 1, 1, tzinfo=UTC)


def sentence(rng: random.Random, n: int = 12) -> str:
    words = rng.choices(VOCABULARY, _WEIGHTS, k=n)
    words += rng.sample(COMMON, 4) + [rng.choice(TOPICS)]
    rng.shuffle(words)
    return " ".join(words) + "."


def write_sessions(root: Path, count: int, first: int = 0) -> None:
    for n in range(first, first + count):
        rng = random.Random(n)
        when = START + timedelta(minutes=n)
        session = InterrogationSession(
            id=uuid.UUID(int=rng.getrandbits(128)),
            hypothesis=Hypothesis(text=sentence(rng, 8), created_at=when), start_time=when,
            status="completed", iteration_limit=5,
            qa_pairs=[sample_pair(i, question=sentence(rng), answer=sentence(rng, 40),
                                  when=when) for i in range(1, 4)],
            audit_result=AuditResult(consistency_score=70, summary=sentence(rng, 30)))
        folder = root / f"{when.strftime('%Y-%m-%d_%H-%M-%S')}_{session.short_id}"
        folder.mkdir(parents=True)
        (folder / "metadata.json").write_text(session.model_dump_json())


REPLIES = [
    'Found it.\n<signal type="context_sufficient" confidence="0.9"><sources_found>2'
    "</sources_found><source_types>sessions, notes</source_types></signal>",
    'Reading.\n<signal type="need_turn" confidence="0.6"><reason>read the audit</reason>'
    "</signal>",
    'Sloppy <signal type="need_turn" confidence="70%"><reason>R&D notes < 5',
    '<signal type="bogus" confidence="1"/>',
    "A reply without any signal at all, only prose about the harbour and the shipment. " * 4,
    "```xml\n<signal type=\"stuck\"><blocker>x</blocker></signal>\n```\nno signal outside",
]


def bench_signals(seconds: float = 1.0) -> None:
    count, begin = 0, time.perf_counter()
    while time.perf_counter() - begin < seconds:
        for reply in REPLIES:
            parse_signal(reply)
        count += len(REPLIES)
    rate = count / (time.perf_counter() - begin)
    good = [r[r.index("<signal"):] for r in REPLIES[:2]]
    count, begin = 0, time.perf_counter()
    while time.perf_counter() - begin < seconds:
        for block in good:
            UnsafeTree.fromstring(block)
        count += len(good)
    unsafe = count / (time.perf_counter() - begin)
    print(f"signals: {rate:,.0f} replies/s parsed (mixed: valid, sloppy, invalid, none); "
          f"stdlib ElementTree on well-formed blocks alone {unsafe:,.0f}/s "
          f"({unsafe / rate:.1f}× the safe, forgiving parser)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "sessions"
        begin = time.perf_counter()
        write_sessions(root, args.sessions)
        print(f"{args.sessions:,} sessions written in {time.perf_counter() - begin:.1f} s")
        store = SessionStore(root)
        vault = Vault(Path(tmp) / "vault.sqlite3", store)
        begin = time.perf_counter()
        report = vault.sync(force=True)
        built = time.perf_counter() - begin
        sessions, docs = vault.count()
        print(f"index: {report.indexed:,} sessions ({docs:,} documents) in {built:.1f} s "
              f"({built / max(sessions, 1) * 1000:.2f} ms a session)")
        rng = random.Random(7)
        queries = [" ".join(rng.sample(TOPICS + VOCABULARY[200:400], rng.choice((1, 2))))
                   for _ in range(50)]
        picks = itertools.cycle(queries)
        fts = percentiles(lambda: vault.search(next(picks), sync=False), args.repeat)
        synced = percentiles(lambda: vault.search(next(picks)), args.repeat)
        common = percentiles(lambda: vault.search("the witness said", sync=False), 20)
        db = vault._db  # the same rows, scanned instead of indexed

        def scan() -> object:
            words = next(picks).split()
            where = " OR ".join("text LIKE ?" for _ in words)
            return db.execute(f"SELECT dir, kind FROM entries WHERE {where} LIMIT 24",
                              [f"%{w}%" for w in words]).fetchall()

        def scan_all() -> object:
            words = next(picks).split()
            where = " OR ".join("text LIKE ?" for _ in words)
            return db.execute(f"SELECT count(*) FROM entries WHERE {where}",
                              [f"%{w}%" for w in words]).fetchall()

        scanned = percentiles(scan_all, max(10, args.repeat // 10))
        first = percentiles(scan, max(10, args.repeat // 10))
        print(f"search at {sessions:,} sessions: FTS5 query p50 {fts[0]:.2f} ms, p95 "
              f"{fts[1]:.2f} ms; as `search` runs it (sync check first) p50 {synced[0]:.2f} "
              f"ms, p95 {synced[1]:.2f} ms (goal ≤ 20 ms); the worst case, words in every "
              f"document (\"the witness said\"): p50 {common[0]:.1f} ms, p95 {common[1]:.1f} ms")
        print(f"baseline: LIKE scan of every row p50 {scanned[0]:.1f} ms "
              f"({scanned[0] / fts[0]:.0f}× the FTS5 query); LIKE stopping at 24 rows "
              f"{first[0]:.2f} ms (unranked)")
        updates = []
        for n in range(10):
            write_sessions(root, 1, first=args.sessions + n)
            begin = time.perf_counter()
            hits = vault.search("harbour")  # the new folder changes the sessions folder
            updates.append((time.perf_counter() - begin) * 1000)
            assert hits
        unchanged = percentiles(lambda: vault.sync(force=True), 20)
        quiet = percentiles(vault.sync, 200)
        print(f"update: a new session, then search: p50 {statistics.median(updates):.1f} ms "
              f"(a forced look at every session with nothing new: p50 {unchanged[0]:.1f} ms; "
              f"the check when the store says nothing changed: p50 {quiet[0] * 1000:.0f} µs)")
        vault.close()
    bench_signals()


if __name__ == "__main__":
    main()
