"""`openai` kind: any OpenAI-compatible chat completions API through the openai SDK.

OpenAI itself, Gemini's OpenAI-compatible endpoint, vLLM, a llama.cpp server, Ollama's /v1.
The SDK is imported on first use (it costs ~0.4–1 s), never on the path to the first frame.
Its own retries are off: retrying and deadlines belong to us, and its read timeout is per read,
not a deadline.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from engine.errors import BadResponseError, ProviderConnectionError, ProviderError, ServerError
from engine.providers._base import (
    Done,
    Message,
    Provider,
    ReasoningDelta,
    StreamEvent,
    StreamRequest,
    TokenDelta,
    Usage,
)
from engine.providers._http import (
    content_text,
    error_for_status,
    error_message,
    field_of,
    is_event_stream,
    looks_like_sse,
    model_listed,
    not_a_stream,
    not_text,
    rate_limit_wait,
    server_dropped_connection,
    unlisted_model,
)
from engine.providers._llamacpp import (
    api_root,
    count_chat_tokens,
    listed_window,
    slot_count,
    slot_window,
)
from engine.providers._reasoning import reasoning_field

if TYPE_CHECKING:
    import openai

__all__ = ["OpenAIProvider"]

# A server that needs no key (llama.cpp, vLLM, Ollama) still gets a non-empty one: the SDK
# refuses to start without it.
PLACEHOLDER_KEY = "not-needed"


def usage_of(usage: object) -> Usage:
    """OpenAI's usage object (or dict) as `Usage`: the cached prompt tokens in
    `prompt_tokens_details.cached_tokens`, the reasoning tokens in
    `completion_tokens_details.reasoning_tokens`."""
    return Usage(
        field_of(usage, "prompt_tokens"), field_of(usage, "completion_tokens"),
        cached_tokens=field_of(field_of(usage, "prompt_tokens_details"), "cached_tokens"),
        reasoning_tokens=field_of(field_of(usage, "completion_tokens_details"),
                                  "reasoning_tokens"),
    )


class OpenAIProvider(Provider):
    """Streams chat completions from an OpenAI-compatible endpoint."""

    _client: openai.AsyncOpenAI | None = None

    async def _prepare(self) -> None:
        if "openai" not in sys.modules:  # a second or more: off the event loop
            await asyncio.to_thread(importlib.import_module, "openai")
        await self._get_client()

    async def _get_client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            key = await self.resolved_key()
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=key or PLACEHOLDER_KEY,
                base_url=self.config.base_url,
                max_retries=0,
                timeout=self.config.total_timeout,
            )
        return self._client

    @property
    def _official(self) -> bool:
        return self.config.base_url is None or "api.openai.com" in self.config.base_url

    def _body(self, request: StreamRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.max_tokens is not None:
            # OpenAI's newer models only accept max_completion_tokens; compatible servers
            # universally understand max_tokens.
            key = "max_completion_tokens" if self._official else "max_tokens"
            body[key] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        extra: dict[str, Any] = {}
        if self.config.reasoning_effort is not None:
            body["reasoning_effort"] = self.config.reasoning_effort
        if self.config.reasoning_budget is not None:  # Gemini's OpenAI-compatible endpoint
            extra["google"] = {"thinking_config": {
                "thinking_budget": self.config.reasoning_budget,
                "include_thoughts": self.config.reasoning == "show"}}
        if request.schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name,
                    "schema": request.schema,
                    "strict": True,
                },
            }
        elif request.demonstration_grammar is not None and self.config.is_demonstration:
            # a shipped model on a llama.cpp server here (`detektiv local-server`)
            extra["grammar"] = request.demonstration_grammar
        if extra:
            body["extra_body"] = extra
        return body

    def _map(self, exc: BaseException) -> ProviderError:
        import openai

        if isinstance(exc, openai.APIStatusError):
            response = exc.response
            retry_after = rate_limit_wait(response.headers)
            message = error_message(response.content, exc.message)
            return error_for_status(self.name, exc.status_code, message, retry_after)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return ProviderConnectionError(self.name, f"{exc.message} ({type(cause).__name__})")
        if isinstance(exc, openai.APIError):
            return ServerError(self.name, exc.message)
        if isinstance(exc, json.JSONDecodeError):
            return BadResponseError(self.name, f"malformed chunk: {exc.msg}")
        # The SDK lets transport errors raised mid-stream through unwrapped (httpx2.ReadError,
        # RemoteProtocolError when the connection is cut).
        if type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "httpcore2"):
            return ProviderConnectionError(self.name, f"connection broke: {type(exc).__name__}")
        return BadResponseError(self.name, f"unexpected {type(exc).__name__}: {exc}")

    async def _stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
        client = await self._get_client()
        body = self._body(request)
        try:
            try:
                stream = await client.chat.completions.create(**body)
            except Exception as exc:
                if not server_dropped_connection(exc):
                    raise
                stream = await client.chat.completions.create(**body)  # on a fresh connection
        except Exception as exc:
            raise self._map(exc) from None
        whole = await self._not_streamed(stream)
        if whole is not None:
            for event in whole:
                yield event
            return
        finish: str | None = None
        usage: Any = None
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    thought = reasoning_field(choice.delta)
                    if thought:
                        yield ReasoningDelta(thought)
                    content = choice.delta.content if choice.delta is not None else None
                    text = content_text(content) if content is not None else None
                    if content is not None and text is None:
                        raise BadResponseError(self.name, "a streamed delta: "
                                               + not_text(content))
                    if text:
                        yield TokenDelta(text)
                    if choice.finish_reason:
                        finish = choice.finish_reason
                        if not isinstance(finish, str):
                            raise BadResponseError(
                                self.name, f"a finish reason that is not text: {finish!r:.80}")
        except ProviderError:
            raise
        except Exception as exc:
            raise self._map(exc) from None
        finally:
            await stream.close()
        if finish is None:
            raise ProviderConnectionError(self.name, "the stream ended before the model finished")
        if usage is not None:
            yield usage_of(usage)
        yield Done(finish)

    async def _not_streamed(self, stream: Any) -> list[StreamEvent] | None:
        """None for a real event stream. A reply of another content type is read whole: SSE
        after all (a proxy rewrote the header) is None again, so it streams from what was read;
        a whole chat completion (a server that ignored `stream`) is its events; anything else
        (an HTML login page, a JSON error with status 200) is a `BadResponseError` that says
        what it was."""
        response = stream.response
        content_type = response.headers.get("content-type")
        if is_event_stream(content_type):
            return None
        try:
            body = await response.aread()
        except Exception as exc:
            await stream.close()
            raise self._map(exc) from None
        if looks_like_sse(body):
            return None
        await stream.close()
        try:
            data = json.loads(body)
            choice = data["choices"][0]
            content = choice["message"].get("content") or ""
            thought = reasoning_field(choice["message"])
            finish = choice.get("finish_reason") or "stop"
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise BadResponseError(self.name, not_a_stream(content_type, body)) from None
        text = content_text(content)
        if text is None or not isinstance(finish, str):
            raise BadResponseError(self.name, not_a_stream(content_type, body))
        events: list[StreamEvent] = [ReasoningDelta(thought)] if thought else []
        if text:
            events.append(TokenDelta(text))
        usage = data.get("usage")
        if isinstance(usage, dict):
            events.append(usage_of(usage))
        return [*events, Done(finish)]

    # ---- a llama.cpp server behind the OpenAI-compatible API: its window and its tokenizer --

    _http: httpx.AsyncClient | None = None
    _llamacpp: bool | None = None
    """None: not asked yet; False: not a llama.cpp server (or it does not say)."""

    async def _llamacpp_api(self) -> tuple[httpx.AsyncClient, str, dict[str, str]] | None:
        if self._official or self.config.base_url is None or self._llamacpp is False:
            return None
        if self._http is None:
            self._http = httpx.AsyncClient()
        key = await self.resolved_key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return self._http, api_root(self.config.base_url), headers

    async def context_window(self) -> int | None:
        api = await self._llamacpp_api()
        if api is None:
            return None
        client, root, headers = api
        try:
            window = await slot_window(client, root, headers)
            self._llamacpp = window is not None
            if window is None and self.config.base_url is not None:  # vLLM lists it
                window = await listed_window(client, self.config.base_url, self.config.model,
                                             headers)
        except httpx.TransportError:  # no answer: ask again next time
            raise
        except httpx.HTTPError:
            window = None
            self._llamacpp = False
        return window

    async def slots(self) -> int | None:
        api = await self._llamacpp_api()
        if api is None:
            return None
        try:
            return await slot_count(*api)
        except httpx.HTTPError:
            return None

    async def count_tokens(self, messages: Sequence[Message]) -> int | None:
        if self._llamacpp is None:
            await self.context_window()
        api = await self._llamacpp_api()
        if api is None:
            return None
        return await count_chat_tokens(*api, messages)

    async def _health(self) -> str:
        client = await self._get_client()
        try:
            page = await client.models.list()
        except Exception as exc:
            raise self._map(exc) from None
        names = [model.id for model in page.data if isinstance(model.id, str)]
        listed = f"{len(names)} model{'s' if len(names) != 1 else ''} listed"
        if not names or model_listed(self.config.model, names):
            return listed
        if self._llamacpp is None:
            await self.context_window()
        if self._llamacpp:  # llama.cpp answers whatever model name it is sent
            return listed
        raise unlisted_model(self.name, self.config.model, names)

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()
