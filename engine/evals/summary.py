"""An evaluation run's figures, read from its results.jsonl in one streaming pass.

Only numbers are kept per unit (no claim text, no session), so memory grows by a few dozen
bytes an item, never with the size of what the models said. Systems compared side by side:

- `interrogation`: the first interrogation of each item;
- `majority of 3`: items with three interrogations, the verdict most of them gave (a
  three-way split is undetermined), the mean probability-false;
- `direct`: the detective on the claim alone; `are-you-sure`: after one "Are you sure?";
- `sampled`: a testimony's claim read against the witness's answers to its question drawn
  again (`engine.evals.baselines.Baselines.sampled`, SelfCheckGPT's signal);
- `signal:NAME`: one signal's reading alone, as the interrogation's sessions read it
  (`engine.interrogation.signals`: `alone`, `samples`, `rounds`, `words`), P(false) = 1 −
  its P(true), its verdict by the claims' band (held below 0.4, false from 0.6);
- `without:NAME`: the interrogation's pool without that signal (the pool's model fitted on
  the other signals: `engine.interrogation.pooling`) — the ablation, from the same
  sessions; for a testimony (a summary), each claim pooled so and the testimony's verdict
  made from its claims as a session makes it;
- `selfcheck`: SelfCheckGPT's own prompt scorer on the witness's sampled answers
  (`engine.evals.selfcheck`);
- `examined`: a testimony's claim as a session of the testimony examines it — its cheap
  readings pooled, and its rounds pooled in only where those leave it in doubt
  (`engine.interrogation.examine.in_doubt`); the evaluation's sessions question every claim,
  so that each signal is measured on all of them;
- `pooled` (runs before issue 72): the interrogation pooled with the `direct` and
  `sampled` units;
- `testimony…`: items that are the split, labelled claims of a testimony, taken together a
  testimony at a time (the testimony is false when any of its claims is; its P(false) the
  largest of its claims', its verdict `false` when any claim's is, `true` when every claim's
  is, else `undetermined`: the rule a testimony's own verdict follows).

A unit that failed counts as an abstention (no verdict, probability-false 0.5), never dropped.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.evals.folder import EvalResult, EvalRunInfo, RunFolder
from engine.evals.metrics import BOOTSTRAP, Metrics, calibration_bins, measure, pr_curve
from engine.interrogation.examine import UNSURE_BAND, in_doubt
from engine.interrogation.pooling import SIGNAL_NAMES, Mode, Pooling, load_pooling

__all__ = ["SYSTEMS", "EvalSummary", "coded", "summarize", "summarize_results", "system_name"]

SYSTEMS = {
    "interrogation": "interrogation",
    "majority": "majority of 3",
    "consistency": "consistency protocol",
    "direct": "baseline: detective alone",
    "are-you-sure": "baseline: \"Are you sure?\"",
    "reader": "reference: detective reads the document",
    "sampled": "baseline: the witness sampled (SelfCheckGPT)",
    "selfcheck": "baseline: SelfCheckGPT (its prompt scorer)",
    "examined": "interrogation, questioned only where in doubt (as a testimony examines)",
    "pooled": "interrogation with the detective alone and the samples (rule 8)",
    "testimony": "per testimony: interrogation",
    "testimony-direct": "per testimony: detective alone",
    "testimony-are-you-sure": "per testimony: \"Are you sure?\"",
}
"""Each system's key and how it is named."""

def system_name(key: str) -> str:
    """How system `key` is named: `SYSTEMS`, or a signal's row (`signal:rounds` → "signal:
    rounds alone", `without:rounds` → "interrogation without rounds")."""
    if key.startswith("signal:"):
        return f"signal: {key.split(':', 1)[1]} alone"
    if key.startswith("without:"):
        return f"interrogation without {key.split(':', 1)[1]}"
    return SYSTEMS.get(key, key)


_CODE = {"false": 1, "true": 0, "undetermined": -1}


def coded(label: bool, verdict: str | None, p: float | None) -> tuple[int, int, float]:
    """A judged item as the figures read it (`engine.evals.metrics`): y (1: the claim is
    false), the verdict (1 false, 0 true, -1 none) and P(false) (0.5 where none was given)."""
    return 0 if label else 1, _CODE.get(verdict or "", -1), 0.5 if p is None else p


@dataclass(slots=True)
class _Rows:
    y: list[int] = field(default_factory=list)
    pred: list[int] = field(default_factory=list)
    p: list[float] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    tokens: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    failed: int = 0

    def add(self, label: bool, verdict: str | None, p: float | None, rounds: int,
            tokens: float, seconds: float) -> None:
        y, pred, p_false = coded(label, verdict, p)
        self.y.append(y)
        self.pred.append(pred)
        self.p.append(p_false)
        self.rounds.append(rounds)
        self.tokens.append(tokens)
        self.seconds.append(seconds)
        self.failed += verdict is None

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return (np.asarray(self.y, dtype=np.int64), np.asarray(self.pred, dtype=np.int64),
                np.asarray(self.p, dtype=np.float64), np.asarray(self.tokens, dtype=np.float64),
                np.asarray(self.seconds, dtype=np.float64))


@dataclass(frozen=True, slots=True)
class EvalSummary:
    """The figures of one run; see the module docstring."""

    info: EvalRunInfo | None
    systems: dict[str, Metrics]
    """By key of `SYSTEMS`, only those with results."""
    by_rounds: list[tuple[int, int, float]]
    """(rounds, items, F1) of the interrogation, by number of rounds asked."""
    curves: dict[str, tuple[list[float], list[float]]]
    """(precision, recall) points of each system."""
    bins: dict[str, list[tuple[int, float, float]]]
    """Reliability bins of each system: (count, mean probability-false, fraction false)."""
    units: int = 0
    cost: float = 0.0
    """What every unit's calls cost, at the configured prices."""
    unpriced: list[str] = field(default_factory=list)
    """Providers that answered with no price configured (not in `cost`)."""
    repairs: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """By system: (items that needed a repair, replies asked for again, items whose rule stayed
    broken and ended undetermined for it)."""


def _majority(verdicts: list[str | None]) -> str | None:
    counted = Counter(v or "undetermined" for v in verdicts)
    verdict, count = counted.most_common(1)[0]
    return verdict if count * 2 > len(verdicts) else "undetermined"


def _testimony(claims: list[tuple[bool, str | None, float | None, int, int, float]]
               ) -> tuple[bool, str | None, float | None, int, int, float]:
    """A testimony's row from its claims' (see the module docstring); no verdict when every
    claim failed."""
    verdicts = [v[1] for v in claims]
    if all(v is None for v in verdicts):
        verdict = None
    elif "false" in verdicts:
        verdict = "false"
    elif all(v == "true" for v in verdicts):
        verdict = "true"
    else:
        verdict = "undetermined"
    p_false = max(0.5 if v[2] is None else v[2] for v in claims)
    return (all(v[0] for v in claims), verdict, p_false, sum(v[3] for v in claims),
            sum(v[4] for v in claims), sum(v[5] for v in claims))


Row = tuple[bool, str | None, float | None, int, int, float]


def _banded(p_false: float | None) -> str | None:
    """A reading's verdict by the claims' band (`engine.interrogation.examine`)."""
    if p_false is None:
        return "undetermined"
    if p_false < 0.5 - UNSURE_BAND:
        return "true"
    if p_false > 0.5 + UNSURE_BAND:
        return "false"
    return "undetermined"


def _of_testimony(values: list[float | None]) -> tuple[str | None, float | None]:
    """A testimony's verdict and P(false) from its claims' (rule 6 of `verdict`): false when
    one is, true when all are, its P(false) the largest."""
    known = [v for v in values if v is not None]
    if not known:
        return "undetermined", None
    verdicts = [_banded(v) for v in values]
    verdict = "false" if "false" in verdicts else "true" if all(
        v == "true" for v in verdicts) else "undetermined"
    return verdict, max(known)


def _signal_rows(r: EvalResult, pool: Pooling, mode: Mode) -> dict[str, Row]:
    """The rows the signals' readings of one interrogation make: each signal alone, and the
    pool without each (see the module docstring)."""
    claims = [r.readings] if r.readings is not None else (r.claim_readings or [])
    if not claims or r.label is None:
        return {}
    # the signals that ran (a reading of None: it ran and read nothing, an abstention)
    present: list[str] = [name for name in SIGNAL_NAMES if any(name in c for c in claims)]
    rows: dict[str, Row] = {}
    if r.readings is not None and r.testimony is not None and "rounds" in present and \
            len(present) > 1:
        cheap = [s for s in present if s != "rounds"]
        first: dict[str, float | None] = {k: v for k, v in r.readings.items() if k in cheap}
        p_cheap = round(1 - pool.model(mode, cheap).p_true(first), 4)
        p_full = r.probability_false
        p_final = p_full if in_doubt(p_cheap, first, mode) else p_cheap
        rows["examined"] = (r.label, _banded(p_final) if p_final is not None else None,
                            p_final, r.rounds, 0, 0.0)
    for name in present:
        each = [None if c.get(name) is None else 1 - float(c[name] or 0) for c in claims]
        verdict, p_false = _of_testimony(each) if r.readings is None else (
            _banded(each[0]), each[0])
        rows[f"signal:{name}"] = (r.label, verdict, p_false, r.rounds, 0, 0.0)
    if len(present) < 2:
        return rows
    for name in present:
        rest = [s for s in present if s != name]
        model = pool.model(mode, rest)
        each = []
        for c in claims:
            read: dict[str, float | None] = {k: v for k, v in c.items() if k in rest}
            each.append(round(1 - model.p_true(read), 4) if any(
                v is not None for v in read.values()) else None)
        verdict, p_false = _of_testimony(each) if r.readings is None else (
            _banded(each[0]), each[0])
        rows[f"without:{name}"] = (r.label, verdict, p_false, r.rounds, 0, 0.0)
    return rows


def _run_pool(info: EvalRunInfo | None) -> Pooling:
    """The pool the run's sessions weighed their readings by (its configured file, when it
    still loads; else the shipped one)."""
    path = info.pooling if info is not None else None
    return load_pooling(Path(path) if path else None)[0]


def summarize_results(results: Iterable[EvalResult], info: EvalRunInfo | None = None, *,
                      resamples: int = BOOTSTRAP, seed: int = 0,
                      pool: Pooling | None = None) -> EvalSummary:
    """The summary of `results` (the last result of a key counts); the ablation's rows are
    pooled by `pool` (default: the run's)."""
    pool = pool or _run_pool(info)
    mode: Mode = "document" if info is not None and info.mode == "document" else "open"
    signal_rows: dict[str, list[Row]] = {}
    compact: dict[tuple[str, str, int], tuple[bool, str | None, float | None, int, int,
                                             float]] = {}
    spent: dict[tuple[str, str, int], tuple[float, list[str]]] = {}
    mended: dict[tuple[str, str, int], tuple[int, bool]] = {}
    grouped: dict[tuple[str, str], dict[str, tuple[bool, str | None, float | None, int,
                                                   int, float]]] = {}
    for r in results:
        if r.label is None:  # an open question: its claims are counted (`compare`)
            continue
        compact[r.key] = (r.label, r.verdict, r.probability_false, r.rounds, r.tokens,
                          r.seconds)
        if r.testimony is not None and r.repeat == 1:
            grouped.setdefault((r.testimony, r.kind), {})[r.item] = compact[r.key]
        if r.kind == "interrogation" and r.repeat == 1:
            for key, row in _signal_rows(r, pool, mode).items():
                signal_rows.setdefault(key, []).append(row)
        spent[r.key] = (r.cost, r.unpriced)
        mended[r.key] = (r.repairs, r.rule_broken is not None)
    repairs: dict[str, tuple[int, int, int]] = {}
    for (_, kind, repeat), (count, broken) in mended.items():
        if repeat != 1:
            continue
        items, retries, stayed = repairs.get(kind, (0, 0, 0))
        repairs[kind] = (items + (count > 0), retries + count, stayed + broken)
    rows = {key: _Rows() for key in SYSTEMS}
    repeats: dict[str, list[tuple[bool, str | None, float | None, int, int, float]]] = {}
    for (item, kind, repeat), value in compact.items():
        if kind == "interrogation":
            repeats.setdefault(item, []).append(value)
            if repeat == 1:
                rows["interrogation"].add(*value)
        elif repeat == 1 and kind in rows:
            rows[kind].add(*value)
    for values in repeats.values():
        if len(values) < 3:
            continue
        values = values[:3]
        probabilities = [0.5 if v[2] is None else v[2] for v in values]
        verdict = _majority([v[1] for v in values])
        failed = all(v[1] is None for v in values)
        rows["majority"].add(values[0][0], None if failed else verdict,
                             float(np.mean(probabilities)), values[0][3],
                             sum(v[4] for v in values), sum(v[5] for v in values))
    for (_, kind), claims in grouped.items():
        key = "testimony" if kind == "interrogation" else f"testimony-{kind}"
        if key in rows:
            rows[key].add(*_testimony(list(claims.values())))
    for key in sorted(signal_rows, key=_signal_order):
        if key == "examined":
            for row in signal_rows[key]:
                rows["examined"].add(*row)
            continue
        rows[key] = _Rows()
        for row in signal_rows[key]:
            rows[key].add(*row)
    systems: dict[str, Metrics] = {}
    curves: dict[str, tuple[list[float], list[float]]] = {}
    bins: dict[str, list[tuple[int, float, float]]] = {}
    for key, found in rows.items():
        if not found.y:
            continue
        y, pred, p, tokens, seconds = found.arrays()
        systems[key] = measure(y, pred, p, tokens, seconds, failed=found.failed,
                               resamples=resamples, seed=seed)
        precision, recall = pr_curve(y, p)
        curves[key] = ([float(v) for v in precision], [float(v) for v in recall])
        bins[key] = calibration_bins(y, p)
    by_rounds: list[tuple[int, int, float]] = []
    single = rows["interrogation"]
    for count in sorted(set(single.rounds)):
        picked = [i for i, r in enumerate(single.rounds) if r == count]
        tp = sum(1 for i in picked if single.pred[i] == 1 and single.y[i] == 1)
        fp = sum(1 for i in picked if single.pred[i] == 1 and single.y[i] == 0)
        fn = sum(1 for i in picked if single.pred[i] != 1 and single.y[i] == 1)
        f1 = 2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else math.nan
        by_rounds.append((count, len(picked), f1))
    unpriced = sorted({name for _, names in spent.values() for name in names})
    return EvalSummary(info, systems, by_rounds, curves, bins, len(compact),
                       cost=sum(cost for cost, _ in spent.values()), unpriced=unpriced,
                       repairs=repairs)


def _signal_order(key: str) -> tuple[int, int]:
    if ":" not in key:
        return (-1, 0)
    kind, name = key.split(":", 1)
    return (0 if kind == "signal" else 1,
            SIGNAL_NAMES.index(name) if name in SIGNAL_NAMES else len(SIGNAL_NAMES))


def summarize(folder: RunFolder, *, resamples: int = BOOTSTRAP) -> EvalSummary:
    """The summary of a run's folder."""
    return summarize_results(folder.results(), folder.info(), resamples=resamples)
