"""Circuit-breaker rules as pure logic, on a clock the test moves."""

from __future__ import annotations

import pytest

from engine import (
    AuthError,
    RateLimitedError,
    RequestError,
    ServerError,
)
from engine.routing.breaker import Breaker, CircuitState, ProviderState, ProviderStatus


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def breaker(clock: Clock) -> Breaker:
    return Breaker(threshold=3, cooldown=300, retry_after_cap=600, rate_limit_default=30,
                   clock=clock)


def test_request_errors_do_not_count_but_auth_errors_do(breaker: Breaker) -> None:
    state = ProviderState()
    for _ in range(5):
        assert breaker.failure(state, RequestError("p", "prompt too long", 400)) == []
    assert state.consecutive_failures == 0 and state.circuit is CircuitState.CLOSED
    for _ in range(2):
        breaker.failure(state, AuthError("p", "HTTP 401"))
    events = breaker.failure(state, AuthError("p", "HTTP 401"))
    assert events == [("circuit_open", "3 consecutive failures; open for 5 min 00 s")]
    assert state.status is ProviderStatus.ERROR


def test_a_success_resets_the_count(breaker: Breaker) -> None:
    state = ProviderState()
    breaker.failure(state, ServerError("p", "x"))
    breaker.failure(state, ServerError("p", "x"))
    assert breaker.success(state) is True
    breaker.failure(state, ServerError("p", "x"))
    assert state.circuit is CircuitState.CLOSED and state.consecutive_failures == 1
    assert breaker.success(state) is True and breaker.success(state) is False


def test_cancelled_trial_frees_the_slot(breaker: Breaker, clock: Clock) -> None:
    state = ProviderState()
    for _ in range(3):
        breaker.failure(state, ServerError("p", "x"))
    clock.now += 299
    denied = breaker.admit(state)
    assert not denied.allowed and denied.reason == "circuit open; next trial in 1.0 s"
    clock.now += 1
    trial = breaker.admit(state)
    assert trial.allowed and trial.trial and state.circuit is CircuitState.HALF_OPEN
    busy = breaker.admit(state)
    assert not busy.allowed and "trial call is running" in busy.reason
    breaker.release(state)
    assert breaker.admit(state).trial


def test_rate_limit_without_retry_after_uses_the_default(breaker: Breaker, clock: Clock) -> None:
    state = ProviderState()
    assert breaker.failure(state, RateLimitedError("p", "429")) == []
    assert state.rate_limited_until == clock.now + 30 and state.consecutive_failures == 0
    clock.now += 29.5
    assert breaker.admit(state).reason == "rate limited; retry in 0.5 s"
    clock.now += 0.5
    assert breaker.admit(state).allowed


def test_health_closes_an_open_circuit(breaker: Breaker) -> None:
    state = ProviderState()
    for _ in range(3):
        breaker.failure(state, ServerError("p", "x"))
    breaker.health(state, False, "down", 3.0)
    assert state.circuit is CircuitState.OPEN
    breaker.health(state, True, "1 model listed", 2.5)
    assert state.circuit is CircuitState.CLOSED and state.status is ProviderStatus.AVAILABLE
    assert (state.last_health_ok, state.last_health_latency_ms) == (True, 2.5)


def test_state_round_trips_without_the_in_flight_trial() -> None:
    state = ProviderState(circuit=CircuitState.HALF_OPEN, trial_in_flight=True,
                          consecutive_failures=4, status=ProviderStatus.ERROR, opened_at=5.0)
    data = state.to_json()
    assert "trial_in_flight" not in data
    again = ProviderState.from_json({**data, "future_field": 1})
    assert again == ProviderState(circuit=CircuitState.HALF_OPEN, consecutive_failures=4,
                                  status=ProviderStatus.ERROR, opened_at=5.0)
    with pytest.raises(ValueError):
        ProviderState.from_json({"circuit": "ajar"})
