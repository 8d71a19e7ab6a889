"""A testimony's time against one claim's, the same server, one run (issue 53's goal: a
testimony of 8 claims in at most 3× the time of one simple claim, ≤ 1,500 tokens a claim).

    python bench/testimony_time.py [--repeat 2] [--threads 2] [--parallel 4] [--baseline REV]

One `detektiv local-server` (the real 1.5B, `make bench-real`'s file) serves both roles; on
it, one after the other and repeated in turn: a simple claim ("The Berlin Wall fell in
1989."), the issue's request ("Summarize the health benefits of Vitamin B3": the witness
gives the testimony, the detective splits it, each claim is examined) and a pasted testimony
of eight facts (the split and the claims only). Each is a `detektiv run` with the product's
defaults (temperature 0 so runs compare). Printed per kind: the median seconds, tokens, claims
examined, tokens a claim, the time until the testimony was given, and the ratio of its
seconds to the simple claim's of the same round. `--baseline REV` runs the same with the code
of commit REV (a git worktree) on the same server, the two taking turns round by round.
`--speculation off,auto` serves the model once per setting (`local-server --speculation`)
and runs every kind on each, in turns, with each run's verdict printed (the same with and
without speculation?). Minutes of CPU; never in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.models.session import InterrogationSession  # noqa: E402
from tests.support.servers import local_server  # noqa: E402

MODEL = Path.home() / ".cache/detektiv-bench/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
CLAIM = "The Berlin Wall fell in 1989."
REQUEST = "Summarize the health benefits of Vitamin B3"
PASTED = ("Vitamin B3 is also called niacin. Niacin helps the body turn food into energy. "
          "Pellagra is caused by a lack of niacin. Niacin can raise HDL cholesterol. "
          "Tryptophan can be converted into niacin in the liver. Large doses of niacin can "
          "cause skin flushing. Meat and fish are good sources of niacin. Niacin is a "
          "water-soluble vitamin.")
KINDS = {"claim": CLAIM, "request": REQUEST, "pasted": PASTED}


def config(url: str, claim_concurrency: int | None) -> str:
    chosen = "" if claim_concurrency is None else f"claim_concurrency = {claim_concurrency}\n"
    return (f'[providers.box]\nkind = "openai"\nmodel = "qwen"\nbase_url = "{url}"\n'
            "priority = 1\ntimeout = 360\nstall_timeout = 180\n\n"
            f"[interrogation]\ntemperature = 0\n{chosen}")


def run_one(code: Path, home: Path, hypothesis: str) -> InterrogationSession:
    """`detektiv run HYPOTHESIS` with the code at `code`; its stored session."""
    before = set((home / "data" / "sessions").glob("*/metadata.json"))
    done = subprocess.run([sys.executable, "-m", "tui", "run", hypothesis, "--detective", "box",
                    "--witness", "box"], cwd=code, env={**os.environ, "DETEKTIV_HOME": str(home)},
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, text=True,
                   timeout=3600)
    after = set((home / "data" / "sessions").glob("*/metadata.json")) - before
    if len(after) != 1:
        raise SystemExit(f"{hypothesis!r}: {len(after)} new sessions; {done.stderr[-2000:]}")
    return InterrogationSession.model_validate_json(after.pop().read_text("utf-8"))


def figures(session: InterrogationSession) -> dict[str, float]:
    end = session.end_time or session.start_time
    seconds = (end - session.start_time).total_seconds()
    claims = 1
    given = 0.0
    if session.testimony is not None:
        claims = max(1, sum(1 for c in session.testimony.claims if c.examined))
        if session.qa_pairs:
            given = (session.qa_pairs[0].timestamp - session.start_time).total_seconds()
    verdict = session.audit_result.verdict if session.audit_result else None
    return {"seconds": seconds, "tokens": session.tokens.total, "claims": claims,
            "per_claim": session.tokens.total / claims, "given": given,
            "status_ok": float(session.status == "completed"), "verdict": str(verdict)}


def measure(trees: list[tuple[str, Path, str]], repeat: int,
            claim_concurrency: int | None, kinds: list[str], keep: Path | None = None
            ) -> list[tuple[str, dict[str, list[dict[str, Any]]]]]:
    """Each kind run with each tree's code on its server, the trees taking turns within each
    round (so a change in the machine's load falls on all alike); a home of its own each."""
    found: list[tuple[str, dict[str, list[dict[str, Any]]]]] = [
        (name, {kind: [] for kind in kinds}) for name, _, _ in trees]
    with contextlib.ExitStack() as stack:
        folder = str(keep) if keep is not None else stack.enter_context(
            tempfile.TemporaryDirectory(prefix="detektiv-ttime-"))
        homes = []
        for n, (_, _, url) in enumerate(trees):
            home = Path(folder) / str(n)
            home.mkdir(parents=True, exist_ok=True)
            (home / "config.toml").write_text(config(url, claim_concurrency), encoding="utf-8")
            homes.append(home)
        for turn in range(repeat):
            for (name, code, _), home, (_, results) in zip(trees, homes, found, strict=True):
                for kind in kinds:
                    began = time.monotonic()
                    result = figures(run_one(code, home, KINDS[kind]))
                    result["wall"] = time.monotonic() - began
                    results[kind].append(result)
                    print(f"  {name} round {turn + 1} {kind}: {result['seconds']:.1f} s, "
                          f"{result['tokens']:.0f} tokens, {result['claims']:.0f} claims, "
                          f"verdict {result['verdict']}", flush=True)
    return found


def report(name: str, found: dict[str, list[dict[str, Any]]]) -> None:
    print(f"\n{name}")
    print("kind      seconds  × claim  tokens  claims  tokens/claim  testimony given at  "
          "completed")
    base = [r["seconds"] for r in found["claim"]]
    for kind, rows in found.items():
        ratios = [r["seconds"] / b for r, b in zip(rows, base, strict=True) if b > 0]
        med = statistics.median
        print(f"{kind:<8} {med(r['seconds'] for r in rows):>8.1f}  {med(ratios):>6.2f}×  "
              f"{med(r['tokens'] for r in rows):>6.0f}  {med(r['claims'] for r in rows):>6.0f}  "
              f"{med(r['per_claim'] for r in rows):>12.0f}  "
              f"{med(r['given'] for r in rows):>16.1f} s  "
              f"{sum(r['status_ok'] for r in rows):.0f}/{len(rows)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--baseline", help="a commit to measure too, in turns")
    parser.add_argument("--kinds", default="claim,request,pasted",
                        help="of claim, request, pasted (claim always runs: the ratios' base)")
    parser.add_argument("--speculation", default="auto",
                        help="local-server --speculation, one server each: off,auto compares")
    parser.add_argument("--keep", type=Path,
                        help="keep the runs' homes (their sessions) in this folder")
    parser.add_argument("--claim-concurrency", type=int,
                        help="[interrogation] claim_concurrency (unset: detektiv's choice)")
    args = parser.parse_args()
    if not args.model.is_file():
        raise SystemExit(f"{args.model}: not found (make bench-real fetches it)")
    kinds = ["claim", *(k for k in args.kinds.split(",") if k in KINDS and k != "claim")]
    settings = args.speculation.split(",")
    with tempfile.TemporaryDirectory(prefix="detektiv-ttime-server-") as folder, \
            contextlib.ExitStack() as stack:
        urls = {setting: stack.enter_context(local_server(
            Path(folder) / setting, "--model", str(args.model), "--parallel",
            str(args.parallel), "--threads", str(args.threads), "--ctx",
            str(4096 * args.parallel), "--speculation", setting)).url for setting in settings}
        trees = [("this tree", ROOT)]
        if args.baseline:
            tree = Path(folder) / "baseline"
            subprocess.run(["git", "worktree", "add", "--detach", str(tree), args.baseline],
                           cwd=ROOT, check=True, capture_output=True)
            trees.insert(0, (f"baseline {args.baseline[:8]}", tree))
        runs = [(name if len(settings) == 1 else f"{name} · speculation {setting}", code, url)
                for name, code in trees for setting, url in urls.items()]
        try:
            results = measure(runs, args.repeat, args.claim_concurrency, kinds, args.keep)
        finally:
            if args.baseline:
                subprocess.run(["git", "worktree", "remove", "--force", str(trees[0][1])],
                               cwd=ROOT, capture_output=True)
    chosen = "" if args.claim_concurrency is None else \
        f", claim_concurrency {args.claim_concurrency}"
    print(f"\nthe 1.5B on one local-server, {args.parallel} slots, {args.threads} threads, "
          f"both roles{chosen}; medians of {args.repeat}")
    for name, found in results:
        report(name, found)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
