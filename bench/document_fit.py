"""The document pool fitted on development summaries (issue 72, part 5, `--mode document`):
each summary's claims settled again from their stored readings and rounds under a candidate
pool — no model called — and the summary's verdict computed as a session computes it.

    python bench/document_fit.py HOME RUN [--fit] [--pool FILE]

HOME is a `make bench-real` home, RUN one of its summaries evaluations (HaluEval
summarization, `--mode document`: each summary a testimony, the witness holding the
document). Every claim of every summary is settled again (`examine.settle`, the document
mode) and the summary's verdict computed (`verdict.testimony_verdict`): printed beside the
run's own, accuracy (an undetermined summary is never right), AUROC of the summary's P(false),
ECE, the undetermined, with 95 % bootstrap intervals.

HaluEval labels summaries, not claims: a right summary's claims are all true, a hallucinated
one's mostly true too, one or two not in the document. So the pool (P(true) = σ(b + w_words ·
x_words + w_rounds · x_rounds), and the words alone σ(b + w_words · x_words) for a claim no
round bore on) is fitted to the summaries: `--fit` searches a grid of (b, w_words, w_rounds)
for the one whose summaries' verdicts, computed by the shipped rule, have the most right
(ties: the higher AUROC, then the smaller move from equal weights), cross-validated by
5 folds of summaries (each fold's verdicts under the pool chosen on the others), and writes
it as `pooling.json`'s `document` entry to `--out`. Development runs only, as prompts are
tuned: `--pool FILE` then reads a test run with that file, unchanged.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.evals.folder import RunFolder  # noqa: E402
from engine.evals.metrics import measure  # noqa: E402
from engine.evals.summary import coded  # noqa: E402
from engine.interrogation.examine import claim_pairs, settle  # noqa: E402
from engine.interrogation.pooling import (  # noqa: E402
    Fitted,
    Model,
    Pooling,
    load_pooling,
    shipped_pooling,
)
from engine.interrogation.verdict import testimony_verdict  # noqa: E402
from engine.models.session import InterrogationSession  # noqa: E402
from engine.storage.sessions import SessionStore  # noqa: E402

SIGNALS = ("words", "rounds")
INTERCEPTS = [-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0]
WORDS = [0.25, 0.5, 1.0, 1.5, 2.0, 3.0]
ROUNDS = [0.0, 0.25, 0.5, 1.0, 1.5]


@dataclass(frozen=True)
class Summary:
    label: bool
    session: InterrogationSession
    verdict: str
    p_false: float | None


def read(home: Path, run: str) -> list[Summary]:
    folder = RunFolder(home / "data" / "evals" / run)
    store = SessionStore(home / "data" / "sessions")
    found = []
    for (_, kind, repeat), result in sorted(folder.latest().items()):
        if kind != "interrogation" or repeat != 1 or result.label is None:
            continue
        if result.session is None or result.verdict is None:
            continue
        found.append(Summary(result.label, store.load(result.session), result.verdict,
                             result.probability_false))
    return found


def pool_of(b: float, words: float, rounds: float) -> Pooling:
    full = Model(SIGNALS, b, {"words": words, "rounds": rounds})
    subsets = {"words": Model(("words",), b, {"words": words}),
               "rounds": Model(("rounds",), b, {"rounds": rounds})}
    return Pooling({**shipped_pooling().models, "document": Fitted(full, subsets)}, "bench")


def settled(summary: Summary, pool: Pooling) -> tuple[str, float]:
    """The summary's verdict and P(false) with its claims settled again under `pool`."""
    session = summary.session
    testimony = session.testimony
    if testimony is None or not testimony.claims:
        return summary.verdict, summary.p_false if summary.p_false is not None else 0.5
    claims = []
    for claim in testimony.claims:
        if claim.state in ("not checkable", "not examined") or not claim.readings:
            claims.append(claim)
            continue
        claims.append(settle(claim.model_copy(update={"state": "pending"}),
                             claim_pairs(session.qa_pairs, claim, False), pool, "document",
                             list(claim.readings)))
    computed = testimony_verdict(claims)
    return computed.verdict, computed.probability_false


def figures(summaries: list[Summary], verdicts: list[tuple[str, float]]) -> dict[str, str]:
    rows = [coded(s.label, v, p) for s, (v, p) in zip(summaries, verdicts, strict=True)]
    y, pred, p = (np.asarray(column) for column in zip(*rows, strict=True))
    zeros = np.zeros(len(y))
    f = measure(y, pred, p, zeros, zeros).figures
    undetermined = sum(v == "undetermined" for v, _ in verdicts)
    return {"accuracy": f["accuracy"].text(), "auroc": f["auroc"].text(),
            "ece": f["ece"].text(), "undetermined": f"{undetermined}/{len(verdicts)}",
            "right": str(sum((v == "true") == s.label and v != "undetermined"
                             for s, (v, _) in zip(summaries, verdicts, strict=True)))}


def score(summaries: list[Summary], pool: Pooling) -> tuple[int, float]:
    """(right verdicts, AUROC of P(false)) of `summaries` under `pool`."""
    verdicts = [settled(s, pool) for s in summaries]
    right = sum((v == "true") == s.label and v != "undetermined"
                for s, (v, _) in zip(summaries, verdicts, strict=True))
    from sklearn.metrics import roc_auc_score
    labels = [0 if s.label else 1 for s in summaries]
    auc = float(roc_auc_score(labels, [p for _, p in verdicts])) if len(set(labels)) > 1 \
        else 0.5
    return right, auc


def best(summaries: list[Summary]) -> tuple[float, float, float]:
    ranked = []
    for b, w, r in itertools.product(INTERCEPTS, WORDS, ROUNDS):
        right, auc = score(summaries, pool_of(b, w, r))
        ranked.append((right, auc, -(abs(b) + abs(w - 0.5) + abs(r - 0.5)), (b, w, r)))
    return max(ranked)[3]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("run")
    parser.add_argument("--fit", action="store_true")
    parser.add_argument("--pool", type=Path, help="a pooling file to read the run with")
    parser.add_argument("--out", type=Path, default=Path("pooling.json"))
    args = parser.parse_args()
    summaries = read(args.home, args.run)
    print(f"{len(summaries)} summaries ({sum(not s.label for s in summaries)} hallucinated)")
    shown = {"as run": [(s.verdict, s.p_false if s.p_false is not None else 0.5)
                        for s in summaries],
             "settled again, shipped pool": [settled(s, shipped_pooling())
                                             for s in summaries]}
    if args.pool is not None:
        pool, refused = load_pooling(args.pool)
        if refused is not None:
            raise SystemExit(refused.message)
        shown[f"settled again, {args.pool}"] = [settled(s, pool) for s in summaries]
    if args.fit:
        b, w, r = best(summaries)
        shown[f"fitted here (b {b}, words {w}, rounds {r}): in-sample"] = [
            settled(s, pool_of(b, w, r)) for s in summaries]
        folds: dict[int, list[int]] = {k: [] for k in range(5)}
        order = list(range(len(summaries)))
        random.Random(0).shuffle(order)
        for n, i in enumerate(order):
            folds[n % 5].append(i)
        crossed: list[tuple[str, float] | None] = [None] * len(summaries)
        for held in folds.values():
            train = [summaries[i] for i in range(len(summaries)) if i not in held]
            pool = pool_of(*best(train))
            for i in held:
                crossed[i] = settled(summaries[i], pool)
        shown["fitted, cross-validated (5 folds)"] = [c for c in crossed if c is not None]
        full = Model(SIGNALS, b, {"words": w, "rounds": r})
        entry = {"model": full.to_json(), "subsets": {
            "words": Model(("words",), b, {"words": w}).to_json(),
            "rounds": Model(("rounds",), b, {"rounds": r}).to_json()}}
        args.out.write_text(json.dumps(entry, indent=1) + "\n", encoding="utf-8")
        print(f"wrote the document pool to {args.out}")
    for name, verdicts in shown.items():
        f = figures(summaries, verdicts)
        print(f"{name:<58} accuracy {f['accuracy']}  AUROC {f['auroc']}  ECE {f['ece']}  "
              f"undetermined {f['undetermined']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
