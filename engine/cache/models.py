"""The response cache's entities (SPEC §3, seed 003): an entry, its validation, a lookup's
explanation. Stored as JSON in the cache database; nothing here touches storage."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.models.session import now

__all__ = ["CacheEntry", "CheckResult", "Explanation", "Tier", "ValidationResult"]

Status = Literal["PASSED", "FAILED", "WARNING"]
Tier = Literal["exact", "variation", "fuzzy", "semantic"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CheckResult(_Model):
    """One validation or guard check."""

    name: str
    passed: bool
    detail: str = ""


class ValidationResult(_Model):
    """Whether an entry may be served: only PASSED ones are."""

    status: Status
    checks: list[CheckResult]
    confidence: Annotated[float, Field(ge=0, le=1)]
    validator_version: int
    validated_at: datetime = Field(default_factory=now)


class CacheEntry(_Model):
    """One cached answer, for one normalised question in one scope."""

    entry_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    question: Annotated[str, Field(min_length=1)]
    normalised: str
    scope: str = ""
    """Where it may be served: a fingerprint of role, provider chain, system prompt and
    earlier context (`""`: entries put by hand, served to lookups without a scope)."""
    variations: list[str] = Field(default_factory=list)
    """Other wordings (normalised) that were accepted as the same question."""
    keywords: list[str] = Field(default_factory=list)
    payload: str
    """The answer."""
    response_template: bool = False
    requires_realtime: bool = False
    created_at: datetime = Field(default_factory=now)
    last_used: datetime = Field(default_factory=now)
    usage_count: Annotated[int, Field(ge=0)] = 0
    confidence: Annotated[float, Field(ge=0, le=1)] = 1.0
    validated: bool = False
    validation_metadata: ValidationResult | None = None
    provider_used: str | None = None
    finish_reason: str = "stop"
    invalidated: bool = False
    """Set by the user: never served again."""


class Explanation(_Model):
    """What one lookup decided, and why (every lookup has one)."""

    question: str
    normalised: str
    hit: bool
    tier: Tier | None = None
    score: float | None = None
    threshold: float
    entry_id: str | None = None
    checks: list[CheckResult] = Field(default_factory=list)
    """The meaning guard's checks of the chosen candidate (fuzzy tier)."""
    reason: str
    """One line: why it is a hit or a miss."""
    validator_version: int
    rejected: list[tuple[str, float, str]] = Field(default_factory=list)
    """The nearest rejected candidates: (question, score, why)."""
