"""The Inspect scorer beside `detektiv eval` on the same items (issue 76): in replay mode its
verdicts should be `detektiv eval`'s, and the time Inspect adds under 5 %.

    python bench/inspect_replay.py [--summaries 10] [--threads 2] [--split dev]

One `detektiv local-server` (the real 1.5B, `make bench-real`'s file) serves both roles, the
product's settings otherwise (temperature 0). HaluEval summarization rows (`--summaries` of
them, from `make bench-real`'s `summaries-SPLIT-40.jsonl`, each a right and a hallucinated
summary) are judged twice, each in a fresh home of its own: by `detektiv eval FILE --mode
document` (the interrogation alone, one item at a time), and by `inspect eval
detektiv/hallucinations -T data=FILE -T replay=true --model mockllm/model` (the data set's
own summaries replayed, detektiv's scorer examining each, one sample at a time). Printed: each
one's seconds, its accuracy, and the items whose verdicts differ — each run on a server of
its own (a server's prompt cache, warm from the run before, would speed the next and move its
floats), and `detektiv eval` run a second time to show how far two runs of the same command
differ. Minutes of CPU; never in CI.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.servers import local_server  # noqa: E402

WORK = Path.home() / ".cache/detektiv-bench"
MODEL = WORK / "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def config(url: str) -> str:
    return (f'[providers.box]\nkind = "openai"\nmodel = "qwen"\nbase_url = "{url}"\n'
            "priority = 1\ntimeout = 360\nstall_timeout = 180\n\n"
            '[roles]\ndetective = ["box"]\nwitness = ["box"]\n\n'
            "[interrogation]\ntemperature = 0\n")


def home_for(root: Path, name: str, url: str) -> Path:
    home = root / name
    home.mkdir()
    (home / "config.toml").write_text(config(url), encoding="utf-8")
    return home


def by_eval(home: Path, sample: Path) -> tuple[float, dict[str, tuple[str, bool]]]:
    env = {**os.environ, "DETEKTIV_HOME": str(home)}
    began = time.monotonic()
    subprocess.run([sys.executable, "-m", "tui", "eval", str(sample), "--mode", "document",
                    "--concurrency", "1", "--json"], env=env, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.monotonic() - began
    found: dict[str, tuple[str, bool]] = {}
    for results in (home / "data" / "evals").glob("*/results.jsonl"):
        for line in results.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row["kind"] == "interrogation":
                found[row["item"]] = (row.get("verdict") or "failed", bool(row["label"]))
    return seconds, found


def by_inspect(home: Path, sample: Path, logs: Path) -> tuple[float, dict[str, tuple[str, bool]]]:
    env = {**os.environ, "DETEKTIV_HOME": str(home), "INSPECT_DISPLAY": "none"}
    inspect = [sys.executable, "-m", "inspect_ai"]
    began = time.monotonic()
    subprocess.run([*inspect, "eval", "detektiv/hallucinations", "--model", "mockllm/model",
                    "-T", f"data={sample}", "-T", "replay=true",
                    "--max-samples", "1", "--log-dir", str(logs)], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    seconds = time.monotonic() - began
    (log,) = logs.glob("*.eval")
    dumped = json.loads(subprocess.run([*inspect, "log", "dump", str(log)], env=env,
                                       check=True, capture_output=True, text=True).stdout)
    found = {}
    for item in dumped["samples"]:
        (score,) = item["scores"].values()
        metadata = score.get("metadata") or {}
        found[str(item["id"])] = (metadata.get("verdict") or "failed", bool(metadata["label"]))
    return seconds, found


def accuracy(found: dict[str, tuple[str, bool]]) -> float:
    return sum(v == ("true" if label else "false") for v, label in found.values()) / max(
        1, len(found))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summaries", type=int, default=10, help="even")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--keep", type=Path, help="keep the homes (their sessions) here")
    args = parser.parse_args()
    source = WORK / "samples" / f"summaries-{args.split}-40.jsonl"
    if not MODEL.is_file() or not source.is_file():
        raise SystemExit("run make bench-real --samples summaries first (the model, the rows)")
    with tempfile.TemporaryDirectory(prefix="detektiv-inspect-") as folder:
        root = Path(folder) if args.keep is None else args.keep
        root.mkdir(parents=True, exist_ok=True)
        sample = root / "summaries.jsonl"
        rows = source.read_text(encoding="utf-8").splitlines()[:args.summaries // 2]
        sample.write_text("\n".join(rows) + "\n", encoding="utf-8")
        def served(name: str) -> Any:  # a fresh server each: no prompt cache carried over
            return local_server(root / f"server-{name}", "--model", str(MODEL), "--parallel",
                                "4", "--threads", str(args.threads), "--ctx", "16384")

        with served("eval") as server:
            eval_s, eval_v = by_eval(home_for(root, "eval", server.url), sample)
        with served("inspect") as server:
            inspect_s, inspect_v = by_inspect(home_for(root, "inspect", server.url), sample,
                                              root / "logs")
        with served("again") as server:  # how far two runs of detektiv eval itself differ
            again_s, again_v = by_eval(home_for(root, "again", server.url), sample)
    differ = sorted(k for k in eval_v if inspect_v.get(k, ("missing",))[0] != eval_v[k][0])
    itself = sorted(k for k in eval_v if again_v.get(k, ("missing",))[0] != eval_v[k][0])
    print(f"{len(eval_v)} summaries, the 1.5B in both roles, {args.threads} threads")
    print(f"detektiv eval        {eval_s:7.1f} s  accuracy {accuracy(eval_v):.3f}")
    print(f"inspect eval (replay) {inspect_s:6.1f} s  accuracy {accuracy(inspect_v):.3f}  "
          f"({inspect_s / eval_s:.3f}× detektiv eval's time)")
    print(f"detektiv eval again  {again_s:7.1f} s  accuracy {accuracy(again_v):.3f}  "
          f"(verdicts differing from the first: {len(itself)})")
    print(f"verdicts that differ: {len(differ)} of {len(eval_v)}" +
          ("".join(f"\n  {k}: eval {eval_v[k][0]}, inspect {inspect_v.get(k, ('missing',))[0]}"
                   for k in differ)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
