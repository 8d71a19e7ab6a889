"""Grounding by words, measured on HaluEval summaries (issue 53; `verdict`'s rule 9,
docs/benchmarks.md): how well the words a summary's sentence has that its document nowhere
has tell a hallucinated summary from a right one. No model is called.

    python bench/summary_grounding.py SAMPLE.jsonl [--at 3]
    python bench/summary_grounding.py --dev-rows 1500 [--work DIR] [--at 3]

SAMPLE is a `make bench-real` summaries sample (`WORK/samples/summaries-{test,dev}-N.jsonl`:
rows of `document`, `right_summary`, `hallucinated_summary`); `--dev-rows N` reads the last N
rows of `make bench-real`'s shuffle of the whole file instead (`WORK/halueval_summarization.
jsonl`: the development end, never the test sample's first rows) — what rule 9 was chosen
on. A summary's score is the largest count, over its sentences (`claims.segments`), of the
words rule 9 counts (`claims.unfound`: five letters or more, and numbers, that no word of the
document matches, endings aside). Printed: the score's AUROC (a hallucinated summary the
positive class) with a 95 % bootstrap interval, the accuracy of "false when some sentence
has `--at` or more such words" for each threshold from 1 to 5, and per count the share of
sentences that stood in hallucinated summaries (rule 9's P(false)).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.real_model import DEFAULT_WORK, SAMPLE_SEEDS  # noqa: E402
from bench.testimony_sessions import auroc  # noqa: E402
from engine.interrogation.claims import segments, unfound  # noqa: E402


def counts(text: str, document: str) -> list[int]:
    """How many words rule 9 counts in each sentence of `text` against `document`."""
    return [len(unfound(text[part.start:part.end], document)) for part in segments(text)]


def dev_rows(path: Path, rows: int) -> list[dict[str, str]]:
    """The last `rows` rows of `make bench-real`'s shuffle of the HaluEval file at `path`."""
    with path.open(encoding="utf-8") as handle:
        every = [json.loads(line) for line in handle if line.strip()]
    order = list(range(len(every)))
    random.Random(SAMPLE_SEEDS["test"]).shuffle(order)
    return [every[i] for i in order[len(order) - rows:]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sample", type=Path, nargs="?")
    parser.add_argument("--dev-rows", type=int, default=0,
                        help="the last N rows of the shuffled file instead of a sample")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help="where `make bench-real` keeps halueval_summarization.jsonl")
    parser.add_argument("--at", type=int, default=3, help="the threshold marked in the table")
    args = parser.parse_args()
    if args.dev_rows:
        rows = dev_rows(args.work / "halueval_summarization.jsonl", args.dev_rows)
    elif args.sample is not None:
        rows = [json.loads(line) for line in args.sample.read_text("utf-8").splitlines()
                if line.strip()]
    else:
        parser.error("give a SAMPLE or --dev-rows N")
    labels: list[int] = []
    scores: list[int] = []
    sentences: Counter[tuple[int, int]] = Counter()
    for row in rows:
        for false, key in ((0, "right_summary"), (1, "hallucinated_summary")):
            found = counts(row[key], row["document"])
            labels.append(false)
            scores.append(max(found, default=0))
            sentences.update((false, min(n, 4)) for n in found)
    result = auroc(labels, [float(s) for s in scores])
    print(f"{len(labels)} summaries ({sum(labels)} hallucinated)")
    if result is not None:
        print(f"AUROC {result[0]:.3f} [{result[1]:.3f}–{result[2]:.3f}]")
    for at in range(1, 6):
        right = sum((score >= at) == bool(label)
                    for score, label in zip(scores, labels, strict=True))
        mark = "  <- --at" if at == args.at else ""
        print(f"false at {at}+ words: accuracy {right / len(labels):.3f}{mark}")
    for n in range(5):
        right, wrong = sentences[(0, n)], sentences[(1, n)]
        share = wrong / (right + wrong) if right + wrong else float("nan")
        print(f"sentences with {n}{'+' if n == 4 else ''} such words: {right + wrong}, "
              f"{share:.2f} in hallucinated summaries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
