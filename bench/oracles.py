"""Oracles: listing 1,000 oracle files, and building a consultation's context.

    listing    OracleCatalog.list() over 1,000 files: cached (within the TTL), after the TTL
               (a stat per file, nothing changed), and cold (every file parsed)
    baseline   reading and parsing every file on every call (no catalog)
    context    the case context of 200 notes and 20 rounds fitted into an 8,192-token window
               (estimate), against rendering it whole (no fitting), and the same with a window
               so small that most of it is cut

Goals: a cached list ≤ 1 ms, a list after the TTL ≤ 50 ms, a context ≤ 20 ms.
Run: .venv/bin/python bench/oracles.py [--files N] [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.context.tokens import estimate  # noqa: E402
from engine.models.notes import ContextSnapshot, LlmEntry, NoteEntry  # noqa: E402
from engine.models.session import now  # noqa: E402
from engine.oracles.catalog import OracleCatalog, parse_oracle  # noqa: E402
from engine.oracles.context import CaseContext, ContextPlan, plan  # noqa: E402
from tests.support.factory import sample_session  # noqa: E402

BODY = (ROOT / "prompts" / "oracles" / "sceptic.md").read_text(encoding="utf-8")


def shown(ms: float) -> str:
    return f"{ms * 1000:9.1f} µs" if ms < 1 else f"{ms:9.2f} ms"


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Median milliseconds of `repeat` calls."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - start) * 1000)
    return statistics.median(runs)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def listing(files: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(files):
            (root / f"oracle-{i:04d}.md").write_text(BODY.replace("# Sceptic", f"# Oracle {i}"))
        clock = Clock()
        catalog = OracleCatalog([(root, "user")], ttl=10, clock=clock)

        def cold() -> object:
            fresh = OracleCatalog([(root, "user")], ttl=10, clock=clock)
            return fresh.list()

        def after_ttl() -> object:
            clock.now += 11
            return catalog.list()

        def baseline() -> object:
            return [parse_oracle(p, "user", "{{CONTEXT}}") for p in sorted(root.glob("*.md"))]

        catalog.list()
        results = {
            "cached (within the TTL)": timed(catalog.list, repeat * 100),
            "after the TTL (stat only)": timed(after_ttl, repeat),
            "cold (every file parsed)": timed(cold, repeat),
            "baseline: parse every file": timed(baseline, repeat),
        }
        count = len(catalog.list())
    print(f"listing {count} oracle files (median of runs):")
    base = results["baseline: parse every file"]
    for name, ms in results.items():
        print(f"  {name:30} {shown(ms)}   {base / ms:10.1f}× faster than the baseline")


def case(notes: int, rounds: int) -> CaseContext:
    session = sample_session(rounds, hypothesis="Customers accept a 50 % price rise")
    for pair in session.qa_pairs:
        pair.answer = "The data suggests most of them would stay, with caveats. " * 12
    entries = [(NoteEntry(sequence=i + 1, received_at=now(), filename=f"{i + 1:03d}_n.txt",
                          kind="imported", source=f"call-{i + 1}.vtt", characters=0),
                f"[0:{i % 60:02d}] Alice: point {i} about pricing and churn, with numbers "
                f"{i * 7} and {i * 13}.\n" * 8) for i in range(notes)]
    shot = ContextSnapshot(transcript_count=0, llm_response_count=0, include_llm_history=True)
    answers = [(LlmEntry(sequence=i + 1, created_at=now(), oracle_name="Sceptic",
                         oracle_id="00000000", response_filename=f"{i + 1:03d}_s.txt",
                         context_snapshot=shot), "A sceptical answer. " * 80) for i in range(5)]
    return CaseContext.build(session, entries, answers, True)


def context(notes: int, rounds: int, repeat: int) -> None:
    material = case(notes, rounds)
    frame = estimate(BODY) + 12

    def whole() -> object:
        return ContextPlan().render(material)

    def fitted(limit: int) -> Callable[[], object]:
        def run() -> object:
            return plan(material, frame, limit, estimate).render(material)
        return run

    def cold(limit: int) -> Callable[[], object]:
        def run() -> object:
            estimate.cache_clear()
            return plan(material, frame, limit, estimate).render(material)
        return run

    size = estimate(whole())
    results = {
        "whole (rendered, not fitted)": timed(whole, repeat),
        "fitted to 8,192 (warm)": timed(fitted(8192 - 1024 - 819), repeat),
        "fitted to 8,192 (cold)": timed(cold(8192 - 1024 - 819), repeat),
        "fitted to 2,048 (warm)": timed(fitted(2048 - 682 - 204), repeat),
    }
    chosen = plan(material, frame, 8192 - 1024 - 819, estimate)
    print(f"context of {notes} notes, {rounds} rounds and 5 earlier answers "
          f"(~{size:,} tokens whole; fitted to 8,192: {'; '.join(chosen.lines(material))}):")
    base = results["whole (rendered, not fitted)"]
    for name, ms in results.items():
        print(f"  {name:30} {shown(ms)}   {ms / base:8.1f}× the time of rendering it whole")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--notes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    listing(args.files, args.repeat)
    context(args.notes, args.rounds, args.repeat)


if __name__ == "__main__":
    main()
