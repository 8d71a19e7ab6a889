"""What happened on the way through a session, as stored: the audit trail's entries (a
failover, a timeout, a resume…) and how each model call was fitted to its window."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AuditTrailEntry", "ContextFit", "TrailEvent", "now"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


TrailEvent = Literal[
    "provider_switch",
    "timeout",
    "error",
    "cache_hit",
    "circuit_open",
    "rate_limited",
    "partial_discarded",
    "resumed",
    "context_too_small",
    "degenerate_output",
    "contradictory_analysis",
    "cost_limit",
    "document_cut",
]
"""`degenerate_output`: a model's reply was empty, an echo or not what was asked (named in the
reason); `contradictory_analysis`: a gap analysis contradicted itself and the loop's rule
decided instead (see `engine.interrogation.checks`); `cost_limit`: the next call would have
passed `--max-cost`, and the run stopped before it; `document_cut`: the witness's document
did not fit its window whole, and only its start was given."""

def now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class AuditTrailEntry(_Model):
    """Something that happened on the way: a failover, a timeout, an error, a resume."""

    timestamp: datetime = Field(default_factory=now)
    event: TrailEvent
    role: str | None = None
    from_provider: str | None = None
    to_provider: str | None = None
    reason: str

    @property
    def route(self) -> str:
        """`"a → b"`, `"a"`, or `""`: the providers the entry is about."""
        return " → ".join(p for p in (self.from_provider, self.to_provider) if p)


class ContextFit(_Model):
    """How one model call was fitted to its provider's context window (SPEC §5): what was
    sent, not what is stored (the stored session is never trimmed)."""

    role: str
    sequence: int | None = None
    """The round the call belongs to; None for the audit."""
    provider: str
    used: Annotated[int, Field(ge=0)]
    """Prompt tokens sent (counted as `counted` says)."""
    window: Annotated[int, Field(ge=1)]
    window_source: Literal["config", "server", "model", "default"]
    counted: Literal["exact", "bounded", "estimate"]
    """exact: the server counted it; bounded: an upper bound from the estimate and the
    server's own counts measured earlier (`engine.context.budget`); estimate: estimated."""
    reply: Annotated[int, Field(ge=0)]
    """Tokens kept for the reply."""
    asked_reply: int | None = None
    """The reply budget asked for, when the window made it smaller."""
    digested: list[int] = Field(default_factory=list)
    """Rounds sent as one-line digests."""
    shortened: list[int] = Field(default_factory=list)
    """Rounds sent with their answer (or question) shortened."""
    omitted: list[int] = Field(default_factory=list)
    """Rounds not sent at all."""

    @property
    def trimmed(self) -> bool:
        """Whether any round was digested, shortened or left out."""
        return bool(self.digested or self.shortened or self.omitted)
