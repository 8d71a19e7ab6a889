"""The headless interrogation commands: run, sessions, show, watch, resume, export.

No Textual here. Exit codes (`engine.session_exit_code`): 0 when a run ends completed or
limit-reached, 130 when it was stopped, and when it failed 3 (its providers could not be
reached), 4 (they did not answer in time) or 1 (anything else; for watch also when the process
running it died).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from contextlib import aclosing
from dataclasses import asdict
from pathlib import Path

from engine import (
    PROTOCOLS,
    Budget,
    ConfigError,
    EvalGroup,
    Finished,
    Paths,
    Record,
    Run,
    SessionError,
    Workspace,
    atomic_write_text,
    check_hypothesis,
    counted,
    encode_record,
    grouped,
    listed_title,
    rounds_cell,
    session_exit_code,
    split_chain,
    strip_control,
    verdict_cell,
)
from tui._format import local_minute
from tui.cli.printer import TranscriptPrinter
from tui.cli.table import print_table

__all__ = ["export", "resume", "run", "sessions", "show", "watch"]


def _print_record(record: Record) -> None:
    sys.stdout.buffer.write(encode_record(record))
    sys.stdout.buffer.flush()


async def _drive(workspace: Workspace, started: Run, as_json: bool,
                 show_reasoning: bool = False) -> int:
    session = started.session
    printer = TranscriptPrinter(show_reasoning=show_reasoning)
    if not as_json and not started.resumed:
        printer.note(f"watch it from another terminal: detektiv watch {session.short_id}")
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    terminated: list[int] = []
    family: str | None = None

    def on_sigterm() -> None:  # stop the way Ctrl-C does: the session is stored as cancelled
        terminated.append(signal.SIGTERM)
        if task is not None:
            task.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        async with aclosing(started.events()) as events:  # ended before the workspace closes
            async for event in events:
                if isinstance(event, Finished):
                    family = event.family
                if not as_json:
                    printer.show(event)
    except asyncio.CancelledError:
        if not terminated:
            raise  # Ctrl-C: asyncio.run turns it into KeyboardInterrupt (exit 130)
        if task is not None:
            task.uncancel()
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        await workspace.aclose()
    return session_exit_code(session.status, family)


async def run(paths: Paths, args: argparse.Namespace) -> int:
    """Run an interrogation, streaming the transcript (or the event records with --json)."""
    hypothesis = read_hypothesis(args.hypothesis, args.file)
    if args.max_cost is not None and not args.max_cost > 0:
        raise ConfigError(f"--max-cost must be more than 0 (got {args.max_cost})")
    workspace = Workspace(paths, use_cache=not args.no_cache)
    if args.dry_run:
        return dry_run(workspace, hypothesis)
    started = workspace.sessions.start(
        hypothesis, args.limit, split_chain(args.detective), split_chain(args.witness),
        on_record=_print_record if args.json else None, session=args.session,
        protocol=args.protocol, document=args.witness_document,
        witness_notes=args.witness_notes,
    )
    if args.max_cost is not None:
        started.budget = Budget(args.max_cost)
    return await _drive(workspace, started, args.json, args.show_reasoning)


def read_hypothesis(given: str | None, file: Path | None) -> str:
    """The hypothesis: as given, `-` from stdin, or `--file FILE` (one of them)."""
    if (given is None) == (file is None):
        raise ConfigError("give the hypothesis, `-` to read it from stdin, or --file FILE "
                          "(one of them)")
    if file is not None:
        if str(file) == "-":
            return sys.stdin.read()
        try:
            return file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{file}: not UTF-8 text") from None
        except OSError as exc:
            raise ConfigError(f"{file}: cannot read: {exc.strerror}") from None
    return sys.stdin.read() if given == "-" else str(given)


def dry_run(workspace: Workspace, hypothesis: str) -> int:
    """What a run would send first, and with which prompt files; nothing is stored or sent."""
    hypothesis = check_hypothesis(hypothesis)
    uses = workspace.sessions.prompts_for_run()
    print("prompts this run would use:")
    for name, use in uses.items():
        print(f"  {name:<26} {use}")
    print("\nthe detective's instructions, filled:\n")
    print(workspace.sessions.first_instructions(hypothesis))
    return 0


async def resume(paths: Paths, args: argparse.Namespace) -> int:
    """Continue an interrupted, failed or cancelled session from its last completed round."""
    workspace = Workspace(paths)
    workspace.config  # noqa: B018 - a bad config fails before the session is taken
    started = workspace.sessions.resume(args.session,
                                        on_record=_print_record if args.json else None)
    return await _drive(workspace, started, args.json, args.show_reasoning)


def sessions(paths: Paths, as_json: bool, run: str | None = None,
             limit: int | None = None) -> int:
    """List sessions, newest first: each evaluation run's as one line (`--json`: every
    session), or with `run` that run's sessions alone; `limit`: the newest that many lines
    (sessions, with `--json`), and how many more there are."""
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {limit})")
    rows = Workspace(paths).sessions.rows()
    if run is not None:
        rows = [row for row in rows if row.eval_run and row.eval_run.startswith(run.strip())]
        if not rows:
            raise SessionError(f"no session of an evaluation run {run!r}")
    if as_json:
        print(json.dumps([asdict(row) for row in rows[:limit]], indent=1, ensure_ascii=False))
        return 0
    for row in rows:
        if row.status == "damaged":
            print(f"detektiv: session {row.dir} is damaged: {strip_control(row.error or '')}",
                  file=sys.stderr)
    if not rows:
        print("No sessions yet. Start one with: detektiv run \"your hypothesis\"")
        return 0
    table = [("ID", "STATUS", "VERDICT", "SCORE", "STARTED", "ROUNDS", "HYPOTHESIS OR TITLE")]
    lines = rows if run is not None else grouped(rows)
    for item in lines[:limit]:
        if isinstance(item, EvalGroup):  # an evaluation's sessions: one line per run
            table.append((item.run[:8], "evaluation", counted(item.count, "session"), "",
                          local_minute(item.newest.started), "",
                          f"evaluation run {item.run} (detektiv sessions --run "
                          f"{item.run[:8]} lists them)"))
            continue
        row = item
        score = "" if row.score is None else str(row.score)
        text = strip_control(listed_title(row.hypothesis, row.claims))
        if len(text) > 60:
            text = text[:59] + "…"
        table.append((row.id[:8], row.status, verdict_cell(row), score,
                      local_minute(row.started), rounds_cell(row), text))
    print_table(table, right={3, 5})
    if limit is not None and len(lines) > limit:
        print(f"… and {len(lines) - limit} more (older); --limit {len(lines)} shows them all")
    return 0


def show(paths: Paths, args: argparse.Namespace) -> int:
    """Print a stored session as a readable report (with --json: the whole session)."""
    sys.stdout.write(Workspace(paths).sessions.export(args.session,
                                                      "json" if args.json else "md",
                                                      reasoning=args.reasoning))
    return 0


def export(paths: Paths, args: argparse.Namespace) -> int:
    """Write a session as markdown or JSON, to a file (atomically) or stdout."""
    text = Workspace(paths).sessions.export(args.session, args.format,
                                            reasoning=args.reasoning,
                                            document=args.with_document)
    if args.output is None or str(args.output) == "-":
        sys.stdout.write(text)
        return 0
    output: Path = args.output
    try:
        atomic_write_text(output, text)
    except OSError as exc:
        raise ConfigError(f"{output}: cannot write: {exc.strerror}") from None
    print(f"detektiv: wrote {output}", file=sys.stderr)
    return 0


async def watch(paths: Paths, args: argparse.Namespace) -> int:
    """Replay a session's events so far, then follow it live until it ends."""
    workspace = Workspace(paths)
    printer = TranscriptPrinter(show_reasoning=args.show_reasoning)
    last = None
    try:
        async with aclosing(workspace.sessions.follow(args.session)) as records:
            async for record in records:
                last = record
                if args.json:
                    _print_record(record)
                else:
                    printer.show(record.event)
    finally:
        await workspace.aclose()
    if last is not None and isinstance(last.event, Finished):
        return session_exit_code(last.event.status, last.event.family)
    session = workspace.sessions.load(args.session)
    if session.status != "running":  # ended between the last event and the final save
        return session_exit_code(session.status)
    printer.note(f"session {session.short_id} was interrupted (no process runs it any more); "
                 f"continue it with: detektiv resume {session.short_id}")
    return 1


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                common: argparse.ArgumentParser) -> None:
    """Register the session commands on the `detektiv` parser."""
    run_parser = commands.add_parser("run", parents=[common], help="run an interrogation")
    run_parser.add_argument("hypothesis", nargs="?",
                            help="what to examine (several lines are fine); - reads stdin")
    run_parser.add_argument("--file", type=Path, metavar="FILE",
                            help="read the hypothesis from FILE (- is stdin)")
    run_parser.add_argument("--dry-run", action="store_true",
                            help="print the prompts it would use and the detective's first "
                            "instructions; send nothing")
    run_parser.add_argument("--detective", metavar="P",
                            help="provider name or kind:model; a comma-separated chain")
    run_parser.add_argument("--witness", metavar="P",
                            help="provider name or kind:model; a comma-separated chain")
    run_parser.add_argument("--limit", type=int, metavar="N", help="iteration limit, 5-20")
    run_parser.add_argument("--protocol", choices=PROTOCOLS, default="cross-exam",
                            help="cross-exam: one answer a question (default); consistency: "
                            "each question put to the witness several times, the answers "
                            "judged by their agreement")
    run_parser.add_argument("--witness-document", type=Path, metavar="FILE",
                            help="a document the witness holds (.txt .md .srt .vtt), fitted "
                            "to its window; the detective never sees it")
    run_parser.add_argument("--witness-notes", action="store_true",
                            help="with --session: the case's notes as the witness's document")
    run_parser.add_argument("--max-cost", type=float, metavar="AMOUNT",
                            help="stop (cancelled, \"cost limit\") before a call would pass "
                            "this cost, at the [prices] in the config")
    run_parser.add_argument("--no-cache", action="store_true",
                            help="bypass the response cache (when [cache] witness is on)")
    run_parser.add_argument("--session", metavar="ID",
                            help="interrogate in this notes-only session (`detektiv new`)")
    run_parser.add_argument("--json", action="store_true",
                            help="print the event records (as in events.jsonl)")
    run_parser.add_argument("--show-reasoning", action="store_true",
                            help="print a reasoning model's thinking too, dimmed, on stderr")
    listing = commands.add_parser("sessions", parents=[common], help="list sessions")
    listing.add_argument("--run", metavar="RUN",
                         help="only the sessions of this evaluation run (an id or its start); "
                         "without it, each run's sessions are one line")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument("--limit", type=int, metavar="N",
                         help="only the newest N lines (with --json: N sessions)")
    for name, text in (("show", "print a session"), ("watch", "follow a session live"),
                       ("resume", "continue an interrupted session")):
        sub = commands.add_parser(name, parents=[common], help=text)
        sub.add_argument("session", help="session id, id prefix or folder name")
        sub.add_argument("--json", action="store_true",
                         help="print the session as JSON" if name == "show"
                         else "print the event records")
        if name == "show":
            sub.add_argument("--reasoning", action="store_true",
                             help="put a reasoning model's thinking before each reply")
        else:
            sub.add_argument("--show-reasoning", action="store_true",
                             help="print a reasoning model's thinking too, dimmed, on stderr")
    exporting = commands.add_parser("export", parents=[common], help="export a session")
    exporting.add_argument("session", help="session id, id prefix or folder name")
    exporting.add_argument("--format", choices=("md", "json"), default="md")
    exporting.add_argument("-o", "--output", type=Path, metavar="FILE",
                           help="write to FILE instead of stdout")
    exporting.add_argument("--reasoning", action="store_true",
                           help="markdown: put a reasoning model's thinking before each reply "
                           "(JSON keeps it in the event log: watch --json)")
    exporting.add_argument("--with-document", action="store_true",
                           help="carry the witness's document's text (named either way)")


async def dispatch(paths: Paths, args: argparse.Namespace) -> int:
    """Run the session command `args.command`."""
    match args.command:
        case "run":
            return await run(paths, args)
        case "resume":
            return await resume(paths, args)
        case "watch":
            return await watch(paths, args)
        case "sessions":
            return sessions(paths, args.json, args.run, args.limit)
        case "show":
            return show(paths, args)
        case "export":
            return export(paths, args)
    raise SessionError(f"unknown command {args.command}")  # pragma: no cover


SESSION_COMMANDS = ("run", "resume", "watch", "sessions", "show", "export")
