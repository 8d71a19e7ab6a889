"""Readings of a claim that do not rest on the witness repeating itself, each measured alone on
a labelled testimony sample (issue 53): which one a testimony's claims should pool with their
rounds (rule 8 of `engine/interrogation/verdict.py`).

    python bench/claim_readings.py HOME SAMPLE.jsonl [--out readings.jsonl]

HOME's config names the `detective` and `witness` providers (as `make bench-real` writes it).
Each reading is one detective judgement of the claim (P(true) from log-probabilities, as a
round's judgement is read: `engine.evals.baselines.Baselines.verdict`):

- `alone`: the claim with nothing else (`prompts/judgement_direct.md`);
- `topic`: the claim with the open question it answers (what the session knows without the
  testimony);
- `sure-full`: the whole testimony and the witness's reply to "Are you sure?" after it, read
  "based only on the witness's answer" — what a session asks after the split;
- `sure-short`: the same with the testimony cut to its first `answer_max_tokens` tokens
  (what `eval --baselines` measured in `open` mode: it asks the open question again with a
  round's reply cap).

The witness's testimony is the row's (`testimony`, the 1.5B's own answer at temperature 0);
its reply to "Are you sure?" is asked once a row. Written to `--out` (one line a claim, reused
on a rerun), then each reading's AUROC of P(false) with a 95 % bootstrap interval.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.testimony_sessions import auroc  # noqa: E402
from engine import Paths, Workspace  # noqa: E402
from engine.evals.baselines import Baselines, are_you_sure, sure_evidence  # noqa: E402
from engine.interrogation.transcript import witness_opening  # noqa: E402
from engine.models.usage import TokenTally  # noqa: E402
from engine.providers import Message, StreamRequest  # noqa: E402

READINGS = ("alone", "topic", "sure-full", "sure-short")


async def run(home: Path, sample: Path, out: Path) -> None:
    os.environ["DETEKTIV_HOME"] = str(home)
    workspace = Workspace(Paths.from_env())
    done = {(r["id"], r["claim"]) for r in map(json.loads, out.read_text("utf-8").splitlines())
            } if out.is_file() else set()
    try:
        router = await workspace.router()
        settings = workspace.config.interrogation
        judge = Baselines(router, settings, "open", TokenTally())
        for row in map(json.loads, sample.read_text("utf-8").splitlines()):
            claims = [c for c in row["claims"] if c["label"] is not None
                      and (row["id"], c["claim"]) not in done]
            if not claims:
                continue
            system, _ = witness_opening(None)
            testimony = row["testimony"]
            asked = [Message("system", system), Message("user", row["question"]),
                     Message("assistant", testimony), Message("user", are_you_sure())]
            reply = await judge._complete(StreamRequest(
                messages=tuple(asked), max_tokens=settings.answer_max_tokens,
                temperature=settings.temperature), "witness")
            words = testimony.split()
            short = " ".join(words[:int(settings.answer_max_tokens * 0.75)])
            evidence = {
                "alone": ("", "judgement_direct"),
                "topic": (f"The question was: {row['question']}", "judgement_direct"),
                "sure-full": (sure_evidence(row["question"], testimony, reply.text.strip()),
                              "judgement_word"),
                "sure-short": (sure_evidence(row["question"], short, reply.text.strip()),
                               "judgement_word"),
            }
            for claim in claims:
                found: dict[str, float | None] = {}
                for name, (text, ask) in evidence.items():
                    _, p_false = await judge.verdict(claim["claim"], text, ask)  # type: ignore[arg-type]
                    found[name] = p_false
                with out.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps({"id": row["id"], "claim": claim["claim"],
                                             "label": claim["label"], **found,
                                             "reply": reply.text.strip()}) + "\n")
            print(f"{row['id']}: {len(claims)} claims", flush=True)
    finally:
        await workspace.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("sample", type=Path)
    parser.add_argument("--out", type=Path, default=Path("readings.jsonl"))
    args = parser.parse_args()
    asyncio.run(run(args.home, args.sample, args.out))
    rows = [json.loads(line) for line in args.out.read_text("utf-8").splitlines()]
    y = [0 if r["label"] else 1 for r in rows]
    print(f"{len(rows)} claims, {sum(y)} false")
    for name in READINGS:
        found = auroc(y, [0.5 if r[name] is None else r[name] for r in rows])
        if found is not None:
            print(f"  {name:10} AUROC {found[0]:.3f} [{found[1]:.3f}–{found[2]:.3f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
