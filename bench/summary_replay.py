"""A summaries run's verdicts computed again from its stored sessions with today's rules (issue
53; `verdict`'s rules 9 and 10, docs/benchmarks.md). No model is called: each claim's rounds
(their judgements, as stored) and its words the document lacks are read again, so what it
prints is what a session with those rounds now computes.

    python bench/summary_replay.py HOME SAMPLE [HOME SAMPLE …] [--cuts 0.6,0.7,0.75]

HOME is a `make bench-real` detektiv home (`WORK/home-{test,dev}-1.5b`) whose evaluations ran
SAMPLE (`WORK/samples/summaries-{test,dev}-N.jsonl`: rows of `document`, `right_summary`,
`hallucinated_summary`); several pairs are read as one sample. Printed, for the summaries as
stored and as the rules now compute them (at each of `--cuts`, rule 10's `FAITHLESS_AT`):
accuracy (an undetermined summary is never right), AUROC of the testimony's P(false) with a
95 % bootstrap interval, the undetermined, and the right summaries called true.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.testimony_sessions import auroc  # noqa: E402
from engine.interrogation import verdict  # noqa: E402
from engine.interrogation.claims import unfound  # noqa: E402
from engine.models.judgement import Judgement  # noqa: E402
from engine.models.testimony import Claim  # noqa: E402

Summary = tuple[bool, list[Claim], str, list[dict], verdict.Computed]
"""Whether it is the right summary, its claims as stored, its document, its rounds, and its
verdict as stored (what a summary with no claims keeps: nothing to compute again)."""


def read(home: Path, sample: Path) -> list[Summary]:
    """The summaries of `sample` that `home`'s evaluations completed, each once."""
    documents: dict[str, str] = {}
    for line in sample.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for key in ("right_summary", "hallucinated_summary"):
            documents[row[key].strip()] = row["document"]
    sessions = {path.name.rsplit("_", 1)[-1]: path
                for path in (home / "data" / "sessions").iterdir()}
    found: dict[str, Summary] = {}
    for results in sorted((home / "data" / "evals").glob("*/results.jsonl")):
        for line in results.read_text(encoding="utf-8").splitlines():
            result = json.loads(line)
            text = result["claim"].strip()
            if result["kind"] != "interrogation" or result["status"] != "completed" or \
                    text in found or text not in documents:
                continue
            folder = sessions.get((result.get("session") or "")[:8])
            stored = json.loads((folder / "metadata.json").read_text()) if folder else {}
            claims = [Claim(**c) for c in (stored.get("testimony") or {}).get("claims", [])]
            found[text] = (bool(result["label"]), claims, documents[text],
                           stored.get("qa_pairs", []), verdict.Computed(
                               result["verdict"], result.get("probability_false") or 0.5))
    return list(found.values())


def again(claim: Claim, document: str, pairs: list[dict]) -> Claim:
    """`claim` as the rules now compute it from its stored rounds."""
    if not claim.examined:
        return claim
    words = len(unfound(claim.text, document))
    rule9 = verdict.unfound_p_false(words)
    if rule9 is not None:  # never questioned now
        return claim.model_copy(update={"state": "unsupported", "probability_false": rule9})
    rounds = [(p["sequence"], Judgement(**p["judgement"]) if p.get("judgement") else None)
              for p in pairs if p.get("claim") == claim.number]
    state, p_false = verdict.claim_state(
        verdict.with_words(verdict.compute(rounds), words), document=True)
    return claim.model_copy(update={"state": state, "probability_false": p_false})


def figures(summaries: list[Summary], now: bool) -> str:
    truth, scores, right, undetermined, held = [], [], 0, 0, 0
    for is_right, claims, document, pairs, stored in summaries:
        result = stored if not claims else verdict.testimony_verdict(
            [again(c, document, pairs) for c in claims] if now else claims)
        truth.append(0 if is_right else 1)
        scores.append(result.probability_false)
        right += result.verdict == ("true" if is_right else "false")
        undetermined += result.verdict == "undetermined"
        held += is_right and result.verdict == "true"
    ranked = auroc(truth, scores)
    ranking = f"{ranked[0]:.3f} [{ranked[1]:.3f}–{ranked[2]:.3f}]" if ranked else "—"
    return (f"accuracy {right / len(truth):.3f} ({right}/{len(truth)}), AUROC {ranking}, "
            f"undetermined {undetermined}, right summaries true {held}/{len(truth) - sum(truth)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", nargs="+", type=Path, help="HOME SAMPLE [HOME SAMPLE …]")
    parser.add_argument("--cuts", default=str(verdict.FAITHLESS_AT),
                        help="rule 10's cuts to compute at, comma-separated")
    args = parser.parse_args()
    if len(args.pairs) % 2:
        parser.error("give HOME SAMPLE pairs")
    summaries = [s for home, sample in zip(args.pairs[::2], args.pairs[1::2], strict=True)
                 for s in read(home, sample)]
    print(f"{len(summaries)} summaries")
    print(f"as stored:       {figures(summaries, now=False)}")
    for cut in (float(c) for c in args.cuts.split(",")):
        verdict.FAITHLESS_AT = cut  # read by with_words at each call
        print(f"now, cut {cut:.2f}: {figures(summaries, now=True)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
