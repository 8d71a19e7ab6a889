"""An evaluation run's claims settled again by today's rule, from their stored readings and
rounds — no model called (issue 72: a change to `settle` measured on the same sessions).

    python bench/resettle.py HOME RUN

For every labelled item the run interrogated, its session's claim is settled again
(`engine.interrogation.examine.settle`, the shipped pool, the readings it has, `users` as
`examine` decides it now) and scored beside what the run recorded: accuracy and AUROC with
95 % bootstrap intervals, ECE, and the items whose verdict changed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.evals.folder import RunFolder  # noqa: E402
from engine.evals.metrics import measure  # noqa: E402
from engine.evals.summary import coded  # noqa: E402
from engine.interrogation.examine import claim_pairs, settle  # noqa: E402
from engine.interrogation.pooling import shipped_pooling  # noqa: E402
from engine.storage.sessions import SessionStore  # noqa: E402

VERDICT = {"held": "true", "contradicted": "false", "unsupported": "false"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("run")
    args = parser.parse_args()
    folder = RunFolder(args.home / "data" / "evals" / args.run)
    store = SessionStore(args.home / "data" / "sessions")
    pool = shipped_pooling()
    rows: dict[str, list[tuple[int, int, float]]] = {"as run": [], "settled again": []}
    changed = []
    for (item, kind, repeat), result in sorted(folder.latest().items()):
        if kind != "interrogation" or repeat != 1 or result.label is None:
            continue
        if result.session is None or result.verdict is None:
            continue
        session = store.load(result.session)
        claim = session.claim
        if claim is None or not claim.readings:
            continue
        mode = "document" if session.witness_document is not None else "open"
        again = settle(claim.model_copy(update={"state": "pending"}),
                       claim_pairs(session.qa_pairs, claim, True), pool, mode,
                       list(claim.readings), users=session.topic is None)
        verdict = VERDICT.get(again.state, "undetermined")
        rows["as run"].append(coded(result.label, result.verdict, result.probability_false))
        rows["settled again"].append(coded(result.label, verdict, again.probability_false))
        if verdict != result.verdict:
            changed.append(f"{item}: {result.verdict} → {verdict} (label "
                           f"{'true' if result.label else 'false'}; {again.why})")
    for name, coded_rows in rows.items():
        y, pred, p = (np.asarray(column) for column in zip(*coded_rows, strict=True))
        zeros = np.zeros(len(y))
        f = measure(y, pred, p, zeros, zeros).figures
        print(f"{name:<14} n={len(y)}  accuracy {f['accuracy'].text()}  AUROC "
              f"{f['auroc'].text()}  ECE {f['ece'].text()}")
    print(f"{len(changed)} verdicts changed:")
    for line in changed:
        print("  " + line[:200])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
