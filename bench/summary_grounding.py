"""Grounding by words, measured on HaluEval summaries (issue 53; docs/benchmarks.md, "Tried on
2026-11-28"): how well the content words a summary's sentence has that its document nowhere
has tell a hallucinated summary from a right one. No model is called.

    python bench/summary_grounding.py SAMPLE.jsonl [--at 3]

SAMPLE is a `make bench-real` summaries sample (`WORK/samples/summaries-{test,dev}-N.jsonl`:
rows of `document`, `right_summary`, `hallucinated_summary`). A summary's score is the largest
count, over its sentences (`claims.segments`), of content words no word of the document
matches (`claims._known`: stems, endings aside). Printed: the score's AUROC (a hallucinated
summary the positive class) with a 95 % bootstrap interval, and the accuracy of "false when
some sentence has `--at` or more such words" for each threshold from 1 to 5.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.testimony_sessions import auroc  # noqa: E402
from engine.interrogation.claims import _known, content_words, segments  # noqa: E402


def ungrounded(text: str, document: str) -> int:
    """The most content words one sentence of `text` has that `document` nowhere has."""
    known = set(content_words(document))
    counts = [len({w for w in content_words(text[part.start:part.end])
                   if not _known(w, known)}) for part in segments(text)]
    return max(counts, default=0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sample", type=Path)
    parser.add_argument("--at", type=int, default=3, help="the threshold marked in the table")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.sample.read_text("utf-8").splitlines()
            if line.strip()]
    labels: list[int] = []
    scores: list[int] = []
    for row in rows:
        for false, key in ((0, "right_summary"), (1, "hallucinated_summary")):
            labels.append(false)
            scores.append(ungrounded(row[key], row["document"]))
    found = auroc(labels, [float(s) for s in scores])
    print(f"{len(labels)} summaries ({sum(labels)} hallucinated)")
    if found is not None:
        print(f"AUROC {found[0]:.3f} [{found[1]:.3f}–{found[2]:.3f}]")
    for at in range(1, 6):
        right = sum((score >= at) == bool(label)
                    for score, label in zip(scores, labels, strict=True))
        mark = "  <- --at" if at == args.at else ""
        print(f"false at {at}+ words: accuracy {right / len(labels):.3f}{mark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
