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
  A server is one endpoint for the whole process (`_Endpoint`): when the detective and the
  witness are two providers over the same replicas, their calls share its slots, and what
  one learns of it (down, rate-limited) holds for the other.
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
import weakref
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
from engine.providers._base import Provider
from engine.providers._events import (
    Health,
    Message,
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
class _Endpoint:
    """One server as every provider of this process that names it sees it: its slots are
    the server's, whichever role's calls fill them (a detective and a witness on the same
    replicas take turns in the same slots), and a server that failed or said 429 did so for
    all of them."""

    url: str
    slots: int | None = None
    configured: bool = False
    """Whether `slots` is configured (it then wins over what the server says)."""
    asked: bool = False
    """Whether the server was asked its slots."""
    in_flight: int = 0
    failures: int = 0
    until: float = 0.0
    """Set aside until then (monotonic seconds)."""
    limited: bool = False
    """Set aside by a 429 (waited for), not by a failure (tried again at once if need be)."""


class _Endpoints:
    """The endpoints of one event loop, and the one condition their changes are announced on
    (asyncio's primitives belong to a loop)."""

    def __init__(self) -> None:
        self.changed = asyncio.Condition()
        self.by_url: dict[str, _Endpoint] = {}

    def get(self, url: str, slots: int | None) -> _Endpoint:
        key = url.rstrip("/")
        endpoint = self.by_url.get(key)
        if endpoint is None:
            endpoint = self.by_url[key] = _Endpoint(key)
        if slots is not None:  # configured slots win; configured twice: the fewer
            endpoint.slots = min(endpoint.slots or slots, slots) if endpoint.configured \
                else slots
            endpoint.configured = endpoint.asked = True
        return endpoint


_LOOPS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Endpoints] = \
    weakref.WeakKeyDictionary()


def _endpoints() -> _Endpoints:
    loop = asyncio.get_running_loop()
    shared = _LOOPS.get(loop)
    if shared is None:
        shared = _LOOPS[loop] = _Endpoints()
    return shared


@dataclass(eq=False)
class _Replica:
    provider: Provider
    weight: float
    endpoint: _Endpoint


class ReplicatedProvider(Provider):
    """See the module docstring."""

    def __init__(self, name: str, config: ProviderConfig, env: Mapping[str, str],
                 replicas: Sequence[Provider], cooldown: float = 300.0,
                 retry_after_cap: float = 600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(name, config, env)
        weights = [r.weight for r in config.replicas] or [1.0] * len(replicas)
        slots = [r.slots for r in config.replicas] or [None] * len(replicas)
        self._members = list(zip(replicas, weights, slots, strict=True))
        self._bound: tuple[_Endpoints, list[_Replica]] | None = None
        self.cooldown = cooldown
        self.retry_after_cap = retry_after_cap
        self._clock = clock
        self._minute: deque[tuple[float, int]] = deque()
        """(when, tokens) of each call of the last minute, for the rates."""
        self.waited = 0.0
        """Seconds calls have spent waiting, in all."""

    @property
    def replicas(self) -> list[_Replica]:
        """The replicas, bound to this loop's endpoints (see `_Endpoint`)."""
        shared = _endpoints()
        if self._bound is None or self._bound[0] is not shared:
            self._bound = (shared, [
                _Replica(provider, weight, shared.get(provider.config.base_url or "", slots))
                for provider, weight, slots in self._members])
        return self._bound[1]

    @property
    def gives_logprobs(self) -> bool:
        return all(member.gives_logprobs for member, _, _ in self._members)

    @property
    def _changed(self) -> asyncio.Condition:
        return _endpoints().changed

    # ---- the stream ---------------------------------------------------------------------

    async def stream(self, request: StreamRequest, *, gated: bool = True
                     ) -> AsyncGenerator[StreamEvent, None]:
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
        replicas = self.replicas
        async with self._changed:
            while True:
                now = self._clock()
                untried = [r for r in replicas if id(r) not in tried]
                if not untried:
                    assert last is not None
                    raise last
                ready = [r for r in untried if r.endpoint.until <= now and (
                    r.endpoint.slots is None or r.endpoint.in_flight < r.endpoint.slots)]
                if ready:
                    chosen = min(ready, key=lambda r: (r.endpoint.in_flight / r.weight,
                                                       replicas.index(r)))
                    chosen.endpoint.in_flight += 1
                    return chosen
                aside = [r for r in untried if r.endpoint.until > now]
                failed = [r for r in aside if not r.endpoint.limited]
                if len(aside) == len(untried) and failed:
                    # all set aside, some after failing: the one set aside longest ago is
                    # tried again at once (it may be back) rather than the call waiting
                    chosen = min(failed, key=lambda r: r.endpoint.until)
                    chosen.endpoint.in_flight += 1
                    return chosen
                # full, or waiting out a 429: wait for a slot or the first to come back
                wake = min((r.endpoint.until for r in aside), default=None)
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
            replica.endpoint.in_flight -= 1
            self._changed.notify_all()

    def _succeeded(self, replica: _Replica) -> None:
        endpoint = replica.endpoint
        endpoint.failures, endpoint.until, endpoint.limited = 0, 0.0, False

    def _set_aside(self, replica: _Replica, seconds: float | None = None,
                   count: bool = True) -> None:
        endpoint = replica.endpoint
        if count:
            endpoint.failures += 1
        if seconds is None:
            seconds = min(self.cooldown, SET_ASIDE * 2 ** max(0, endpoint.failures - 1))
        endpoint.until = max(endpoint.until, self._clock() + seconds)
        endpoint.limited = not count

    async def _ask_slots(self) -> None:
        for replica in self.replicas:
            endpoint = replica.endpoint
            if endpoint.slots is None and not endpoint.asked:
                endpoint.asked = True
                try:
                    async with asyncio.timeout(5):
                        endpoint.slots = await replica.provider.slots()
                except Exception:  # a server that cannot say: unlimited
                    endpoint.slots = None

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

    def slot_key(self) -> str | None:
        return None  # each replica holds its own server's slots (`_Endpoint`, `_slots`)

    @property
    def replica_count(self) -> int:  # type: ignore[override]
        return len(self.replicas)

    def has_ready_replica(self) -> bool:
        now = self._clock()
        return any(r.endpoint.until <= now for r in self.replicas)

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
        down = [f"{r.endpoint.url}: {h.detail}" for r, h in zip(self.replicas, results, strict=True)
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
        """The smallest window a replica reports (a call may go to any of them); all are
        asked at once."""
        found = await asyncio.gather(*(r.provider.context_window() for r in self.replicas),
                                     return_exceptions=True)
        windows = [w for w in found if isinstance(w, int) and not isinstance(w, bool) and w]
        return min(windows) if windows else None

    async def slots(self) -> int | None:
        """The slots of all replicas together (None when one of them cannot say)."""
        await self._ask_slots()
        counts = [r.endpoint.slots for r in self.replicas]
        return None if any(c is None for c in counts) else sum(c for c in counts if c)

    async def count_tokens(self, messages: Sequence[Message]) -> int | None:
        ready = [r for r in self.replicas if r.endpoint.until <= self._clock()] or self.replicas
        return await min(ready, key=lambda r: r.endpoint.in_flight).provider.count_tokens(messages)

    async def aclose(self) -> None:
        await asyncio.gather(*(r.provider.aclose() for r in self.replicas))
