"""`openai` kind: any OpenAI-compatible chat completions API, over httpx, streamed as
server-sent events.

OpenAI itself, Gemini's OpenAI-compatible endpoint, vLLM, a llama.cpp server, Ollama's /v1,
LiteLLM's proxy. No SDK: the wire is small, and the openai SDK cost ~1.5 ms of CPU to build a
request and ~0.3 ms to build a pydantic object for every streamed chunk (a third of an
evaluation's CPU over eight replicas, bench/eval_scale.py), besides 0.4–1 s to import and an
SSL context per client. Retrying and deadlines belong to us (`Provider.stream`); the one retry
kept is a request the server dropped on a pooled connection without answering.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import httpx

from engine.config.providers import GEMINI_URL
from engine.errors import BadResponseError, ProviderError
from engine.jsondata import read_json
from engine.providers._base import Provider
from engine.providers._events import (
    Done,
    HealthCheck,
    Message,
    ReasoningDelta,
    StreamEvent,
    StreamRequest,
    TokenDelta,
    finish_reason_of,
)
from engine.providers._gateway import backend_count, gateway_window, listed_or_checked
from engine.providers._http import (
    connection_error,
    content_parts,
    error_for_status,
    error_message,
    field_of,
    model_listed,
    model_names,
    models_listed,
    not_a_stream,
    not_text,
    path_hint,
    rate_limit_wait,
    send_streamed,
    shared_tls,
    unfinished,
    unlisted_model,
    usage_of,
)
from engine.providers._llamacpp import (
    api_root,
    count_chat_tokens,
    slot_count,
    slot_window,
    slots_working,
)
from engine.providers._logprobs import token_choices, wants_logprobs
from engine.providers._reading import bounded, read_error_body, sse_events
from engine.providers._reasoning import reasoning_field

__all__ = ["OpenAIProvider"]

OPENAI_URL = "https://api.openai.com/v1"


def stream_error(provider: str, data: dict[str, Any]) -> ProviderError:
    """An `{"error": …}` event inside a stream (LiteLLM's proxy when its backend dies, vLLM,
    OpenRouter): the error its `code` names (a status, when it is one), else a server error."""
    message = error_message(json.dumps(data), "") or "an error event in the stream"
    return error_for_status(provider, _status_of(data.get("error")) or 500, message)


def _status_of(error: object) -> int | None:
    """The HTTP status an error object's `code` names, or None."""
    try:
        status = int(field_of(error, "code"))
    except (TypeError, ValueError):
        return None
    return status if 400 <= status < 600 else None


def _error_event(raw: str) -> dict[str, Any]:
    """The data of an `event: error` as an `{"error": …}` object, whatever it holds."""
    try:
        data = read_json(raw)
    except ValueError:
        return {"error": {"message": raw}}
    if isinstance(data, dict) and "error" in data:
        return data
    return {"error": data if isinstance(data, dict) else {"message": str(data)}}


REFUSED = "refused"
"""What `_read_delta` adds after a refusal's text."""


class OpenAIProvider(Provider):
    """Streams chat completions from an OpenAI-compatible endpoint."""

    _client: httpx.AsyncClient | None = None
    _llamacpp: bool | None = None
    """None: not asked yet; False: not a llama.cpp server (or it does not say)."""
    _litellm = False
    """LiteLLM's proxy answered its `/model/info` when the window was asked."""

    @property
    def _base(self) -> str:
        return (self.config.base_url or OPENAI_URL).rstrip("/")

    @property
    def _official(self) -> bool:
        return self.config.base_url is None or "api.openai.com" in self.config.base_url

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.config.total_timeout, connect=10.0),
                verify=shared_tls(), limits=httpx.Limits(max_connections=None))
        return self._client

    async def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        key = await self.resolved_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        if self._official:
            for header, variable in (("OpenAI-Organization", "OPENAI_ORG_ID"),
                                     ("OpenAI-Project", "OPENAI_PROJECT_ID")):
                if os.environ.get(variable):
                    headers[header] = os.environ[variable]
        return headers

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
        if request.frequency_penalty is not None:
            body["frequency_penalty"] = request.frequency_penalty
        if request.seed is not None:
            body["seed"] = request.seed
        if self.config.reasoning_effort is not None:
            body["reasoning_effort"] = self.config.reasoning_effort
        if self.config.reasoning_budget is not None:  # Gemini's OpenAI-compatible endpoint
            body["extra_body"] = {"google": {"thinking_config": {
                "thinking_budget": self.config.reasoning_budget,
                "include_thoughts": self.config.reasoning == "show"}}}
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
            body["grammar"] = request.demonstration_grammar
        if self.gives_logprobs:
            wants_logprobs(body, request.top_logprobs)
        return body

    @property
    def gives_logprobs(self) -> bool:
        """OpenAI and the compatible servers send them; Gemini's compatible endpoint and
        OpenAI's reasoning models (a `reasoning_effort` set) refuse the request."""
        base = (self.config.base_url or "").rstrip("/")
        return self.config.reasoning_effort is None and base != GEMINI_URL.rstrip("/")

    @contextlib.asynccontextmanager
    async def _open(self, body: dict[str, Any]) -> AsyncIterator[httpx.Response]:
        """The streamed reply to `body` (`send_streamed`), closed after; a failure to get one
        is a connection error."""
        client = self._get_client()
        request = client.build_request("POST", f"{self._base}/chat/completions", json=body,
                                       headers=await self._headers())
        try:
            reply = await send_streamed(client, request)
        except httpx.HTTPError as exc:
            raise connection_error(self.name, exc) from None
        try:
            yield reply
        finally:
            await reply.aclose()

    async def _stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
        finish: str | None = None
        usage: Any = None
        refused = False
        one: object = None  # the index of the choice read: the first a chunk names
        async with self._open(self._body(request)) as reply:
            try:
                if reply.status_code >= 300:
                    content = await read_error_body(reply)
                    message = error_message(content, f"Error code: {reply.status_code}")
                    raise error_for_status(self.name, reply.status_code, message,
                                           rate_limit_wait(reply.headers),
                                           path_hint(reply.status_code, self.kind, self._base,
                                                     "/chat/completions"),
                                           reply.headers.get("location"))
                events, whole = await sse_events(self.name, reply)
                if events is None:
                    for event in self._whole(reply.headers.get("content-type"), whole):
                        yield event
                    return
                async for kind, raw in events:
                    if raw.startswith("[DONE]"):
                        # the server's own end of the stream: an answer it never gave a
                        # finish reason (some OpenAI-compatible servers don't) stopped there
                        finish = finish or "stop"
                        break
                    if kind == "error":  # `event: error`, its data JSON or a line of text
                        raise stream_error(self.name, _error_event(raw))
                    try:
                        chunk = read_json(raw)
                    except ValueError as exc:
                        raise BadResponseError(self.name, f"malformed chunk: {exc}") from None
                    if not isinstance(chunk, dict):
                        raise BadResponseError(
                            self.name, f"a chunk that is not an object: {raw[:80]!r}")
                    if chunk.get("error"):
                        raise stream_error(self.name, chunk)
                    if chunk.get("usage") is not None:
                        usage = chunk["usage"]
                    if chunk.get("timings") is not None:  # a llama.cpp server's speed
                        self.measured(chunk["timings"])
                    choices = chunk.get("choices") or []
                    if not isinstance(choices, list):
                        raise BadResponseError(self.name, f"choices that are not a list: "
                                               f"{raw[:80]!r}")
                    for choice in choices:
                        index = field_of(choice, "index")
                        if index is not None and one is None:
                            one = index
                        elif index is not None and index != one:
                            continue  # another choice than the first (n = 1 was asked for)
                        delta = field_of(choice, "delta")
                        if delta is None:  # a server that sends each piece as a message
                            delta = field_of(choice, "message")
                        for piece in self._read_delta(delta):
                            if isinstance(piece, str):
                                refused = True
                            else:
                                yield piece
                        for choices in token_choices(field_of(choice, "logprobs")):
                            yield choices
                        reason = field_of(choice, "finish_reason")
                        if reason:
                            if not isinstance(reason, str):
                                raise BadResponseError(
                                    self.name,
                                    f"a finish reason that is not text: {reason!r:.80}")
                            finish = finish_reason_of(self.name, reason)
            except httpx.HTTPError as exc:
                raise connection_error(self.name, exc, mid_stream=True) from None
        if finish is None:
            raise unfinished(self.name)
        if usage is not None:
            yield usage_of(usage)
        yield Done(finish_reason_of(self.name, "refusal") if refused else finish)

    def _read_delta(self, delta: object) -> list[StreamEvent | str]:
        """A delta's (or a whole message's) events: its reasoning, in a field of its own or in
        thinking parts of its content, then its text. A refusal (OpenAI's `refusal` field) is
        its text, and `REFUSED` after it: the answer then ends as the content filter's."""
        events: list[StreamEvent | str] = []
        thought = reasoning_field(delta)
        if thought:
            events.append(ReasoningDelta(thought))
        content = field_of(delta, "content")
        parts = content_parts(content) if content is not None else ("", "")
        if parts is None:
            raise BadResponseError(self.name, "a streamed delta: " + not_text(content))
        text, thinking = parts
        if thinking:
            events.append(ReasoningDelta(thinking))
        if text:
            events.append(TokenDelta(text))
        refusal = field_of(delta, "refusal")
        if isinstance(refusal, str) and refusal.strip():
            events += [TokenDelta(refusal), REFUSED]
        return events

    def _whole(self, content_type: str | None, body: bytes) -> list[StreamEvent]:
        """A reply that is not an event stream: a whole chat completion (a server that ignored
        `stream`) is its events; anything else (an HTML login page, a JSON error with status
        200) is a `BadResponseError` that says what it was."""
        try:
            data = read_json(body)
        except ValueError:
            raise BadResponseError(self.name, not_a_stream(content_type, body)) from None
        if isinstance(data, dict) and _status_of(data.get("error")) is not None:
            raise stream_error(self.name, data)  # an error whose code is a status, though 200
        try:
            choice = data["choices"][0]
            message = choice["message"]
            finish = choice.get("finish_reason") or "stop"
            read = self._read_delta(message) if isinstance(message, dict) else None
        except (KeyError, IndexError, TypeError, AttributeError, BadResponseError):
            read = None
        if read is None or not isinstance(finish, str):
            raise BadResponseError(self.name, not_a_stream(content_type, body))
        events = [e for e in read if not isinstance(e, str)]
        events += token_choices(choice.get("logprobs"))
        finish = finish_reason_of(self.name, "refusal" if REFUSED in read else finish)
        usage = data.get("usage")
        if isinstance(usage, dict):
            events.append(usage_of(usage))
        self.measured(data.get("timings"))
        return [*events, Done(finish)]

    # ---- a llama.cpp server behind the OpenAI-compatible API: its window and its tokenizer --

    async def _server_api(self) -> tuple[httpx.AsyncClient, str, dict[str, str]] | None:
        """(client, API root, headers) of the server behind `base_url`, to ask what it says
        of itself; None for a vendor's API."""
        if self._official or self.config.base_url is None:
            return None
        key = await self.resolved_key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return self._get_client(), api_root(self.config.base_url), headers

    async def _llamacpp_api(self) -> tuple[httpx.AsyncClient, str, dict[str, str]] | None:
        """`_server_api`, unless the server is known not to be llama.cpp."""
        return None if self._llamacpp is False else await self._server_api()

    async def context_window(self) -> int | None:
        api = await self._server_api()
        if api is None:
            return None
        client, root, headers = api
        try:
            window = None
            if self._llamacpp is not False:  # known not to be llama.cpp: a gateway's, asked again
                window = await slot_window(client, root, headers)
                self._llamacpp = window is not None
            self.window_said_by = "llama.cpp's /props" if window is not None else ""
            if window is None and self.config.base_url is not None:  # a gateway, vLLM, …
                said = await gateway_window(client, self.config.base_url, root,
                                            self.config.model, headers)
                window, self._litellm = said.tokens, said.litellm
                self.window_said_by, self._counters = said.by, said.counters
        except httpx.TransportError:  # no answer: ask again next time
            raise
        except httpx.HTTPError:
            window = None
            self._llamacpp = False
        return window

    async def server_working(self) -> bool:
        if not self._llamacpp:
            return False
        api = await self._llamacpp_api()
        return api is not None and await slots_working(*api)

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
        if self._counters:  # a gateway in front of llama.cpp: its backend counts
            return await backend_count(self._get_client(), self._counters, messages)
        api = await self._llamacpp_api()
        if api is None:
            return None
        return await count_chat_tokens(*api, messages)

    async def _health(self) -> str | tuple[str, HealthCheck]:
        client = self._get_client()
        try:
            reply = await bounded(client, "GET", f"{self._base}/models", self.name,
                                  headers=await self._headers())
        except httpx.HTTPError as exc:
            raise connection_error(self.name, exc) from None
        if reply.status_code >= 300:
            message = error_message(reply.content, f"Error code: {reply.status_code}")
            raise error_for_status(self.name, reply.status_code, message,
                                   rate_limit_wait(reply.headers),
                                   path_hint(reply.status_code, self.kind, self._base,
                                             "/models"), reply.headers.get("location"))
        names = model_names(self.name, reply.content)
        listed = models_listed(names)
        if self._llamacpp is None:
            await self.context_window()
        if names and not model_listed(self.config.model, names) and not self._llamacpp:
            raise unlisted_model(self.name, self.config.model, names)
        if self._llamacpp:  # the model's own server (it answers whatever name it is sent)
            return listed
        if self._official or self.config.base_url is None:  # its list is all there is to ask
            return listed, "list"
        return await listed_or_checked(self, client, api_root(self.config.base_url),
                                       await self._headers(), listed, self._litellm)

    def _health_asks(self) -> HealthCheck:
        return "server" if self._llamacpp else "list"

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
