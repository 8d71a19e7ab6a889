"""Each signal of a claim's verdict measured alone, then in combination (issue 53): read from
an evaluation run of split, labelled claims (`make bench-real`'s `testimony-claims` sample, or
`detektiv eval FILE --baselines [--protocol cross-exam,consistency]`).

    python bench/claim_signals.py HOME RUN

Signals, each as P(false) of the claim: `interrogation` (the computed verdict of its rounds),
`alone` (the detective judging the claim with no testimony: the `direct` baseline),
`sure` (after one "Are you sure?"), `spread` (the consistency protocol's first round: how far
its sampled answers' judgements lie apart, SelfCheckGPT's signal; a claim the witness made up
varies). Each alone: AUROC with a 95 % bootstrap interval; then the combinations: the mean
log-odds of interrogation and alone, their larger P(false), and interrogation raised by the
spread. What is chosen goes into `engine/interrogation/verdict.py`, stated there.
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score


def logit(p: float) -> float:
    p = min(0.99, max(0.01, p))
    return math.log(p / (1 - p))


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def auroc(y: list[int], p: list[float], resamples: int = 2000) -> tuple[float, float, float]:
    value = float(roc_auc_score(y, p))
    rng = random.Random(0)
    draws = []
    n = len(y)
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        ys = [y[i] for i in idx]
        if len(set(ys)) < 2:
            continue
        draws.append(float(roc_auc_score(ys, [p[i] for i in idx])))
    draws.sort()
    return value, draws[int(0.025 * len(draws))], draws[int(0.975 * len(draws)) - 1]


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    home, run = Path(sys.argv[1]), sys.argv[2]
    folders = [f for f in (home / "data" / "evals").iterdir() if f.name.startswith(run)]
    results = [json.loads(line) for line in (folders[0] / "results.jsonl").read_text()
               .splitlines() if line.strip()]
    by: dict[str, dict[str, dict[str, object]]] = {}
    for row in results:
        by.setdefault(row["item"], {})[row["kind"]] = row
    sessions = {p.name[-8:]: p for p in (home / "data" / "sessions").iterdir()}
    y: list[int] = []
    signals: dict[str, list[float]] = {k: [] for k in ("interrogation", "alone", "sure",
                                                       "spread")}
    for _item, kinds in sorted(by.items()):
        if "interrogation" not in kinds or "direct" not in kinds:
            continue
        label = bool(kinds["interrogation"]["label"])
        y.append(0 if label else 1)
        for key, kind in (("interrogation", "interrogation"), ("alone", "direct"),
                          ("sure", "are-you-sure")):
            p = kinds.get(kind, {}).get("probability_false")
            signals[key].append(0.5 if p is None else float(p))  # type: ignore[arg-type]
        spread = 0.0
        consistency = kinds.get("consistency")
        if consistency and consistency.get("session"):
            folder = sessions.get(str(consistency["session"])[:8])
            if folder is not None:
                meta = json.loads((folder / "metadata.json").read_text())
                first = meta["qa_pairs"][0]["judgement"] if meta["qa_pairs"] else None
                if first and len(first.get("samples") or []) > 1:
                    spread = max(first["samples"]) - min(first["samples"])
        signals["spread"].append(spread)
    print(f"{len(y)} claims, {sum(y)} false")
    for key, values in signals.items():
        if len(set(values)) > 1:
            value, low, high = auroc(y, values)
            print(f"  {key:28} AUROC {value:.3f} [{low:.3f}–{high:.3f}]")
    inter, alone = signals["interrogation"], signals["alone"]
    combos = {
        "mean log-odds (inter, alone)": [sigmoid((logit(a) + logit(b)) / 2)
                                         for a, b in zip(inter, alone, strict=True)],
        "max (inter, alone)": [max(a, b) for a, b in zip(inter, alone, strict=True)],
        "inter + spread": [min(1.0, a + s / 2) for a, s in zip(inter, signals["spread"],
                                                                strict=True)],
    }
    sure = signals["sure"]
    combos["mean log-odds (inter, sure)"] = [sigmoid((logit(a) + logit(c)) / 2)
                                             for a, c in zip(inter, sure, strict=True)]
    combos["mean log-odds (alone, sure)"] = [sigmoid((logit(b) + logit(c)) / 2)
                                             for b, c in zip(alone, sure, strict=True)]
    combos["mean log-odds (all three)"] = [
        sigmoid((logit(a) + logit(b) + logit(c)) / 3)
        for a, b, c in zip(inter, alone, sure, strict=True)]
    for weight in (0.25, 0.5, 0.75):
        combos[f"log-odds, alone weight {weight}"] = [
            sigmoid((1 - weight) * logit(a) + weight * logit(b))
            for a, b in zip(inter, alone, strict=True)]
    for key, values in combos.items():
        value, low, high = auroc(y, values)
        accuracy = np.mean([(v >= 0.6 and t == 1) or (v <= 0.4 and t == 0)
                            for v, t in zip(values, y, strict=True)])
        print(f"  {key:28} AUROC {value:.3f} [{low:.3f}–{high:.3f}]  accuracy {accuracy:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
