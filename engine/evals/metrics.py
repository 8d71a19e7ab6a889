"""The figures of an evaluation, from labels and verdicts (pure: arrays in, numbers out).

The positive class is a *false* claim: catching a false claim is what an interrogation is for.

    y     1 = the claim is false, 0 = it is true
    pred  1 = verdict "false", 0 = verdict "true", -1 = no verdict (undetermined, or failed)
    p     the probability-false the detective gave (0.5 where it gave none)

`accuracy_p` reads the verdict from the probability alone (false when p ≥ 0.5), so a detective
that abstains in words but knows in numbers shows.

An abstention is counted, never dropped: it is never correct (accuracy), a false claim left
undetermined is a miss (recall), a true one left undetermined is not a false alarm
(precision), and the undetermined rate says how often it happened. A figure that cannot be
computed (precision with no "false" verdict, AUROC with one class) is NaN and reads "n/a".

- AUROC is the Mann–Whitney statistic with ties counted half;
- AUC-PR is average precision, Σ (Rₖ − Rₖ₋₁)·Pₖ over the distinct thresholds;
- ECE takes 10 equal-width bins of `p` (a value on an inner edge goes to the lower bin, as
  scikit-learn bins it).
- Intervals: the 2.5th and 97.5th percentiles of `BOOTSTRAP` resamples of the items.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BOOTSTRAP",
    "Figure",
    "Metrics",
    "auc_pr",
    "auroc",
    "bootstrap",
    "calibration_bins",
    "ece",
    "measure",
    "percentile_interval",
    "pr_curve",
    "resampled",
]

BOOTSTRAP = 1000
"""Resamples behind every interval."""
BINS = 10

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


def confusion(y: Ints, pred: Ints) -> tuple[int, int, int, int, int]:
    """(true positives, false positives, false negatives, correct, undetermined)."""
    tp = int(np.sum((pred == 1) & (y == 1)))
    fp = int(np.sum((pred == 1) & (y == 0)))
    fn = int(np.sum((pred != 1) & (y == 1)))
    correct = int(np.sum(pred == y))
    return tp, fp, fn, correct, int(np.sum(pred == -1))


def auroc(y: Ints, p: Floats) -> float:
    """The area under the ROC curve of `p` for `y` (ties count half); NaN with one class."""
    positives = int(np.sum(y == 1))
    negatives = len(y) - positives
    if not positives or not negatives:
        return math.nan
    order = np.argsort(p, kind="mergesort")
    ranks = np.empty(len(p), dtype=np.float64)
    sorted_p = p[order]
    # average ranks over ties
    starts = np.flatnonzero(np.r_[True, sorted_p[1:] != sorted_p[:-1]])
    ends = np.r_[starts[1:], len(p)]
    average = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(average, ends - starts)
    total = float(np.sum(ranks[y == 1]))
    return (total - positives * (positives + 1) / 2.0) / (positives * negatives)


def pr_curve(y: Ints, p: Floats) -> tuple[Floats, Floats]:
    """(precision, recall) at each distinct threshold of `p`, highest first."""
    order = np.argsort(-p, kind="mergesort")
    sorted_p, sorted_y = p[order], y[order]
    last = np.r_[np.flatnonzero(sorted_p[1:] != sorted_p[:-1]), len(p) - 1]
    tp = np.cumsum(sorted_y == 1)[last].astype(np.float64)
    fp = (last + 1) - tp
    positives = float(np.sum(y == 1))
    precision = tp / (tp + fp)
    recall = tp / positives if positives else np.full(len(tp), math.nan)
    return precision, recall


def auc_pr(y: Ints, p: Floats) -> float:
    """Average precision of `p` for the positive class; NaN with no positive."""
    if not len(y) or not np.any(y == 1):
        return math.nan
    precision, recall = pr_curve(y, p)
    steps = np.diff(np.r_[0.0, recall])
    return float(np.sum(steps * precision))


def calibration_bins(y: Ints, p: Floats) -> list[tuple[int, float, float]]:
    """(count, mean p, fraction positive) for each of the 10 bins of `p` (empty: 0, NaN, NaN)."""
    edges = np.linspace(0.0, 1.0, BINS + 1)
    index = np.searchsorted(edges[1:-1], p, side="left")
    rows: list[tuple[int, float, float]] = []
    for b in range(BINS):
        inside = index == b
        count = int(np.sum(inside))
        if count:
            rows.append((count, float(np.mean(p[inside])), float(np.mean(y[inside]))))
        else:
            rows.append((0, math.nan, math.nan))
    return rows


def ece(y: Ints, p: Floats) -> float:
    """Expected calibration error over 10 bins; NaN with no item."""
    if not len(y):
        return math.nan
    return sum(count / len(y) * abs(observed - mean)
               for count, mean, observed in calibration_bins(y, p) if count)


@dataclass(frozen=True, slots=True)
class Figure:
    """A figure and its bootstrap 95 % interval (NaN where it cannot be computed)."""

    value: float
    low: float = math.nan
    high: float = math.nan

    def text(self, percent: bool = False, digits: int = 3) -> str:
        """`0.812 [0.70–0.90]`, or `n/a`."""
        if math.isnan(self.value):
            return "n/a"

        def one(v: float) -> str:
            return f"{100 * v:.1f}" if percent else f"{v:.{digits}f}"

        if math.isnan(self.low):
            return one(self.value)
        return f"{one(self.value)} [{one(self.low)}–{one(self.high)}]"


Statistic = Callable[[Ints, Ints, Floats, Floats, Floats], float]
"""(y, pred, p, tokens, seconds) → one number."""

STATISTICS: dict[str, Statistic] = {
    "accuracy": lambda y, pred, p, t, s: _ratio(confusion(y, pred)[3], len(y)),
    "accuracy_p": lambda y, pred, p, t, s: _ratio(float(np.sum((p >= 0.5) == (y == 1))),
                                                  len(y)),
    "precision": lambda y, pred, p, t, s: (lambda c: _ratio(c[0], c[0] + c[1]))(
        confusion(y, pred)),
    "recall": lambda y, pred, p, t, s: (lambda c: _ratio(c[0], c[0] + c[2]))(
        confusion(y, pred)),
    "f1": lambda y, pred, p, t, s: (lambda c: _ratio(2 * c[0], 2 * c[0] + c[1] + c[2]))(
        confusion(y, pred)),
    "auroc": lambda y, pred, p, t, s: auroc(y, p),
    "auc_pr": lambda y, pred, p, t, s: auc_pr(y, p),
    "ece": lambda y, pred, p, t, s: ece(y, p),
    "undetermined": lambda y, pred, p, t, s: _ratio(confusion(y, pred)[4], len(y)),
    "tokens": lambda y, pred, p, t, s: float(np.mean(t)) if len(t) else math.nan,
    "seconds": lambda y, pred, p, t, s: float(np.mean(s)) if len(s) else math.nan,
}


def resampled(values: list[Ints | Floats], statistic: Callable[..., float],
              resamples: int = BOOTSTRAP, seed: int = 0) -> Floats:
    """`statistic` of each of `resamples` resamples of the items (the same rows of every
    array of `values`: paired), the NaN ones (precision with no positive verdict drawn) left
    out; none for fewer than two items."""
    n = len(values[0])
    if n < 2:
        return np.empty(0, dtype=np.float64)
    rng = np.random.default_rng(seed)
    found: list[float] = []
    for _ in range(resamples):
        pick = rng.integers(0, n, n)
        value = statistic(*(v[pick] for v in values))
        if not math.isnan(value):
            found.append(value)
    return np.asarray(found, dtype=np.float64)


def percentile_interval(draws: Floats, alpha: float = 0.05) -> tuple[float, float]:
    """The central 1 − `alpha` interval of `draws` (NaN when there are none)."""
    if not len(draws):
        return math.nan, math.nan
    tail = 100 * alpha / 2
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap(values: list[Ints | Floats], statistic: Callable[..., float],
              resamples: int = BOOTSTRAP, seed: int = 0) -> tuple[float, float]:
    """The 95 % percentile interval of `statistic` over resamples of the items (NaN
    resamples, such as precision with no positive verdict drawn, are left out)."""
    return percentile_interval(resampled(values, statistic, resamples, seed))


@dataclass(frozen=True, slots=True)
class Metrics:
    """Every figure for one way of judging (the interrogation, a baseline) over n items."""

    n: int
    figures: dict[str, Figure]
    failed: int = 0


def measure(y: Ints, pred: Ints, p: Floats, tokens: Floats, seconds: Floats, *,
            failed: int = 0, resamples: int = BOOTSTRAP, seed: int = 0) -> Metrics:
    """Every statistic with its interval (see the module docstring)."""
    figures: dict[str, Figure] = {}
    arrays: list[Ints | Floats] = [y, pred, p, tokens, seconds]
    for name, statistic in STATISTICS.items():
        value = statistic(y, pred, p, tokens, seconds)
        low, high = bootstrap(arrays, statistic, resamples, seed) if resamples else (
            math.nan, math.nan)
        figures[name] = Figure(value, low, high)
    return Metrics(len(y), figures, failed)
