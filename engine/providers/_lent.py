"""A provider lent by the program that embeds the engine: its replies come whole from a
function of the request (`Workspace.lend`). What Inspect AI's model is to a scorer detektiv
plays: a model Inspect calls through its own API, for any provider it supports, and which
does not stream to us.

    provider = LentProvider("inspect", config, answer)   # answer(request) -> LentReply
    async for event in provider.stream(request): ...     # one TokenDelta, its Usage, Done

The function's own failures become a `ServerError` naming the provider (the router then
fails over, as for a server's error); a cancellation passes through untouched.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass

from engine.config.providers import ProviderConfig
from engine.errors import DetektivError, ServerError
from engine.providers._base import Provider
from engine.providers._events import (
    Done,
    StreamEvent,
    StreamRequest,
    TokenDelta,
    Usage,
    finish_reason_of,
)

__all__ = ["Answer", "LentProvider", "LentReply"]


@dataclass(frozen=True, slots=True)
class LentReply:
    """One reply, whole: its text, why it ended, and its tokens where they were counted."""

    text: str
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


Answer = Callable[[StreamRequest], Awaitable[LentReply]]
"""What a lent provider calls for each request."""


class LentProvider(Provider):
    """A provider whose replies a function of the embedding program gives, whole."""

    def __init__(self, name: str, config: ProviderConfig, answer: Answer) -> None:
        super().__init__(name, config, {})
        self._answer = answer

    @property
    def gives_logprobs(self) -> bool:
        return False

    def api_key(self) -> str | None:
        return None  # the program that lent it holds whatever key it needs

    async def _stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
        try:
            whole = await self._answer(request)
        except DetektivError:
            raise
        except Exception as exc:  # the embedding program's model failed: a server error
            text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else \
                type(exc).__name__
            raise ServerError(self.name, f"the lent model failed: {text}") from None
        if whole.text:
            yield TokenDelta(whole.text)
        if whole.prompt_tokens is not None or whole.completion_tokens is not None:
            yield Usage(whole.prompt_tokens, whole.completion_tokens)
        yield Done(finish_reason_of(self.name, whole.finish_reason or "stop"))

    async def _health(self) -> str:
        return f"{self.model}, lent by the program that runs detektiv"

    def _where(self) -> str:
        return "the program that lent it (detektiv does not configure it)"
