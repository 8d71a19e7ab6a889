"""The headless commands: `providers`, `ask`, `local-server`. No Textual here."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys
from typing import Any

from engine import (
    Config,
    ConfigError,
    Done,
    Health,
    Paths,
    Provider,
    ProviderError,
    StreamRequest,
    TokenDelta,
    complete_json,
    create_provider,
    discover_ollama,
    load_config,
    select_provider,
    strip_control,
)
from engine.structured import SchemaError, check_schema

__all__ = ["ask", "local_server", "providers"]


def _public_url(url: str | None) -> str | None:
    """A base URL without any user:password part."""
    if url is None or "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('@', 1)[1]}"


async def providers(paths: Paths, as_json: bool) -> int:
    """List every provider with kind, model, priority and a live health result."""
    config = load_config(paths)
    await discover_ollama(config)
    entries = sorted(config.providers.items(), key=lambda item: item[1].priority)
    built = [(name, pc, create_provider(name, pc, paths)) for name, pc in entries]

    async def check(provider: Provider, enabled: bool) -> Health | None:
        return await provider.health() if enabled else None

    try:
        results = await asyncio.gather(*(check(p, pc.enabled) for _, pc, p in built))
    finally:
        await asyncio.gather(*(p.aclose() for _, _, p in built))
    rows: list[dict[str, Any]] = []
    for (name, pc, _), health in zip(built, results, strict=True):
        rows.append(
            {
                "name": name,
                "kind": pc.kind,
                "model": pc.model,
                "priority": pc.priority,
                "enabled": pc.enabled,
                "origin": pc.origin,
                "base_url": _public_url(pc.base_url),
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
    header = ("NAME", "KIND", "MODEL", "PRIO", "HEALTH", "LATENCY", "DETAIL")
    table = [header]
    for row in rows:
        health = row["health"]
        status = "disabled" if health is None else ("ok" if health["ok"] else "down")
        latency = "" if health is None else f"{health['latency_ms']:.0f} ms"
        detail = "" if health is None else health["detail"]
        table.append(
            (row["name"], row["kind"], row["model"], str(row["priority"]), status, latency, detail)
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(header) - 1)]
    for line in table:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        print("  ".join([*cells, line[-1]]).rstrip())
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


def _choose(config: Config, spec: str | None) -> tuple[str, Any]:
    if spec:
        return select_provider(config, spec)
    ranked = config.by_priority()
    if not ranked:
        raise ConfigError("no enabled provider: enable one in the config file")
    return ranked[0]


async def ask(paths: Paths, args: argparse.Namespace) -> int:
    """Stream one answer to stdout; with --schema, print JSON valid against it."""
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        raise ConfigError("the prompt is empty")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise ConfigError("--max-tokens must be at least 1")
    schema = _read_schema(args.schema) if args.schema else None
    config = load_config(paths)
    if not args.provider or (args.provider not in config.providers and ":" not in args.provider):
        await discover_ollama(config)  # `providers` may have shown a discovered one
    name, provider_config = _choose(config, args.provider)
    provider = create_provider(name, provider_config, paths)
    request = StreamRequest.of(
        prompt, schema=schema, max_tokens=args.max_tokens, temperature=args.temperature
    )
    out = sys.stdout
    try:
        if schema is not None:
            value = await complete_json(provider, request)
            out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
            return 0
        ended_with_newline = True
        async for event in provider.stream(request):
            if type(event) is TokenDelta:
                text = strip_control(event.text)
                if text:
                    out.write(text)
                    out.flush()
                    ended_with_newline = text.endswith("\n")
            elif type(event) is Done and event.finish_reason == "length":
                print("\n[stopped: max tokens reached]", file=sys.stderr)
        if not ended_with_newline:
            out.write("\n")
        return 0
    except ProviderError:
        out.flush()
        raise
    finally:
        await provider.aclose()


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def local_server(paths: Paths, args: argparse.Namespace) -> int:
    """Serve the embedded model on 127.0.0.1 until SIGINT or SIGTERM."""
    from engine.config import BUNDLED_MODEL
    from engine.providers._llama import LlamaEngine, LlamaOptions, resolve_model_path

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port}: not a port number")
    if args.port and not _port_free(args.port):
        raise ConfigError(f"--port {args.port}: already in use on 127.0.0.1")
    model = resolve_model_path(args.model or BUNDLED_MODEL, paths.model_dir)
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
        )
    )
    try:
        engine.load()
    except Exception as exc:
        raise ConfigError(f"cannot serve {model.name} on port {args.port}: {exc}") from None
    print(f"detektiv local-server: {model.name} at {engine.address}/v1", flush=True)
    signal.sigwait(stop_signals)
    return 0
