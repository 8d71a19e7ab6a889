"""Issue 72's goals, read from the test runs of `make bench-real` — no model called.

    python bench/goals_72.py HOME [--dev]

HOME is the bench's detektiv home (`~/.cache/detektiv-bench/home-test-1.5b…`). For each run it
finds — the own-answer claims (`testimony-claims-*`), HaluEval summaries (`summaries-*`), the
demo claims (`demo-*`) and the shapes (`shapes-*`) — it prints each system's accuracy and
AUROC with 95 % bootstrap intervals, ECE, the paired AUROC differences the goals name, and
whether any claim was held (`true`) above P(false) 0.5.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.evals.folder import RunFolder, list_runs  # noqa: E402
from engine.evals.metrics import auroc, resampled  # noqa: E402
from engine.evals.summary import summarize, system_name  # noqa: E402


def paired(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> str:
    def diff(yy: np.ndarray, aa: np.ndarray, bb: np.ndarray) -> float:
        return auroc(yy, aa) - auroc(yy, bb)
    draws = resampled([y, a, b], diff, resamples=2000)
    low, high = np.percentile(draws, [2.5, 97.5]) if len(draws) else (np.nan, np.nan)
    return f"{diff(y, a, b):+.3f} [{low:+.3f}, {high:+.3f}]"


def vectors(folder: RunFolder, kinds: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each kind's (y, P(false)) over the items every one of `kinds` judged (paired)."""
    latest = folder.latest()
    found: dict[str, dict[str, float]] = {k: {} for k in kinds}
    labels: dict[str, bool] = {}
    for (item, kind, repeat), r in latest.items():
        if repeat != 1 or r.label is None:
            continue
        labels[item] = r.label
        if kind in found:
            found[kind][item] = 0.5 if r.probability_false is None else r.probability_false
        if kind == "interrogation" and r.readings:
            for name, p in r.readings.items():
                key = f"signal:{name}"
                if key in found:
                    found[key][item] = 0.5 if p is None else 1 - p
    items = sorted(set.intersection(*(set(v) for v in found.values())) if found else set())
    y = np.array([0 if labels[i] else 1 for i in items])
    return {k: (y, np.array([found[k][i] for i in items])) for k in kinds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path)
    args = parser.parse_args()
    root = args.home / "data" / "evals"
    for info in list_runs(root):
        folder = RunFolder(root / info.id)
        summary = summarize(folder)
        name = Path(info.dataset).name
        print(f"\n== {name} (run {info.id}, mode {info.mode}, {info.items} items)")
        for key, metrics in summary.systems.items():
            f = metrics.figures
            print(f"  {system_name(key):<58} n={metrics.n:<4} accuracy "
                  f"{f['accuracy'].text()}  AUROC {f['auroc'].text()}  ECE {f['ece'].text()}")
        held = [r for r in folder.latest().values() if r.kind == "interrogation"
                and r.verdict == "true" and (r.probability_false or 0) > 0.5]
        print(f"  held (true) above P(false) 0.5: {len(held)}")
        kinds = [k for k in ("interrogation", "are-you-sure", "selfcheck", "reader", "direct",
                             "signal:samples", "signal:rounds", "signal:alone",
                             "signal:words") if k in summary.systems]
        if "interrogation" in kinds and len(kinds) > 1:
            pairs = vectors(folder, kinds)
            y, ours = pairs["interrogation"]
            for other in kinds[1:]:
                _, theirs = pairs[other]
                print(f"  interrogation − {system_name(other)}: AUROC "
                      f"{paired(y, ours, theirs)} (paired, n={len(y)})")
            if "signal:rounds" in pairs and "signal:samples" in pairs:
                _, rounds = pairs["signal:rounds"]
                _, sample = pairs["signal:samples"]
                print(f"  rounds alone − samples alone: AUROC {paired(y, rounds, sample)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
