"""The response cache on public labelled pairs nobody on this project wrote: how many answers it
would serve wrongly, and how many rewordings it serves.

Each pair goes through `put` (the first text) and `lookup` (the second) in a scope of its own,
as in the suite's own sets (`tests.support.cache_sets`). The files are not shipped (their
licences are the publishers'); point the script at them:

    --mrpc FILE   the Microsoft Research Paraphrase Corpus (`msr_paraphrase_train.txt`,
                  `msr_paraphrase_test.txt`: Quality, #1 ID, #2 ID, #1 String, #2 String);
                  Quality 0 is a pair of different meaning
    --sick FILE   SICK (`SICK_test_annotated.txt`: id, sentence A, sentence B, relatedness,
                  entailment), both directions; NEUTRAL and CONTRADICTION are pairs of
                  different meaning, ENTAILMENT with relatedness ≥ 4.5 a rewording
    --assin FILE  ASSIN (Portuguese: `assin-ptbr-train.xml`, `assin-ptpt-test_gold.xml`…),
                  both directions: `entailment="None"` with similarity ≤ 3 is a pair of
                  different meaning, `Paraphrase` a rewording
    --wikiqa FILE WikiQA (`WikiQA-train.txt`: question, sentence, label): how many of its
                  questions (real search queries) the time filter keeps out of the cache, and
                  which
    --sts FILE    the STS benchmark (`sts-test.csv`: genre, file, year, id, score, sentence 1,
                  sentence 2), both directions: a score ≤ 3 is a pair of different meaning,
                  ≥ 4.5 a rewording (between: neither)

Run: .venv/bin/python bench/cache_public.py --mrpc FILE [--mrpc FILE] [--sick FILE]
     [--sts FILE] [--assin FILE] [--wikiqa FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.cache_sets import Pair, measure  # noqa: E402

SAME = 4.5
"""SICK relatedness from which an entailment counts as a rewording."""


def _both_ways(kind: str, language: str, a: str, b: str, same: bool) -> list[Pair]:
    """A pair of a symmetric set, each text put in once and looked up once."""
    return [Pair(kind, language, a, b, same), Pair(kind, language, b, a, same)]


def mrpc(path: Path) -> list[Pair]:
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines()[1:]:
        cells = line.split("\t")
        if len(cells) >= 5 and cells[0] in ("0", "1"):
            found.append(Pair("mrpc", "en", cells[3], cells[4], cells[0] == "1"))
    return found


def sick(path: Path) -> list[Pair]:
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        cells = line.split("\t")
        if len(cells) < 5 or not cells[0].isdigit():
            continue
        same = cells[4] == "ENTAILMENT" and float(cells[3]) >= SAME
        if cells[4] == "ENTAILMENT" and not same:
            continue  # one way only: neither a rewording nor another meaning
        found += _both_ways(f"sick {cells[4].lower()}", "en", cells[1], cells[2], same)
    return found


DIFFERENT = 3.0
"""STS score up to which two sentences mean different things."""


def sts(path: Path) -> list[Pair]:
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        cells = line.split("\t")
        try:
            score = float(cells[4])
        except (IndexError, ValueError):
            continue
        if len(cells) < 7 or DIFFERENT < score < SAME:
            continue
        found += _both_ways("sts", "en", cells[5], cells[6], score >= SAME)
    return found


def assin(path: Path) -> list[Pair]:
    from defusedxml import ElementTree

    found = []
    for pair in ElementTree.parse(path).getroot().iter("pair"):
        kind, similarity = pair.get("entailment"), float(pair.get("similarity") or 0)
        t, h = pair.findtext("t"), pair.findtext("h")
        if not t or not h or not (kind == "Paraphrase" or
                                  (kind == "None" and similarity <= DIFFERENT)):
            continue
        found += _both_ways("assin", "pt", t.strip(), h.strip(), kind == "Paraphrase")
    return found


def time_filter(paths: list[Path]) -> None:
    from engine.cache.validate import requires_realtime

    questions = sorted({line.split("\t")[0].strip() for path in paths
                        for line in path.read_text(encoding="utf-8").splitlines()
                        if line.strip()})
    fired = [q for q in questions if requires_realtime(q)]
    print(f"WikiQA: the time filter keeps {len(fired)} of {len(questions):,} questions out "
          f"({len(fired) / max(1, len(questions)):.1%}):")
    for question in fired:
        print(f"  {question}")


def report(name: str, items: list[Pair]) -> None:
    outcomes = measure(items)
    other = [o for o in outcomes if not o.pair.served]
    same = [o for o in outcomes if o.pair.served]
    wrong = [o for o in other if o.hit]
    print(f"{name}: {len(items):,} pairs; of {len(other):,} of different meaning, "
          f"{len(wrong)} served (wrong answers); rewordings served {sum(o.hit for o in same)} "
          f"of {len(same):,}")
    for outcome in wrong:
        print(f"  wrong: {outcome.pair.question!r} -> {outcome.pair.candidate!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mrpc", type=Path, action="append", default=[])
    parser.add_argument("--sick", type=Path, action="append", default=[])
    parser.add_argument("--sts", type=Path, action="append", default=[])
    parser.add_argument("--assin", type=Path, action="append", default=[])
    parser.add_argument("--wikiqa", type=Path, action="append", default=[])
    args = parser.parse_args()
    if not (args.mrpc or args.sick or args.sts or args.assin or args.wikiqa):
        parser.error("name at least one file (--mrpc, --sick, --sts, --assin, --wikiqa)")
    if args.mrpc:
        report("MRPC", [p for path in args.mrpc for p in mrpc(path)])
    if args.sick:
        report("SICK (both directions)", [p for path in args.sick for p in sick(path)])
    if args.sts:
        report("STS benchmark (both directions)", [p for path in args.sts for p in sts(path)])
    if args.assin:
        report("ASSIN (both directions)", [p for path in args.assin for p in assin(path)])
    if args.wikiqa:
        time_filter(args.wikiqa)


if __name__ == "__main__":
    main()
