"""Reading what a server sends, bounded: the lines of a stream (CRLF, CR or LF), its SSE
events, a whole body. A broken or hostile server cannot fill memory: past `MOST_BYTES` a line
or a body is a `BadResponseError`, and an error reply is read only for its message."""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from engine.errors import BadResponseError

if TYPE_CHECKING:
    import httpx

__all__ = ["ERROR_BYTES", "MOST_BYTES", "bound_lines", "bounded", "is_event_stream", "iter_sse",
           "looks_like_sse", "read_error_body", "read_whole", "said_json", "sse_events",
           "stream_lines"]

MOST_BYTES = 16 << 20
"""The longest line of an event stream, and the largest whole reply, read from a server
(16 MiB): past it a reply is no answer, and a broken or hostile server cannot fill memory."""
ERROR_BYTES = 64 << 10
"""What is read of an error reply's body: its message is in the first lines."""
_LINE_END = re.compile(r"\r\n|\r|\n")


async def stream_lines(provider: str, chunks: AsyncIterator[bytes],
                       limit: int = MOST_BYTES) -> AsyncIterator[str]:
    """The lines of a UTF-8 byte stream, ended by CRLF, CR or LF (an event stream's framing);
    a line longer than `limit` characters is a `BadResponseError`, never read to its end."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    line: list[str] = []  # the line read so far, in pieces
    size = 0
    after_cr = False  # the text so far ended with a CR: an LF next is its other half
    finished = False
    while not finished:
        chunk = await anext(chunks, None)
        finished = chunk is None
        text = decoder.decode(chunk or b"", finished)
        if after_cr and text.startswith("\n"):
            text, after_cr = text[1:], False
        if not text:
            continue
        after_cr = text.endswith("\r")
        pieces = _LINE_END.split(text)  # only the new text is searched
        if len(pieces) > 1:
            yield "".join(line) + pieces[0]
            for piece in pieces[1:-1]:
                yield piece
            line, size = [pieces[-1]], len(pieces[-1])
        else:
            line.append(text)
            size += len(text)
        if size > limit:
            raise BadResponseError(provider, f"a line of the stream ran past {limit:,} "
                                   "characters")
    if size:
        yield "".join(line)


def bound_lines(response: httpx.Response, provider: str, limit: int = MOST_BYTES,
                objects: bool = True) -> None:
    """`response`'s NDJSON body, as a library reads it (Ollama's, line by line): blank lines
    (a proxy's keep-alive) left out, a line that is no JSON object refused by name (unless
    not `objects`: a body the caller names itself), and a line that runs past `limit` bytes
    refused before it fills memory (`BadResponseError`)."""
    import httpx

    if not isinstance(response.stream, httpx.AsyncByteStream):
        return
    inner: httpx.AsyncByteStream = response.stream

    def kept(line: bytes) -> bytes:
        if not line.strip():
            return b""
        if objects and not line.lstrip().startswith(b"{"):
            raise BadResponseError(provider, f"a line of the stream that is no JSON object: "
                                   f"{line[:80].decode('utf-8', 'replace')!r}")
        return line + b"\n"

    class Bounded(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            pending = bytearray()  # the line not ended yet
            async for chunk in inner:
                if b"\n" not in chunk:
                    pending += chunk
                else:
                    *lines, rest = (bytes(pending) + chunk).split(b"\n")
                    pending = bytearray(rest)
                    out = b"".join(kept(line) for line in lines)
                    if out:
                        yield out
                if len(pending) > limit:
                    raise BadResponseError(provider, f"a line of the stream ran past "
                                           f"{limit:,} bytes")
            if pending.strip():
                yield kept(bytes(pending))

        async def aclose(self) -> None:
            await inner.aclose()

    response.stream = Bounded()


async def _one_chunk(body: bytes) -> AsyncIterator[bytes]:
    """A body already read, as the chunks `stream_lines` takes."""
    yield body


async def sse_events(provider: str, reply: httpx.Response
                     ) -> tuple[AsyncIterator[tuple[str, str]] | None, bytes]:
    """`reply`'s server-sent events (`iter_sse`), its lines read bounded; or, when it is no
    event stream whatever its content type says (some proxies drop or rewrite the header),
    None and its whole body, for the caller to say what it was."""
    chunks: AsyncIterator[bytes]
    if is_event_stream(reply.headers.get("content-type")):
        chunks = reply.aiter_bytes()
    else:
        body = await read_whole(provider, reply)
        if not looks_like_sse(body):
            return None, body
        chunks = _one_chunk(body)
    return iter_sse(stream_lines(provider, chunks)), b""


async def _at_most(reply: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """Up to `limit` bytes of `reply`'s body, and whether that was all of it."""
    parts: list[bytes] = []
    size = 0
    async for chunk in reply.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(parts)[:limit], False
    return b"".join(parts), True


async def read_whole(provider: str, reply: httpx.Response, limit: int = MOST_BYTES) -> bytes:
    """`reply`'s whole body; a `BadResponseError` past `limit` bytes."""
    body, whole = await _at_most(reply, limit)
    if not whole:
        raise BadResponseError(provider, f"the reply ran past {limit:,} bytes")
    return body


async def bounded(client: httpx.AsyncClient, method: str, url: str, provider: str,
                  limit: int = MOST_BYTES, **kwargs: Any) -> httpx.Response:
    """`client.request(method, url, **kwargs)` with its body read to at most `limit` bytes (a
    `BadResponseError` past it): for the small JSON a server says about itself."""
    import httpx

    async with client.stream(method, url, **kwargs) as reply:
        body = await read_whole(provider, reply, limit)
    headers = [(k, v) for k, v in reply.headers.multi_items()  # the body is decoded already
               if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
    return httpx.Response(reply.status_code, headers=headers, content=body,
                          request=reply.request)


async def said_json(client: httpx.AsyncClient, method: str, url: str,
                    headers: Mapping[str, str], body: Any = None,
                    statuses: tuple[int, ...] = (200,), timeout: float = 5.0,
                    **kwargs: Any) -> Any:
    """What a server says about itself (`/props`, `/model/info`, `/health`…) as JSON, or None
    for anything else: another status than `statuses`, a reply that is no JSON, or one too
    large to be what was asked (`bounded`)."""
    from engine.jsondata import read_json

    if body is not None:
        kwargs["json"] = body
    try:
        response = await bounded(client, method, url, "server", headers=dict(headers),
                                 timeout=timeout, **kwargs)
    except BadResponseError:
        return None
    if response.status_code not in statuses:
        return None
    try:
        return read_json(response.content)
    except ValueError:
        return None


async def read_error_body(reply: httpx.Response) -> bytes:
    """The first `ERROR_BYTES` of an error reply's body: enough for its message."""
    return (await _at_most(reply, ERROR_BYTES))[0]


async def iter_sse(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """Server-sent events as (event, data) from a stream of lines (the WHATWG framing)."""
    event = "message"
    data: list[str] = []
    first = True
    async for line in lines:
        if first:  # a byte order mark before the first field is no part of it
            line, first = line.removeprefix("\ufeff"), False
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield event, "\n".join(data)


def is_event_stream(content_type: str | None) -> bool:
    """True for a `text/event-stream` response (parameters such as charset ignored)."""
    return (content_type or "").split(";")[0].strip().lower() == "text/event-stream"


def looks_like_sse(body: bytes) -> bool:
    """True when a body is server-sent events whatever its content type says (some proxies
    drop or rewrite the header): its first non-blank line is an SSE field."""
    for line in body.decode("utf-8", "replace").lstrip("\ufeff").splitlines():
        if line.strip():
            return line.startswith(("data:", "event:", ":", "id:", "retry:"))
    return False
