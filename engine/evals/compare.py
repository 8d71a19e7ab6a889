"""A witness leaderboard: the same items put to several witnesses, the same detective judging
(`detektiv eval ITEMS --compare A,B,C`), and which witness held up best, with intervals.

A comparison is a set of ordinary evaluation runs, one per witness, whose `EvalRunInfo`
share a `comparison` id: a digest of everything but the witness (the dataset's bytes, the
sample, the mode, the detective, the rounds). A witness added later is one more run with the
same id; the other runs keep theirs, and their finished items are not judged again.

**Labelled items** (claims, HaluEval, a testimony's labelled claims): each witness's row is
its run's figures (`engine.evals.summary`, the system of the comparison's protocol). Each
pair of witnesses is compared on the items both have, paired: the difference in accuracy and
in AUROC, with a paired bootstrap interval (the same resampled items for both).

**Open questions** (unlabelled): each witness answers each question, its testimony is taken
apart and examined claim by claim, and its row gives the shares of its claims that held, were
contradicted, stayed unsure (or unsupported) or were not checkable — FActScore's factual
precision, measured by cross-examination instead of a knowledge source: whether a model stands
by what it says, not whether it is true. With `--mode document`, also the share of its
checkable claims that the reference (the detective holding the question's document) reads as
supported: faithfulness, as ragas reports it. Intervals resample questions (a question's
claims stay together). Pairs are compared on the held share (with a document: the supported
share), paired by question.

**Several pairs.** With three witnesses or more, each family of comparisons (one figure, every
pair) is corrected by Holm's step-down: the pairs sorted by their bootstrap p-value, the k-th
of m gets the confidence level 1 − 0.05 / (m − k + 1) until one shows no difference, and every
pair after it that one's level. The report says so. A difference is "shown" when its interval
does not hold 0.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.evals.folder import EvalResult, EvalRunInfo, RunFolder
from engine.evals.metrics import (
    BOOTSTRAP,
    Figure,
    Metrics,
    auroc,
    percentile_interval,
    resampled,
)
from engine.evals.summary import coded, summarize_results

if TYPE_CHECKING:
    from engine.evals.run import EvalRequest

__all__ = [
    "SHARES",
    "Leaderboard",
    "Paired",
    "WitnessRow",
    "comparison_id",
    "holm_levels",
    "leaderboard",
]

ALPHA = 0.05
SHARES = ("held", "contradicted", "unsure", "not checkable")
"""The states an open question's claims are counted in (`unsupported` counts as `unsure`:
the witness could not stand by the claim)."""
READINGS = ("supported", "not supported", "reference unsure")
"""The reference's readings of an open question's claims, with a document (its own names:
`unsure` is a claim state too)."""
_TITLES = {"auroc": "AUROC"}


def comparison_id(request: EvalRequest, checksum: str, limit: int) -> str:
    """The comparison's id: the run id's digest without the witness."""
    key = json.dumps({"comparison": True, "checksum": checksum, "n": request.n,
                      "seed": request.seed, "mode": request.mode,
                      "detective": list(request.detective), "limit": limit}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:10]


@dataclass(frozen=True, slots=True)
class WitnessRow:
    """One witness of the comparison."""

    witness: str
    """As asked for (`--compare`'s name)."""
    label: str
    """The provider that played it (`name:model`)."""
    run: str
    """Its evaluation run (its sessions: `detektiv sessions --run RUN`)."""
    items: int
    failed: int
    metrics: Metrics | None = None
    """Labelled items: the run's figures for the comparison's system."""
    shares: dict[str, Figure] = field(default_factory=dict)
    """Open questions: each state's share of the witness's claims (and `supported`, with a
    document), with its interval."""
    claims: int = 0
    """Open questions: the claims counted."""

    def figure(self, name: str) -> Figure:
        if self.metrics is not None:
            return self.metrics.figures.get(name, Figure(math.nan))
        return self.shares.get(name, Figure(math.nan))


@dataclass(frozen=True, slots=True)
class Paired:
    """B − A in one figure, on the items both have, with its (Holm-corrected) interval."""

    a: str
    b: str
    figure: str
    difference: float
    low: float
    high: float
    p_value: float
    level: float
    """The confidence level of the interval (0.95, or higher after Holm's correction)."""
    n: int
    unit: str = "items"
    """What `n` counts: items, or the questions a pair of open answers is paired by."""

    @property
    def shown(self) -> bool:
        return not (math.isnan(self.low) or self.low <= 0 <= self.high)

    def sentence(self) -> str:
        """"accuracy: B is ahead of A by 0.12, 95 % CI 0.04–0.20 (40 items)", or "no
        difference shown" where the interval holds 0."""
        level = f"{100 * self.level:.2f}".rstrip("0").rstrip(".")
        figure = _TITLES.get(self.figure, self.figure)
        if math.isnan(self.difference):
            return (f"{figure}: {self.a} and {self.b} cannot be compared "
                    f"({self.n} {self.unit})")
        if not self.shown:
            interval = "" if math.isnan(self.low) else \
                f", {level} % CI {self.low:+.2f} to {self.high:+.2f}"
            return (f"{figure}: no difference shown between {self.a} and {self.b} "
                    f"({self.b} − {self.a} = {self.difference:+.2f}{interval}, "
                    f"{self.n} {self.unit})")
        ahead, behind = (self.b, self.a) if self.difference > 0 else (self.a, self.b)
        low, high = (self.low, self.high) if self.difference > 0 else (-self.high, -self.low)
        return (f"{figure}: {ahead} is ahead of {behind} by {abs(self.difference):.2f}, "
                f"{level} % CI {low:.2f}–{high:.2f} ({self.n} {self.unit})")


@dataclass(frozen=True, slots=True)
class Leaderboard:
    comparison: str
    labelled: bool
    system: str
    """The results kind the rows are read from (`interrogation`, `consistency`)."""
    document: bool
    rows: list[WitnessRow]
    pairs: list[Paired]
    holm: bool
    """Whether the intervals were corrected for the number of pairs."""
    infos: list[EvalRunInfo] = field(default_factory=list)

    @property
    def headline(self) -> str:
        """The figure each witness is ranked by."""
        if self.labelled:
            return "accuracy"
        return "supported" if self.document else "held"


def _p_value(draws: np.ndarray) -> float:
    """Two-sided bootstrap p-value of "no difference"."""
    if not len(draws):
        return 1.0
    below, above = float(np.mean(draws <= 0)), float(np.mean(draws >= 0))
    return min(1.0, 2 * min(below, above))


def holm_levels(p_values: Sequence[float], alpha: float = ALPHA) -> list[float]:
    """Each comparison's confidence level under Holm's step-down (see the module docstring):
    1 − alpha / (m − k) for the k-th smallest p-value (from 0) while each so far is below its
    level's alpha, then the first failing one's level for it and every one after."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    levels = [1 - alpha] * m
    stopped: float | None = None
    for rank, index in enumerate(order):
        level = stopped if stopped is not None else 1 - alpha / (m - rank)
        levels[index] = level
        if stopped is None and p_values[index] > alpha / (m - rank):
            stopped = level
    return levels


def _labelled(results: dict[str, EvalResult]) -> dict[str, tuple[int, int, float]]:
    """item → (y, verdict, P(false)) as the figures read it (`summary.coded`)."""
    return {key: coded(bool(r.label), r.verdict, r.probability_false)
            for key, r in results.items()}


def _counted(results: dict[str, EvalResult], document: bool
             ) -> dict[str, dict[str, int]]:
    """question → its claims counted by state (and the reference's readings, with a
    document); questions that failed are left out."""
    found: dict[str, dict[str, int]] = {}
    for key, r in results.items():
        if r.claims is None:
            continue
        counts = {state: 0 for state in SHARES}
        for state, count in r.claims.items():
            if state != "not examined":  # past max_claims: listed, never examined
                counts[state if state in SHARES else "unsure"] += count
        if document:
            reading = r.reference or {}
            counts["supported"] = reading.get("supported", 0)
            counts["not supported"] = reading.get("not supported", 0)
            counts["reference unsure"] = reading.get("unsure", 0)
        found[key] = counts
    return found


def _share(rows: list[dict[str, int]], name: str) -> Callable[[np.ndarray], float]:
    """The share `name` of the claims of `rows` (a ratio of sums: long answers weigh by their
    claims), as a function of the resampled indexes."""
    denominator_names = READINGS if name in READINGS else SHARES
    tops = np.asarray([r.get(name, 0) for r in rows], dtype=np.float64)
    bottoms = np.asarray([sum(r.get(s, 0) for s in denominator_names) for r in rows],
                         dtype=np.float64)

    def share(pick: np.ndarray) -> float:
        total = bottoms[pick].sum()
        return float(tops[pick].sum() / total) if total else math.nan
    return share


def leaderboard(comparison: str, folders: Sequence[RunFolder], system: str = "interrogation",
                *, resamples: int = BOOTSTRAP, seed: int = 0) -> Leaderboard:
    """The comparison's table and paired differences (see the module docstring)."""
    infos = [folder.info() for folder in folders]
    latest = [{r.item: r for (item, kind, repeat), r in folder.latest().items()
               if kind == system and repeat == 1} for folder in folders]
    labelled = any(r.label is not None for results in latest for r in results.values())
    document = bool(infos) and infos[0].mode == "document"
    names = [info.witness_name for info in infos]
    coded: list[dict[str, Any]] = [  # each witness's items, as its figures read them
        _labelled(results) if labelled else _counted(results, document) for results in latest]
    rows: list[WitnessRow] = []
    for info, name, results, items in zip(infos, names, latest, coded, strict=True):
        failed = sum(r.failed for r in results.values())
        if labelled:
            summary = summarize_results(
                [r for r in results.values() if r.label is not None], info,
                resamples=resamples, seed=seed)
            rows.append(WitnessRow(name, info.witness_label, info.id, len(results), failed,
                                   metrics=summary.systems.get(system)))
            continue
        counted = list(items.values())
        shares: dict[str, Figure] = {}
        for share_name in (*SHARES, *(("supported",) if document else ())):
            statistic = _share(counted, share_name)
            value = statistic(np.arange(len(counted))) if counted else math.nan
            shares[share_name] = Figure(value, *percentile_interval(
                _draws(statistic, len(counted), resamples, seed)))
        rows.append(WitnessRow(name, info.witness_label, info.id, len(results), failed,
                               shares=shares,
                               claims=sum(sum(c.get(s, 0) for s in SHARES) for c in counted)))
    pairs = _pairs(names, coded, labelled, document, resamples, seed)
    return Leaderboard(comparison, labelled, system, document, rows, pairs,
                       holm=len(names) >= 3, infos=infos)


def _draws(statistic: Callable[[np.ndarray], float], n: int, resamples: int, seed: int
           ) -> np.ndarray:
    """`statistic` of the resampled indexes of `n` items (`metrics.resampled`)."""
    return resampled([np.arange(n)], statistic, resamples, seed)


def _pairs(names: list[str], coded: list[dict[str, Any]], labelled: bool, document: bool,
           resamples: int, seed: int) -> list[Paired]:
    figures = ("accuracy", "auroc") if labelled else (("supported",) if document else
                                                      ("held",))
    found: list[Paired] = []
    for figure in figures:
        family: list[tuple[str, str, float, np.ndarray, int]] = []
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                difference, draws, n = _difference(coded[i], coded[j], figure, labelled,
                                                   resamples, seed)
                family.append((names[i], names[j], difference, draws, n))
        p_values = [_p_value(draws) for *_, draws, _ in family]
        levels = holm_levels(p_values) if len(names) >= 3 else [1 - ALPHA] * len(family)
        for (a, b, difference, draws, n), p, level in zip(family, p_values, levels,
                                                            strict=True):
            low, high = percentile_interval(draws, 1 - level)
            found.append(Paired(a, b, figure, difference, low, high, p, level, n,
                                "items" if labelled else "questions"))
    return found


def _difference(a: dict[str, Any], b: dict[str, Any], figure: str, labelled: bool,
                resamples: int, seed: int) -> tuple[float, np.ndarray, int]:
    """b − a in `figure` on the items both have (`_labelled` or `_counted`), and its
    bootstrap draws."""
    keys = sorted(a.keys() & b.keys())
    if labelled:
        y = np.asarray([a[k][0] for k in keys], dtype=np.int64)
        pred_a = np.asarray([a[k][1] for k in keys], dtype=np.int64)
        pred_b = np.asarray([b[k][1] for k in keys], dtype=np.int64)
        p_a = np.asarray([a[k][2] for k in keys], dtype=np.float64)
        p_b = np.asarray([b[k][2] for k in keys], dtype=np.float64)

        def statistic(pick: np.ndarray) -> float:
            if figure == "accuracy":
                return float(np.mean(pred_b[pick] == y[pick]) - np.mean(pred_a[pick] == y[pick]))
            return auroc(y[pick], p_b[pick]) - auroc(y[pick], p_a[pick])
    else:
        share_a = _share([a[k] for k in keys], figure)
        share_b = _share([b[k] for k in keys], figure)

        def statistic(pick: np.ndarray) -> float:
            return share_b(pick) - share_a(pick)
    n = len(keys)
    value = statistic(np.arange(n)) if n else math.nan
    return value, _draws(statistic, n, resamples, seed), n
