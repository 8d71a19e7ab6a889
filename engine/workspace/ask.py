"""The workspace's ask part: one question answered, streamed, kept in its conversation.

    asking = await workspace.ask.question("Is tea a stimulant?", provider=None, schema=None)
    async for event in asking.events():
        match event:
            case AskDelta(text): ...          # the answer as it streams (stdout)
            case AskNote(text): ...           # a switch, a trimmed history, a retry (stderr)
            case AskAnswered(text, provider, conversation_id): ...   # last: kept

With a provider named, that one answers: a chain of one (whatever the router remembers about
it), cached, fitted and refitted like any other; without, the role's chain does (failover).
The answer's tokens and cost come with it, and are kept with its turn. With a schema, the
answer is JSON valid against it. An empty answer is asked for once more, sampled warm; a
second one is an error, never an exit 0 with nothing said.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from engine.context.budget import Prompt
from engine.context.conversations import ConversationTurn, conversation_prompt, load_recent
from engine.errors import AllProvidersFailed, ConfigError, DetektivError, UnusableReplyError
from engine.interrogation.calls import count_tokens
from engine.models.event import Event
from engine.models.usage import TokenTally
from engine.providers import StreamRequest, TokenDelta
from engine.report.stream import stream_note, trim_note
from engine.routing.collect import Reply
from engine.routing.events import Fitted, ProviderEvent
from engine.routing.router import Router

if TYPE_CHECKING:
    from engine.workspace.core import Workspace

__all__ = ["Ask", "AskAnswered", "AskDelta", "AskEvent", "AskNote", "Asked", "Asking"]

RETRY_TEMPERATURE = 0.8
"""An empty answer is asked for once more, sampled at least this warm (greedy decoding that
said nothing says nothing again)."""
FAILURES = frozenset({"error", "timeout", "rate_limited", "degenerate_output",
                      "context_too_small"})
"""Router events that say a provider failed or was passed over (a chain of one then ends
with that as its error; an open circuit is no reason under `Router.insist`)."""
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
    conversations are off), with what its calls used (tokens and cost: `engine.costs`)."""

    type: Literal["ask_answered"] = "ask_answered"
    text: str
    provider: str | None
    conversation_id: str | None
    usage: TokenTally = Field(default_factory=TokenTally)


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

    def answered(self, text: str, provider: str | None = None,
                 usage: TokenTally | None = None) -> None:
        """Keep the answer as the conversation's next turn (who gave it, what it used)."""
        if self.conversation_id is None:
            return
        meta: dict[str, Any] = {"provider": provider} if provider else {}
        if usage is not None:
            meta["usage"] = usage.model_dump(mode="json")
        self.workspace.conversations.append(
            self.client_id, self.conversation_id, ConversationTurn("assistant", text, meta=meta))


class Asking:
    """One question on its way; `events()` answers it (and closes what it opened)."""

    def __init__(self, asked: Asked, router: Router, schema: dict[str, Any] | None,
                 continued: bool) -> None:
        self.asked = asked
        self.router = router
        self.schema = schema
        self.continued = continued
        self.reply = Reply()
        """The answer as it stands."""
        self.usage = TokenTally()
        """What its calls used so far (an empty answer asked again counts twice)."""

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
            asked.answered(text, label, self.usage)
            yield AskAnswered(text=text, provider=label, conversation_id=asked.conversation_id,
                              usage=self.usage)
        finally:
            await self.router.aclose()

    def _own(self, failed: AllProvidersFailed) -> DetektivError:
        """The error to show: a provider asked for by name failed with its own error (a
        chain of one has nothing to fail over to), any other chain with every provider's."""
        if self.router.insist and len(failed.causes) == 1:
            return failed.causes[0]
        if self.router.insist and len(failed.failures) == 1:  # skipped: too small a window
            name, why = failed.failures[0]
            return DetektivError(f"{name}: {why}")
        return failed

    def _count(self, reply: Reply) -> None:
        count_tokens(self.usage, reply, self.router.config)

    async def _answer(self) -> AsyncGenerator[AskEvent, None]:
        prompt = self.asked.prompt
        for attempt in (1, 2):
            self.reply = reply = Reply()
            held: str | None = None  # a failure's note: the error itself, if nothing follows
            try:
                async for event in reply.follow(self.router.stream(prompt)):
                    if held is not None:
                        yield AskNote(text=held)
                        held = None
                    match event:
                        case TokenDelta(text):
                            yield AskDelta(text=text)
                        case Fitted() if attempt == 2:
                            pass  # said the first time
                        case ProviderEvent() if self.router.insist and \
                                event.type in FAILURES:
                            held = stream_note(event)
                        case _:
                            fitted = reply.fits[-1] if reply.fits else None
                            if (line := stream_note(event, fitted)) is not None:
                                yield AskNote(text=line)
            except AllProvidersFailed as failed:
                raise self._own(failed) from None
            finally:
                self._count(reply)
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

    async def _json(self) -> tuple[Any, str, list[str]]:
        reply = Reply()
        try:
            value, done = await self.router.complete_json(self.asked.prompt, reply=reply)
        except AllProvidersFailed as failed:
            raise self._own(failed) from None
        finally:
            self._count(reply)
        notes = [line for event in done.events
                 if not (isinstance(event, ProviderEvent) and event.type == "provider_switch")
                 if (line := stream_note(event)) is not None]
        notes += [line for fitted in reply.fits if (line := trim_note(fitted)) is not None]
        return value, done.label, notes


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
        if provider:  # a chain of one: its own cache scope, its window learned, refitted
            router, _ = await workspace.routed({"default": [provider]})
            router.insist = True  # tried whatever the router remembers about it
        else:
            router = await workspace.new_router()
        try:
            asked = self.prepare(request, client_id=client_id, conversation=conversation,
                                 continue_last=continue_last)
        except BaseException:
            await router.aclose()
            raise
        return Asking(asked, router, schema, continue_last)

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
