"""A testimony's claims judged as the product judges them (issue 53): each open question of a
labelled testimony sample (`bench/data/testimony-{dev,test}.jsonl`) run as a `detektiv run`
session — the witness answers, the detective splits, each claim is examined in its rounds,
the detective alone (told the question) is read beside it, the verdict pooled by rule 8 —
then the session's claims matched to the labelled ones and measured.

    python bench/testimony_sessions.py HOME SAMPLE.jsonl [--limit 5]

HOME is a detektiv home whose config names the `detective` and `witness` providers (what
`make bench-real` writes); sessions already run there for a question are reused (a rerun only
runs the missing ones). A session's claim is matched to the labelled claim of its row whose
words are closest (rapidfuzz's token-set ratio ≥ 90; the split at temperature 0 mostly
writes the very claims the sample was made of), unmatched ones are counted and left out.

Prints, per claim matched: the AUROC of P(false) (95 % bootstrap interval) for the session's
pooled verdict and for each signal alone — its rounds, the detective alone (told the
question) — and the accuracy of the states (held = true, contradicted = false, unsure = abstention);
per testimony: the seconds and tokens a testimony and a claim took.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from rapidfuzz import fuzz
from sklearn.metrics import roc_auc_score

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.interrogation.verdict import compute  # noqa: E402
from engine.models.session import InterrogationSession  # noqa: E402

MATCH = 90.0


def auroc(y: list[int], p: list[float], resamples: int = 2000
          ) -> tuple[float, float, float] | None:
    if len(set(y)) < 2:
        return None
    value = float(roc_auc_score(y, p))
    rng = random.Random(0)
    draws = []
    for _ in range(resamples):
        idx = [rng.randrange(len(y)) for _ in y]
        ys = [y[i] for i in idx]
        if len(set(ys)) > 1:
            draws.append(float(roc_auc_score(ys, [p[i] for i in idx])))
    draws.sort()
    return value, draws[int(0.025 * len(draws))], draws[int(0.975 * len(draws)) - 1]


def sessions_by_question(home: Path) -> dict[str, InterrogationSession]:
    found: dict[str, InterrogationSession] = {}
    root = home / "data" / "sessions"
    for meta in sorted(root.glob("*/metadata.json")) if root.is_dir() else []:
        try:
            session = InterrogationSession.model_validate_json(meta.read_text("utf-8"))
        except ValueError:
            continue
        if session.status == "completed" and session.testimony is not None:
            found[session.hypothesis_text.strip()] = session
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("sample", type=Path)
    parser.add_argument("--limit", type=int, default=5)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.sample.read_text("utf-8").splitlines()
            if line.strip()]
    env = {**os.environ, "DETEKTIV_HOME": str(args.home)}
    for row in rows:
        question = row["question"].strip()
        if question in sessions_by_question(args.home):
            continue
        began = time.monotonic()
        subprocess.run([str(Path(sys.executable).parent / "detektiv"), "run", question, "--limit",
                        str(args.limit), "--detective", "detective", "--witness", "witness"],
                       env=env, cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
        print(f"{row['id']}: {time.monotonic() - began:.0f} s", flush=True)
    sessions = sessions_by_question(args.home)
    y: list[int] = []
    signals: dict[str, list[float]] = {k: [] for k in ("pooled (rule 8)", "rounds", "alone",
                                                       "samples")}
    right = abstained = unmatched = examined = 0
    seconds: list[float] = []
    tokens: list[int] = []
    claims_run: list[int] = []
    for row in rows:
        session = sessions.get(row["question"].strip())
        if session is None or session.testimony is None:
            print(f"{row['id']}: no completed session")
            continue
        labelled = [(c["claim"], c["label"]) for c in row["claims"] if c["label"] is not None]
        if session.end_time is not None:
            seconds.append((session.end_time - session.start_time).total_seconds())
        tokens.append(session.tokens.total)
        run = [c for c in session.testimony.claims if c.examined]
        claims_run.append(len(run))
        for claim in run:
            best = max(labelled, key=lambda lc: fuzz.token_set_ratio(claim.text, lc[0]),
                       default=None)
            if best is None or fuzz.token_set_ratio(claim.text, best[0]) < MATCH:
                unmatched += 1
                continue
            examined += 1
            false = 0 if best[1] else 1
            y.append(false)
            rounds = [(p.sequence, p.judgement) for p in session.qa_pairs
                      if p.claim == claim.number]
            signals["pooled (rule 8)"].append(claim.probability_false or 0.5)
            signals["rounds"].append(compute(rounds).probability_false)
            signals["alone"].append(0.5 if claim.direct_p_true is None
                                    else 1 - claim.direct_p_true)
            signals["samples"].append(0.5 if claim.sampled_p_true is None
                                      else 1 - claim.sampled_p_true)
            if claim.state == "unsure":
                abstained += 1
            elif (claim.state == "contradicted") == bool(false):
                right += 1
    print(f"\n{len(sessions)} testimonies; {examined} claims matched to a label "
          f"({sum(y)} false), {unmatched} examined claims unmatched")
    for name, values in signals.items():
        found = auroc(y, values)
        if found is not None:
            print(f"  {name:18} AUROC {found[0]:.3f} [{found[1]:.3f}–{found[2]:.3f}]")
    if y:
        print(f"  states: accuracy {right / len(y):.3f} ({right}/{len(y)}), "
              f"unsure {abstained}")
    if seconds:
        per_claim = sum(tokens) / max(1, sum(claims_run))
        print(f"  a testimony: {sum(seconds) / len(seconds):.0f} s, "
              f"{sum(tokens) / len(tokens):,.0f} tokens; a claim examined: "
              f"{per_claim:,.0f} tokens all told "
              f"({sum(claims_run) / len(claims_run):.1f} claims a testimony)")
    return 0 if not math.isnan(sum(signals["pooled (rule 8)"])) else 1


if __name__ == "__main__":
    raise SystemExit(main())
