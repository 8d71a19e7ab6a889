"""A busy server is not a dead one (issue 55): an evaluation whose calls outnumber the
server's slots, on a busy machine, with no item failed for time.

    python bench/busy_server.py [--n 8] [--concurrency 4] [--load 1] [--baseline REV]
    python bench/busy_server.py --document [--n 8] [--concurrency 2] …

`detektiv local-server --parallel 2` (this tree's, for both) runs the real 1.5B (`make
bench-real`'s file, with its token budgets; `--answer-tokens` for the witness's) for both
roles; `detektiv eval demo --protocol consistency --concurrency C` sends it up to C items at
once, each asking the witness three times side by side, while `--load` processes keep the
cores busy. Counted: items that ended failed, and of those the ones failed for time ("no
token for…", "not finished within…"). `--baseline REV` runs the same first with the code of
commit REV (a git worktree), so both figures come from one run of this script on the same
machine. Hours of CPU at larger `--n`; never in CI.

`--document`: the same class in document mode — `eval --mode document` (cross-examination)
of HaluEval summaries whose news article is about 900 tokens (3,300–4,200 characters), the
witness holding the article, so one slot ingests a long prompt while the other streams.
Needs `make bench-real`'s HaluEval file.
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

from engine.lifeline import spawn_tied  # noqa: E402
from tests.support.servers import local_server, stop  # noqa: E402

MODEL = Path.home() / ".cache/detektiv-bench/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
SUMMARIES = Path.home() / ".cache/detektiv-bench/halueval_summarization.jsonl"
TIME_WORDS = ("no token", "not finished within", "timed out")


def articles(n: int, path: Path) -> None:
    """`path`: the first HaluEval summary rows whose article is about 900 tokens, enough
    for `n` items (each row gives two: its right and its hallucinated summary)."""
    kept = []
    with SUMMARIES.open(encoding="utf-8") as rows:
        for line in rows:
            row = json.loads(line)
            if 3300 < len(row["document"]) < 4200:
                kept.append(line)
            if 2 * len(kept) >= n:
                break
    path.write_text("".join(kept), encoding="utf-8")


def one(code: Path, args: argparse.Namespace) -> dict[str, object]:
    """One evaluation with the code at `code`: its items' endings and how long it took."""
    with tempfile.TemporaryDirectory(prefix="detektiv-busy-") as folder, \
            local_server(Path(folder) / "server", "--model", str(args.model),
                         "--parallel", "2", "--ctx", "8192") as server:
        home = Path(folder)
        (home / "config.toml").write_text(
            f'[providers.box]\nkind = "openai"\nmodel = "qwen"\nbase_url = "{server.url}"\n'
            "priority = 1\n\n"
            # `make bench-real`'s budgets: the same work a call, hours fewer
            "[interrogation]\ntemperature = 0\nquestion_max_tokens = 48\n"
            f"answer_max_tokens = {args.answer_tokens}\nanalysis_max_tokens = 96\n"
            "max_gaps = 1\n"
            "audit_max_tokens = 160\n")
        if args.document:
            articles(args.n, home / "articles.jsonl")
            what = [str(home / "articles.jsonl"), "--mode", "document", "--protocol",
                    "cross-exam"]
        else:
            what = ["demo", "--protocol", "consistency"]
        started = time.monotonic()
        done = subprocess.run(
                [sys.executable, "-m", "tui", "eval", *what, "--n", str(args.n), "--seed",
                 "7", "--concurrency", str(args.concurrency),
                 "--detective", "box", "--witness", "box", "--limit", "5", "--json"],
                capture_output=True, text=True, cwd=code,
                env={**os.environ, "DETEKTIV_HOME": str(home)}, timeout=6 * 3600)
        took = time.monotonic() - started
    units = []
    for line in done.stdout.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and "status" in value and "item" in value:
            units.append(value)
    failed = [u for u in units if u["status"] == "failed"]
    for_time = [u for u in failed if any(w in str(u.get("error") or "") for w in TIME_WORDS)]
    for unit in failed:
        print(f"  failed: {str(unit.get('error'))[:200]}", flush=True)
    return {"units": len(units), "failed": len(failed), "for_time": len(for_time),
            "seconds": round(took), "exit": done.returncode,
            "stderr": done.stderr.strip().splitlines()[-1:] if done.returncode else []}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--load", type=int, default=1, help="busy processes beside it")
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--baseline", help="a commit to measure first, the same way")
    parser.add_argument("--answer-tokens", type=int, default=48,
                        help="the witness's budget (longer answers keep the slots busier)")
    parser.add_argument("--document", action="store_true",
                        help="document mode: the witness holds a ~900-token news article")
    args = parser.parse_args()
    if not args.model.is_file():
        raise SystemExit(f"{args.model}: not found (make bench-real fetches it)")
    if args.document and not SUMMARIES.is_file():
        raise SystemExit(f"{SUMMARIES}: not found (make bench-real fetches it)")
    burners = [spawn_tied([sys.executable, "-c", "while True: pass"], foreign=True)
               for _ in range(args.load)]
    results: list[tuple[str, dict[str, object]]] = []
    try:
        if args.baseline:
            with tempfile.TemporaryDirectory(prefix="detektiv-baseline-") as folder:
                tree = Path(folder) / "tree"
                subprocess.run(["git", "worktree", "add", "--detach", str(tree),
                                args.baseline], cwd=ROOT, check=True, capture_output=True)
                try:
                    results.append((f"baseline {args.baseline[:8]}", one(tree, args)))
                    print(results[-1], flush=True)
                finally:
                    subprocess.run(["git", "worktree", "remove", "--force", str(tree)],
                                   cwd=ROOT, capture_output=True)
        results.append(("this tree", one(ROOT, args)))
        print(results[-1], flush=True)
    finally:
        for burner in burners:
            stop(burner, timeout=30)
    kind = ("summaries, document mode (~900-token articles), cross-examination"
            if args.document else "claims, consistency protocol")
    print(f"\n{args.n} {kind}, --concurrency {args.concurrency}, a "
          f"two-slot server, {args.load} busy process(es)")
    print("code              units  failed  for time  seconds")
    for name, result in results:
        print(f"{name:<16}  {result['units']:>5}  {result['failed']:>6}  "
              f"{result['for_time']:>8}  {result['seconds']:>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
