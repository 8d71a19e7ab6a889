"""The case-agent commands: `agent` and `vault search` (SPEC §6).

No Textual here. The reply streams to stdout without its signal and tool tags; the signals,
tool calls, the tree's nodes and the stop with its evidence are short lines on stderr.
`--json` prints every event as one JSON object a line on stdout, the last one the stop.
"""

from __future__ import annotations

import argparse
import json
import sys

from engine import (
    AgentDelta,
    AgentError,
    AgentEvent,
    AgentStopped,
    NodeChanged,
    Paths,
    TagFilter,
    TurnEnded,
    TurnStarted,
    Workspace,
    event_line,
    read_run,
    stop_lines,
    strip_control,
)
from tui.cli.printer import StreamPrinter

__all__ = ["AGENT_COMMANDS", "add_parsers", "dispatch"]

AGENT_COMMANDS = ("agent", "vault")


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                common: argparse.ArgumentParser) -> None:
    """Register `agent` and `vault` on the `detektiv` parser."""
    agent = commands.add_parser("agent", parents=[common],
                                help="ask the case agent about your sessions (it searches "
                                     "them over several turns and says why it stopped)")
    agent.add_argument("question", nargs="?", help="the question; - reads it from stdin")
    agent.add_argument("-p", "--provider", help="configured name or kind:model for every turn")
    agent.add_argument("-c", "--continue", dest="continue_last", action="store_true",
                       help="continue the last agent conversation")
    agent.add_argument("--conversation", metavar="ID", help="continue (or start) conversation ID")
    agent.add_argument("--json", action="store_true", help="print one JSON object per event")
    agent.add_argument("--nodes", action="store_true", help="also show the tree's node changes")
    agent.add_argument("--replay", metavar="RUN", help="print a logged run again (its run id)")
    vault = commands.add_parser("vault", parents=[common],
                                help="search every session's words (the agent's vault)")
    actions = vault.add_subparsers(dest="vault_command", metavar="ACTION", required=True)
    search = actions.add_parser("search", parents=[common], help="ranked matches with snippets")
    search.add_argument("query", help="words to look for")
    search.add_argument("-n", "--limit", type=int, default=10, metavar="N")
    search.add_argument("--json", action="store_true", help="print JSON")


async def dispatch(paths: Paths, args: argparse.Namespace) -> int:
    workspace = Workspace(paths)
    try:
        if args.command == "vault":
            return vault_search(workspace, args.query, args.limit, args.json)
        if args.replay:
            return replay(workspace, args.replay, args.json)
        return await agent(workspace, args)
    finally:
        await workspace.aclose()


def vault_search(workspace: Workspace, query: str, limit: int, as_json: bool) -> int:
    hits = workspace.agent.search(query, limit=max(1, min(limit, 100)))
    if as_json:
        print(json.dumps({"query": query, "hits": [h.to_json() for h in hits]},
                         ensure_ascii=False))
        return 0
    if not hits:
        print(f"no matches for {strip_control(query)!r}", file=sys.stderr)
        return 0
    for hit in hits:
        print(f"{hit.short_id}  {strip_control(hit.name)[:60]}  ({hit.ref})")
        print(f"    {strip_control(hit.snippet)}")
    return 0


def _question(args: argparse.Namespace) -> str:
    if args.question == "-":
        return sys.stdin.read()
    if args.question is None:
        raise AgentError("no question given (detektiv agent \"QUESTION\")")
    return str(args.question)


async def agent(workspace: Workspace, args: argparse.Namespace) -> int:
    for warning in workspace.warnings:
        print(f"detektiv: warning: {warning}", file=sys.stderr)
    run = await workspace.agent.run(_question(args), provider=args.provider,
                                conversation=args.conversation,
                                continue_last=args.continue_last)
    stop: AgentStopped | None = None
    show = _Shower(args.json, args.nodes)
    async for event in run.events():  # Ctrl-C cancels this task, and so the run
        show(event)
        if isinstance(event, AgentStopped):
            stop = event
    if not args.json:
        print(f"agent: run {run.run_id} logged in {run.log.path}; conversation "
              f"{run.conversation_id} (continue with -c)", file=sys.stderr)
    return 1 if stop is None or stop.reason == "error" else 0


def replay(workspace: Workspace, run_id: str, as_json: bool) -> int:
    folder = workspace.paths.data_dir / "agent" / "runs"
    found = sorted(folder.glob(f"*_{run_id.strip()}*.jsonl")) if run_id.strip() else []
    if len(found) != 1:
        what = "no logged run" if not found else f"{len(found)} logged runs"
        raise AgentError(f"{what} match {run_id!r} (in {folder})")
    show = _Shower(as_json, True)
    for event in read_run(found[0]):
        show(event)
    return 0


class _Shower:
    """Prints events: JSON lines, or the reply on stdout and short lines on stderr."""

    def __init__(self, as_json: bool, nodes: bool) -> None:
        self.as_json = as_json
        self.nodes = nodes
        self.out = StreamPrinter()
        self.filter = TagFilter()
        self.streamed = False

    def __call__(self, event: AgentEvent) -> None:
        if self.as_json:
            to_json = getattr(event, "to_json", None)
            if to_json is not None:
                print(json.dumps(to_json(), ensure_ascii=False, default=str), flush=True)
            return
        out = self.out
        match event:
            case AgentDelta(text=text):
                self.streamed = True
                out.write(self.filter.feed(text))
                return
            case TurnStarted():
                self.filter, self.streamed = TagFilter(), False
            case TurnEnded(shown=shown):
                if self.streamed:
                    out.write(self.filter.flush())
                else:  # a replay: the turn's text comes whole
                    out.write(shown)
                out.end_line()
                return
            case NodeChanged() if not self.nodes:
                return
            case AgentStopped():
                out.end_line()
                for line in stop_lines(event):
                    out.note(line)
                return
        said = event_line(event)
        if said:
            out.end_line()
            out.note(said)
