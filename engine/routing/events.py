"""What the router yields besides the provider's own `TokenDelta`, `Usage` and `Done`: which
provider answers now, what happened on the way (for the audit trail), how the prompt was
fitted. `engine.routing.collect` is the one place that consumes them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from engine.context.budget import FitReport
from engine.errors import ProviderError, ProviderTimeout, RateLimitedError, UnusableReplyError
from engine.providers import ReasoningDelta, StreamEvent, Usage

__all__ = ["WAS_REASONING", "Attempt", "EventType", "Fitted", "PartialDiscarded",
           "ProviderEvent", "RoutedCompletion", "RouterEvent", "failure_event", "reasoning_moved"]

EventType = Literal[
    "provider_switch", "circuit_open", "rate_limited", "timeout", "error", "context_too_small",
    "cache_hit", "degenerate_output",
]


def failure_event(error: ProviderError) -> EventType:
    """The audit trail's type for a provider's failure."""
    if isinstance(error, RateLimitedError):
        return "rate_limited"
    if isinstance(error, ProviderTimeout):
        return "timeout"
    if isinstance(error, UnusableReplyError):
        return "degenerate_output"
    return "error"


@dataclass(frozen=True, slots=True)
class Attempt:
    """The router is now streaming from `provider`; `trial` when it is a half-open trial."""

    provider: str
    label: str
    trial: bool = False


@dataclass(frozen=True, slots=True)
class ProviderEvent:
    """A skip, a failure or a switch, shaped for the session's audit trail."""

    type: EventType
    from_provider: str | None
    to_provider: str | None
    reason: str
    at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class PartialDiscarded:
    """The answer streamed since the last `Attempt` is void; `text` is kept for the audit."""

    provider: str
    text: str
    reason: str


WAS_REASONING = "it was the model's thinking (its reply began inside a think block)"
"""Why text is void when a reply turns out to have begun inside its reasoning."""


def reasoning_moved(provider: str, label: str, trial: bool, partial: str,
                    reasoning: str) -> list[RouterEvent]:
    """What a front end is told when the answer streamed so far was reasoning (a provider's
    `WasReasoning`): that text void, the answer starting again from the same provider (an
    `Attempt`: every reader starts its text afresh there), the reasoning as reasoning."""
    moved: list[RouterEvent] = []
    if partial:
        moved.append(PartialDiscarded(provider, partial, WAS_REASONING))
    moved.append(Attempt(provider, label, trial))
    if reasoning:
        moved.append(ReasoningDelta(reasoning))
    return moved


@dataclass(frozen=True, slots=True)
class Fitted:
    """How the prompt sent to `provider` (just named by `Attempt`) was fitted to its window."""

    provider: str
    report: FitReport


RouterEvent = StreamEvent | Attempt | ProviderEvent | PartialDiscarded | Fitted


@dataclass(frozen=True, slots=True)
class RoutedCompletion:
    """A whole answer from the router, with who gave it and what happened on the way."""

    text: str
    finish_reason: str
    usage: Usage | None
    provider: str
    label: str
    events: tuple[ProviderEvent | PartialDiscarded, ...]


