"""Cold start to the first frame: detektiv with 10,000 sessions on disk vs a minimal Textual app.

Each run is a fresh process (headless, 120×40); the parent takes the time from spawning it to
the child's first frame (and, for detektiv, to the first frame showing the session rows).
Goal: detektiv's first frame, and its first frame with rows, ≤ 1.5× the minimal app's. Then
`detektiv sessions`, `sessions --json` and `sessions --limit 20` are timed on the same store.
Run: .venv/bin/python bench/startup.py [--sessions N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.sessions import make_sessions  # noqa: E402

MINIMAL = """
import time
from textual.app import App
from textual.widgets import Static
class Minimal(App):
    def compose(self):
        yield Static("hello")
    def _display(self, screen, renderable):
        super()._display(screen, renderable)
        if renderable is not None:
            print("frame", time.time(), flush=True)
            self.exit()
Minimal().run(headless=True, size=(120, 40))
"""

DETEKTIV = """
import time
from engine.paths import Paths
from tui.app import DetektivApp, build_app
class Probe(DetektivApp):
    first = True
    def _display(self, screen, renderable):
        super()._display(screen, renderable)
        if renderable is None:
            return
        if self.first:
            self.first = False
            print("frame", time.time(), flush=True)
        tables = self.screen.query("DataTable")
        if tables and tables.first().row_count:
            print("rows", time.time(), flush=True)
            self.exit()
build_app(Paths.from_env(), Probe).run(headless=True, size=(120, 40))
"""


def once(code: str, env: dict[str, str]) -> dict[str, float]:
    start = time.time()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=120, check=True).stdout
    marks: dict[str, float] = {}
    for line in out.splitlines():
        name, _, value = line.partition(" ")
        marks.setdefault(name, float(value) - start)
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        make_sessions_root = Path(home) / "data" / "sessions"
        make_sessions_root.mkdir(parents=True)
        make_sessions(make_sessions_root, args.sessions,
                      Path(home) / "cache" / "sessions-index.jsonl")
        # the capable model's check runs (after the first frame, on a thread) but never
        # downloads: a benchmark fetches no 1.1 GB
        env = {**os.environ, "DETEKTIV_HOME": home, "PYTHONPATH": str(ROOT),
               "DETEKTIV_NO_DOWNLOAD": "1"}
        env.pop("OPENAI_API_KEY", None)
        minimal: list[float] = []
        ours: list[float] = []
        rows: list[float] = []
        for _ in range(args.repeat):  # alternating, so both see the same machine state
            minimal.append(once(MINIMAL, env)["frame"])
            marks = once(DETEKTIV, env)
            ours.append(marks["frame"])
            rows.append(marks["rows"])
        listing = {" ".join(command): statistics.median(
            _timed([str(Path(sys.executable).parent / "detektiv"), *command], env)
            for _ in range(args.repeat)) for command in LISTINGS}
    m, o, r = (statistics.median(v) * 1000 for v in (minimal, ours, rows))
    print(f"cold start, median of {args.repeat}, {args.sessions} sessions on disk")
    print(f"minimal Textual app, first frame:   {m:7.0f} ms")
    print(f"detektiv, first frame:              {o:7.0f} ms  ({o / m:.2f}×, goal ≤ 1.5×)")
    print(f"detektiv, first frame with rows:    {r:7.0f} ms  ({r / m:.2f}×, goal ≤ 1.5×)")
    for command, seconds in listing.items():
        print(f"detektiv {command + ':':27} {seconds * 1000:7.0f} ms")


LISTINGS = (("sessions",), ("sessions", "--json"), ("sessions", "--limit", "20"))
"""The command line's listings, timed from spawn to exit (output to /dev/null)."""


def _timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, check=True,
                   timeout=600)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
