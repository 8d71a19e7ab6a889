"""`detektiv eval ITEMS --fit`: the pool (`engine.interrogation.pooling`) fitted on an
evaluation's labelled items — the readings its sessions stored and the labels — and written
as a pooling file to name in `[interrogation] pooling` (issue 72, part 5).

    pool, figures = fit_results(folder.results(), info, base=shipped_pooling())

Labelled claims (each its own session) fit a logistic model of their readings
(`pooling.fit_model`): the model with every signal that read them and one for every smaller
set, each cross-validated (`pooling.cross_validated`, 5 folds) for its AUROC and ECE.
Labelled testimonies (HaluEval's summaries: the label is the summary's, not its claims')
fit the same model through the testimony's verdict: a testimony's P(false) is the largest of
its claims' (rule 6 of `verdict`), and the model's parameters are those that make the
testimonies' P(false) most likely (`fit_testimonies`, Nelder–Mead on the log-likelihood).
The mode the run's witness answered in (`open`, `document`) is replaced; the other is kept
from `base`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from engine.errors import DetektivError
from engine.evals.folder import EvalResult, EvalRunInfo
from engine.evals.metrics import auroc, ece
from engine.interrogation.pooling import (
    L2,
    MODES,
    SIGNAL_NAMES,
    Fitted,
    Mode,
    Model,
    Pooling,
    all_subsets,
    cross_validated,
    feature,
    fit_model,
    subset_key,
)

__all__ = ["FEWEST", "FitRefused", "fit_results", "fit_testimonies"]

FEWEST = 20
"""Labelled items a fit needs at least (and false and true ones among them)."""

Row = tuple[Mapping[str, float | None], bool]
TestimonyRow = tuple[Sequence[Mapping[str, float | None]], bool]


class FitRefused(DetektivError):
    """The run's results cannot fit a pool: too few labelled items, or no readings."""


def _sigmoid(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1 / (1 + np.exp(-np.clip(x, -30, 30)))
    return out


def _testimony_p_false(params: np.ndarray, rows: Sequence[TestimonyRow],
                       signals: Sequence[str]) -> np.ndarray:
    out = []
    for claims, _ in rows:
        x = np.array([[1.0, *(feature(c.get(s)) for s in signals)] for c in claims])
        out.append(float(np.max(1 - _sigmoid(x @ params))) if len(x) else 0.5)
    return np.array(out)


def _nelder_mead(loss: Any, start: np.ndarray, steps: int = 400) -> np.ndarray:
    """A minimum of `loss` near `start` (the simplex method: a handful of parameters)."""
    n = len(start)
    simplex = [start] + [start + np.eye(n)[i] * 0.5 for i in range(n)]
    values = [loss(p) for p in simplex]
    for _ in range(steps):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        centre = np.mean(simplex[:-1], axis=0)
        reflected = centre + (centre - simplex[-1])
        value = loss(reflected)
        if value < values[0]:
            expanded = centre + 2 * (centre - simplex[-1])
            grown = loss(expanded)
            simplex[-1], values[-1] = (expanded, grown) if grown < value else (reflected, value)
        elif value < values[-2]:
            simplex[-1], values[-1] = reflected, value
        else:
            shrunk = centre + 0.5 * (simplex[-1] - centre)
            small = loss(shrunk)
            if small < values[-1]:
                simplex[-1], values[-1] = shrunk, small
            else:
                simplex = [simplex[0] + 0.5 * (p - simplex[0]) for p in simplex]
                values = [loss(p) for p in simplex]
        if max(values) - min(values) < 1e-9:
            break
    best: np.ndarray = simplex[int(np.argmin(values))]
    return best


def fit_testimonies(rows: Sequence[TestimonyRow], signals: Sequence[str],
                    l2: float = L2) -> Model:
    """The model whose testimonies' P(false) — each the largest of its claims' — is most
    likely given their labels (L2 on the weights)."""
    y = np.array([0.0 if label else 1.0 for _, label in rows])  # 1: the testimony is false

    def loss(params: np.ndarray) -> float:
        p = np.clip(_testimony_p_false(params, rows, signals), 1e-6, 1 - 1e-6)
        return float(-np.sum(y * np.log(p) + (1 - y) * np.log(1 - p))
                     + l2 * np.sum(params[1:] ** 2) / 2)

    start = np.array([1.0, *([1.0 / len(signals)] * len(signals))])
    best = _nelder_mead(loss, start)
    return Model(tuple(signals), float(best[0]),
                 {s: float(w) for s, w in zip(signals, best[1:], strict=True)})


def _figures(y_false: list[int], p_false: list[float]) -> dict[str, float]:
    y, p = np.array(y_false), np.array(p_false)
    return {"auroc": round(float(auroc(y, p)), 4), "ece": round(float(ece(y, p)), 4)}


def fit_results(results: Iterable[EvalResult], info: EvalRunInfo, base: Pooling,
                where: str = "") -> tuple[Pooling, dict[str, Any]]:
    """The pool fitted on a run's labelled results (the module docstring), and the fit's
    figures. `FitRefused` when they cannot fit one."""
    mode: Mode = "document" if info.mode == "document" else "open"
    claims: list[Row] = []
    testimonies: list[TestimonyRow] = []
    for r in results:
        if r.kind != "interrogation" or r.repeat != 1 or r.label is None:
            continue
        if r.readings:
            claims.append((r.readings, r.label))
        elif r.claim_readings:
            testimonies.append((r.claim_readings, r.label))
    labels = [label for _, label in claims] or [label for _, label in testimonies]
    if len(labels) < FEWEST or all(labels) or not any(labels):
        raise FitRefused(f"a fit needs {FEWEST} labelled items with readings at least, false "
                         f"and true ones among them (this run has {len(labels)}, "
                         f"{sum(not v for v in labels)} false): run `detektiv eval` on them "
                         "first (its sessions store each signal's reading)")
    pool_rows: list[Mapping[str, float | None]] = (
        [r for r, _ in claims] if claims else [c for cs, _ in testimonies for c in cs])
    signals = [s for s in SIGNAL_NAMES if any(r.get(s) is not None for r in pool_rows)]
    if not signals:
        raise FitRefused("the run's sessions stored no reading to fit on")
    figures: dict[str, Any] = {"fitted_on": where or info.dataset, "mode": mode,
                               "items": len(labels), "false": sum(not v for v in labels)}
    if claims:
        full = fit_model(claims, signals)
        subsets = {subset_key(sub): fit_model(claims, sub) for sub in all_subsets(signals)}
        predicted = cross_validated(claims, signals)
        figures |= {"unit": "claims",
                    "cross_validated": _figures([0 if v else 1 for _, v in claims], predicted)}
        for sub in all_subsets(signals):
            cv = cross_validated(claims, sub)
            figures.setdefault("subsets", {})[subset_key(sub)] = _figures(
                [0 if v else 1 for _, v in claims], cv)
    else:
        full = fit_testimonies(testimonies, signals)
        subsets = {subset_key(sub): fit_testimonies(testimonies, sub)
                   for sub in all_subsets(signals)}
        p = _testimony_p_false(np.array([full.intercept, *(full.weights[s] for s in signals)]),
                               testimonies, signals)
        figures |= {"unit": "testimonies (each as its most doubtful claim)",
                    "in_sample": _figures([0 if v else 1 for _, v in testimonies],
                                          [float(v) for v in p])}
    models = dict(base.models)
    models[mode] = Fitted(full, subsets, figures)
    kept = {m: models[m] for m in MODES if m in models}
    return Pooling(kept, where or "fitted"), figures

