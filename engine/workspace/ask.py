"""The workspace's ask part: one question answered, streamed, kept in its conversation.

    asking = await workspace.ask.question("Is tea a stimulant?", provider=None, schema=None)
    async for event in asking.events():
        match event:
            case AskDelta(text): ...          # the answer as it streams (stdout)
            case AskNote(text): ...           # a switch, a trimmed history, a retry (stderr)
            case AskAnswered(text, provider, conversation_id): ...   # last: kept

With a provider named, that one answers (whatever the router remembers about it); without,
the router does (the fallback chain). With a schema, the answer is JSON valid against it. An
empty answer is asked for once more, sampled warm; a second one is an error, never an exit 0
with nothing said.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from engine.context.budget import Prompt, fit
from engine.context.conversations import ConversationTurn, conversation_prompt, load_recent
from engine.errors import ConfigError, UnusableReplyError
from engine.models.event import Event
from engine.providers import Provider, StreamRequest, TokenDelta, WasReasoning
from engine.report.stream import stream_note, trim_note
from engine.routing.collect import Reply
from engine.routing.events import (
    Attempt,
    Fitted,
    ProviderEvent,
    RouterEvent,
    reasoning_moved,
)
from engine.routing.router import Router
from engine.routing.structured import complete_json

if TYPE_CHECKING:
    from engine.workspace.core import Workspace

__all__ = ["Ask", "AskAnswered", "AskDelta", "AskEvent", "AskNote", "Asked", "Asking"]

RETRY_TEMPERATURE = 0.8
"""An empty answer is asked for once more, sampled at least this warm (greedy decoding that
said nothing says nothing again)."""
EMPTY_ANSWER_TWICE = "the answer was empty twice (a small model may end its turn at once)"


class AskDelta(Event):
    """A piece of the answer."""

    type: Literal["ask_delta"] = "ask_delta"
    text: str


class AskNote(Event):
    """A line beside the answer: a failover, a trimmed history, a retry."""

    type: Literal["ask_note"] = "ask_note"
    text: str


class AskAnswered(Event):
    """The whole answer, kept as the conversation's next turn (`conversation_id` None when
    conversations are off)."""

    type: Literal["ask_answered"] = "ask_answered"
    text: str
    provider: str | None
    conversation_id: str | None


AskEvent = AskDelta | AskNote | AskAnswered


class Asked:
    """A question put in a conversation: the prompt to send (the conversation's history in
    it, fitted to each provider's window), and the conversation its answer goes to."""

    def __init__(self, workspace: Workspace, prompt: Prompt, client_id: str,
                 conversation_id: str | None, history: list[ConversationTurn]) -> None:
        self.workspace = workspace
        self.prompt = prompt
        self.client_id = client_id
        self.conversation_id = conversation_id
        """None when conversations are off (`context.toml`)."""
        self.history = history
        """The earlier turns loaded for it (before fitting to a window)."""

    def answered(self, text: str, provider: str | None = None) -> None:
        """Keep the answer as the conversation's next turn."""
        if self.conversation_id is None:
            return
        self.workspace.conversations.append(
            self.client_id, self.conversation_id,
            ConversationTurn("assistant", text, meta={"provider": provider} if provider else {}),
        )


class Asking:
    """One question on its way; `events()` answers it (and closes what it opened)."""

    def __init__(self, asked: Asked, source: Provider | Router, schema: dict[str, Any] | None,
                 continued: bool) -> None:
        self.asked = asked
        self.source = source
        self.schema = schema
        self.continued = continued
        self.reply = Reply()
        """The answer as it stands."""

    async def events(self) -> AsyncIterator[AskEvent]:
        asked = self.asked
        try:
            if self.continued and not asked.history and asked.conversation_id:
                yield AskNote(text="no earlier conversation to continue; starting a new one")
            if self.schema is None:
                async for event in self._answer():
                    yield event
                text, label = self.reply.text, self.reply.label
            else:
                value, label, notes = await self._json()
                for line in notes:
                    yield AskNote(text=line)
                text = json.dumps(value, indent=2, ensure_ascii=False)
                yield AskDelta(text=text + "\n")
            asked.answered(text, label)
            yield AskAnswered(text=text, provider=label, conversation_id=asked.conversation_id)
        finally:
            await self.source.aclose()

    async def _answer(self) -> AsyncGenerator[AskEvent, None]:
        prompt = self.asked.prompt
        for attempt in (1, 2):
            self.reply = reply = Reply()
            async for event in reply.follow(self._stream(prompt)):
                match event:
                    case TokenDelta(text):
                        yield AskDelta(text=text)
                    case Fitted() if attempt == 2:
                        pass  # said the first time
                    case _:
                        if (line := stream_note(event)) is not None:
                            yield AskNote(text=line)
            if reply.text.strip():
                return
            label = reply.label or "the model"
            if attempt == 2:  # never exit 0 with nothing printed
                raise UnusableReplyError(label, EMPTY_ANSWER_TWICE)
            yield AskNote(text=f"{label} gave an empty answer; asking once more, sampled at "
                          f"temperature {RETRY_TEMPERATURE}")
            prompt = replace(prompt, request=replace(
                prompt.request, temperature=max(RETRY_TEMPERATURE,
                                                prompt.request.temperature or 0)))

    async def _stream(self, prompt: Prompt) -> AsyncGenerator[RouterEvent, None]:
        """The router's events, or one provider's dressed as the router's (an `Attempt`,
        how the prompt was fitted, the stream)."""
        source = self.source
        if isinstance(source, Router):
            async for event in source.stream(prompt):
                yield event
            return
        fitted = await fit(source, prompt)
        yield Attempt(source.name, source.label)
        yield Fitted(source.name, fitted.report)
        async for event in source.stream(fitted.request):
            if type(event) is WasReasoning:  # told as the router tells it
                for moved in reasoning_moved(source.name, source.label, False,
                                             self.reply.text, event.text):
                    yield moved
            else:
                yield event

    async def _json(self) -> tuple[Any, str, list[str]]:
        source, prompt = self.source, self.asked.prompt
        if isinstance(source, Router):
            value, done = await source.complete_json(prompt)
            notes = [line for event in done.events
                     if not (isinstance(event, ProviderEvent)
                             and event.type == "provider_switch")
                     if (line := stream_note(event)) is not None]
            return value, done.label, notes
        fitted = await fit(source, prompt)
        notes = [line] if (line := trim_note(fitted.report)) else []
        return await complete_json(source, fitted.request), source.label, notes


class Ask:
    """Questions in conversations, for `detektiv ask` (and any front end that asks)."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    async def question(
        self, text: str, *, provider: str | None = None, schema: dict[str, Any] | None = None,
        max_tokens: int | None = None, temperature: float | None = None,
        conversation: str | None = None, continue_last: bool = False, client_id: str = "cli",
    ) -> Asking:
        """A question ready to be answered; `ConfigError` for an empty one, a bad token
        limit, an unknown provider or a conversation asked for when they are off."""
        if not text.strip():
            raise ConfigError("the prompt is empty")
        if max_tokens is not None and max_tokens < 1:
            raise ConfigError("--max-tokens must be at least 1")
        workspace = self.workspace
        workspace.context_policy  # noqa: B018 - its warnings are known before the answer
        request = StreamRequest.of(text, schema=schema, max_tokens=max_tokens,
                                   temperature=temperature)
        source: Provider | Router
        if provider:  # that one provider, tried whatever the router remembers about it
            source = await workspace.provider(provider)
        else:
            source = await workspace.new_router()
        try:
            asked = self.prepare(request, client_id=client_id, conversation=conversation,
                                 continue_last=continue_last)
        except BaseException:
            await source.aclose()
            raise
        return Asking(asked, source, schema, continue_last)

    def prepare(
        self,
        request: StreamRequest,
        *,
        client_id: str = "cli",
        conversation: str | None = None,
        continue_last: bool = False,
    ) -> Asked:
        """A question in a conversation: a new one, `conversation` (by id; created when
        new) or, with `continue_last`, the client's most recent one. Its history comes from
        `load_recent` under the `ask` policy; the user's turn is stored now, before any
        provider is called. With conversations off in `context.toml`, the question is asked
        alone and nothing is kept (`ConfigError` when a conversation was asked for)."""
        workspace = self.workspace
        limits = workspace.context_policy.limits("ask")
        if not limits.enabled:
            if conversation or continue_last:
                raise ConfigError("conversations are off for ask in context.toml "
                                  "(enabled = false)")
            return Asked(workspace, Prompt.whole(request), client_id, None, [])
        store = workspace.conversations
        conversation_id = self.conversation_id(client_id, conversation, continue_last)
        history = load_recent(store, client_id, conversation_id, limits).turns
        store.append(client_id, conversation_id,
                     ConversationTurn("user", request.messages[-1].content))
        prompt = conversation_prompt(request, history, limits)
        return Asked(workspace, prompt, client_id, conversation_id, history)

    def conversation_id(self, client_id: str, conversation: str | None,
                        continue_last: bool) -> str:
        """The conversation a question goes to: `conversation` (checked; created when new),
        the client's most recent one (`continue_last`; a new one when it has none), else a
        new id."""
        if conversation is not None:
            name = conversation.strip()
            if not name or len(name) > 64 or not name.isprintable():
                raise ConfigError(f"--conversation {conversation!r}: use 1–64 printable "
                                  "characters")
            return name
        if continue_last:
            latest = self.workspace.conversations.conversations(client_id)
            if latest:
                return latest[0].conversation_id
        return secrets.token_hex(4)
