"""What the journal's rule costs a session: the rule now against the one it replaced.

    python bench/journal.py [--sessions 300] [--rounds 3]

Each session is what an evaluation's item writes: made, `Started`, per round ten answer
deltas and its `PairCompleted`, then metadata.json at the end and `Finished`. Two rules,
alternated in one run on the same file system, median of 5 batches:

    now      a round is its `PairCompleted`, synced (the journal's rule 2); metadata.json is
             written when the session is made and when it ends
    before   what the store did until this rule: metadata.json replaced (temp file, fsync,
             rename, fsync the folder) at every round before its `PairCompleted`, and
             `Started`, `PairCompleted` and `Finished` each synced

The figures are detektiv's own time per session spent on its journal; `fsync`s and files
replaced are counted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.models.events import AnswerDelta, Finished, PairCompleted, Started  # noqa: E402
from engine.storage.sessions import SessionStore  # noqa: E402
from tests.support.factory import sample_pair  # noqa: E402

CALLS = {"fsync": 0, "replace": 0}


def _counting() -> None:
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        CALLS["fsync"] += 1
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        CALLS["replace"] += 1
        real_replace(src, dst)

    os.fsync, os.replace = fsync, replace  # type: ignore[assignment]


def session(store: SessionStore, rounds: int, before: bool) -> None:
    journal = store.create("Bridge number 7 was built in 1807.", 5)
    journal.record(Started(session_id=str(journal.session.id), hypothesis="h",
                           iteration_limit=5))
    if before:
        journal._log.sync()  # noqa: SLF001 - the earlier rule, rebuilt from today's parts
    for n in range(1, rounds + 1):
        for _ in range(10):
            journal.record(AnswerDelta(sequence=n, text="a word or two "))
        pair = sample_pair(n)
        journal.session.qa_pairs.append(pair)
        if before:
            journal.save()
        journal.record(PairCompleted(pair=pair, tokens=journal.session.tokens,
                                     repairs=journal.session.repairs))
    journal.session.status = "completed"
    journal.save()
    journal.record(Finished(status="completed"))
    if before:
        journal._log.sync()  # noqa: SLF001
    journal.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    _counting()
    times: dict[str, list[float]] = {"before": [], "now": []}
    calls: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        store = SessionStore(Path(tmp) / "sessions", Path(tmp) / "cache" / "index.jsonl")
        session(store, args.rounds, False)  # warm: imports, folders
        for batch in range(5):
            for kind in ("before", "now") if batch % 2 else ("now", "before"):
                CALLS.update(fsync=0, replace=0)
                began = time.perf_counter()
                for _ in range(args.sessions):
                    session(store, args.rounds, kind == "before")
                times[kind].append((time.perf_counter() - began) / args.sessions)
                calls[kind] = {k: v // args.sessions for k, v in CALLS.items()}
    print(f"the journal of one session ({args.rounds} rounds), {args.sessions} sessions a "
          "batch, median of 5:")
    print("| rule | per session | fsyncs | files replaced | × now |")
    print("|---|---|---|---|---|")
    now = statistics.median(times["now"])
    for kind in ("before", "now"):
        median = statistics.median(times[kind])
        print(f"| {kind} | {median * 1000:.2f} ms | {calls[kind]['fsync']} | "
              f"{calls[kind]['replace']} | {median / now:.2f}× |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
