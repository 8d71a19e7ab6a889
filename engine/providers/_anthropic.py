"""`anthropic` kind: the native Messages API over httpx, streamed as server-sent events.

No SDK: it costs ~2.5 s to import here, and the wire format is small. Structured output is
asked for with the schema in the system prompt (`prompts/structured_output.md`); the answer is
validated by `engine.routing.structured`, like every other kind's.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import httpx

from engine.config.providers import ANTHROPIC_URL
from engine.errors import (
    BadResponseError,
    ProviderError,
    RateLimitedError,
    RequestError,
    ServerError,
)
from engine.jsondata import read_json
from engine.prompts import fill, load_prompt
from engine.providers._base import (
    Provider,
    standard_key_env,
)
from engine.providers._events import (
    Done,
    HealthCheck,
    Message,
    ReasoningDelta,
    StreamEvent,
    StreamRequest,
    TokenDelta,
    Usage,
    finish_reason_of,
)
from engine.providers._gateway import backend_count, gateway_window, listed_or_checked
from engine.providers._http import (
    connection_error,
    error_for_status,
    error_message,
    field_of,
    first_line,
    model_listed,
    model_names,
    models_listed,
    not_a_stream,
    not_text,
    path_hint,
    rate_limit_wait,
    send_streamed,
    unlisted_model,
)
from engine.providers._reading import bounded, read_error_body, sse_events

__all__ = ["AnthropicProvider"]

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens",
           "cache_creation_input_tokens")


def _take_counts(counts: dict[str, Any], usage: object) -> None:
    """Keep the counts `usage` reports. `message_start` and `message_delta` both carry usage;
    the later wins where it says more: LiteLLM's proxy sends `input_tokens: 0` at the start
    and the real count at the end."""
    for name in _COUNTS:
        value = field_of(usage, name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0 and (
                value > 0 or name not in counts):
            counts[name] = value


def _usage(counts: dict[str, Any]) -> Usage:
    """Anthropic's counts as `Usage`: its `input_tokens` leaves out what was read from the
    cache and written to it; `prompt_tokens` is all three."""
    fresh = counts.get("input_tokens")
    read = counts.get("cache_read_input_tokens")
    written = counts.get("cache_creation_input_tokens")
    prompt = None if fresh is None else fresh + (read or 0) + (written or 0)
    return Usage(prompt, counts.get("output_tokens"), cached_tokens=read,
                 cache_write_tokens=written)


def _block_text(provider: str, data: dict[str, Any]) -> list[StreamEvent]:
    """The answer or the thinking a `content_block_delta` carries, or a `content_block_start`
    (empty from Anthropic, though a gateway may start a block with its first text); any
    other block or delta (a signature, redacted thinking, citations, a tool's input) is
    neither."""
    part = data.get("delta") if "delta" in data else data.get("content_block")
    if not isinstance(part, dict):
        return []
    kind, text, thinking = part.get("type"), part.get("text"), part.get("thinking")
    if kind in ("text_delta", "text") and text is not None and not isinstance(text, str):
        raise BadResponseError(provider, f"a {kind}: {not_text(text)}")
    if kind in ("text_delta", "text") and text:
        return [TokenDelta(text)]
    if kind in ("thinking_delta", "thinking") and isinstance(thinking, str) and thinking:
        return [ReasoningDelta(thinking)]
    return []


class AnthropicProvider(Provider):
    """Streams from Anthropic's Messages API."""

    _client: httpx.AsyncClient | None = None

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=(self.config.base_url or ANTHROPIC_URL).rstrip("/"),
                timeout=httpx.Timeout(self.config.total_timeout, connect=10.0),
            )
        return self._client

    async def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION, "content-type": "application/json"}
        key = await self.resolved_key()
        if key is not None:
            headers["x-api-key"] = key
        return headers

    def schema_prompt(self, schema: dict[str, Any]) -> str:
        """The schema in the system prompt, with how to answer it."""
        return fill(load_prompt("structured_output"), SCHEMA=json.dumps(schema, indent=2))

    def read_messages(self, messages: Sequence[Message],
                      schema: dict[str, Any] | None) -> list[Message]:
        """As `_body` sends them: one system prompt first — the system messages and the
        schema's text (`schema_prompt`) joined — then the others (LiteLLM passes it on to a
        backend as one system message)."""
        system = [m.content for m in messages if m.role == "system"]
        if schema is not None:
            system.append(self.schema_prompt(schema))
        rest = [m for m in messages if m.role != "system"]
        return [Message("system", "\n\n".join(system)), *rest] if system else rest

    def _body(self, request: StreamRequest) -> dict[str, Any]:
        read = self.read_messages(request.messages, request.schema)
        budget = self.config.reasoning_budget
        thinking = budget is not None and budget > 0
        body: dict[str, Any] = {
            "model": self.config.model,
            # thinking spends from max_tokens: the reply keeps its own allowance on top
            "max_tokens": (request.max_tokens or DEFAULT_MAX_TOKENS) + (budget or 0),
            "messages": [{"role": m.role, "content": m.content}
                         for m in read if m.role != "system"],
            "stream": True,
        }
        if read and read[0].role == "system":
            body["system"] = read[0].content
        if thinking:  # the API refuses a temperature beside extended thinking
            body["thinking"] = {"type": "enabled", "budget_tokens": max(budget or 0, 1024)}
        elif request.temperature is not None:
            body["temperature"] = request.temperature
        return body

    def _stream_error(self, data: dict[str, Any]) -> ProviderError:
        error = data.get("error")
        if not isinstance(error, dict):  # a gateway's own shape: a string, or nothing
            error = {"message": error} if isinstance(error, str) and error else {}
        kind = error.get("type") if isinstance(error.get("type"), str) else "error"
        message = f"{kind}: {first_line(str(error.get('message', 'error event in the stream')))}"
        if kind == "rate_limit_error":
            return RateLimitedError(self.name, message)
        if kind in ("invalid_request_error", "not_found_error", "request_too_large"):
            return RequestError(self.name, message)
        return ServerError(self.name, message)

    async def _stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
        client = self._get_client()
        headers = await self._headers()
        body = self._body(request)
        counts: dict[str, Any] = {}
        stop_reason: str | None = None
        answering = False
        try:
            async with self._open(client, body, headers) as reply:
                answering = True
                if reply.status_code >= 300:
                    content = await read_error_body(reply)
                    retry_after = rate_limit_wait(reply.headers)
                    message = error_message(content, reply.reason_phrase)
                    raise error_for_status(self.name, reply.status_code, message, retry_after,
                                           path_hint(reply.status_code, self.kind, self._root,
                                                     "/v1/messages"),
                                           reply.headers.get("location"))
                events, raw_body = await sse_events(self.name, reply)
                if events is None:
                    for whole in self._whole_message(reply.headers.get("content-type"),
                                                     raw_body, body["max_tokens"]):
                        yield whole
                    return
                async for event, raw in events:
                    if event == "ping":
                        continue
                    try:
                        data = read_json(raw)
                    except ValueError:
                        raise BadResponseError(
                            self.name, f"malformed {event} event: {raw[:80]!r}"
                        ) from None
                    if not isinstance(data, dict):
                        raise BadResponseError(
                            self.name, f"a {event} event that is not an object: {raw[:80]!r}")
                    if event == "message" and isinstance(data.get("type"), str):
                        event = data["type"]  # a gateway that names events only in their data
                    if event in ("content_block_delta", "content_block_start"):
                        for piece in _block_text(self.name, data):
                            yield piece
                    elif event == "message_start":
                        _take_counts(counts, field_of(data.get("message"), "usage"))
                    elif event == "message_delta":
                        stop = field_of(data.get("delta"), "stop_reason")
                        stop_reason = stop if isinstance(stop, str) and stop else stop_reason
                        _take_counts(counts, data.get("usage"))
                    elif event == "message_stop":
                        usage = _usage(counts)
                        yield usage
                        yield Done(self._finish(self.name, stop_reason, usage, body["max_tokens"]))
                        return
                    elif event == "error":
                        raise self._stream_error(data)
        except httpx.TransportError as exc:
            raise connection_error(self.name, exc, mid_stream=answering) from None

    def _whole_message(self, content_type: str | None, body: bytes, limit: int
                       ) -> list[StreamEvent]:
        """A whole Messages API reply (a server that ignored `stream`) as events; anything
        else is a `BadResponseError` saying what the reply was."""
        try:
            data = read_json(body)
            kind = data.get("type")
        except (ValueError, AttributeError):
            raise BadResponseError(self.name, not_a_stream(content_type, body)) from None
        if kind == "error":  # an error, though the status says 200
            raise self._stream_error(data)
        try:
            if kind != "message":
                raise ValueError("not a message")
            parts = [part for part in data["content"] if isinstance(part, dict)]
            text = "".join(part.get("text") or "" for part in parts
                           if part.get("type") == "text")
            thought = "".join(part.get("thinking") or "" for part in parts
                              if part.get("type") == "thinking")
            counts: dict[str, Any] = {}
            _take_counts(counts, data.get("usage"))
            reason = data.get("stop_reason")
        except (ValueError, KeyError, TypeError, AttributeError):
            raise BadResponseError(self.name, not_a_stream(content_type, body)) from None
        events: list[StreamEvent] = [ReasoningDelta(thought)] if isinstance(thought, str) \
            and thought else []
        if text:
            events.append(TokenDelta(text))
        usage = _usage(counts)
        events.append(usage)
        stop_reason = reason if isinstance(reason, str) else None
        return [*events, Done(self._finish(self.name, stop_reason, usage, limit))]

    @staticmethod
    def _finish(provider: str, stop_reason: str | None, usage: Usage, limit: int) -> str:
        """The finish reason: the server's own where it gives one (LiteLLM's proxy answers
        past a `max_tokens` it did not pass on, and says `end_turn` for a whole answer: the
        count cannot tell). Only a server that says nothing has its reply's output tokens
        counted against the limit: at the limit, it was cut."""
        if stop_reason:
            return finish_reason_of(provider, stop_reason)
        output = usage.completion_tokens
        if isinstance(output, int) and not isinstance(output, bool) and output >= limit:
            return "length"
        return finish_reason_of(provider, "end_turn")

    @contextlib.asynccontextmanager
    async def _open(
        self, client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]
    ) -> AsyncIterator[httpx.Response]:
        """POST the request and yield the streaming response (`send_streamed`), closed
        after."""
        request = client.build_request("POST", "/v1/messages", json=body, headers=headers)
        reply = await send_streamed(client, request)
        try:
            yield reply
        finally:
            await reply.aclose()

    async def _health(self) -> str | tuple[str, HealthCheck]:
        client = self._get_client()
        try:
            reply = await bounded(client, "GET", "/v1/models", self.name,
                                  headers=await self._headers())
        except httpx.TransportError as exc:
            raise connection_error(self.name, exc) from None
        if reply.status_code >= 300:
            message = error_message(reply.content, reply.reason_phrase)
            raise error_for_status(self.name, reply.status_code, message,
                                   hint=path_hint(reply.status_code, self.kind, self._root,
                                                  "/v1/models"),
                                   location=reply.headers.get("location"))
        names = model_names(self.name, reply.content)
        listed = models_listed(names)
        if names and not model_listed(self.config.model, names):
            if standard_key_env(self.config):  # Anthropic's aliases (…-latest) are not listed
                return f"{listed}, not {self.config.model!r} (an alias, or a typo?)", "list"
            raise unlisted_model(self.name, self.config.model, names)
        if self._litellm is None:
            await self.context_window()
        return await listed_or_checked(self, client, self._root, await self._headers(), listed,
                                       bool(self._litellm))

    def _health_asks(self) -> HealthCheck:
        return "list"

    # ---- a gateway's Messages route (LiteLLM's proxy): what it says of the model ----------

    _litellm: bool | None = None
    """None: not asked yet; True: LiteLLM's proxy answered its `/model/info`."""

    @property
    def _root(self) -> str:
        return (self.config.base_url or ANTHROPIC_URL).rstrip("/")

    async def context_window(self) -> int | None:
        """Anthropic's API says nothing (its models' windows are known by name); a gateway
        in front of another model may (`gateway_window`)."""
        if self.config.base_url is None or "api.anthropic.com" in self.config.base_url:
            self._litellm = False
            return None
        said = await gateway_window(self._get_client(), f"{self._root}/v1", self._root,
                                    self.config.model, await self._headers())
        self._litellm = said.litellm
        self.window_said_by, self._counters = said.by, said.counters
        return said.tokens

    async def count_tokens(self, messages: Sequence[Message]) -> int | None:
        """Counted by the llama.cpp servers behind a gateway (LiteLLM passes the Messages
        route on to them as chat messages, the system prompt first); None elsewhere."""
        if self._litellm is None:
            await self.context_window()
        if not self._counters:
            return None
        return await backend_count(self._get_client(), self._counters, messages)

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
