"""`detektiv eval DATASET …` and `detektiv evals [RUN]`: measure whether interrogation
catches false claims (SPEC §9). No Textual here; the table's words are the engine's
(`eval_table`), the same the app shows."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine import (
    ConfigError,
    EvalFinished,
    EvalItemDone,
    EvalRequest,
    EvalStarted,
    EvalSummary,
    Paths,
    Workspace,
    ablation_table,
    board_json,
    board_lines,
    board_table,
    eval_lines,
    eval_table,
    fit_lines,
    money,
    split_chain,
    summary_json,
)
from tui.cli.table import print_table

__all__ = ["EVAL_COMMANDS", "add_parser", "dispatch"]

EVAL_COMMANDS = ("eval", "evals")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser],
               common: argparse.ArgumentParser) -> None:
    """Register `detektiv eval` and `detektiv evals`."""
    run = commands.add_parser(
        "eval", parents=[common],
        help="measure whether interrogation catches false claims (labelled claims in, "
        "figures out)")
    run.add_argument("dataset", metavar="DATASET",
                     help="a JSONL file of labelled claims, a HaluEval-QA file, or a named "
                     "dataset: demo, halueval-qa")
    run.add_argument("--n", type=int, metavar="N", help="claims to sample (default: all)")
    run.add_argument("--seed", type=int, default=0, metavar="S", help="sampling seed")
    run.add_argument("--mode", choices=("planted", "defend", "open", "document"),
                     help="planted: the claim is the witness's own first answer; defend: "
                     "the witness is told to defend it; open: the witness is told nothing; "
                     "document: told nothing, holding the row's document, context or "
                     "knowledge (default: planted; open with --compare or open questions)")
    run.add_argument("--protocol", default="cross-exam", metavar="P[,P]",
                     help="interrogation protocols, each judged as a system of its own: "
                     "cross-exam (default), consistency, or both (cross-exam,consistency)")
    run.add_argument("--runs", type=int, choices=(1, 3), default=1,
                     help="interrogations an item (3: majority verdict)")
    run.add_argument("--detective", metavar="P", help="detective chain (a,b)")
    run.add_argument("--witness", metavar="P", help="witness chain (a,b)")
    run.add_argument("--compare", metavar="A,B[,C…]",
                     help="witnesses to compare on the same items (each a provider name or "
                     "kind:model), the same detective judging: a leaderboard with paired "
                     "intervals")
    run.add_argument("--limit", type=int, metavar="R", help="rounds an interrogation (5-20)")
    run.add_argument("--concurrency", type=_concurrency, metavar="K|auto",
                     help="items at once; auto (the default): the slots of the detective's "
                     "and the witness's servers, every replica counted, else 4")
    run.add_argument("--baselines", action="store_true",
                     help="also judge each claim with no interrogation and after one "
                     "\"Are you sure?\"")
    run.add_argument("--max-cost", type=float, metavar="AMOUNT",
                     help="stop before a call would pass this cost ([prices] in the config)")
    run.add_argument("--retry-failed", action="store_true",
                     help="run the items that failed last time again")
    run.add_argument("--json", action="store_true",
                     help="print one JSON object a unit, then the summary")
    run.add_argument("--fit", action="store_true",
                     help="then fit the pool of the signals' readings on these labelled "
                     "items and write it as pooling.json (in -o DIR, else the run's folder): "
                     "name it in [interrogation] pooling")
    run.add_argument("-o", "--output", type=Path, metavar="DIR",
                     help="write report.md, results.jsonl and PNG plots there")
    runs = commands.add_parser("evals", parents=[common],
                               help="list evaluation runs, or show one's figures")
    runs.add_argument("run", nargs="?", metavar="RUN",
                      help="a run id or a witness comparison's (or its start)")
    runs.add_argument("--json", action="store_true", help="print JSON")
    runs.add_argument("-o", "--output", type=Path, metavar="DIR",
                      help="write the run's report there")


async def dispatch(paths: Paths, args: argparse.Namespace) -> int:
    workspace = Workspace(paths)
    try:
        if args.command == "eval":
            return await _eval(workspace, args)
        return _evals(workspace, args)
    finally:
        await workspace.aclose()


class _Progress:
    """done / failed / ETA / tokens on stderr (tqdm; shown even when stderr is a log)."""

    def __init__(self) -> None:
        self.bar: Any = None

    def start(self, total: int, skipped: int) -> None:
        from tqdm import tqdm

        tty = sys.stderr.isatty()
        self.bar = tqdm(total=total, initial=skipped, unit="item", desc="eval",
                        file=sys.stderr, ascii=not tty, mininterval=0.2 if tty else 2.0,
                        dynamic_ncols=True)

    def step(self, event: EvalItemDone) -> None:
        if self.bar is not None:
            waited = f", waited {event.waited:.0f} s for rate limits" if event.waited >= 1 \
                else ""
            self.bar.set_postfix_str(f"failed {event.failed}, tokens {event.tokens:,}{waited}",
                                     refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _concurrency(value: str) -> int | None:
    """`--concurrency`: a number, or `auto` (None: the servers' slots)."""
    if value.strip().lower() == "auto":
        return None
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number or auto, not {value!r}") from None


async def _eval(workspace: Workspace, args: argparse.Namespace) -> int:
    compared = split_chain(args.compare) if args.compare is not None else []
    if args.compare is not None:
        if len(set(compared)) < 2:
            raise ConfigError("--compare needs two witnesses or more (A,B)")
        if args.witness:
            raise ConfigError("--compare names the witnesses; leave --witness out")
    request = EvalRequest(
        dataset=args.dataset, n=args.n, seed=args.seed,
        mode=args.mode or workspace.evals.default_mode(args.dataset, bool(compared)),
        detective=tuple(split_chain(args.detective)), witness=tuple(split_chain(args.witness)),
        limit=args.limit,
    )
    if not compared:
        return (await _one(workspace, args, request))[0]
    code, comparison = 0, None
    for witness in dict.fromkeys(compared):
        print(f"detektiv: witness {witness}", file=sys.stderr)
        ended, comparison = await _one(workspace, args, replace(request, witness=(witness,)),
                                       quiet=True)
        code = max(code, ended)
    if comparison is not None:
        _show_board(workspace, comparison, args.json, args.output)
    return code


def _show_board(workspace: Workspace, comparison: str, as_json: bool,
                output: Path | None) -> None:
    board = workspace.evals.comparison(comparison)
    if as_json:
        print(json.dumps({"type": "comparison", **board_json(board)}, ensure_ascii=False))
    else:
        print_table(board_table(board))
        for line in board_lines(board):
            print(line)
    if output is not None:
        written = workspace.evals.board_report(comparison, output, board)
        print("detektiv: wrote " + ", ".join(str(p) for p in written), file=sys.stderr)


async def _one(workspace: Workspace, args: argparse.Namespace, request: EvalRequest,
               quiet: bool = False) -> tuple[int, str | None]:
    """One run (a witness of a comparison: `quiet`, its figures left to the leaderboard): its
    exit code and its comparison."""
    download = _Download(args.dataset)
    try:
        run = await workspace.evals.start(request, runs=args.runs, baselines=args.baselines,
                                          protocols=split_chain(args.protocol),
                                          concurrency=args.concurrency,
                                          retry_failed=args.retry_failed, progress=download,
                                          max_cost=args.max_cost, compared=quiet)
    finally:
        download.close()
    bar = _Progress()
    finished: EvalFinished | None = None
    started = time.monotonic()
    tried, failures = 0, []
    try:
        # closed here, not when collected: its tasks are cancelled and awaited before the
        # workspace closes what they use
        async with aclosing(run.events()) as events:
            async for event in events:
                match event:
                    case EvalStarted(total=total, skipped=skipped, concurrency=k):
                        note = f", {skipped} finished earlier" if skipped else ""
                        print(f"detektiv: evaluation {run.id}: {total} to judge{note}, "
                              f"{k} at once", file=sys.stderr)
                        if event.demonstration:
                            print("detektiv: the detective is a demonstration model: the "
                                  "verdicts will mean nothing", file=sys.stderr)
                        if not args.json:
                            bar.start(total, skipped)
                    case EvalItemDone(result=result):
                        tried += 1
                        if result.failed:
                            failures.append(result.error or result.status)
                        if args.json:
                            print(json.dumps({"type": "result",
                                              **result.model_dump(mode="json")},
                                             ensure_ascii=False), flush=True)
                        else:
                            bar.step(event)
                    case EvalFinished():
                        finished = event
    except asyncio.CancelledError:
        bar.close()
        print(f"\ndetektiv: evaluation {run.id} stopped; run the same command again to go "
              "on where it stopped", file=sys.stderr)
        raise KeyboardInterrupt from None
    finally:
        bar.close()
    if not quiet:
        summary = workspace.evals.summary(run.id)
        _show(summary, args.json)
        if args.output is not None:
            written = workspace.evals.report(run.id, args.output, summary)
            print("detektiv: wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
        if getattr(args, "fit", False):
            _fit(workspace, run.id, args.output, args.json)
    if finished is not None:
        print(f"detektiv: evaluation {run.id}: {finished.done}/{finished.total} judged, "
              f"{finished.failed} failed, in {time.monotonic() - started:.0f} s "
              f"(its sessions: detektiv sessions --run {run.id})", file=sys.stderr)
        if finished.status == "cancelled" and run.budget is not None and run.budget.stopped:
            print(f"detektiv: stopped at the cost limit ({money(run.budget.spent)} spent of "
                  f"{money(run.budget.limit)}); the same command with a larger --max-cost "
                  "goes on", file=sys.stderr)
            return 130, run.info.comparison
    if tried and len(failures) == tried:  # not one verdict this time: a failure, said once
        print(f"detektiv: evaluation {run.id}: no item could be judged; the first failure: "
              f"{failures[0]}", file=sys.stderr)
        return 1, run.info.comparison
    return 0, run.info.comparison


def _fit(workspace: Workspace, run: str, output: Path | None, as_json: bool) -> None:
    """`--fit`: the pool fitted on the run's results, written, and how to use it."""
    where = (output or workspace.evals.folder(run).directory) / "pooling.json"
    path, figures = workspace.evals.fit(run, where)
    if as_json:
        print(json.dumps({"type": "fit", "path": str(path), **figures}, ensure_ascii=False))
        return
    for line in fit_lines(str(path.resolve()), figures):
        print(line)


def _show(summary: EvalSummary, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"type": "summary", **summary_json(summary)}, ensure_ascii=False))
        return
    print_table(eval_table(summary))
    ablation = ablation_table(summary)
    if ablation:
        print("\nThe interrogation's signals, from the same sessions: each alone, and the pool "
              "without it")
        print_table(ablation)
    for line in eval_lines(summary):
        print(line)


def _evals(workspace: Workspace, args: argparse.Namespace) -> int:
    evals = workspace.evals
    if args.run is None:
        runs = evals.runs()
        if args.json:
            print(json.dumps([info.model_dump(mode="json") for info in runs], indent=2))
            return 0
        if not runs:
            print("No evaluation runs yet: detektiv eval demo --detective P")
            return 0
        for info in runs:
            compared = f"  (comparison {info.comparison})" if info.comparison else ""
            print(f"{info.id}  {info.updated.astimezone():%Y-%m-%d %H:%M}  {info.dataset}  "
                  f"{info.items} claims  {info.mode}  detective {info.detective_label}  "
                  f"witness {info.witness_label}{compared}")
        return 0
    if any(ident.startswith(args.run.strip()) for ident in evals.comparisons()):
        _show_board(workspace, args.run, args.json, args.output)
        return 0
    summary = evals.summary(args.run)
    _show(summary, args.json)
    if args.output is not None:
        written = evals.report(args.run, args.output, summary)
        print("detektiv: wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0


class _Download:
    """A first download's progress bar (tqdm on stderr)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bar: Any = None

    def __call__(self, done: int, total: int | None) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit="B", unit_scale=True,
                            desc=self.name, file=sys.stderr, ascii=not sys.stderr.isatty())
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
