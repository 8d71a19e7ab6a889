"""The one consumer of router events: what a routed stream has come to so far.

    reply = Reply()
    async for event in reply.follow(router.stream(request, role)):
        match event:                      # the caller turns events into its own, if it wants
            case TokenDelta(text): ...
    reply.text, reply.label, reply.finish_reason, reply.discarded, reply.fits

Every operation that streams through the router (a round of an interrogation, an oracle, a
turn of the case agent, `ask`) keeps its reply here, so the rules are written once: the text
starts over on every `Attempt` (after a failover the new provider answers from the start, and
text from two providers is never spliced), the reply is whole on `Done`, discarded partials,
fits, skips and cache hits are kept in order. How each of these reads to a user is
`engine.report.stream_note`, also once.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field

from engine.context.budget import FitReport
from engine.providers import Done, ReasoningDelta, TokenChoices, TokenDelta, Usage
from engine.routing.events import (
    Attempt,
    Fitted,
    PartialDiscarded,
    ProviderEvent,
    RoutedCompletion,
    RouterEvent,
)

__all__ = ["Reply"]


@dataclass(slots=True)
class Reply:
    """A routed stream's reply as it stands: updated by `take`, one event at a time."""

    parts: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    """The reasoning of the provider answering now, apart from its answer."""
    attempt: Attempt | None = None
    """The provider answering now (None before the first attempt)."""
    attempts: list[Attempt] = field(default_factory=list)
    finish_reason: str | None = None
    """Set by `Done`: the reply is whole."""
    usage: Usage | None = None
    trail: list[ProviderEvent | PartialDiscarded] = field(default_factory=list)
    """Skips, failures, switches, cache hits and discarded partials, in order."""
    fits: list[FitReport] = field(default_factory=list)
    choices: list[TokenChoices] = field(default_factory=list)
    """The answer's tokens with their log-probabilities, when asked for and sent (the
    provider answering now)."""

    @property
    def text(self) -> str:
        """The text of the provider answering now (all of it once `done`)."""
        return "".join(self.parts)

    @property
    def reasoning(self) -> str:
        """The reasoning of the provider answering now (never part of `text`)."""
        return "".join(self.thinking)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    @property
    def label(self) -> str | None:
        """`name:model` of the provider answering now."""
        return None if self.attempt is None else self.attempt.label

    @property
    def provider(self) -> str | None:
        """The configured name of the provider answering now (`cache` for a cached reply)."""
        return None if self.attempt is None else self.attempt.provider

    @property
    def discarded(self) -> list[PartialDiscarded]:
        """The partial replies voided by a failover, in order."""
        return [event for event in self.trail if isinstance(event, PartialDiscarded)]

    @property
    def cached(self) -> bool:
        return self.provider == "cache"

    def take(self, event: RouterEvent) -> RouterEvent:
        """Account for one event; returns it."""
        match event:
            case TokenDelta(text):
                self.parts.append(text)
            case ReasoningDelta(text):
                self.thinking.append(text)
            case TokenChoices():
                self.choices.append(event)
            case Attempt():
                self.parts, self.thinking, self.attempt = [], [], event
                self.choices = []
                self.attempts.append(event)
            case Done(reason):
                self.finish_reason = reason
            case Usage():
                self.usage = event
            case PartialDiscarded() | ProviderEvent():
                self.trail.append(event)
            case Fitted(report=report):
                self.fits.append(report)
        return event

    async def follow(self, events: AsyncIterator[RouterEvent]
                     ) -> AsyncGenerator[RouterEvent, None]:
        """Pass `events` through, taking each; closing this closes the stream under it."""
        async with aclosing(events) as stream:  # type: ignore[type-var]
            async for event in stream:
                yield self.take(event)

    def completion(self) -> RoutedCompletion:
        """The whole reply, once `done`."""
        assert self.attempt is not None and self.finish_reason is not None
        return RoutedCompletion(self.text, self.finish_reason, self.usage,
                                self.attempt.provider, self.attempt.label, tuple(self.trail))
