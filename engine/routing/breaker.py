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

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from engine.config.providers import ProviderConfig
from engine.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimitedError,
    RequestError,
    UnusableReplyError,
)
from engine.jsondata import read_json
from engine.paths import Paths
from engine.providers._base import standard_key_env
from engine.storage.atomic import atomic_write_text

__all__ = [
    "Admission",
    "Breaker",
    "CircuitState",
    "ProviderState",
    "ProviderStatus",
    "StateStore",
    "fingerprint",
    "state_file",
]

log = logging.getLogger(__name__)


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
    last_health_by: str | None = None
    """What the last health check asked (`engine.providers.HealthCheck`)."""
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
        if isinstance(error, RequestError | UnusableReplyError):  # the server answered
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

    def health(self, state: ProviderState, ok: bool, detail: str, latency_ms: float,
               by: str = "server") -> None:
        """Record a health check (`by`: what it asked). A provider that answers again closes
        its circuit; a model list that answered is no answer of the model, and changes
        nothing."""
        state.last_health_check = self.clock()
        state.last_health_ok = ok
        state.last_health_detail = detail
        state.last_health_latency_ms = round(latency_ms, 1)
        state.last_health_by = by
        if ok and by == "list":
            return
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


_FINGERPRINT = "config"


def fingerprint(config: ProviderConfig, env: Mapping[str, str]) -> str:
    """What identifies a provider's configuration for its remembered state: kind, base URL,
    model and key reference (the variable's name and a hash of its value, the key command, a
    hash of a key in the file). A user who fixes any of them starts with a closed circuit.
    Only a short hash is stored: no key, and nothing a key could be recovered from."""
    key_env = config.api_key_env or standard_key_env(config)
    parts = {
        "kind": config.kind,
        "base_url": (config.base_url or "").rstrip("/"),
        "model": config.model,
        "key_env": config.api_key_env,
        "key_value": _digest(env.get(key_env, "")) if key_env else None,
        "key_cmd": config.api_key_cmd,
        "key_file": _digest(config.api_key.get_secret_value()) if config.api_key else None,
    }
    return _digest(json.dumps(parts, sort_keys=True))[:16]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class StateStore:
    """Breaker state in one JSON file, shared by every detektiv process of a user."""

    VERSION = 1

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.stale: set[str] = set()
        """Providers whose saved state belonged to another configuration of theirs."""

    def _entries(self) -> dict[str, Any]:
        """The file's entries as stored (fingerprints included); empty when there is none.
        A file that cannot be read is moved aside."""
        if self.path is None:
            return {}
        try:
            raw = read_json(self.path.read_text(encoding="utf-8"))
            entries = raw["providers"] if raw.get("version") == self.VERSION else {}
            if not isinstance(entries, dict):
                raise TypeError("providers is not an object")
            return entries
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self._set_aside(exc)
            return {}

    def _set_aside(self, exc: Exception) -> None:
        # Only remembered health is lost: start fresh, keep the bad file for a look.
        assert self.path is not None
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        with contextlib.suppress(OSError):
            self.path.replace(aside)
        log.warning("provider state %s unreadable (%s); moved to %s", self.path, exc, aside)

    def load(self, fingerprints: Mapping[str, str] | None = None) -> dict[str, ProviderState]:
        """The saved states; with `fingerprints`, only those saved for the same provider
        configuration (a state saved before fingerprints existed is taken as the same)."""
        states: dict[str, ProviderState] = {}
        try:
            for name, data in self._entries().items():
                saved = data.get(_FINGERPRINT) if isinstance(data, dict) else None
                if fingerprints is None or saved is None or saved == fingerprints.get(name):
                    states[name] = ProviderState.from_json(data)
                else:
                    self.stale.add(name)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._set_aside(exc)
            return {}
        return states

    def save(
        self,
        states: Mapping[str, ProviderState],
        names: set[str],
        fingerprints: Mapping[str, str],
    ) -> None:
        """Write the states of `names`, keeping what other processes wrote for the rest as
        they wrote it (their configuration fingerprints too)."""
        if self.path is None or not names:
            return
        current = self._entries()
        current.update({name: {**states[name].to_json(), _FINGERPRINT: fingerprints[name]}
                        for name in names})
        try:
            atomic_write_text(
                self.path, json.dumps({"version": self.VERSION, "providers": current}, indent=1)
            )
        except OSError as exc:
            log.warning("cannot save provider state to %s: %s", self.path, exc)

def state_file(paths: Paths) -> Path:
    """`providers.json` in the state directory; one left in the data directory by an earlier
    version is moved there first (nothing is lost, nothing is read twice)."""
    path = paths.state / "providers.json"
    old = paths.data_dir / "providers.json"
    if old != path and old.exists() and not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(old, path)
        except OSError:
            return old  # cannot move it: go on using it where it is
    return path
