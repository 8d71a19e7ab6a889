"""`detektiv mcp`: detektiv over the Model Context Protocol (`tui.mcp.server` has the tools,
`tui.mcp.transport` how they are reached)."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from engine import Paths, Workspace

if TYPE_CHECKING:
    from tui.mcp.transport import HttpOptions

__all__ = ["run"]

TOKEN_VARIABLE = "DETEKTIV_MCP_TOKEN"
DEFAULT_PORT = 8765


def run(paths: Paths, args: argparse.Namespace) -> int:
    """Serve until the client goes (stdio) or SIGINT/SIGTERM (`--http`)."""
    from tui.listening import check_listener, listener_token
    from tui.mcp.transport import HttpOptions

    options = None
    if args.http:
        token = listener_token(TOKEN_VARIABLE) if args.allow_remote else None
        check_listener("mcp", args.host, token)  # before anything loads
        options = HttpOptions(args.host, DEFAULT_PORT if args.port is None else args.port,
                              token)
    elif args.allow_remote or args.host != "127.0.0.1" or args.port is not None:
        from engine import ConfigError

        raise ConfigError("mcp: --host, --port and --allow-remote go with --http")
    asyncio.run(_serve(paths, options))
    return 0


async def _serve(paths: Paths, options: HttpOptions | None) -> None:
    from tui.mcp.server import build
    from tui.mcp.transport import serve_http

    workspace = Workspace(paths)
    try:
        workspace.config  # noqa: B018 - a bad config fails here, in one line, before serving
        server = build(workspace)
        if options is not None:
            await serve_http(server, options)
        else:
            await server.run_stdio_async()
    finally:
        await workspace.aclose()
