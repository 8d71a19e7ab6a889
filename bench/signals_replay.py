"""Issue 72: what each signal of a claim's examination is worth, read back from an evaluation
run's stored sessions — no model called (except with `--clusters`).

    python bench/signals_replay.py HOME RUN [--clusters URL] [--json OUT]

For every labelled claim the run interrogated, its session's readings and its rounds' answers
(each answer's P(true) is kept in the round's judgement): AUROC of P(false) with a 95 %
bootstrap interval for

- each signal alone (`alone`, `samples`, `rounds`, `words`), and the samples read with the
  first 1, 2, … of them;
- the rounds with the first k answers of each round (k = 1, 2, 3, … as drawn: the answers of
  a round are drawn one after another, so the first k are what k draws would have been),
  and under each way of reading a round's answers: `mean-disagree` (shipped: the mean, 0.5
  when one answer leans for the claim and another against), `mean`, `min`, `share` (the
  share of answers that lean for it), and with `--clusters URL`, semantic entropy's own
  form: the answers clustered against each other by the detective (two answers in one
  cluster when each, read as the claim, supports the other), the share of answers in the
  clusters of those that support the claim;
- the pool: a logistic model of the readings fitted on these claims, cross-validated (5
  folds), and with each signal left out; the equal-weight pool beside it; ECE of each;
- paired bootstrap differences of AUROC between the rows that matter (the pool against each
  baseline the run has: "Are you sure?", SelfCheckGPT).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.evals.folder import RunFolder  # noqa: E402
from engine.evals.metrics import auroc, bootstrap, ece, resampled  # noqa: E402
from engine.interrogation.pooling import (  # noqa: E402
    cross_validated,
    equal_model,
)
from engine.interrogation.verdict import compute  # noqa: E402
from engine.models.judgement import Judgement  # noqa: E402
from engine.models.session import InterrogationSession  # noqa: E402
from engine.storage.sessions import SessionStore  # noqa: E402

LEANS = 0.6


def round_value(values: Sequence[float], form: str) -> float | None:
    """A round's P(true) from its answers' P(true) under `form` (module docstring)."""
    if not values:
        return None
    if form == "mean":
        return float(np.mean(values))
    if form == "min":
        return float(min(values))
    if form == "share":
        return sum(v >= LEANS for v in values) / len(values)
    # mean-disagree: the shipped form
    if max(values) >= LEANS and min(values) <= 1 - LEANS:
        return 0.5
    return float(np.mean(values))


def rounds_reading(session: InterrogationSession, k: int, form: str) -> float | None:
    """The rounds signal's P(true) had each round drawn only its first `k` answers, read by
    `form`: the verdict rule over the rounds (rule 3 of `verdict`)."""
    judged: list[tuple[int, Judgement | None]] = []
    for pair in session.qa_pairs:
        if pair.testimony or pair.judgement is None:
            continue
        values = list(pair.judgement.samples) or (
            [pair.judgement.p_true] if pair.judgement.p_true is not None else [])
        value = round_value(values[:k], form)
        if value is None:
            judged.append((pair.sequence, Judgement(bearing="silent")))
            continue
        bearing = "supports" if value >= LEANS else "contradicts" if value <= 1 - LEANS \
            else "silent"
        judged.append((pair.sequence, Judgement(bearing=bearing, p_true=value)))  # type: ignore[arg-type]
    computed = compute(judged)
    if not computed.bore or computed.conflict:
        return None
    return 1 - computed.probability_false


def figure(y: np.ndarray, p: np.ndarray) -> tuple[float, float, float]:
    value = auroc(y, p)
    low, high = bootstrap([y, p], auroc, resamples=2000)
    return value, low, high


def paired(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """AUROC(a) − AUROC(b) with its paired 95 % interval."""
    def diff(yy: np.ndarray, aa: np.ndarray, bb: np.ndarray) -> float:
        return auroc(yy, aa) - auroc(yy, bb)
    draws = resampled([y, a, b], diff, resamples=2000)
    low, high = (float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))) \
        if len(draws) else (math.nan, math.nan)
    return diff(y, a, b), low, high


def clusters_reading(url: str, model: str, claim: str, question: str,
                     answers: Sequence[str], supports: Sequence[bool]) -> float | None:
    """Semantic entropy's own form (module docstring): the share of answers in the clusters
    of the answers that support the claim, the clusters made by the detective reading each
    pair of answers both ways."""
    import httpx

    def same(a: str, b: str) -> bool:
        prompt = (f"Question: {question}\nAnswer 1: {a}\nAnswer 2: {b}\n\nDo the two answers "
                  "give the same answer to the question? Answer with one word, yes or no.")
        reply = httpx.post(f"{url}/chat/completions", json={
            "model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 2, "temperature": 0}, timeout=300)
        reply.raise_for_status()
        return str(reply.json()["choices"][0]["message"]["content"]).strip().lower() \
            .startswith("yes")

    n = len(answers)
    if not n:
        return None
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if find(i) != find(j) and same(answers[i], answers[j]) and \
                    same(answers[j], answers[i]):
                parent[find(j)] = find(i)
    held = {find(i) for i in range(n) if supports[i]}
    return sum(1 for i in range(n) if find(i) in held) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path, help="the bench's detektiv home")
    parser.add_argument("run", help="the evaluation run's id (or its start)")
    parser.add_argument("--clusters", metavar="URL", help="the detective's OpenAI base URL: "
                        "also measure semantic entropy's clustering (calls the model)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    parser.add_argument("--json", type=Path, help="write the figures there")
    args = parser.parse_args()
    evals = args.home / "data" / "evals"
    found = [d for d in evals.iterdir() if d.name.startswith(args.run)]
    if len(found) != 1:
        raise SystemExit(f"no single run {args.run!r} in {evals}")
    folder = RunFolder(found[0])
    store = SessionStore(args.home / "data" / "sessions")
    results = folder.latest()
    rows: list[dict[str, Any]] = []
    baselines: dict[str, dict[str, float | None]] = {}
    for (item, kind, repeat), result in results.items():
        if result.label is None or repeat != 1:
            continue
        if kind != "interrogation":
            baselines.setdefault(kind, {})[item] = result.probability_false
            continue
        if result.session is None or result.readings is None:
            continue
        session = store.load(result.session)
        claim = session.claim
        rows.append({"item": item, "label": result.label, "session": session,
                     "readings": dict(result.readings), "p_false": result.probability_false,
                     "samples": list(claim.readings["samples"].values)
                     if claim is not None and "samples" in claim.readings else []})
    if not rows:
        raise SystemExit("no interrogated, labelled claim with readings in that run")
    y = np.array([0 if r["label"] else 1 for r in rows])
    out: dict[str, Any] = {"claims": len(rows), "false": int(y.sum())}
    lines: list[tuple[str, tuple[float, float, float]]] = []

    def row(name: str, p_false: Sequence[float | None]) -> np.ndarray:
        p = np.array([0.5 if v is None else v for v in p_false], dtype=float)
        lines.append((name, figure(y, p)))
        return p

    interrogation = row("interrogation as run (the session's pooled P(false))",
                        [r["p_false"] for r in rows])
    for name in ("alone", "samples", "rounds", "words"):
        if any(name in r["readings"] for r in rows):
            row(f"signal {name} alone", [None if r["readings"].get(name) is None
                                         else 1 - r["readings"][name] for r in rows])
    most = max((len(r["samples"]) for r in rows), default=0)
    for n in range(1, most + 1):
        row(f"samples, the first {n}", [None if not r["samples"][:n] else
                                        1 - float(np.mean(r["samples"][:n])) for r in rows])
    draws = max((len(p.judgement.samples) for r in rows for p in r["session"].qa_pairs
                 if p.judgement is not None), default=1)
    forms = ("mean-disagree", "mean", "min", "share")
    rounds_by: dict[tuple[int, str], list[float | None]] = {}
    for k in range(1, max(1, draws) + 1):
        for form in forms:
            values = [rounds_reading(r["session"], k, form) for r in rows]
            rounds_by[(k, form)] = values
            row(f"rounds, k = {k}, {form}", [None if v is None else 1 - v for v in values])
    if args.clusters:
        values = []
        for r in rows:
            first = next((p for p in r["session"].qa_pairs if not p.testimony
                          and p.judgement is not None), None)
            if first is None:
                values.append(None)
                continue
            answers = [first.answer, *first.samples]
            supports = [v >= LEANS for v in (first.judgement.samples  # type: ignore[union-attr]
                                             or [first.judgement.p_true or 0.5])]  # type: ignore[union-attr]
            values.append(clusters_reading(args.clusters.rstrip("/"), args.model,
                                           r["session"].hypothesis_text, first.question,
                                           answers, supports))
        row("rounds, semantic entropy's clusters (round 1)",
            [None if v is None else 1 - v for v in values])
    # the pool, fitted here, cross-validated
    signals = [s for s in ("alone", "samples", "rounds", "words")
               if any(r["readings"].get(s) is not None for r in rows)]
    fit_rows = [(r["readings"], bool(r["label"])) for r in rows]
    pool = np.array(cross_validated(fit_rows, signals))
    lines.append((f"pool fitted, cross-validated ({'+'.join(signals)})", figure(y, pool)))
    out["pool_ece"] = ece(y, pool)
    for left in signals:
        rest = [s for s in signals if s != left]
        lines.append((f"pool fitted without {left}, cross-validated",
                      figure(y, np.array(cross_validated(fit_rows, rest)))))
    equal = equal_model(signals)
    row("pool, equal weights", [1 - equal.p_true(r["readings"]) for r in rows])
    for kind, found_p in baselines.items():
        p = row(f"baseline {kind}", [found_p.get(r["item"]) for r in rows])
        out[f"pool_minus_{kind}"] = paired(y, pool, p)
        out[f"interrogation_minus_{kind}"] = paired(y, interrogation, p)
    width = max(len(name) for name, _ in lines)
    print(f"{len(rows)} claims, {int(y.sum())} false")
    for name, (value, low, high) in lines:
        print(f"{name:<{width}}  AUROC {value:.3f} [{low:.3f}–{high:.3f}]")
    for key, value in out.items():
        if isinstance(value, tuple):
            print(f"{key}: {value[0]:+.3f} [{value[1]:+.3f}, {value[2]:+.3f}]")
    print(f"pool ECE (cross-validated): {out['pool_ece']:.3f}")
    out["rows"] = {name: list(v) for name, v in lines}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
