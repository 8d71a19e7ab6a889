"""The headless commands: `providers`, `ask`, `conversations`, `local-server`. No Textual
here."""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from engine import (
    Attempt,
    ConfigError,
    Done,
    Fitted,
    PartialDiscarded,
    Paths,
    Provider,
    ProviderEvent,
    Router,
    RouterEvent,
    SchemaError,
    StreamEvent,
    StreamRequest,
    TokenDelta,
    UnusableReplyError,
    Workspace,
    check_schema,
    complete_json,
    demonstration_note,
    fit,
    history_note,
    strip_control,
)
from tui.cli.printer import StreamPrinter

__all__ = ["ask", "conversations", "local_server", "providers"]

RETRY_TEMPERATURE = 0.8
"""An empty answer is asked for once more, sampled at least this warm (greedy decoding that
said nothing says nothing again)."""
EMPTY_ANSWER_TWICE = "the answer was empty twice (a small model may end its turn at once)"


def _public_url(url: str | None) -> str | None:
    """A base URL without any user:password part."""
    if url is None or "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('@', 1)[1]}"


async def providers(paths: Paths, as_json: bool) -> int:
    """List every provider with kind, model, priority, circuit state and a live health check."""
    workspace = Workspace(paths)
    config = workspace.config
    router = await workspace.new_router()
    try:
        checks = await router.check_health()
        advice = demonstration_note([config.providers[n] for n in router.chain("detective")])
    finally:
        await router.aclose()
    rows: list[dict[str, Any]] = []
    for name, pc in sorted(config.providers.items(), key=lambda item: item[1].priority):
        state = router.states.get(name)
        health = checks.get(name)
        rows.append(
            {
                "name": name,
                "kind": pc.kind,
                "model": pc.model,
                "priority": pc.priority,
                "enabled": pc.enabled,
                "origin": pc.origin,
                "demonstration": pc.is_demonstration,
                "base_url": _public_url(pc.base_url),
                "status": state.status.value if state else None,
                "circuit": state.circuit.value if state else None,
                "consecutive_failures": state.consecutive_failures if state else None,
                "rate_limited_until": state.rate_limited_until if state else None,
                "last_error": strip_control(state.last_error) if state and state.last_error
                else None,
                "health": None
                if health is None
                else {
                    "ok": health.ok,
                    "latency_ms": round(health.latency_ms, 1),
                    "detail": strip_control(health.detail),
                    "checked_at": health.checked_at,
                },
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    header = ("NAME", "KIND", "MODEL", "PRIO", "HEALTH", "CIRCUIT", "LATENCY", "DETAIL")
    table = [header]
    for row in rows:
        health = row["health"]
        status = "disabled" if health is None else ("ok" if health["ok"] else "down")
        latency = "" if health is None else f"{health['latency_ms']:.0f} ms"
        detail = "" if health is None else health["detail"]
        circuit = (row["circuit"] or "-").replace("_", "-")
        table.append(
            (row["name"], row["kind"], row["model"], str(row["priority"]), status, circuit,
             latency, detail)
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(header) - 1)]
    for line in table:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        print("  ".join([*cells, line[-1]]).rstrip())
    if advice:
        print(f"\nNote: {advice}")
    return 0


def _read_schema(path: Any) -> dict[str, Any]:
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
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


async def _print_stream(events: AsyncIterator[RouterEvent | StreamEvent],
                        out: StreamPrinter) -> tuple[str, str | None]:
    """Answer text to stdout; skips, switches and discarded partial answers noted on stderr.
    Returns the answer and the provider that gave it."""
    parts: list[str] = []
    provider: str | None = None
    async for event in events:
        match event:
            case TokenDelta(text):
                parts.append(text)
                out.write(text)
            case Attempt(label=label):
                parts, provider = [], label
            case Fitted(report=report) if report.trim:
                out.note(history_note(report))
            case ProviderEvent(type="provider_switch", from_provider=old, to_provider=new):
                out.note(f"switching from {old} to {new}")
            case ProviderEvent(from_provider=name, reason=reason):
                out.note(f"{name}: {reason}")
            case PartialDiscarded(provider=name):
                out.note(f"the partial answer from {name} above is discarded; starting over")
            case Done(finish_reason="length"):
                out.note("stopped: max tokens reached")
    return "".join(parts), provider


async def ask(paths: Paths, args: argparse.Namespace) -> int:
    """Stream one answer to stdout; with --schema, print JSON valid against it.

    With -p, that one provider answers; without, the router does (fallback chain). The
    question and its answer are kept as a conversation (-c continues the last one,
    --conversation ID a named one); its id is printed on stderr.
    """
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        raise ConfigError("the prompt is empty")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise ConfigError("--max-tokens must be at least 1")
    schema = _read_schema(args.schema) if args.schema else None
    workspace = Workspace(paths, use_cache=not args.no_cache)
    workspace.config  # noqa: B018 - a bad config fails first
    policy = workspace.context_policy  # noqa: F841 - its warnings are shown before the answer
    for warning in workspace.warnings:
        print(f"detektiv: warning: {warning}", file=sys.stderr)
    request = StreamRequest.of(
        prompt, schema=schema, max_tokens=args.max_tokens, temperature=args.temperature
    )
    out = StreamPrinter()
    source: Provider | Router
    if args.provider:  # that one provider, tried whatever the router remembers about it
        source = await workspace.provider(args.provider)
    else:
        source = await workspace.new_router()
    try:
        asked = workspace.ask(request, conversation=args.conversation,
                              continue_last=args.continue_last)
        if args.continue_last and not asked.history and asked.conversation_id:
            out.note("no earlier conversation to continue; starting a new one")
        if schema is None:
            prompt = asked.prompt
            for attempt in (1, 2):
                if isinstance(source, Router):
                    text, label = await _print_stream(source.stream(prompt), out)
                else:
                    fitted = await fit(source, prompt)
                    if fitted.report.trim and attempt == 1:
                        out.note(history_note(fitted.report))
                    text, label = await _print_stream(source.stream(fitted.request), out)
                    label = source.label
                if text.strip():
                    break
                if attempt == 2:  # never exit 0 with nothing printed
                    raise UnusableReplyError(label or "the model", EMPTY_ANSWER_TWICE)
                out.note(f"{label} gave an empty answer; asking once more, sampled at "
                         f"temperature {RETRY_TEMPERATURE}")
                prompt = replace(prompt, request=replace(
                    prompt.request, temperature=max(RETRY_TEMPERATURE,
                                                    prompt.request.temperature or 0)))
        elif isinstance(source, Router):
            value, done = await source.complete_json(asked.prompt)
            for event in done.events:
                if isinstance(event, ProviderEvent) and event.type != "provider_switch":
                    out.note(f"{event.from_provider}: {event.reason}")
            text, label = json.dumps(value, indent=2, ensure_ascii=False), done.label
            out.write(text + "\n")
        else:
            fitted = await fit(source, asked.prompt)
            value = await complete_json(source, fitted.request)
            text, label = json.dumps(value, indent=2, ensure_ascii=False), source.label
            out.write(text + "\n")
        out.end_line()
        asked.answered(text, label)
        if asked.conversation_id is not None:
            out.note(f"conversation {asked.conversation_id} (continue it with: detektiv ask -c "
                     "\"…\")")
    finally:
        out.end_line()
        await source.aclose()
        await workspace.aclose()
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


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def local_server(paths: Paths, args: argparse.Namespace) -> int:
    """Serve the embedded model on 127.0.0.1 until SIGINT or SIGTERM."""
    from engine import LlamaEngine, LlamaOptions, default_local_model, resolve_model_path

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port}: not a port number")
    if args.port and not _port_free(args.port):
        raise ConfigError(f"--port {args.port}: already in use on 127.0.0.1")
    try:
        model = resolve_model_path(args.model or default_local_model(), paths)
    except FileNotFoundError as exc:
        raise ConfigError(f"--model {args.model}: {exc}") from None
    if not model.is_file():
        raise ConfigError(f"--model {model}: no such file")
    # Block the stop signals before llama.cpp starts its threads, so they all inherit the
    # mask and the main thread alone receives them in sigwait.
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    engine = LlamaEngine(
        LlamaOptions(
            model_path=model,
            port=args.port,
            public=True,
            n_parallel=args.parallel,
            n_ctx=args.ctx,
            n_threads=max(0, args.threads),
        )
    )
    try:
        engine.load()
    except Exception as exc:
        raise ConfigError(f"cannot serve {model.name} on port {args.port}: {exc}") from None
    print(f"detektiv local-server: {model.name} at {engine.address}/v1", flush=True)
    signal.sigwait(stop_signals)
    return 0
