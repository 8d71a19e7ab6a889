"""The evaluation's figures against independent computations: scikit-learn on random data
(ties, one class only, abstentions), and cases worked by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.calibration import calibration_curve
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    f1_score,
    precision_score,
    recall_score,
    roc_auc_score,
)

from engine.evals.folder import EvalResult
from engine.evals.metrics import auc_pr, auroc, bootstrap, ece, measure
from engine.evals.summary import summarize_results

# y: 1 = a false claim; pred: 1 "false", 0 "true", -1 undetermined; p on a coarse grid (ties)
cases = st.integers(2, 80).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 1), min_size=n, max_size=n),
    st.lists(st.integers(-1, 1), min_size=n, max_size=n),
    st.lists(st.integers(0, 10).map(lambda k: k / 10), min_size=n, max_size=n),
))


@settings(max_examples=200, deadline=None)
@given(cases)
def test_every_figure_matches_scikit_learn(case: tuple[list[int], list[int], list[float]]
                                           ) -> None:
    y, pred, p = (np.array(v) for v in case)
    y, pred, p = y.astype(np.int64), pred.astype(np.int64), p.astype(np.float64)
    m = measure(y, pred, p, p, p, resamples=0).figures
    said_false = (pred == 1).astype(int)
    # an abstention is its own class for accuracy: never equal to the label
    assert m["accuracy"].value == pytest.approx(accuracy_score(y, np.where(pred == -1, 2, pred)))
    if said_false.any():
        assert m["precision"].value == pytest.approx(precision_score(y, said_false))
    else:
        assert math.isnan(m["precision"].value)
    if y.any():
        assert m["recall"].value == pytest.approx(recall_score(y, said_false))
    else:
        assert math.isnan(m["recall"].value)
    if said_false.any() or y.any():
        assert m["f1"].value == pytest.approx(f1_score(y, said_false))
    assert m["undetermined"].value == pytest.approx(np.mean(pred == -1))
    if 0 < y.sum() < len(y):
        assert m["auroc"].value == pytest.approx(roc_auc_score(y, p))
    else:  # one class only: no ROC curve
        assert math.isnan(m["auroc"].value)
    if y.any():
        assert m["auc_pr"].value == pytest.approx(average_precision_score(y, p))
    else:
        assert math.isnan(m["auc_pr"].value)
    observed, predicted = calibration_curve(y, p, n_bins=10, strategy="uniform")
    counts = np.bincount(np.searchsorted(np.linspace(0, 1, 11)[1:-1], p, side="left"),
                         minlength=10)
    counts = counts[counts > 0]
    expected = float(np.sum(counts / len(y) * np.abs(observed - predicted)))
    assert m["ece"].value == pytest.approx(expected)


def test_worked_by_hand() -> None:
    # four false claims (1) and four true (0); verdicts: 2 caught, 1 missed, 1 left open;
    # 1 true claim called false, 1 left open
    y = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    pred = np.array([1, 1, 0, -1, 1, -1, 0, 0])
    p = np.array([0.9, 0.8, 0.3, 0.5, 0.7, 0.5, 0.2, 0.1])
    m = measure(y, pred, p, p, p, resamples=0).figures
    assert m["accuracy"].value == pytest.approx(4 / 8)  # 2 caught + 2 true ones said true
    assert m["precision"].value == pytest.approx(2 / 3)
    assert m["recall"].value == pytest.approx(2 / 4)  # the open one is a miss
    assert m["f1"].value == pytest.approx(2 * 2 / (2 * 2 + 1 + 2))
    assert m["undetermined"].value == pytest.approx(2 / 8)
    # read from the probability alone (false at 0.5 or more): .9 .8 .5 right of the false
    # claims, .3 wrong; .7 and .5 wrong of the true ones, .2 .1 right
    assert m["accuracy_p"].value == pytest.approx(5 / 8)
    # 16 (false, true) pairs: .9 and .8 beat all four true ones, .3 beats two, .5 beats two
    # and ties one → (4 + 4 + 2 + 2.5) / 16
    assert auroc(y, p) == pytest.approx(12.5 / 16)
    # ranked: .9(1) .8(1) .7(0) .5(1,0 tie) .3(1) .2 .1 → AP = ¼(1 + 1 + ¾ + ⅘)
    assert auc_pr(y, p) == pytest.approx((1 + 1 + 3 / 5 + 4 / 6) / 4)
    # every p said 1.0 for false claims and 0.0 for true ones: perfectly calibrated
    assert ece(np.array([1, 0]), np.array([1.0, 0.0])) == 0.0
    assert ece(np.array([1, 1, 0, 0]), np.array([0.5] * 4)) == 0.0
    assert ece(np.array([0, 0]), np.array([0.9, 0.9])) == pytest.approx(0.9)


def test_bootstrap_interval_holds_the_value_and_narrows_with_more_items() -> None:
    rng = np.random.default_rng(3)

    def mean(values: np.ndarray) -> float:
        return float(np.mean(values))

    small = rng.integers(0, 2, 40).astype(np.float64)
    large = rng.integers(0, 2, 4000).astype(np.float64)
    low, high = bootstrap([small], mean)
    assert low <= mean(small) <= high
    low2, high2 = bootstrap([large], mean)
    assert low2 <= mean(large) <= high2
    assert high2 - low2 < (high - low) / 5


def _result(item: str, label: bool, verdict: str | None, p: float | None, repeat: int = 1,
            kind: str = "interrogation", rounds: int = 3) -> EvalResult:
    return EvalResult(item=item, kind=kind, repeat=repeat, label=label, claim=item,  # type: ignore[arg-type]
                      status="completed" if verdict else "failed", verdict=verdict,
                      probability_false=p, rounds=rounds)


def test_majority_of_three_and_abstentions_are_counted_never_dropped() -> None:
    results = [
        # a: false claim, 2 of 3 say false → caught by the majority, missed by the first run
        _result("a", False, "true", 0.4, 1), _result("a", False, "false", 0.9, 2),
        _result("a", False, "false", 0.8, 3),
        # b: true claim, a three-way split → undetermined
        _result("b", True, "true", 0.1, 1), _result("b", True, "false", 0.6, 2),
        _result("b", True, "undetermined", 0.5, 3),
        # c: false claim whose first run failed, then retried and caught: the last line counts
        _result("c", False, None, None, 1), _result("c", False, "false", 0.7, 1),
        _result("c", False, None, None, 2), _result("c", False, None, None, 3),
        # d: a true claim interrogated once only: not in the majority figures
        _result("d", True, None, None, 1),
    ]
    summary = summarize_results(results, resamples=0)
    single, majority = summary.systems["interrogation"], summary.systems["majority"]
    assert single.n == 4 and single.failed == 1  # d failed: counted, not dropped
    assert single.figures["recall"].value == pytest.approx(1 / 2)  # c caught, a missed
    assert single.figures["undetermined"].value == pytest.approx(1 / 4)
    assert majority.n == 3  # a, b, c
    # a is caught by 2 of 3; c has one "false" and two failures: no majority, undetermined
    assert majority.figures["recall"].value == pytest.approx(1 / 2)
    assert majority.figures["undetermined"].value == pytest.approx(2 / 3)  # b and c
    assert majority.failed == 0  # c's repeats did not all fail


def test_f1_by_rounds_groups_the_first_interrogation() -> None:
    results = [_result("a", False, "false", 0.9, rounds=3), _result("b", True, "false", 0.9,
                                                                     rounds=3),
               _result("c", False, "false", 0.9, rounds=5), _result("d", True, "true", 0.1,
                                                                     rounds=5)]
    assert summarize_results(results, resamples=0).by_rounds == [(3, 2, pytest.approx(2 / 3)),
                                                                 (5, 2, pytest.approx(1.0))]


def test_split_claims_are_also_judged_a_testimony_at_a_time() -> None:
    """A testimony is false when any of its claims is: its verdict false when any claim's is,
    true when every claim's is; its P(false) the largest of its claims'."""
    def claim(item: str, group: str, label: bool, verdict: str | None, p: float | None,
              kind: str = "interrogation") -> EvalResult:
        return EvalResult(item=item, kind=kind, label=label, claim=item, status="completed",  # type: ignore[arg-type]
                          verdict=verdict, probability_false=p, testimony=group)

    results = [claim("t1:1", "t1", True, "true", 0.1), claim("t1:2", "t1", False, "false", 0.9),
               claim("t2:1", "t2", True, "true", 0.2), claim("t2:2", "t2", True, "true", 0.3),
               claim("t3:1", "t3", True, "undetermined", 0.5),
               claim("t3:2", "t3", True, "true", 0.1),
               claim("t1:1", "t1", True, "false", 0.7, "direct"),
               claim("t1:2", "t1", False, "true", 0.3, "direct")]
    summary = summarize_results(results, resamples=0)
    per = summary.systems["testimony"]
    assert per.n == 3 and summary.systems["interrogation"].n == 6
    assert per.figures["accuracy"].value == pytest.approx(2 / 3)  # t1 false, t2 true; t3 open
    assert per.figures["undetermined"].value == pytest.approx(1 / 3)
    assert per.figures["auroc"].value == pytest.approx(1.0)  # 0.9 against 0.3 and 0.5
    direct = summary.systems["testimony-direct"]
    assert direct.n == 1 and direct.figures["accuracy"].value == pytest.approx(1.0)


def test_each_signal_alone_and_the_pool_without_each_are_systems_of_their_own() -> None:
    """From the same sessions: each signal's reading alone (P(false) = 1 − its P(true), the
    claims' band for its verdict), and the pool without each signal (the pool's model of the
    others); a testimony (a summary) made from its claims' readings as a session makes it."""
    from engine.interrogation.pooling import parse_pooling
    from tests.support.interrogation import EQUAL_POOLING

    equal = parse_pooling(json.loads(EQUAL_POOLING.read_text()), "equal")

    def row(item: str, label: bool, readings: dict[str, float | None]) -> EvalResult:
        return EvalResult(item=item, kind="interrogation", label=label, claim=item,
                          status="completed", verdict="true", probability_false=0.3,
                          readings=readings)

    results = [row("a", False, {"alone": 0.9, "rounds": 0.1}),
               row("b", True, {"alone": 0.8, "rounds": 0.9}),
               row("c", False, {"alone": 0.2, "rounds": None})]
    summary = summarize_results(results, resamples=0, pool=equal)
    alone, rounds = summary.systems["signal:alone"], summary.systems["signal:rounds"]
    assert alone.n == rounds.n == 3
    assert alone.figures["accuracy"].value == pytest.approx(2 / 3)  # a is believed alone
    assert rounds.figures["accuracy"].value == pytest.approx(2 / 3)  # c: no reading
    assert rounds.figures["undetermined"].value == pytest.approx(1 / 3)
    without = summary.systems["without:rounds"]  # the others' model: alone's, weight 1
    assert without.figures["accuracy"].value == pytest.approx(2 / 3)
    assert summary.systems["without:alone"].figures["auroc"].value == pytest.approx(1.0)
    # a testimony: false when a claim is, its P(false) its most doubtful claim's
    summary = summarize_results([EvalResult(
        item="s1", kind="interrogation", label=False, claim="s1", status="completed",
        verdict="false", probability_false=0.9,
        claim_readings=[{"words": 0.76, "rounds": 0.95}, {"words": 0.13, "rounds": None}])],
        resamples=0, pool=equal)
    words = summary.systems["signal:words"]
    assert words.figures["accuracy"].value == 1.0 and words.n == 1


