"""What each call of a round costs, read from stored sessions: the question, the answer, the
judgement and the gap analysis, in prompt and reply tokens (issue 44: on a small model the
gap analysis must not cost more than the answer).

    python bench/round_costs.py ~/.cache/detektiv-bench/home-test-1.5b

The prompt tokens are the fitted counts each call recorded (`context_fits`, in call order:
within a round the detective's calls are its question(s), then its judgement(s), then its
analysis; the witness's is the answer). Reply tokens are estimated at four characters a
token from the stored texts (the question, the answer, the analysis as JSON, the judgement's
one word), as the session's own estimate does.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

CALLS = ("question", "answer", "judgement", "analysis")


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


def measure(home: Path) -> dict[str, list[int]]:
    """Per call kind, the total tokens (prompt + reply) of every round in `home`."""
    costs: dict[str, list[int]] = defaultdict(list)
    for meta in sorted((home / "data" / "sessions").glob("*/metadata.json")):
        session = json.loads(meta.read_text(encoding="utf-8"))
        fits: dict[tuple[str, int], list[int]] = defaultdict(list)
        for fit in session.get("context_fits", []):
            if fit.get("sequence") is not None:
                fits[(fit["role"], fit["sequence"])].append(fit["used"])
        for pair in session.get("qa_pairs", []):
            n = pair["sequence"]
            detective = fits.get(("detective", n), [])
            judged = pair.get("judgement") or {}
            judgements = len(judged.get("samples") or []) or (
                1 if judged.get("source") not in (None, "none") else 0)
            if len(detective) < 2 + judgements:
                continue  # a round resumed or cut short: its calls are not all there
            analysis, judging = detective[-1], detective[-1 - judgements:-1]
            asking = detective[:len(detective) - 1 - judgements]
            costs["question"].append(sum(asking) + _tokens(pair["question"]) * len(asking))
            costs["answer"].append(sum(fits.get(("witness", n), [0])) + _tokens(pair["answer"]))
            costs["judgement"].append(sum(judging) + len(judging))
            costs["analysis"].append(analysis + _tokens(json.dumps(pair["gap_analysis"])))
    return costs


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    costs = measure(Path(sys.argv[1]).expanduser())
    rounds = len(costs["answer"])
    if not rounds:
        print("no complete rounds found")
        return 1
    print(f"{rounds} rounds")
    print(f"{'call':<10} {'tokens a round':>15}")
    for kind in CALLS:
        values = costs[kind]
        print(f"{kind:<10} {sum(values) / len(values):>15.0f}")
    ratio = sum(costs["analysis"]) / max(1, sum(costs["answer"]))
    print(f"gap analysis / answer: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
