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
  round's reply cap);
- `sampled`: SelfCheckGPT's signal (Manakul et al. 2023, the prompt variant) — the open
  question answered again `--samples` times at `consistency_temperature`, told nothing, each
  answer read against the claim as a round's answer is (`prompts/judgement_exchange.md`,
  "based only on the witness's answer"); P(false) the mean of the samples' (a fact the
  witness made up varies between samples; one it knows comes back). Each sample's P(false)
  is kept (`sampled_each`) so that fewer samples can be measured from the same run;
- `sampled-round` (with `--run RUN`, the evaluation run of the same sample in HOME): the
  consistency protocol's samples drawn whatever the protocol — the claim's first key-fact
  question, from the run's session, answered again `--samples` times at
  `consistency_temperature` with a round's reply cap, each read against the claim.

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
from engine.interrogation.judgement import exchange  # noqa: E402
from engine.interrogation.transcript import witness_opening  # noqa: E402
from engine.models.usage import TokenTally  # noqa: E402
from engine.providers import Message, StreamRequest  # noqa: E402

READINGS = ("alone", "topic", "sure-full", "sure-short", "sampled", "sampled-round")


def first_questions(home: Path, run: str) -> dict[str, str]:
    """Each claim's first key-fact question in evaluation run `run` (its interrogation's
    session), by claim."""
    folder = next(f for f in (home / "data" / "evals").iterdir() if f.name.startswith(run))
    sessions = {p.name[-8:]: p for p in (home / "data" / "sessions").iterdir()}
    found: dict[str, str] = {}
    for line in (folder / "results.jsonl").read_text("utf-8").splitlines():
        row = json.loads(line)
        if row["kind"] != "interrogation" or not row.get("session"):
            continue
        session = sessions.get(str(row["session"])[:8])
        if session is None:
            continue
        pairs = json.loads((session / "metadata.json").read_text("utf-8"))["qa_pairs"]
        asked = [p for p in pairs if not p.get("testimony")]
        if asked:
            found[row["claim"]] = asked[0]["question"]
    return found


async def run(home: Path, sample: Path, out: Path, samples: int, run_id: str | None) -> None:
    os.environ["DETEKTIV_HOME"] = str(home)
    workspace = Workspace(Paths.from_env())
    kept = {(r["id"], r["claim"]): r for r in map(json.loads, out.read_text(
        "utf-8").splitlines())} if out.is_file() else {}
    questions = first_questions(home, run_id) if run_id else {}
    try:
        router = await workspace.router()
        settings = workspace.config.interrogation
        judge = Baselines(router, settings, "open", TokenTally())
        system, _ = witness_opening(None)
        hot = settings.consistency_temperature

        async def answer(question: str, cap: int, temperature: float) -> str:
            reply = await judge._complete(StreamRequest(
                messages=(Message("system", system), Message("user", question)),
                max_tokens=cap, temperature=temperature), "witness")
            return reply.text.strip()

        async def each(claim: str, question: str, answers: list[str]) -> list[float | None]:
            return [(await judge.verdict(claim, exchange(question, a), "judgement_word"))[1]
                    for a in answers]

        for row in map(json.loads, sample.read_text("utf-8").splitlines()):
            claims = [c for c in row["claims"] if c["label"] is not None]
            rows = {c["claim"]: kept.get((row["id"], c["claim"]), {
                "id": row["id"], "claim": c["claim"], "label": c["label"]}) for c in claims}
            testimony = row["testimony"]
            if any("alone" not in r for r in rows.values()):
                asked = [Message("system", system), Message("user", row["question"]),
                         Message("assistant", testimony), Message("user", are_you_sure())]
                reply = (await judge._complete(StreamRequest(
                    messages=tuple(asked), max_tokens=settings.answer_max_tokens,
                    temperature=settings.temperature), "witness")).text.strip()
                words = testimony.split()
                short = " ".join(words[:int(settings.answer_max_tokens * 0.75)])
                evidence = {
                    "alone": ("", "judgement_direct"),
                    "topic": (f"The question was: {row['question']}", "judgement_direct"),
                    "sure-full": (sure_evidence(row["question"], testimony, reply),
                                  "judgement_word"),
                    "sure-short": (sure_evidence(row["question"], short, reply),
                                   "judgement_word"),
                }
                for found in rows.values():
                    if "alone" in found:
                        continue
                    for name, (text, ask) in evidence.items():
                        found[name] = (await judge.verdict(found["claim"], text, ask))[1]
                    found["reply"] = reply
            if any("sampled" not in r for r in rows.values()):
                drawn = [await answer(row["question"], settings.testimony_max_tokens, hot)
                         for _ in range(samples)]
                for found in rows.values():
                    each_p = await each(found["claim"], row["question"], drawn)
                    found["sampled_each"] = each_p
                    found["sampled"] = mean_of(each_p)
                rows[next(iter(rows))]["samples"] = drawn
            for found in rows.values():
                question = questions.get(found["claim"])
                if question is None or "sampled-round" in found:
                    continue
                drawn = [await answer(question, settings.claim_answer_max_tokens, hot)
                         for _ in range(samples)]
                each_p = await each(found["claim"], question, drawn)
                found.update({"round_question": question, "round_samples": drawn,
                              "sampled_round_each": each_p, "sampled-round": mean_of(each_p)})
            kept.update({(row["id"], c): r for c, r in rows.items()})
            out.write_text("".join(json.dumps(r) + "\n" for r in kept.values()), "utf-8")
            print(f"{row['id']}: {len(claims)} claims", flush=True)
    finally:
        await workspace.aclose()


def mean_of(values: list[float | None]) -> float | None:
    """The mean of the readings there are (None when none)."""
    there = [v for v in values if v is not None]
    return sum(there) / len(there) if there else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("sample", type=Path)
    parser.add_argument("--out", type=Path, default=Path("readings.jsonl"))
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--run", help="the evaluation run of SAMPLE in HOME (sampled-round)")
    args = parser.parse_args()
    asyncio.run(run(args.home, args.sample, args.out, args.samples, args.run))
    rows = [json.loads(line) for line in args.out.read_text("utf-8").splitlines()]
    y = [0 if r["label"] else 1 for r in rows]
    print(f"{len(rows)} claims, {sum(y)} false")
    for name in READINGS:
        if not all(name in r for r in rows):
            continue
        found = auroc(y, [0.5 if r[name] is None else r[name] for r in rows])
        if found is not None:
            print(f"  {name:10} AUROC {found[0]:.3f} [{found[1]:.3f}–{found[2]:.3f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
