"""The demonstration run reaches its end: `make run`'s default (nothing configured, the
embedded demonstration model as detective and witness), five times.

    python bench/demo_runs.py [--runs 5]

Each run is `detektiv run HYPOTHESIS` in a fresh home with no configuration, as a newcomer's
first try. Counted: runs that reach the audit with a verdict, and whether every one of them
says that a demonstration model's verdict means nothing (the stored audit, `show`, the
markdown export). Prints the count and each run's ending; the goal is 4 of 5.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.report.words import DEMONSTRATION_VERDICT  # noqa: E402

DETEKTIV = [sys.executable, "-m", "tui"]
HYPOTHESES = [
    "Owls hunt at night.",
    "The Eiffel Tower is in Berlin.",
    "Water boils at 100 degrees Celsius at sea level.",
    "Bats are birds.",
    "The Moon orbits the Earth.",
]


def one(hypothesis: str) -> tuple[bool, bool, str, float]:
    """(reached a verdict, labelled everywhere, how it ended, seconds) of one fresh run."""
    with tempfile.TemporaryDirectory(prefix="detektiv-demo-") as home:
        env = {**os.environ, "DETEKTIV_HOME": home}
        began = time.monotonic()
        subprocess.run([*DETEKTIV, "run", hypothesis], env=env, cwd=home, check=False,
                       capture_output=True, text=True)
        seconds = time.monotonic() - began
        listed = subprocess.run([*DETEKTIV, "sessions", "--json"], env=env, cwd=home,
                                check=False, capture_output=True, text=True)
        rows = json.loads(listed.stdout or "[]")
        if not rows:
            return False, False, "no session stored", seconds
        row = rows[0]
        shown = subprocess.run([*DETEKTIV, "show", row["id"]], env=env, cwd=home,
                               check=False, capture_output=True, text=True).stdout
        exported = subprocess.run([*DETEKTIV, "export", row["id"], "--format", "md", "-o",
                                   str(Path(home) / "out.md")], env=env, cwd=home,
                                  check=False, capture_output=True, text=True)
        markdown = (Path(home) / "out.md").read_text() if exported.returncode == 0 else ""
        reached = row.get("verdict") is not None
        labelled = reached and all(DEMONSTRATION_VERDICT in text for text in (shown, markdown))
        ending = f"{row['status']}: {row.get('verdict') or row.get('error') or ''}"
        return reached, labelled, ending, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    reached = labelled = 0
    for number in range(args.runs):
        hypothesis = HYPOTHESES[number % len(HYPOTHESES)]
        got, said, ending, seconds = one(hypothesis)
        reached += got
        labelled += said
        print(f"run {number + 1}: {hypothesis!r} → {ending} ({seconds:.0f} s)"
              f"{'' if said or not got else ' — NOT labelled as a demonstration'}",
              flush=True)
    print(f"\nreached the audit with a verdict: {reached} of {args.runs} (goal: 4 of 5); "
          f"labelled as a demonstration model's verdict: {labelled} of {reached}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
