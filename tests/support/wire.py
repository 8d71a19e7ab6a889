"""A loopback HTTP/1.1 server whose replies a test scripts byte by byte.

Used to speak the documented wire formats of Anthropic (SSE) and Ollama (NDJSON) where no real
server can run here. Bodies go out with chunked transfer encoding, so a test can cut the
connection mid-body and the client sees a truncated stream, exactly as with a real server.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


CUT = object()
"""Yield this from a body to drop the connection without finishing the chunked body."""

DROP = object()
"""Return this from a route to close the connection without answering at all."""


@dataclass
class Reply:
    """What to answer: status, headers, and a body of bytes, floats (sleep) or CUT."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Iterable[Any] = ()


Route = Callable[[Recorded], Any]  # a Reply, or DROP


class WireServer:
    """Serve scripted replies on 127.0.0.1; `routes` maps "METHOD /path" to a function.
    `keep_alive`: connections stay open between requests (as llama.cpp's and vLLM's do);
    by default each reply closes its connection."""

    def __init__(self, routes: dict[str, Route], keep_alive: bool = False) -> None:
        self.routes = routes
        self.keep_alive = keep_alive
        self.requests: list[Recorded] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                recorded = Recorded(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length) if length else b"",
                )
                server.requests.append(recorded)
                route = server.routes.get(f"{self.command} {self.path.split('?')[0]}")
                reply = route(recorded) if route else Reply(404, body=[b'{"error":"no route"}'])
                if reply is DROP:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("transfer-encoding", "chunked")
                if not server.keep_alive:
                    self.send_header("connection", "close")
                self.end_headers()
                self.wfile.flush()
                for piece in reply.body:
                    if piece is CUT:
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if isinstance(piece, int | float):
                        time.sleep(piece)
                        continue
                    data = piece.encode() if isinstance(piece, str) else piece
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            do_GET = do_POST = do_DELETE = _handle

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # as a real server's: 32 clients may connect at once

            def handle_error(self, request: Any, client_address: Any) -> None:
                import sys

                if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that left
                    super().handle_error(request, client_address)

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> WireServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def json_reply(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    """A JSON body in one piece."""
    return Reply(status, {"content-type": "application/json", **(headers or {})},
                 [json.dumps(data).encode()])


@contextlib.asynccontextmanager
async def openai_behind(routes: dict[str, Route], paths: Any) -> AsyncIterator[Any]:
    """An `openai` provider named `srv` in front of a `WireServer` with `routes`, closed after."""
    from engine import ProviderConfig
    from engine.providers import create_provider

    with WireServer(routes) as server:
        provider = create_provider("srv", ProviderConfig(
            kind="openai", model="m", base_url=f"{server.url}/v1"), paths)
        try:
            yield provider
        finally:
            await provider.aclose()


def chat(reply: Reply) -> dict[str, Route]:
    """The routes of a server that answers every chat completion with `reply`."""
    return {"POST /v1/chat/completions": lambda _: reply}
