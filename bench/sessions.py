"""Listing 10,000 sessions: the store's index against parsing every metadata.json.

Writes 10,000 synthetic sessions (five rounds each, ~9 KB of metadata) into a temp dir, then
measures, each in a fresh interpreter so peak RSS is its own:

    index      SessionStore.list()  (what `detektiv sessions` and the Sessions tab do)
    baseline   read and validate every metadata.json, then sort (the naive way)

Goals: the index lists 10,000 sessions in ≤ 0.3 s with a peak RSS ≤ 150 MB.
Run: .venv/bin/python bench/sessions.py [--sessions N] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.models.session import (  # noqa: E402
    AuditResult,
    Gap,
    Hypothesis,
    InterrogationSession,
)
from engine.storage.index import SessionIndex, summarize  # noqa: E402
from tests.support.factory import sample_pair  # noqa: E402

MEASURE = {
    "index": """
from engine.storage.sessions import SessionStore
store = SessionStore(root)
start = time.perf_counter()
rows = store.list()
elapsed = time.perf_counter() - start
""",
    "baseline": """
from engine.models.session import InterrogationSession
start = time.perf_counter()
sessions = [InterrogationSession.model_validate_json(p.read_bytes())
            for p in root.glob("*/metadata.json")]
sessions.sort(key=lambda s: s.start_time, reverse=True)
rows = sessions
elapsed = time.perf_counter() - start
""",
}

CHILD = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from bench import peak_rss_mb
root = Path({sessions!r})
{body}
print(json.dumps({{"seconds": elapsed, "rows": len(rows),
                  "rss_mb": peak_rss_mb()}}))
"""


def make_sessions(root: Path, count: int, index: Path | None = None) -> None:
    answer = "The witness said something fairly long about the matter at hand. " * 12
    gaps = [Gap(category="vagueness", description="the dates stay vague", severity="medium")]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for i in range(count):
        begun = start + timedelta(minutes=i)
        session = InterrogationSession(
            id=uuid.uuid4(),
            hypothesis=Hypothesis(text=f"Hypothesis number {i} about vitamins", created_at=begun),
            start_time=begun,
            end_time=begun + timedelta(minutes=3),
            status="completed",
            iteration_limit=10,
            current_iteration=5,
            qa_pairs=[
                sample_pair(n, question=f"Question {n}: what exactly happened?", answer=answer,
                            when=begun, gaps=gaps, completeness=60, follow_up=n < 5,
                            detective="openai:gpt-4o", witness="local:g")
                for n in range(1, 6)
            ],
            audit_result=AuditResult(consistency_score=92, remaining_gaps=gaps,
                                     summary="A summary. " * 40),
            events_recorded=60,
        )
        name = f"{begun.strftime('%Y-%m-%d_%H-%M-%S')}_{session.short_id}"
        (root / name).mkdir()
        (root / name / "metadata.json").write_text(session.model_dump_json(indent=1))
        (root / name / "events.jsonl").write_text("")
        rows.append(summarize(name, session))
    SessionIndex(index or root / "index.jsonl").append(*rows)


def measure(kind: str, root: Path) -> dict[str, float]:
    code = CHILD.format(root=str(ROOT), sessions=str(root), body=MEASURE[kind])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "sessions"
        root.mkdir()
        began = time.perf_counter()
        make_sessions(root, args.sessions)
        size = sum(p.stat().st_size for p in root.glob("*/metadata.json")) / 1e6
        print(f"{args.sessions} sessions written in {time.perf_counter() - began:.1f} s "
              f"({size:.0f} MB of metadata.json)")
        results: dict[str, list[dict[str, float]]] = {"index": [], "baseline": []}
        for _ in range(args.repeat):  # interleaved, so both see the same page cache
            for kind in results:
                results[kind].append(measure(kind, root))
        summary = {}
        for kind, runs in results.items():
            assert all(r["rows"] == args.sessions for r in runs), runs
            seconds = statistics.median(r["seconds"] for r in runs)
            rss = max(r["rss_mb"] for r in runs)
            summary[kind] = (seconds, rss)
            print(f"{kind:9} list: median {seconds * 1000:7.1f} ms   peak RSS {rss:6.1f} MB")
        (index_s, index_rss), (base_s, base_rss) = summary["index"], summary["baseline"]
        print(f"index vs baseline: {base_s / index_s:.1f}x faster, "
              f"{base_rss / index_rss:.1f}x less memory")
        verdict = "met" if index_s <= 0.3 and index_rss <= 150 else "MISSED"
        print(f"goal (≤ 300 ms, ≤ 150 MB): {verdict}")


if __name__ == "__main__":
    main()
