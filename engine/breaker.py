"""Per-provider health bookkeeping: status, circuit breaker, rate limit. Pure logic, no I/O.

    closed ──(threshold consecutive failures)──▶ open ──(cooldown passed)──▶ half-open
      ▲                                            ▲                            │
      └────────────── trial call succeeds ─────────┴──── trial call fails ──────┘

- An open circuit refuses calls without any network traffic.
- Half-open admits exactly one trial call; concurrent callers are refused until it ends.
- A 429 keeps the provider aside until Retry-After (capped) has passed; it does not count as a
  failure of the provider's health, since the provider answered.
- Request errors (a 4xx about *this* request: unknown model, prompt too long) do not count
  either: the next request may be fine. Everything else does, including failures mid-stream
  and auth failures (a wrong key will not fix itself).

Times are wall-clock seconds (`time.time`), so the state can be saved and read back by another
process; the clock is injectable for tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, Literal

from engine.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimitedError,
    RequestError,
)

__all__ = ["Breaker", "CircuitState", "Admission", "ProviderState", "ProviderStatus"]


class ProviderStatus(StrEnum):
    """What we last learnt of a provider (SPEC §2)."""

    AVAILABLE = "available"
    UNAVAILABLE = "unavailable"
    RATE_LIMITED = "rate_limited"
    ERROR = "error"


class CircuitState(StrEnum):
    """The circuit breaker's state."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass
class ProviderState:
    """Everything the router remembers about one provider."""

    status: ProviderStatus = ProviderStatus.AVAILABLE
    circuit: CircuitState = CircuitState.CLOSED
    consecutive_failures: int = 0
    opened_at: float | None = None
    rate_limited_until: float | None = None
    last_error: str | None = None
    last_health_check: float | None = None
    last_health_ok: bool | None = None
    last_health_detail: str | None = None
    last_health_latency_ms: float | None = None
    trial_in_flight: bool = False

    def to_json(self) -> dict[str, Any]:
        """The persistent part (an in-flight trial belongs to one process only)."""
        data = asdict(self)
        data.pop("trial_in_flight")
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProviderState:
        """Read back `to_json`; unknown keys are ignored, bad values raise ValueError."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known.pop("trial_in_flight", None)
        state = cls(**known)
        state.status = ProviderStatus(state.status)
        state.circuit = CircuitState(state.circuit)
        return state


@dataclass(frozen=True, slots=True)
class Admission:
    """Whether a call may go out now; when not, `kind` and `reason` say why."""

    allowed: bool
    trial: bool = False
    kind: str = ""
    reason: str = ""


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s"


class Breaker:
    """The rules above, applied to `ProviderState`s."""

    def __init__(
        self,
        threshold: int = 3,
        cooldown: float = 300.0,
        retry_after_cap: float = 600.0,
        rate_limit_default: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self.retry_after_cap = retry_after_cap
        self.rate_limit_default = rate_limit_default
        self.clock = clock

    def admit(self, state: ProviderState) -> Admission:
        """May a call go out now? Claims the half-open trial when it grants one."""
        now = self.clock()
        if state.rate_limited_until is not None and now < state.rate_limited_until:
            wait = _duration(state.rate_limited_until - now)
            return Admission(False, kind="rate_limited", reason=f"rate limited; retry in {wait}")
        if state.circuit is CircuitState.CLOSED:
            return Admission(True)
        opened = state.opened_at if state.opened_at is not None else now
        if now - opened < self.cooldown:
            wait = _duration(self.cooldown - (now - opened))
            return Admission(
                False, kind="circuit_open", reason=f"circuit open; next trial in {wait}"
            )
        if state.trial_in_flight:
            return Admission(
                False, kind="circuit_open", reason="circuit half-open; a trial call is running"
            )
        state.circuit = CircuitState.HALF_OPEN
        state.trial_in_flight = True
        return Admission(True, trial=True)

    def release(self, state: ProviderState) -> None:
        """The admitted call ended without a verdict (cancelled): free the trial slot."""
        state.trial_in_flight = False

    def success(self, state: ProviderState) -> bool:
        """Record a success; True when that changed the state (worth saving)."""
        changed = (
            state.circuit is not CircuitState.CLOSED
            or state.consecutive_failures != 0
            or state.status is not ProviderStatus.AVAILABLE
            or state.rate_limited_until is not None
        )
        state.circuit = CircuitState.CLOSED
        state.consecutive_failures = 0
        state.opened_at = None
        state.rate_limited_until = None
        state.status = ProviderStatus.AVAILABLE
        state.trial_in_flight = False
        return changed

    def failure(
        self, state: ProviderState, error: ProviderError
    ) -> list[tuple[Literal["circuit_open", "rate_limited"], str]]:
        """Record a failure; returns the (kind, reason) events it caused besides itself."""
        now = self.clock()
        events: list[tuple[Literal["circuit_open", "rate_limited"], str]] = []
        trial = state.trial_in_flight
        state.trial_in_flight = False
        state.last_error = error.detail
        if isinstance(error, RateLimitedError):
            asked = error.retry_after
            wait = self.rate_limit_default if asked is None else asked
            if wait > self.retry_after_cap:
                events.append(
                    (
                        "rate_limited",
                        f"Retry-After of {_duration(wait)} capped to "
                        f"{_duration(self.retry_after_cap)}",
                    )
                )
                wait = self.retry_after_cap
            state.rate_limited_until = now + wait
            state.status = ProviderStatus.RATE_LIMITED
            if trial:  # the trial got an answer: the provider is up, only busy
                state.circuit = CircuitState.CLOSED
                state.consecutive_failures = 0
            return events
        if isinstance(error, RequestError):
            if trial:
                state.circuit = CircuitState.CLOSED
                state.consecutive_failures = 0
            return events
        if isinstance(error, ProviderConnectionError | ProviderTimeout):
            state.status = ProviderStatus.UNAVAILABLE
        else:
            state.status = ProviderStatus.ERROR
        state.consecutive_failures += 1
        if trial:
            state.circuit, state.opened_at = CircuitState.OPEN, now
            events.append(
                ("circuit_open", f"trial call failed; open again for {_duration(self.cooldown)}")
            )
        elif (
            state.circuit is CircuitState.CLOSED
            and state.consecutive_failures >= self.threshold
        ):
            state.circuit, state.opened_at = CircuitState.OPEN, now
            events.append(
                (
                    "circuit_open",
                    f"{state.consecutive_failures} consecutive failures; open for "
                    f"{_duration(self.cooldown)}",
                )
            )
        return events

    def health(self, state: ProviderState, ok: bool, detail: str, latency_ms: float) -> None:
        """Record a health check. A provider that answers again closes its circuit."""
        state.last_health_check = self.clock()
        state.last_health_ok = ok
        state.last_health_detail = detail
        state.last_health_latency_ms = round(latency_ms, 1)
        if ok:
            if state.circuit is not CircuitState.CLOSED or state.status in (
                ProviderStatus.UNAVAILABLE,
                ProviderStatus.ERROR,
            ):
                state.circuit = CircuitState.CLOSED
                state.consecutive_failures = 0
                state.opened_at = None
                if state.status is not ProviderStatus.RATE_LIMITED:
                    state.status = ProviderStatus.AVAILABLE
        elif state.status is ProviderStatus.AVAILABLE:
            state.status = ProviderStatus.UNAVAILABLE

