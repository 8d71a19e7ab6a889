"""How `detektiv mcp` is reached: stdio (the default) or streamable HTTP (`--http`).

stdio: stdout is the wire. detektiv's logs go to its log file (and stderr with `--debug`);
the SDK's transport moves file descriptor 1 onto stderr while it serves and writes the wire
through a duplicate of its own, so what the embedded llama.cpp prints from C never reaches
the client.

HTTP: on loopback unless `--allow-remote`, which requires a token (as `serve` does): every
request then carries `Authorization: Bearer TOKEN`. Every request's `Origin`, when it has one,
must be a loopback origin or the server's own (the MCP specification's defence against DNS
rebinding: a web page cannot make a browser call a local server under its own name), and on
loopback the `Host` must be a loopback name too.
"""

from __future__ import annotations

import hmac
import socket
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from engine import ConfigError, is_loopback
from tui.listening import check_listener

__all__ = ["Guard", "HttpOptions", "serve_http"]

PATH = "/mcp"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class HttpOptions:
    host: str
    port: int
    token: str | None
    """Required of every request when set (`--allow-remote`)."""


def _hostname(value: str) -> str:
    """`"127.0.0.1"` of a Host header `"127.0.0.1:8000"` (or `"[::1]:8000"`)."""
    return (urlsplit(f"//{value}").hostname or "").lower()


def _loopback_name(name: str) -> bool:
    return name in LOOPBACK_NAMES or (name != "localhost" and is_loopback(name))


class Guard:
    """ASGI middleware: the token, the Origin and the Host checks (see the module
    docstring), each refusal a plain-text line with its status."""

    def __init__(self, app: Any, options: HttpOptions) -> None:
        self.app = app
        self.options = options

    def refusal(self, headers: dict[str, str]) -> tuple[int, str] | None:
        host = _hostname(headers.get("host", ""))
        if is_loopback(self.options.host) and not _loopback_name(host):
            return 421, f"refused: the Host {host or '(none)'!s} is no loopback name"
        origin = headers.get("origin")
        if origin is not None and origin != "null":
            name = (urlsplit(origin).hostname or "").lower()
            if not (_loopback_name(name) or name == host):
                return 403, f"refused: the Origin {origin} is not this server's"
        elif origin == "null":
            return 403, "refused: an opaque Origin (null)"
        token = self.options.token
        if token is not None:
            given = headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                    value.strip().encode(), token.encode()):
                return 401, "refused: this server needs its token (Authorization: Bearer …)"
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        refused = self.refusal(headers)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, text = refused
        extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"), *extra]})
        await send({"type": "http.response.body", "body": (text + "\n").encode()})


async def serve_http(server: Any, options: HttpOptions) -> None:
    """Serve streamable HTTP at http://HOST:PORT/mcp until SIGINT or SIGTERM; the address
    (and the token) is said on stderr once the socket listens."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    check_listener("mcp", options.host, options.token)
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        # the Guard checks Host and Origin for every address (the SDK's lists are exact)
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        host=options.host)
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((options.host, options.port))
    except OSError as exc:
        listener.close()
        raise ConfigError(f"mcp: cannot listen on {options.host}:{options.port}: "
                          f"{exc.strerror}") from None
    port = listener.getsockname()[1]
    shown = f"[{options.host}]" if ":" in options.host else options.host
    where = f"http://{shown}:{port}{PATH}"
    token = f" (send Authorization: Bearer {options.token})" if options.token else ""
    print(f"detektiv mcp: serving {where}{token}", file=sys.stderr, flush=True)
    config = uvicorn.Config(Guard(app, options), log_level="warning", log_config=None,
                            lifespan="on")
    await uvicorn.Server(config).serve(sockets=[listener])
