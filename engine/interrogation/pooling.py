"""A claim's pooled P(false): a logistic model of its signals' readings, fitted on labelled
development claims, never guessed (issue 72, part 5).

    pool = load_pooling(path)                          # shipped, or a user's `eval --fit`
    found = pool.pooled(claim.readings, "open")        # Pooled: p_false, each reading's pull
    model = fit_model(rows, ("alone", "samples", "rounds"))

Each signal's reading is a P(true) (`engine.interrogation.signals`); its feature is the
reading's log-odds, clipped to [0.01, 0.99] (±4.6), and 0 where the signal read nothing or
did not run (no evidence either way). P(true) = σ(b + Σ wₛ·xₛ): `b` carries the base rate of
false claims, each weight how far that signal is to be trusted beside the others. One model a
witness mode: `open` (the witness answers from what it knows) and `document` (it holds a
document), since the same signal means different things in each.

A fitted file holds, for each mode, a model for every set of its signals — a claim is pooled
by the model of the signals that read it (a testimony's claim that was not questioned, one
`[interrogation] signals` leaves a signal out of, a single claim with no samples), and the
models without each signal are the ablation `eval --baselines` reports — with where it was
fitted and its figures (cross-validated AUROC and ECE). A file that is not valid, or fitted
for another version of the signals (`READINGS_VERSION`), is refused with its reason named
(`PoolingRefused`); the run then pools by the shipped one.

The fit: L2-regularised logistic regression by Newton's method (`fit_model`, a handful of
parameters on a hundred-odd claims — numpy, no further dependency), the regularisation
`L2` on the weights only. Its cross-validated figures come from `cross_validated` (k folds,
each fold's claims predicted by a model fitted without them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np

from engine.errors import DetektivError
from engine.models.testimony import SIGNAL_NAMES, SignalReading

__all__ = ["L2", "MODES", "READINGS_VERSION", "SIGNAL_NAMES", "Fitted", "Model", "Mode",
           "Pooled", "Pooling", "PoolingRefused", "all_subsets", "cross_validated",
           "equal_model", "feature", "fit_model", "load_pooling", "parse_pooling",
           "pooling_file", "shipped_pooling", "subset_key"]

READINGS_VERSION = 2
"""The version of what the signals read: a fitted file of another version was fitted on
readings that meant something else, and is refused. 2: the rounds sampled (issue 72)."""
L2 = 1.0
"""The penalty on the weights' squares (the intercept is free): with a hundred-odd claims a
weight is only as large as the evidence for it."""
_CLIP = 0.01

Mode = Literal["open", "document"]
"""A model for a witness that answers from what it knows (`open`, planted and defend
included) and for one that holds a document."""
MODES: tuple[Mode, ...] = ("open", "document")


class PoolingRefused(DetektivError):
    """A fitted pooling file that cannot be used (unreadable, not a pooling file, fitted for
    another version of the signals): its path and why."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"the pooling file {path} is not used: {why}; the shipped one is")
        self.path = path
        self.why = why


def feature(p_true: float | None) -> float:
    """A reading's feature: its log-odds, clipped; 0 (no evidence) when there is none."""
    if p_true is None:
        return 0.0
    p = min(1 - _CLIP, max(_CLIP, p_true))
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    if x < -700:
        return 0.0
    return 1 / (1 + math.exp(-x))


@dataclass(frozen=True, slots=True)
class Model:
    """One fitted pool: P(true) = σ(`intercept` + Σ `weights`[s] · feature(reading of s))."""

    signals: tuple[str, ...]
    intercept: float
    weights: Mapping[str, float]

    def pulls(self, readings: Mapping[str, float | None]) -> dict[str, float]:
        """Each signal's pull on the claim's log-odds of being true (its weight times its
        feature; 0 where it read nothing)."""
        return {name: self.weights.get(name, 0.0) * feature(readings.get(name))
                for name in self.signals}

    def p_true(self, readings: Mapping[str, float | None]) -> float:
        """P(the claim is true) given `readings` (signal → P(true) or None)."""
        return _sigmoid(self.intercept + sum(self.pulls(readings).values()))

    def to_json(self) -> dict[str, Any]:
        return {"signals": list(self.signals), "intercept": round(self.intercept, 6),
                "weights": {k: round(v, 6) for k, v in self.weights.items()}}

    @classmethod
    def from_json(cls, data: Any) -> Model:
        if not isinstance(data, dict):
            raise ValueError("a model is not an object")
        signals = data.get("signals")
        weights = data.get("weights")
        intercept = data.get("intercept")
        if not isinstance(signals, list) or not all(s in SIGNAL_NAMES for s in signals):
            raise ValueError(f"a model names signals other than {', '.join(SIGNAL_NAMES)}")
        if not isinstance(weights, dict) or set(weights) != set(signals) or not all(
                _finite(v) for v in weights.values()) or not _finite(intercept):
            raise ValueError("a model's weights are not a number for each of its signals")
        assert isinstance(intercept, int | float)
        return cls(tuple(signals), float(intercept), {k: float(v) for k, v in weights.items()})


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and \
        math.isfinite(value)


def all_subsets(signals: Sequence[str]) -> list[tuple[str, ...]]:
    """Every non-empty proper subset of `signals`, in reading order."""
    ordered: list[str] = [s for s in SIGNAL_NAMES if s in signals]
    found: list[tuple[str, ...]] = []
    for mask in range(1, 2 ** len(ordered) - 1):
        found.append(tuple(s for i, s in enumerate(ordered) if mask >> i & 1))
    return found


def equal_model(signals: Sequence[str]) -> Model:
    """The pool before any fit: each reading weighs the same, the mean of their log-odds
    when every signal read (what rules 8 and 10 did)."""
    return Model(tuple(signals), 0.0, {s: 1 / len(signals) for s in signals} if signals
                 else {})


@dataclass(frozen=True, slots=True)
class Pooled:
    """A claim's pooled reading: P(false), and each signal's pull on it."""

    p_false: float
    pulls: dict[str, float]
    """Signal → its pull on the log-odds of the claim being *true*."""
    model: Model

    def strongest(self, side: Literal["true", "false"]) -> str | None:
        """The signal that pulled hardest toward `side`, if any pulled that way."""
        sign = 1 if side == "true" else -1
        found = [(sign * pull, name) for name, pull in self.pulls.items() if sign * pull > 0]
        return max(found)[1] if found else None


def subset_key(signals: Sequence[str]) -> str:
    """A set of signals as a fitted file names it: in reading order, joined by "+"."""
    return "+".join(name for name in SIGNAL_NAMES if name in signals)


@dataclass(frozen=True, slots=True)
class Fitted:
    """A mode's models: `full` with every signal, `subsets` for each smaller set of them
    (by `subset_key`), and the fit's figures (claims, false claims, cross-validated AUROC
    and ECE, where)."""

    full: Model
    subsets: Mapping[str, Model] = field(default_factory=dict)
    figures: Mapping[str, Any] = field(default_factory=dict)

    def for_signals(self, present: Sequence[str]) -> Model:
        """The model of the signals `present` (those that read the claim, among this mode's):
        the full one, or the one fitted on that subset; the full one with the missing
        readings at 0 when none was."""
        key = subset_key([s for s in present if s in self.full.signals])
        if key == subset_key(self.full.signals) or not key:
            return self.full
        return self.subsets.get(key, self.full)


@dataclass(frozen=True, slots=True)
class Pooling:
    """The models a run pools by, and where they come from (`source`)."""

    models: Mapping[Mode, Fitted]
    source: str = "shipped"

    def model(self, mode: Mode, present: Sequence[str] = SIGNAL_NAMES) -> Model:
        fitted = self.models.get(mode)
        if fitted is None:
            return equal_model([s for s in present])
        return fitted.for_signals(present)

    def pooled(self, readings: Mapping[str, SignalReading], mode: Mode,
               chosen: Sequence[str] = SIGNAL_NAMES) -> Pooled:
        """The pooled P(false) of a claim's `readings` (those of the `chosen` signals)."""
        values = {name: r.p_true for name, r in readings.items() if name in chosen}
        model = self.model(mode, [s for s in chosen if s in self._signals(mode)])
        pulls = model.pulls(values)
        return Pooled(round(1 - model.p_true(values), 4), pulls, model)

    def _signals(self, mode: Mode) -> tuple[str, ...]:
        fitted = self.models.get(mode)
        return fitted.full.signals if fitted is not None else SIGNAL_NAMES

    def to_json(self) -> dict[str, Any]:
        return {"format": 1, "readings_version": READINGS_VERSION, "modes": {
            mode: {"model": f.full.to_json(),
                   "subsets": {k: m.to_json() for k, m in f.subsets.items()},
                   "figures": dict(f.figures)} for mode, f in self.models.items()}}


def parse_pooling(data: Any, source: str) -> Pooling:
    """A pooling file's content as a `Pooling`; `ValueError` naming what is wrong."""
    if not isinstance(data, dict) or data.get("format") != 1:
        raise ValueError("it is not a detektiv pooling file (format 1)")
    version = data.get("readings_version")
    if version != READINGS_VERSION:
        raise ValueError(f"it was fitted on readings of version {version!r}; this detektiv's "
                         f"signals read version {READINGS_VERSION} (fit it again: detektiv "
                         "eval ITEMS --fit)")
    modes = data.get("modes")
    if not isinstance(modes, dict) or not modes or not set(modes) <= set(MODES):
        raise ValueError(f"its modes are not among {', '.join(MODES)}")
    models: dict[Mode, Fitted] = {}
    for mode, entry in modes.items():
        if not isinstance(entry, dict):
            raise ValueError(f"mode {mode!r} is not an object")
        subsets = entry.get("subsets") or {}
        if not isinstance(subsets, dict):
            raise ValueError(f"mode {mode!r}: `subsets` is not an object")
        figures = entry.get("figures") or {}
        models[mode] = Fitted(Model.from_json(entry.get("model")),
                              {k: Model.from_json(v) for k, v in subsets.items()},
                              figures if isinstance(figures, dict) else {})
    return Pooling(models, source)


def pooling_file() -> Path:
    """The shipped pooling file (fitted on the development samples; docs/benchmarks.md)."""
    return Path(str(resources.files("engine.interrogation") / "pooling.json"))


_SHIPPED: Pooling | None = None


def shipped_pooling() -> Pooling:
    """The shipped pool (read once)."""
    global _SHIPPED
    if _SHIPPED is None:
        path = pooling_file()
        _SHIPPED = parse_pooling(json.loads(path.read_text(encoding="utf-8")), "shipped")
    return _SHIPPED


def load_pooling(path: Path | None) -> tuple[Pooling, PoolingRefused | None]:
    """The pool at `path` (a user's `eval --fit`), or the shipped one — with why `path`
    was refused, when it was."""
    if path is None:
        return shipped_pooling(), None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return parse_pooling(data, str(path)), None
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return shipped_pooling(), PoolingRefused(path, why)


# ---- fitting --------------------------------------------------------------------------------

Row = tuple[Mapping[str, float | None], bool]
"""One labelled claim: its readings (signal → P(true) or None) and whether it is true."""


def _matrix(rows: Sequence[Row], signals: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([[1.0, *(feature(readings.get(s)) for s in signals)] for readings, _ in rows])
    y = np.array([1.0 if label else 0.0 for _, label in rows])
    return x, y


def fit_model(rows: Sequence[Row], signals: Sequence[str], l2: float = L2,
              steps: int = 50) -> Model:
    """The L2-regularised logistic model of `rows` (P(true) of each claim from its readings
    of `signals`), by Newton's method; the intercept is not penalised. Its weights are zero
    or above: a reading fitted to count against what it reads (a negative weight, where it
    moves with a stronger reading on a small sample: a denial that would make a claim more
    likely true) is left out at weight 0, and the others fitted again without it."""
    kept = list(signals)
    while True:
        beta = _newton(rows, kept, l2, steps)
        negative = [(float(w), s) for s, w in zip(kept, beta[1:], strict=True) if w < 0]
        if not negative:
            break
        kept.remove(min(negative)[1])
    weights = {s: 0.0 for s in signals}
    weights |= {s: float(w) for s, w in zip(kept, beta[1:], strict=True)}
    return Model(tuple(signals), float(beta[0]), weights)


def _newton(rows: Sequence[Row], signals: Sequence[str], l2: float, steps: int) -> np.ndarray:
    """The penalised maximum-likelihood coefficients (intercept first)."""
    x, y = _matrix(rows, signals)
    beta = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(x @ beta, -30, 30)))
        gradient = x.T @ (y - p) - penalty * beta
        hessian = -(x.T * (p * (1 - p))) @ x - np.diag(penalty) - 1e-9 * np.eye(x.shape[1])
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.max(np.abs(step))) < 1e-8:
            break
    return beta


def cross_validated(rows: Sequence[Row], signals: Sequence[str], folds: int = 5,
                    seed: int = 0, l2: float = L2) -> list[float]:
    """Each row's P(false) as predicted by a model fitted on the other folds (k-fold, the
    rows shuffled once by `seed`, each fold holding false and true claims in proportion)."""
    order = np.random.default_rng(seed).permutation(len(rows))
    false = [i for i in order if not rows[i][1]]
    true = [i for i in order if rows[i][1]]
    assigned = {index: n % folds for n, index in enumerate(false)}
    assigned |= {index: n % folds for n, index in enumerate(true)}
    predicted = [0.5] * len(rows)
    for fold in range(folds):
        train = [rows[i] for i in range(len(rows)) if assigned[i] != fold]
        labels = [label for _, label in train]
        if not train or all(labels) or not any(labels):
            continue
        model = fit_model(train, signals, l2)
        for i in range(len(rows)):
            if assigned[i] == fold:
                predicted[i] = 1 - model.p_true(rows[i][0])
    return predicted
