"""One provider over several replicas of the same model, held to its rate limits.

    [providers.qwen]
    kind = "openai"
    model = "qwen2.5-7b"
    base_urls = ["http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"]   # or [[...replicas]]
    requests_per_minute = 600

`ReplicatedProvider` is a `Provider` like any other: the router, the breaker and every caller
see one provider. Inside it:

- **Fewest in flight first.** A call goes to the healthy replica with the fewest calls in
  flight for its weight, within its slots (configured, else asked of the server: llama.cpp's
  `/props`, else unlimited). When every replica is full, the call waits for a free slot.
- **A replica's failure is its own.** A replica that fails before the first token (refused,
  timed out, a 5xx) is set aside (10 s, doubling to the router's cooldown) and the call goes to
  the next one at once; the router hears of a failure only when every replica failed. A
  failure mid-answer is the router's, as from any provider (the turn restarts, never spliced).
  A health check that reaches a replica takes it back.
- **429 slows, it does not fail.** A replica that answers 429 waits out its Retry-After (or
  the reset its `x-ratelimit-*` / `anthropic-ratelimit-*` headers name), up to the router's
  `retry_after_cap`, while the others carry on; when all of them wait, the call waits for the
  first to come back; `waited` adds up the time calls spent so (a run's progress line shows
  it).
- **Rates.** `requests_per_minute` and `tokens_per_minute` (the prompt estimated at four
  characters a token, plus the reply's allowance) are kept for the whole process: a call that
  would pass one waits for its turn.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass

from engine.config.providers import ProviderConfig
from engine.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimitedError,
    ServerError,
)
from engine.providers._base import (
    Health,
    Message,
    Provider,
    ReasoningDelta,
    StreamEvent,
    StreamRequest,
    TokenDelta,
)

__all__ = ["ReplicatedProvider"]

SET_ASIDE = 10.0
"""Seconds a replica that failed is left alone at first (doubling with each failure)."""
MINUTE = 60.0


@dataclass(eq=False)
class _Replica:
    provider: Provider
    url: str
    weight: float
    slots: int | None
    asked: bool = False
    """Whether the server was asked its slots."""
    in_flight: int = 0
    failures: int = 0
    until: float = 0.0
    """Set aside until then (monotonic seconds)."""
    limited: bool = False
    """Set aside by a 429 (waited for), not by a failure (tried again at once if need be)."""


class ReplicatedProvider(Provider):
    """See the module docstring."""

    def __init__(self, name: str, config: ProviderConfig, env: Mapping[str, str],
                 replicas: Sequence[Provider], cooldown: float = 300.0,
                 retry_after_cap: float = 600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(name, config, env)
        weights = [r.weight for r in config.replicas] or [1.0] * len(replicas)
        slots = [r.slots for r in config.replicas] or [None] * len(replicas)
        self.replicas = [_Replica(p, p.config.base_url or "", w, s)
                         for p, w, s in zip(replicas, weights, slots, strict=True)]
        self.cooldown = cooldown
        self.retry_after_cap = retry_after_cap
        self._clock = clock
        self._changed = asyncio.Condition()
        self._minute: deque[tuple[float, int]] = deque()
        """(when, tokens) of each call of the last minute, for the rates."""
        self.waited = 0.0
        """Seconds calls have spent waiting, in all."""

    # ---- the stream ---------------------------------------------------------------------

    async def stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
        tried: set[int] = set()
        last: ProviderError | None = None
        limited_since: float | None = None
        while True:
            if limited_since is not None and last is not None and \
                    self._clock() - limited_since > self.retry_after_cap:
                raise last  # rate-limited for longer than the cap: the router decides
            replica = await self._acquire(request, tried, last)
            started = False
            try:
                async with aclosing(replica.provider.stream(request)) as events:
                    async for event in events:
                        if type(event) is TokenDelta or type(event) is ReasoningDelta:
                            started = True
                        yield event
                self._succeeded(replica)
                return
            except RateLimitedError as exc:
                wait = min(exc.retry_after if exc.retry_after is not None else SET_ASIDE,
                           self.retry_after_cap)
                self._set_aside(replica, wait, count=False)
                if started:
                    raise
                last = exc
                if limited_since is None:
                    limited_since = self._clock()
            except (ProviderConnectionError, ProviderTimeout, ServerError) as exc:
                self._set_aside(replica)
                if started:
                    raise
                tried.add(id(replica))
                last = exc
            finally:
                await self._release(replica)

    async def _acquire(self, request: StreamRequest, tried: set[int],
                       last: ProviderError | None) -> _Replica:
        """A replica for one call (its slot taken): see the module docstring."""
        await self._ask_slots()
        await self._take_rate(request)
        async with self._changed:
            while True:
                now = self._clock()
                untried = [r for r in self.replicas if id(r) not in tried]
                if not untried:
                    assert last is not None
                    raise last
                ready = [r for r in untried if r.until <= now
                         and (r.slots is None or r.in_flight < r.slots)]
                if ready:
                    chosen = min(ready, key=lambda r: (r.in_flight / r.weight,
                                                       self.replicas.index(r)))
                    chosen.in_flight += 1
                    return chosen
                aside = [r for r in untried if r.until > now]
                failed = [r for r in aside if not r.limited]
                if len(aside) == len(untried) and failed:
                    # all set aside, some after failing: the one set aside longest ago is
                    # tried again at once (it may be back) rather than the call waiting
                    chosen = min(failed, key=lambda r: r.until)
                    chosen.in_flight += 1
                    return chosen
                # full, or waiting out a 429: wait for a slot or the first to come back
                wake = min((r.until for r in aside), default=None)
                began = self._clock()
                try:
                    timeout = None if wake is None else max(0.0, wake - now)
                    async with asyncio.timeout(timeout):
                        await self._changed.wait()
                except TimeoutError:
                    pass
                finally:
                    self.waited += self._clock() - began

    async def _release(self, replica: _Replica) -> None:
        async with self._changed:
            replica.in_flight -= 1
            self._changed.notify_all()

    def _succeeded(self, replica: _Replica) -> None:
        replica.failures, replica.until, replica.limited = 0, 0.0, False

    def _set_aside(self, replica: _Replica, seconds: float | None = None,
                   count: bool = True) -> None:
        if count:
            replica.failures += 1
        if seconds is None:
            seconds = min(self.cooldown, SET_ASIDE * 2 ** max(0, replica.failures - 1))
        replica.until = max(replica.until, self._clock() + seconds)
        replica.limited = not count

    async def _ask_slots(self) -> None:
        for replica in self.replicas:
            if replica.slots is None and not replica.asked:
                replica.asked = True
                try:
                    async with asyncio.timeout(5):
                        replica.slots = await replica.provider.slots()
                except Exception:  # a server that cannot say: unlimited
                    replica.slots = None

    async def _take_rate(self, request: StreamRequest) -> None:
        """Wait until this call keeps `requests_per_minute` and `tokens_per_minute`."""
        rpm, tpm = self.config.requests_per_minute, self.config.tokens_per_minute
        if rpm is None and tpm is None:
            return
        tokens = sum(len(m.content) for m in request.messages) // 4 + (request.max_tokens or 0)
        minute = self._minute
        while True:
            now = self._clock()
            while minute and minute[0][0] <= now - MINUTE:
                minute.popleft()
            spent = sum(n for _, n in minute)
            if (rpm is None or len(minute) < rpm) and (
                    tpm is None or not minute or spent + tokens <= tpm):
                minute.append((now, tokens))
                return
            # either limit waits for the oldest call of the minute to leave it
            pause = max(0.01, minute[0][0] + MINUTE - now)
            try:
                await asyncio.sleep(pause)
            finally:
                self.waited += pause

    # ---- what the router asks -----------------------------------------------------------

    def _stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
        raise AssertionError("ReplicatedProvider streams through its replicas")

    @property
    def replica_count(self) -> int:  # type: ignore[override]
        return len(self.replicas)

    def has_ready_replica(self) -> bool:
        now = self._clock()
        return any(r.until <= now for r in self.replicas)

    @property
    def official(self) -> bool:
        return self.replicas[0].provider.official

    async def health(self, timeout: float = 5.0) -> Health:
        """Every replica's health: ok when one answers; one that answers is taken back."""
        start = time.perf_counter()
        results = await asyncio.gather(*(r.provider.health(timeout) for r in self.replicas))
        async with self._changed:
            for replica, health in zip(self.replicas, results, strict=True):
                if health.ok:
                    self._succeeded(replica)
            self._changed.notify_all()
        ok = [h for h in results if h.ok]
        down = [f"{r.url}: {h.detail}" for r, h in zip(self.replicas, results, strict=True)
                if not h.ok]
        detail = f"{len(ok)} of {len(results)} replicas ok"
        if ok:
            detail += f" ({ok[0].detail})"
        if down:
            detail += "; " + "; ".join(down)
        return Health(bool(ok), (time.perf_counter() - start) * 1000, detail)

    async def _health(self) -> str:  # pragma: no cover - `health` is overridden
        raise AssertionError("unused")

    async def context_window(self) -> int | None:
        """The smallest window a replica reports (a call may go to any of them)."""
        found = []
        for replica in self.replicas:
            try:
                window = await replica.provider.context_window()
            except Exception:
                continue
            if window:
                found.append(window)
        return min(found) if found else None

    async def slots(self) -> int | None:
        """The slots of all replicas together (None when one of them cannot say)."""
        await self._ask_slots()
        counts = [r.slots for r in self.replicas]
        return None if any(c is None for c in counts) else sum(c for c in counts if c)

    async def count_tokens(self, messages: Sequence[Message]) -> int | None:
        ready = [r for r in self.replicas if r.until <= self._clock()] or self.replicas
        return await min(ready, key=lambda r: r.in_flight).provider.count_tokens(messages)

    async def aclose(self) -> None:
        await asyncio.gather(*(r.provider.aclose() for r in self.replicas))
