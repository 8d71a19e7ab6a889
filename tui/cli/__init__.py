"""The `detektiv` console script: argument parsing and the one error funnel for commands.

Headless commands never import Textual. Every failure ends as one line on stderr (with
`--json`, one JSON object), and its exit code says its family (`engine.EXIT_CODES`): 1 a model
or provider failed, 2 bad configuration or usage, 3 a provider could not be reached, 4 it did
not answer in time, 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from engine import (
    EXIT_CODES,
    DetektivError,
    Paths,
    configure_logging,
    exit_family,
    hold_lifeline,
    log_level,
)

__all__ = ["build_parser", "main"]

log = logging.getLogger("tui.cli")

COMPLETION_SHELLS = ("bash", "zsh", "fish")
"""The shells `detektiv completion` has a script for."""
COMPLETION_KINDS = ("sessions", "oracles", "providers", "models")
"""What `detektiv complete KIND` offers the scripts (`tui.cli.completion.candidates`)."""


class _Version(argparse._VersionAction):
    """`--version`: the installed version, read when asked for (not at every start)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from engine import __version__

        print(f"detektiv {__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The `detektiv` argument parser (also what the completion scripts are made from)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        type=Path,
        default=argparse.SUPPRESS,
        metavar="FILE",
        help="configuration file (default: $DETEKTIV_HOME/config.toml or the user config dir)",
    )
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="log everything (DETEKTIV_LOG_LEVEL=debug), on stderr too for a "
                        "command")
    parser = argparse.ArgumentParser(
        prog="detektiv",
        description="Interrogate language models. With no command, opens the terminal app.",
        parents=[common],
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    providers = commands.add_parser(
        "providers", parents=[common], help="list providers with a live health check"
    )
    providers.add_argument("--json", action="store_true", help="print JSON")

    ask = commands.add_parser("ask", parents=[common], help="stream one answer to stdout")
    ask.add_argument("-p", "--provider", help="configured name or kind:model (local:gemma-3-270m)")
    ask.add_argument("--schema", type=Path, metavar="FILE", help="JSON schema the answer must meet")
    ask.add_argument("--max-tokens", type=int, metavar="N")
    ask.add_argument("--temperature", type=float, metavar="T")
    ask.add_argument("-c", "--continue", dest="continue_last", action="store_true",
                     help="continue the last conversation")
    ask.add_argument("--conversation", metavar="ID", help="continue (or start) conversation ID")
    ask.add_argument("--no-cache", action="store_true", help="bypass the response cache")
    ask.add_argument("--json", action="store_true",
                     help="print one JSON object (answer, provider, conversation, notes) at "
                     "the end instead of streaming")
    ask.add_argument("prompt", help="the prompt; - reads it from stdin")

    conversations = commands.add_parser(
        "conversations", parents=[common], help="list the conversations kept for ask"
    )
    conversations.add_argument("--json", action="store_true", help="print JSON")

    server = commands.add_parser(
        "local-server",
        parents=[common],
        help="serve the embedded model's OpenAI-compatible API on 127.0.0.1",
    )
    server.add_argument("--port", type=int, default=8080, metavar="N", help="0 picks a free port")
    server.add_argument("--model", metavar="NAME|GGUF",
                        help="a model of `detektiv models` or a GGUF file "
                        "(default: the embedded one)")
    server.add_argument("--parallel", type=int, default=4, metavar="N", help="concurrent slots")
    server.add_argument("--ctx", type=int, default=32768, metavar="N",
                        help="total context size, shared by the slots")
    server.add_argument(
        "--threads", type=int, default=0, metavar="N", help="CPU threads (default: cores - 1)"
    )
    server.add_argument("--speculation", choices=("auto", "draft", "ngram", "off"),
                        default="auto", help="speculative decoding: auto is what measured "
                        "fastest (plain on CPU), draft takes the model's draft (or --draft), "
                        "ngram needs none, off decodes plainly")
    server.add_argument("--draft", metavar="NAME|GGUF",
                        help="the draft model (the same tokenizer; default: the model's own)")
    server.add_argument("--json", action="store_true",
                        help="print one JSON line (url, port, pid, model) once it listens")
    listed = commands.add_parser("prompts", parents=[common],
                                 help="list the prompts (shipped or yours) and check yours")
    listed.add_argument("--json", action="store_true", help="print JSON")
    completion = commands.add_parser("completion", parents=[common],
                                     help="print a shell completion script (bash, zsh, fish)")
    completion.add_argument("shell", choices=COMPLETION_SHELLS)
    complete = commands.add_parser("complete", parents=[common])  # for the scripts
    complete.add_argument("kind", choices=COMPLETION_KINDS)
    where = commands.add_parser("paths", parents=[common],
                                help="print every file and directory detektiv uses")
    where.add_argument("--json", action="store_true", help="print JSON")
    web = commands.add_parser("serve", parents=[common],
                              help="serve the app to a browser (textual-serve)",
                              description="Serve the app to a web browser (textual-serve), "
                              "on loopback unless --allow-remote and --host say otherwise.")
    web.add_argument("--host", default="127.0.0.1",
                     help="address to listen on (default 127.0.0.1; others need --allow-remote)")
    web.add_argument("--port", type=int, default=8000, metavar="N", help="0 picks a free port")
    web.add_argument("--allow-remote", action="store_true",
                     help="permit a --host that is not loopback (without --host it still "
                     "listens on 127.0.0.1); every request then needs the token printed "
                     "(or DETEKTIV_SERVE_TOKEN)")
    web.add_argument("--no-shared-model", dest="shared_model", action="store_false",
                     help="do not start one local-server for all tabs (each tab then loads "
                     "the embedded model itself)")
    mcp = commands.add_parser(
        "mcp", parents=[common],
        help="serve detektiv's tools over the Model Context Protocol (stdio; --http)",
        description="Serve detektiv's tools (interrogate, sessions, session, evaluate) to an "
        "MCP client: over stdio (the default; the client starts this command) or streamable "
        "HTTP (--http).")
    mcp.add_argument("--http", action="store_true",
                     help="streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    mcp.add_argument("--host", default="127.0.0.1",
                     help="with --http: address to listen on (default 127.0.0.1; others "
                     "need --allow-remote)")
    mcp.add_argument("--port", type=int, metavar="N",
                     help="with --http: port (default 8765; 0 picks a free one)")
    mcp.add_argument("--allow-remote", action="store_true",
                     help="with --http: permit a --host that is not loopback (without --host "
                     "it still listens on 127.0.0.1); every request then needs the token "
                     "printed (or DETEKTIV_MCP_TOKEN)")
    from tui.cli import agent, cache, case, evals, models, sessions

    sessions.add_parsers(commands, common)
    case.add_parsers(commands, common)
    agent.add_parsers(commands, common)
    cache.add_parser(commands, common)
    models.add_parser(commands, common)
    evals.add_parser(commands, common)
    return parser


def _failed(args: argparse.Namespace, family: str, kind: str, message: str,
            line: str | None) -> int:
    """Say why a command failed: one line on stderr, or with --json one JSON object
    (`{"error": {"family", "type", "message", "exit_code"}}`); returns the exit code."""
    code = EXIT_CODES[family]
    if getattr(args, "json", False):
        print(json.dumps({"error": {"family": family, "type": kind, "message": message,
                                    "exit_code": code}}, ensure_ascii=False), file=sys.stderr)
    elif line is not None:
        print(f"detektiv: {line}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    hold_lifeline()  # started by another detektiv (or the suite): die with it
    args = build_parser().parse_args(argv)
    paths = Paths.from_env(getattr(args, "config", None))
    debug = bool(getattr(args, "debug", False))
    try:
        level = log_level(os.environ.get("DETEKTIV_LOG_LEVEL"), debug)
    except ValueError as exc:
        print(f"detektiv: {exc}", file=sys.stderr)
        return 2
    try:
        log_path = configure_logging(paths.log_dir, level,
                                     echo=debug and args.command is not None)
    except OSError as exc:
        print(f"detektiv: cannot write logs in {paths.log_dir}: {exc.strerror}", file=sys.stderr)
        return 2
    if log.isEnabledFor(logging.DEBUG):  # the version is read only when it is written
        from engine import __version__

        log.debug("detektiv %s: %s, config %s", __version__, args.command or "the app",
                  paths.config_file)
    try:
        if args.command is None:
            if not sys.stdout.isatty() and not os.environ.get("TEXTUAL_DRIVER"):
                from engine import load_config

                load_config(paths)  # a broken config is the line worth saying
                print("detektiv: the app needs a terminal on stdout; in a script, use a "
                      "command (detektiv --help lists them)", file=sys.stderr)
                return 2
            from tui.app import run_app

            return run_app(paths)
        from tui.cli import agent, case, commands, evals, sessions as session_commands

        if args.command in session_commands.SESSION_COMMANDS:
            return asyncio.run(session_commands.dispatch(paths, args))
        if args.command in case.CASE_COMMANDS:
            return asyncio.run(case.dispatch(paths, args))
        if args.command in agent.AGENT_COMMANDS:
            return asyncio.run(agent.dispatch(paths, args))
        if args.command in evals.EVAL_COMMANDS:
            return asyncio.run(evals.dispatch(paths, args))
        match args.command:
            case "providers":
                return asyncio.run(commands.providers(paths, as_json=args.json))
            case "ask":
                return asyncio.run(commands.ask(paths, args))
            case "conversations":
                return commands.conversations(paths, as_json=args.json)
            case "cache":
                from tui.cli import cache as cache_commands

                return cache_commands.run(paths, args)
            case "local-server":
                return commands.local_server(paths, args)
            case "serve":
                return commands.serve(paths, args)
            case "mcp":
                from tui.mcp import run as run_mcp

                return run_mcp(paths, args)
            case "completion":
                from tui.cli.completion import script

                sys.stdout.write(script(args.shell))
                return 0
            case "complete":
                from tui.cli.completion import candidates

                print("\n".join(candidates(paths, args.kind)))
                return 0
            case "prompts":
                return commands.prompts(paths, as_json=args.json)
            case "paths":
                return commands.show_paths(paths, as_json=args.json)
            case "models":
                from tui.cli import models as model_commands

                return model_commands.run(paths, args)
    except DetektivError as exc:
        family = exit_family(exc)
        line = exc.message if family == "usage" else f"error: {exc.message}"
        return _failed(args, family, type(exc).__name__, exc.message, line)
    except KeyboardInterrupt:
        return _failed(args, "interrupted", "KeyboardInterrupt", "interrupted", None)
    except BrokenPipeError:  # `detektiv ask … | head`
        return 0
    except Exception as exc:
        log.exception("internal error")
        message = f"internal error: {type(exc).__name__} (details in {log_path})"
        return _failed(args, "failed", "InternalError", message, message)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
