"""A fault-injecting HTTP proxy on 127.0.0.1, in front of the real llama.cpp server.

Each connection takes the next fault from `plan` (then `default`) and serves one request:

    pass            forward to the real server, response streamed through unchanged
    500             answer HTTP 500 with an OpenAI-style error body
    429:VALUE       answer HTTP 429 with `Retry-After: VALUE` (seconds or an HTTP date)
    hold            read the request, never send a byte
    drop            read the request, close the connection without a byte (a stale keep-alive)
    stall:N         forward N SSE data events, then go silent (connection kept open)
    cut:N           forward N SSE data events, then drop the connection
    malformed:N     forward N SSE data events, then a `data:` line that is not JSON, then
                    nothing (the real server's generation stops when the client leaves)
    invalid_json    a well-formed stream whose content is not JSON (for structured requests)
    script:NAME     a well-formed stream of `scripts[NAME]` = (text, finish_reason), in pieces;
                    finish_reason "cut" drops the connection after the text instead
    html            HTTP 200 with an HTML sign-in page (text/html), as a captive proxy sends
    json200         HTTP 200 with a JSON error body (application/json)
    whole           the real server's answer asked for without streaming: one JSON completion,
                    as from a server that ignores `stream`
    relabel         the real stream with its content type rewritten to text/plain
    prompt:NAME     the real server's stream for one user message `scripts[NAME][0]` in place
                    of the request's messages: the real model generates, on a prompt whose
                    length of reply the test chooses (not on detektiv's, whose reply from the
                    tiny model may be anything, an immediate end of turn too)

`schema_scripts` maps a structured request's schema name (`gap_analysis`) to a script: such a
request is answered by it, whatever the plan (the plan is not consumed). `judgement` (a
`scripted.Judged`, or a list of them taken in turn, the last repeated) answers every judgement
request, with log-probabilities when they are asked for (a stated probability when not).

Only chat requests (`…/chat/completions`) take a fault and are counted: llama.cpp's own
endpoints that detektiv asks before a call (`/props`, `/apply-template`, `/tokenize`: the
window and the exact token count) always pass, and are listed in `side_requests`.

`refuse()` stops listening (connections are refused, so none are counted); `accept()` listens
again on the same port. `connections` counts every chat connection accepted; `open` the
connections open now; `requests` holds every chat request body received, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx

from tests.support.scripted import Judged, is_judgement, judgement_reply


class FaultProxy:
    """See the module docstring."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.plan: list[str] = []
        self.default = "pass"
        self.connections = 0
        self.open = 0
        self.requests: list[bytes] = []
        self.side_requests: list[str] = []
        self.schema_scripts: dict[str, str] = {}
        self.judgement: Judged | list[Judged] | None = None
        self.scripts: dict[str, tuple[str, str]] = {}
        self.port = 0
        self._server: asyncio.Server | None = None
        self._client = httpx.AsyncClient(base_url=upstream, timeout=None)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._handle, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def refuse(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def accept(self) -> None:
        if self._server is None:
            await self.start()

    async def stop(self) -> None:
        await self.refuse()
        await self._client.aclose()

    def _by_schema(self, body: bytes) -> str | None:
        """`script:NAME` when the request asks for a schema named in `schema_scripts`;
        `judge` for a judgement when `judgement` is set."""
        if self.judgement is not None:
            try:
                data = json.loads(body)
                if is_judgement(data["messages"]):
                    return "judge"
            except (ValueError, KeyError, TypeError):
                pass
        if not self.schema_scripts:
            return None
        try:
            name = json.loads(body)["response_format"]["json_schema"]["name"]
        except (ValueError, KeyError, TypeError):
            return None
        script = self.schema_scripts.get(name)
        return f"script:{script}" if script else None

    def _next_fault(self) -> str:
        return self.plan.pop(0) if self.plan else self.default

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
            length = int({k.lower(): v for k, v in headers.items()}.get("content-length", 0))
            if not path.endswith("/chat/completions"):  # the window, a token count: no fault
                self.side_requests.append(path)
                body = await reader.readexactly(length) if length else b""
                await self._serve("pass", method, path, headers, body, reader, writer)
                return
            self.connections += 1
            body = await reader.readexactly(length) if length else b""
            fault = self._by_schema(body) or self._next_fault()
            self.requests.append(body)
            await self._serve(fault, method, path, headers, body, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, httpx.TransportError):
            pass  # the client (or the server behind) went away: so does this connection
        finally:
            self.open -= 1
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    def _start(writer: asyncio.StreamWriter, status: int, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} X"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        lines += ["transfer-encoding: chunked", "connection: close", "", ""]
        writer.write("\r\n".join(lines).encode())

    @staticmethod
    async def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()

    @staticmethod
    async def _end(writer: asyncio.StreamWriter) -> None:
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _sse(self, writer: asyncio.StreamWriter, text: str, finish: str,
                   logprobs: list[dict[str, Any]] | None = None) -> None:
        """A well-formed OpenAI stream of `text` in five pieces, then `finish`; `logprobs`
        with the first piece."""
        self._start(writer, 200, {"content-type": "text/event-stream"})
        base = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        step = max(1, len(text) // 5 + 1)
        pieces: list[str | None] = [text[i:i + step] for i in range(0, len(text), step)]
        for number, content in enumerate([*pieces, None]):
            if content is None and finish == "cut":
                writer.transport.abort()
                return
            delta = {"content": content} if content else {}
            choice: dict[str, Any] = {"index": 0, "delta": delta,
                                      "finish_reason": None if content else finish}
            if number == 0 and logprobs is not None:
                choice["logprobs"] = {"content": logprobs}
            await self._chunk(writer, f"data: {json.dumps({**base, 'choices': [choice]})}\n\n"
                              .encode())
        await self._chunk(writer, b"data: [DONE]\n\n")
        await self._end(writer)

    async def _serve(
        self,
        fault: str,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        kind, _, arg = fault.partition(":")
        if kind == "hold":
            await reader.read()  # until the client gives up and closes
            return
        if kind == "drop":
            return  # _handle closes the connection
        if kind in ("500", "429"):
            status = int(kind)
            extra = {"retry-after": arg} if kind == "429" else {}
            error = {"error": {"message": f"injected {status}", "type": "server_error",
                               "code": status}}
            self._start(writer, status, {"content-type": "application/json", **extra})
            await self._chunk(writer, json.dumps(error).encode())
            await self._end(writer)
            return
        if kind == "invalid_json":
            self._start(writer, 200, {"content-type": "text/event-stream"})
            base = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
            for content, finish in (('{"answer": ', None), ("not json at all", None),
                                    (None, "stop")):
                delta = {"content": content} if content else {}
                chunk = {**base, "choices": [{"index": 0, "delta": delta,
                                              "finish_reason": finish}]}
                await self._chunk(writer, f"data: {json.dumps(chunk)}\n\n".encode())
            await self._chunk(writer, b"data: [DONE]\n\n")
            await self._end(writer)
            return
        if kind == "judge":
            assert self.judgement is not None
            judged = self.judgement
            if isinstance(judged, list):
                judged = judged.pop(0) if len(judged) > 1 else judged[0]
            text, logprobs = judgement_reply(judged, json.loads(body))
            await self._sse(writer, text, "stop", logprobs)
            return
        if kind == "script":
            text, finish = self.scripts[arg]
            await self._sse(writer, text, finish)
            return
        if kind in ("html", "json200"):
            html = ("<!DOCTYPE html>\n<html><head><title>Sign in - Corporate Proxy</title></head>"
                    "<body>Please sign in</body></html>")
            error = json.dumps({"error": {"message": "quota exhausted for this key"}})
            self._start(writer, 200, {"content-type": "text/html; charset=utf-8" if kind == "html"
                                      else "application/json"})
            await self._chunk(writer, (html if kind == "html" else error).encode())
            await self._end(writer)
            return
        if kind == "prompt":
            data = {**json.loads(body), "messages": [
                {"role": "user", "content": self.scripts[arg][0]}]}
            data.pop("response_format", None)
            body = json.dumps(data).encode()
        if kind == "whole":
            data = {**json.loads(body), "stream": False}
            data.pop("stream_options", None)
            body = json.dumps(data).encode()
        forward = {k: v for k, v in headers.items()
                   if k.lower() not in ("host", "content-length", "connection")}
        request = self._client.build_request(method, path, headers=forward, content=body)
        upstream = await self._client.send(request, stream=True)
        try:
            content_type = upstream.headers.get("content-type", "application/json")
            if kind == "relabel":
                content_type = "text/plain"
            self._start(writer, upstream.status_code, {"content-type": content_type})
            limit = int(arg) if kind in ("stall", "cut", "malformed") else None
            events = 0
            async for line in upstream.aiter_lines():
                if limit is not None and line.startswith("data:"):
                    if events == limit:
                        if kind == "cut":
                            writer.transport.abort()
                            return
                        if kind == "stall":
                            await reader.read()
                            return
                        if kind == "malformed":
                            await self._chunk(writer, b"data: {oops, not json\n\n")
                            await reader.read()  # the client gives up; stop generating
                            return
                    events += 1
                await self._chunk(writer, (line + "\n").encode())
            await self._end(writer)
        finally:
            await upstream.aclose()
