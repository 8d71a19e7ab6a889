"""`local` kind: a GGUF model run in-process (default: the bundled Gemma 3 270M).

Works with no server and no key. The model loads on first use, on a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

import httpx

from engine.config.providers import LOCAL_TIMEOUT, UNMEASURED_TIMEOUT, ProviderConfig
from engine.errors import (
    BadResponseError,
    ContextOverflowError,
    ProviderError,
    RequestError,
    ServerError,
    is_context_overflow,
)
from engine.gguf.store import resolve_model_path
from engine.paths import Paths
from engine.providers._base import Provider
from engine.providers._deadline import fitted
from engine.providers._events import (
    Done,
    Message,
    ReasoningDelta,
    StreamEvent,
    StreamRequest,
    TokenDelta,
    finish_reason_of,
)
from engine.providers._http import error_for_status, usage_of
from engine.providers._llama import LlamaEngine, LlamaOptions
from engine.providers._llamacpp import count_chat_tokens
from engine.providers._logprobs import token_choices, wants_logprobs
from engine.providers._reasoning import reasoning_field
from engine.providers._speculation import chosen

__all__ = ["LocalProvider"]


class LocalProvider(Provider):
    """Streams from the embedded llama.cpp engine."""

    stops_at_markers = True

    @property
    def gives_logprobs(self) -> bool:
        return True

    def __init__(
        self, name: str, config: ProviderConfig, env: Mapping[str, str], paths: Paths
    ) -> None:
        super().__init__(name, config, env)
        self._paths = paths
        self._engine: LlamaEngine | None = None
        self._http: httpx.AsyncClient | None = None

    def engine(self) -> LlamaEngine:
        """The shared engine for this provider's model (resolving the model file once)."""
        if self._engine is None:
            try:
                path = resolve_model_path(self.config.model, self._paths)
            except Exception as exc:
                raise ServerError(self.name, f"cannot prepare the bundled model: {exc}") from None
            options = LlamaOptions(
                model_path=path,
                n_ctx=self.config.n_ctx,
                n_parallel=self.config.n_parallel,
                n_threads=self.config.n_threads or 0,
                speculation=chosen(self.config.speculation, self.config.draft_model, path,
                                   self.config.model, self._paths),
            )
            self._engine = LlamaEngine.shared(options)
        return self._engine

    async def _shared_engine(self) -> LlamaEngine:
        """`engine()`, on a worker thread the first time (it may assemble the model file)."""
        if self._engine is not None:
            return self._engine
        return await asyncio.to_thread(self.engine)

    def _body(self, request: StreamRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "stream_options": {"include_usage": True},
        }
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.frequency_penalty is not None:
            body["frequency_penalty"] = request.frequency_penalty
        if request.seed is not None:
            body["seed"] = request.seed
        if request.schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.schema},
            }
        elif request.demonstration_grammar is not None and self.config.is_demonstration:
            body["grammar"] = request.demonstration_grammar
        wants_logprobs(body, request.top_logprobs)
        return body

    def _error(self, chunk: dict[str, Any]) -> ProviderError:
        error = chunk.get("error", chunk)
        message = str(error.get("message") or error) if isinstance(error, dict) else str(error)
        code = error.get("code") if isinstance(error, dict) else None
        if isinstance(code, int) and code >= 400:
            return error_for_status(self.name, code, message)
        return ServerError(self.name, message)

    async def _stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
        engine = await self._shared_engine()
        try:
            await engine.ensure_loaded()
        except Exception as exc:
            raise ServerError(self.name, f"cannot load the model: {exc}") from None
        finish: str | None = None
        usage: dict[str, Any] | None = None
        chunks = engine.chat(self._body(request))
        try:
            async for chunk in chunks:
                if "choices" not in chunk:
                    if "error" in chunk or "message" in chunk:
                        raise self._error(chunk)
                    raise BadResponseError(self.name, "a chunk without choices")
                if chunk.get("usage"):
                    usage = chunk["usage"]
                if chunk.get("timings"):
                    engine.measured(chunk["timings"])
                for choice in chunk["choices"]:
                    thought = reasoning_field(choice.get("delta"))
                    if thought:
                        yield ReasoningDelta(thought)
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        yield TokenDelta(text)
                    for choices in token_choices(choice.get("logprobs")):
                        yield choices
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
        except ValueError as exc:  # llama.cpp rejected the request before generating
            if is_context_overflow(str(exc)):
                raise ContextOverflowError(self.name, str(exc)) from None
            raise RequestError(self.name, str(exc)) from None
        finally:
            await chunks.aclose()
        if finish is None:
            raise ServerError(self.name, "the model stopped without finishing")
        if usage is not None:
            yield usage_of(usage)
        yield Done(finish_reason_of(self.name, finish))

    def reply_deadline(self, request: StreamRequest) -> float:
        """The user's `timeout` when set; else the time the model's measured speed needs
        for the prompt and every token the reply may have, half again and 15 s more, never
        less than the default (`LOCAL_TIMEOUT`: `_deadline.fitted`); `UNMEASURED_TIMEOUT` while
        no reply has measured it yet."""
        if self.config.timeout is not None:
            return self.config.timeout
        speed = self._engine.speed if self._engine is not None else None
        if speed is None:
            return UNMEASURED_TIMEOUT
        return fitted(speed, sum(len(m.content) for m in request.messages),
                      request.max_tokens, LOCAL_TIMEOUT[0], LOCAL_TIMEOUT[2])

    def stall_deadline(self, total: float) -> float:
        """The user's `stall_timeout` when set; else the reply's whole deadline. The model runs
        in this process: no connection can die under it, and a token that waits is one that
        waits for the other slots on the same cores (eight claims examined side by side on
        two cores went 30 s without a token and failed the session)."""
        if self.config.stall_timeout is not None:
            return self.config.stall_timeout
        return total

    def deadline_note(self, request: StreamRequest) -> str:
        speed = self._engine.speed if self._engine is not None else None
        if self.config.timeout is not None or speed is None:
            return ""
        return (f"fitted to the {speed.reply:.1f} tokens a second measured here for "
                f"{request.max_tokens or 512:,} tokens")

    counts_exactly = True  # its llama.cpp server's /tokenize, once the model is loaded

    async def context_window(self) -> int | None:
        self.window_said_by = "n_ctx / n_parallel"
        return self.config.n_ctx // self.config.n_parallel

    async def slots(self) -> int | None:
        return self.config.n_parallel

    def slot_key(self) -> str | None:
        return f"local:{self.config.model}:{self.config.n_ctx}:{self.config.n_parallel}"

    shares_cores = True

    @property
    def on_this_machine(self) -> bool:
        return True

    async def count_tokens(self, messages: Sequence[Message]) -> int | None:
        engine = await self._shared_engine()
        await engine.ensure_loaded()
        if engine.address is None:
            return None
        if self._http is None:
            self._http = httpx.AsyncClient()
        return await count_chat_tokens(self._http, engine.address, engine.auth, messages)

    async def aclose(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    async def _health(self) -> str:
        engine = await self._shared_engine()
        if engine.loaded:
            return f"loaded: {engine.options.model_path.name} · {engine.speculation.label()}"
        if not engine.options.model_path.is_file():
            raise ServerError(self.name, f"model file not found: {engine.options.model_path}")
        return (f"ready: {engine.options.model_path.name} (loads on first use) · "
                f"{engine.speculation.label()}")
