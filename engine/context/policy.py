"""`context.toml`: how much conversation each consumer is given (SPEC §5, seed 004).

    enabled = true          # conversations kept and sent at all
    max_turns = 20          # newest turns sent, at most
    ttl_seconds = 604800    # turns older than this are not sent (0: no age limit)
    max_chars = 16000       # characters of history sent, at most

    [ask]                   # per consumer: detective, witness, oracle, agent, ask
    max_turns = 10          # overrides the top level for `detektiv ask`

    [last_reference]        # the entity last talked about ("that session")
    enabled = true
    allowed_entities = ["session"]
    max_age_turns = 4

A missing file means the defaults. A file that cannot be read or does not validate means the
defaults too, plus one warning naming the file and the field: nothing stops working for it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "CONSUMERS",
    "ConsumerPolicy",
    "ContextPolicy",
    "Limits",
    "ReferencePolicy",
    "load_policy",
]

Consumer = Literal["detective", "witness", "oracle", "agent", "ask"]
CONSUMERS: tuple[Consumer, ...] = ("detective", "witness", "oracle", "agent", "ask")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ConsumerPolicy(_Strict):
    """A consumer's block: any field left out takes the top-level value."""

    enabled: bool | None = None
    max_turns: int | None = Field(default=None, ge=0, le=10_000)
    ttl_seconds: float | None = Field(default=None, ge=0)
    max_chars: int | None = Field(default=None, ge=0)


class ReferencePolicy(_Strict):
    """The `[last_reference]` block."""

    enabled: bool = True
    allowed_entities: tuple[str, ...] = ("session",)
    """Kinds of entity a later turn may refer back to without naming them."""
    max_age_turns: int = Field(default=4, ge=0, le=1000)
    """How many turns later a reference may still be filled in from context."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The effective limits for one consumer (its block merged over the top level)."""

    enabled: bool
    max_turns: int
    ttl_seconds: float
    max_chars: int


class ContextPolicy(_Strict):
    """The whole `context.toml`, defaults filled in."""

    enabled: bool = True
    max_turns: int = Field(default=20, ge=0, le=10_000)
    ttl_seconds: float = Field(default=7 * 86400, ge=0)
    """0: turns never expire."""
    max_chars: int = Field(default=16_000, ge=0)
    detective: ConsumerPolicy = ConsumerPolicy()
    witness: ConsumerPolicy = ConsumerPolicy()
    oracle: ConsumerPolicy = ConsumerPolicy()
    agent: ConsumerPolicy = ConsumerPolicy()
    ask: ConsumerPolicy = ConsumerPolicy()
    last_reference: ReferencePolicy = ReferencePolicy()

    def limits(self, consumer: Consumer) -> Limits:
        """`consumer`'s block merged over the top-level values."""
        own: ConsumerPolicy = getattr(self, consumer)
        return Limits(
            enabled=self.enabled and (own.enabled if own.enabled is not None else True),
            max_turns=own.max_turns if own.max_turns is not None else self.max_turns,
            ttl_seconds=own.ttl_seconds if own.ttl_seconds is not None else self.ttl_seconds,
            max_chars=own.max_chars if own.max_chars is not None else self.max_chars,
        )


def load_policy(path: Path) -> tuple[ContextPolicy, list[str]]:
    """The policy in `path` over the defaults, and the warnings (an invalid file: defaults)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return ContextPolicy(), []
    except OSError as exc:
        return ContextPolicy(), [f"{path}: cannot read ({exc.strerror}); using the defaults"]
    try:
        data = tomllib.loads(raw.decode("utf-8-sig"))  # a BOM (an editor's) is no TOML
    except UnicodeDecodeError:
        return ContextPolicy(), [f"{path}: not UTF-8 text; using the defaults"]
    except tomllib.TOMLDecodeError as exc:
        return ContextPolicy(), [f"{path}: invalid TOML ({exc}); using the defaults"]
    try:
        return ContextPolicy.model_validate(data), []
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(top level)"
        message = first["msg"].removeprefix("Value error, ")
        return ContextPolicy(), [f"{path}: {field}: {message}; using the defaults"]
