"""The headless commands: `providers`, `ask`, `conversations`, `local-server`. No Textual
here."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from engine import (
    AskAnswered,
    AskDelta,
    AskEvent,
    AskNote,
    ConfigError,
    Paths,
    SchemaError,
    Workspace,
    check_schema,
    read_json,
    strip_control,
)
from tui.cli.printer import StreamPrinter

__all__ = ["ask", "conversations", "local_server", "providers"]


async def providers(paths: Paths, as_json: bool) -> int:
    """List every provider with kind, model, priority, circuit state and a live health check."""
    workspace = Workspace(paths)
    try:
        rows = await workspace.check_providers()
        advice = workspace.advice()
    finally:
        await workspace.aclose()
    if as_json:
        print(json.dumps([row.to_json() for row in rows], indent=2))
        return 0
    header = ("NAME", "KIND", "MODEL", "PRIO", "HEALTH", "CHECK", "CIRCUIT", "LATENCY",
              "WINDOW", "DETAIL")
    table = [header]
    table += [(row.name, row.kind, strip_control(row.model), str(row.priority), row.health,
               row.check or "-", row.circuit if row.state else "-", row.latency,
               row.window_text or "-", row.detail)
              for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header) - 1)]
    for line in table:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        print("  ".join([*cells, line[-1]]).rstrip())
    if advice:
        print(f"\nNote: {advice}")
    return 0


def _read_schema(path: Any) -> dict[str, Any]:
    try:
        schema = read_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    try:
        check_schema(schema)
    except SchemaError as exc:
        raise ConfigError(f"{path}: not a valid JSON schema: {exc}") from None
    assert isinstance(schema, dict)
    return schema


async def ask(paths: Paths, args: argparse.Namespace) -> int:
    """Stream one answer to stdout; with --schema, print JSON valid against it.

    With -p, that one provider answers; without, the router does (fallback chain). The
    question and its answer are kept as a conversation (-c continues the last one,
    --conversation ID a named one); its id is printed on stderr.
    """
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    schema = _read_schema(args.schema) if args.schema else None
    workspace = Workspace(paths, use_cache=not args.no_cache)
    out = StreamPrinter()
    try:
        workspace.config  # noqa: B018 - a bad config fails first
        asking = await workspace.ask.question(
            prompt, provider=args.provider, schema=schema, max_tokens=args.max_tokens,
            temperature=args.temperature, conversation=args.conversation,
            continue_last=args.continue_last)
        for warning in workspace.warnings:
            print(f"detektiv: warning: {warning}", file=sys.stderr)
        if args.json:
            return await _ask_json(asking.events())
        # On a terminal the answer streams; into a file or a pipe only the answer that won
        # goes (a failover mid-stream would leave the discarded start before it).
        live = sys.stdout.isatty()
        async for event in asking.events():
            match event:
                case AskDelta(text=text) if live:
                    out.write(text)
                case AskNote(text=text):
                    out.note(text)
                case AskAnswered(text=text, conversation_id=conversation):
                    if not live:
                        out.write(text)
                    out.end_line()
                    if conversation is not None:
                        out.note(f"conversation {conversation} (continue it with: detektiv "
                                 "ask -c \"…\")")
    finally:
        out.end_line()
        await workspace.aclose()
    return 0


async def _ask_json(events: AsyncIterator[AskEvent]) -> int:
    """`ask --json`: one object once the answer is complete (its notes with it)."""
    notes: list[str] = []
    async for event in events:
        match event:
            case AskNote(text=text):
                notes.append(text)
            case AskAnswered(text=text, provider=provider, conversation_id=conversation,
                             usage=usage):
                print(json.dumps({"answer": text, "provider": provider,
                                  "conversation": conversation, "notes": notes,
                                  "usage": usage.model_dump(mode="json")},
                                 ensure_ascii=False))
    return 0


def conversations(paths: Paths, as_json: bool) -> int:
    """List the conversations kept for `ask`, newest first."""
    store = Workspace(paths).conversations
    try:
        found = store.conversations("cli")
    finally:
        store.close()
    if as_json:
        rows = [{"id": c.conversation_id, "turns": c.turns, "created_at": c.created_at,
                 "updated_at": c.updated_at, "first_question": c.first_question} for c in found]
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not found:
        print('No conversations yet. Start one with: detektiv ask "…"')
        return 0
    for info in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated_at))
        question = " ".join(strip_control(info.first_question).split())
        if len(question) > 60:
            question = question[:59] + "…"
        print(f"{info.conversation_id:<10} {when}  {info.turns:>3} turns  {question}")
    return 0


def local_server(paths: Paths, args: argparse.Namespace) -> int:
    """Serve a local model on 127.0.0.1 until SIGINT or SIGTERM."""
    # Block the stop signals before llama.cpp starts its threads, so they all inherit the
    # mask and the main thread alone receives them in sigwait.
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    try:
        engine = Workspace(paths).models.serve(
            args.model, args.port, parallel=args.parallel, ctx=args.ctx, threads=args.threads,
            speculation=args.speculation, draft=args.draft)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
        raise
    address = str(engine.address)
    if args.json:
        port = int(address.rsplit(":", 1)[1])
        print(json.dumps({"url": f"{address}/v1", "port": port, "pid": os.getpid(),
                          "model": engine.options.model_path.name,
                          "model_path": str(engine.options.model_path),
                          "decoding": engine.speculation.label()}), flush=True)
    else:
        print(f"detektiv local-server: {engine.options.model_path.name} "
              f"({engine.speculation.label()}; pid {os.getpid()}) at {address}/v1", flush=True)
    signal.sigwait(stop_signals)
    return 0


def serve(paths: Paths, args: argparse.Namespace) -> int:
    """`detektiv serve`: the app in a browser (see `tui.serve.server`)."""
    from tui.listening import listener_token
    from tui.serve.server import ServeOptions, serve as run_server

    token = listener_token("DETEKTIV_SERVE_TOKEN") if args.allow_remote else None
    options = ServeOptions(args.host, args.port, token, getattr(args, "config", None),
                           shared_model=args.shared_model)
    return run_server(paths, options)


def show_paths(paths: Paths, as_json: bool) -> int:
    """`detektiv paths`: every file and directory detektiv uses, and whether it exists."""
    rows = paths.described()
    if as_json:
        print(json.dumps([{"name": name, "path": str(path), "exists": path.exists(),
                           "what": what} for name, path, what in rows], indent=2))
        return 0
    width = max(len(name) for name, _, _ in rows)
    for name, path, what in rows:
        print(f"{name.ljust(width)}  {path}{'' if path.exists() else '  (not yet)'}  # {what}")
    return 0


def prompts(paths: Paths, as_json: bool) -> int:
    """`detektiv prompts`: every prompt as a run would use it; exit 1 when an override is
    invalid (each says why)."""
    workspace = Workspace(paths)
    files = workspace.prompts()
    if as_json:
        print(json.dumps([{"name": f.name, "source": f.source, "path": str(f.path),
                           "sha256": f.sha256, "placeholders": list(f.placeholders),
                           "valid": f.problem is None, "problem": f.problem}
                          for f in files], indent=2, ensure_ascii=False))
    else:
        print(f"your prompts: {workspace.user_prompts_dir} (a file there named as a shipped "
              "one replaces it)")
        for f in files:
            where = "shipped" if f.source == "shipped" else f"user    {f.path}"
            line = f"{f.name:<26} {where}  sha256:{f.sha256[:12]}"
            if f.problem is not None:
                line += f"\n{'':<26} INVALID: {f.problem}"
            print(line)
    return 1 if any(f.problem is not None for f in files) else 0
