"""`anthropic` kind: the native Messages API over httpx, streamed as server-sent events.

No SDK: it costs ~2.5 s to import here, and the wire format is small. Structured output is
asked for with the schema in the system prompt (`prompts/structured_output.md`); the answer is
validated by `engine.routing.structured`, like every other kind's.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx

from engine.config.providers import ANTHROPIC_URL
from engine.errors import (
    BadResponseError,
    ProviderConnectionError,
    ProviderError,
    RateLimitedError,
    RequestError,
    ServerError,
)
from engine.prompts import fill, load_prompt
from engine.providers._base import Done, Provider, StreamEvent, StreamRequest, TokenDelta, Usage
from engine.providers._http import (
    error_for_status,
    error_message,
    field_of,
    is_event_stream,
    iter_sse,
    looks_like_sse,
    not_a_stream,
    parse_retry_after,
    server_dropped_connection,
)

__all__ = ["AnthropicProvider"]

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


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

    def _body(self, request: StreamRequest) -> dict[str, Any]:
        system = [m.content for m in request.messages if m.role == "system"]
        if request.schema is not None:
            schema = json.dumps(request.schema, indent=2)
            system.append(fill(load_prompt("structured_output"), SCHEMA=schema))
        body: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": [
                {"role": m.role, "content": m.content}
                for m in request.messages
                if m.role != "system"
            ],
            "stream": True,
        }
        if system:
            body["system"] = "\n\n".join(system)
        if request.temperature is not None:
            body["temperature"] = request.temperature
        return body

    def _stream_error(self, data: dict[str, Any]) -> ProviderError:
        error = data.get("error") or {}
        kind = error.get("type", "error")
        message = f"{kind}: {error.get('message', 'error event in the stream')}"
        if kind == "rate_limit_error":
            return RateLimitedError(self.name, message)
        if kind in ("invalid_request_error", "not_found_error", "request_too_large"):
            return RequestError(self.name, message)
        return ServerError(self.name, message)

    async def _stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
        client = self._get_client()
        headers = await self._headers()
        body = self._body(request)
        prompt_tokens: int | None = None
        output_tokens: int | None = None
        stop_reason: str | None = None
        try:
            async with self._open(client, body, headers) as reply:
                if reply.status_code >= 400:
                    content = await reply.aread()
                    retry_after = parse_retry_after(reply.headers.get("retry-after"))
                    message = error_message(content, reply.reason_phrase)
                    raise error_for_status(self.name, reply.status_code, message, retry_after)
                content_type = reply.headers.get("content-type")
                if not is_event_stream(content_type):
                    raw_body = await reply.aread()  # aiter_lines() then reads what was read
                    if not looks_like_sse(raw_body):
                        for whole in self._whole_message(content_type, raw_body):
                            yield whole
                        return
                async for event, raw in iter_sse(reply.aiter_lines()):
                    if event == "ping":
                        continue
                    try:
                        data = json.loads(raw)
                    except ValueError:
                        raise BadResponseError(
                            self.name, f"malformed {event} event: {raw[:80]!r}"
                        ) from None
                    if event == "content_block_delta":
                        delta = data.get("delta") or {}
                        if delta.get("type") == "text_delta" and delta.get("text"):
                            yield TokenDelta(delta["text"])
                    elif event == "message_start":
                        prompt_tokens = field_of(field_of(data.get("message"), "usage"),
                                                 "input_tokens")
                    elif event == "message_delta":
                        stop = field_of(data.get("delta"), "stop_reason")
                        stop_reason = stop if isinstance(stop, str) and stop else stop_reason
                        output_tokens = field_of(data.get("usage"), "output_tokens")
                    elif event == "message_stop":
                        yield Usage(prompt_tokens, output_tokens)
                        reason = stop_reason or "end_turn"
                        yield Done(_STOP_REASONS.get(reason, reason))
                        return
                    elif event == "error":
                        raise self._stream_error(data)
        except httpx.TimeoutException as exc:
            raise ProviderConnectionError(self.name, f"timed out ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise ProviderConnectionError(self.name, f"connection failed: {exc}") from None

    def _whole_message(self, content_type: str | None, body: bytes) -> list[StreamEvent]:
        """A whole Messages API reply (a server that ignored `stream`) as events; anything
        else is a `BadResponseError` saying what the reply was."""
        try:
            data = json.loads(body)
            if data.get("type") != "message":
                raise ValueError("not a message")
            text = "".join(part.get("text") or "" for part in data["content"]
                           if isinstance(part, dict) and part.get("type") == "text")
            usage = data.get("usage")
            reason = data.get("stop_reason") or "end_turn"
        except (ValueError, KeyError, TypeError, AttributeError):
            raise BadResponseError(self.name, not_a_stream(content_type, body)) from None
        events: list[StreamEvent] = [TokenDelta(text)] if text else []
        events.append(Usage(field_of(usage, "input_tokens"), field_of(usage, "output_tokens")))
        reason = reason if isinstance(reason, str) else "end_turn"
        return [*events, Done(_STOP_REASONS.get(reason, reason))]

    @contextlib.asynccontextmanager
    async def _open(
        self, client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]
    ) -> AsyncIterator[httpx.Response]:
        """POST the request and yield the streaming response, retrying once on a fresh
        connection when the server dropped a pooled one without answering."""
        request = client.build_request("POST", "/v1/messages", json=body, headers=headers)
        try:
            reply = await client.send(request, stream=True)
        except Exception as exc:
            if not server_dropped_connection(exc):
                raise
            reply = await client.send(request, stream=True)  # on a fresh connection
        try:
            yield reply
        finally:
            await reply.aclose()

    async def _health(self) -> str:
        client = self._get_client()
        try:
            reply = await client.get("/v1/models", headers=await self._headers())
        except httpx.TransportError as exc:
            raise ProviderConnectionError(self.name, f"connection failed: {exc}") from None
        if reply.status_code >= 400:
            message = error_message(reply.content, reply.reason_phrase)
            raise error_for_status(self.name, reply.status_code, message)
        models = reply.json().get("data", [])
        return f"{len(models)} model{'s' if len(models) != 1 else ''} listed"

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
