"""The router: provider chains by role, failover, circuit breakers, health checks (SPEC §2).

    router = Router(config, paths)
    async for event in router.stream(request, role="detective"):
        match event:
            case Attempt(provider):             # now streaming from `provider` (badge)
            case TokenDelta(text):              # answer text
            case PartialDiscarded(provider, text, reason):
                                                # everything since the last Attempt is void
            case ProviderEvent(type, from_provider, to_provider, reason):
                                                # skip, switch, failure: for the audit trail
            case Fitted(provider, report):      # how the prompt was fitted to its window
            case Usage() | Done():

Every request is fitted to the window of the provider about to receive it
(`engine.context.fit`): a `Prompt` is built anew for each provider of the chain, so a failover
to a smaller window sends a smaller prompt; a provider whose window cannot hold the prompt at
all is skipped (`context_too_small`), which is no failure of the provider. A server that
rejects a prompt as too long gets it once more, fitted to the window it then reports (or a
quarter smaller).

A failure before the first token moves to the next provider. A failure mid-stream (cut,
stall, malformed chunk, invalid structured output) restarts the turn on the next provider from
the start, after a `PartialDiscarded` that carries the partial text: text from two providers is
never spliced. When the chain runs out, `AllProvidersFailed` names every provider and why;
when every provider tried was skipped for its window (or refused the prompt fitted again),
`WindowTooSmall`, its subclass: nothing failed, and a caller whose prompt was its own addition
(a retry) ends that instead of the session. A
reply that turns out to have begun inside its think block (`WasReasoning`) is told the same
way: the text so far void, an `Attempt` on the same provider, the text again as reasoning.

Breaker state survives the process (`providers.json` in the state directory), so a provider
that keeps failing is skipped by the next `detektiv ask` too, instead of costing it a timeout.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from engine.config.models import Config
from engine.config.providers import ProviderConfig
from engine.context.budget import FitReport, Prompt, fit
from engine.context.fit import DoesNotFit
from engine.context.measure import forget_window, measured, refit_share
from engine.context.windows import Window, window_of
from engine.errors import (
    AllProvidersFailed,
    ContextOverflowError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    ServerError,
    WindowTooSmall,
)
from engine.paths import Paths
from engine.providers import (
    Done,
    Health,
    Provider,
    StreamRequest,
    TokenDelta,
    Usage,
    WasReasoning,
    create_provider,
)
from engine.routing.breaker import (
    Admission,
    Breaker,
    ProviderState,
    StateStore,
    fingerprint,
    state_file,
)
from engine.routing.chains import chain_for
from engine.routing.collect import Reply
from engine.routing.events import (
    Attempt,
    EventType,
    Fitted,
    PartialDiscarded,
    ProviderEvent,
    RoutedCompletion,
    RouterEvent,
    failure_event,
    reasoning_moved,
)
from engine.routing.health import HealthLoop
from engine.routing.structured import collect_json

if TYPE_CHECKING:
    from engine.cache.layer import CacheLayer

__all__ = [
    "Attempt",
    "Fitted",
    "PartialDiscarded",
    "ProviderEvent",
    "RoutedCompletion",
    "Router",
    "RouterEvent",
]

ProviderFactory = Callable[[str, ProviderConfig], Provider]
"""Builds the provider for a (name, configuration) of the config."""

Accept = Callable[[str, str, str], str | None]
"""Called with (provider, whole text, finish reason) before `Done`; raising
`BadResponseError` rejects the answer (the next provider is asked). Returning a reason instead
passes the answer on but keeps it out of the response cache: the caller asks the same provider
again, telling it what was wrong."""


class Router:
    """Routes requests over provider chains; owns breakers, state and the health loop."""

    def __init__(
        self,
        config: Config,
        paths: Paths,
        *,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        persist: bool = True,
        factory: ProviderFactory | None = None,
        cache: CacheLayer | None = None,
    ) -> None:
        """`factory` builds each enabled provider from its name and configuration (default:
        `create_provider`): the seam where a test puts in providers of its own. `cache`: the
        response cache consulted before any provider, per role (`engine.cache.layer`)."""
        self.cache = cache
        self.config = config
        self.paths = paths
        self.insist = False
        """True when the chain was named by the user (`ask -p NAME`): a provider whose circuit
        is open or that is rate limited is tried all the same."""
        settings = config.router
        self.breaker = Breaker(
            threshold=settings.failure_threshold,
            cooldown=settings.cooldown,
            retry_after_cap=settings.retry_after_cap,
            rate_limit_default=settings.rate_limit_default,
            clock=clock,
        )
        if factory is None:
            def factory(name: str, provider: ProviderConfig) -> Provider:
                return create_provider(name, provider, paths, env)

        self.providers: dict[str, Provider] = {
            name: factory(name, provider)
            for name, provider in config.providers.items()
            if provider.enabled
        }
        environ = os.environ if env is None else env
        self.fingerprints = {
            name: fingerprint(config.providers[name], environ) for name in self.providers
        }
        self._store = StateStore(state_file(paths) if persist else None)
        saved = self._store.load(self.fingerprints)
        self.states = {name: saved.get(name, ProviderState()) for name in self.providers}
        # a state left by an earlier configuration is replaced at the next save
        self._dirty: set[str] = self._store.stale & set(self.providers)
        self.health = HealthLoop(self.check_health)
        self.seen_windows: dict[str, Window] = {}
        """The windows the health checks found, by provider (`windows`)."""

    def chain(self, role: str) -> list[str]:
        """The enabled providers `role` tries, in order."""
        return chain_for(self.config, role, self.paths.config_file)

    async def windows(self, timeout: float = 10.0, names: list[str] | None = None
                      ) -> dict[str, Window]:
        """Each enabled provider's context window (`names`: those only), as a call would be
        fitted to it (asked of its server, at most `timeout` seconds each; one that did not
        say is left out)."""
        async def one(provider: Provider) -> Window | None:
            try:
                return await asyncio.wait_for(window_of(provider), timeout)
            except Exception:  # a server that cannot say has no window shown, no error
                return None
        names = list(self.providers) if names is None else names
        found = await asyncio.gather(*(one(self.providers[name]) for name in names))
        return {name: window for name, window in zip(names, found, strict=True)
                if window is not None}

    def save(self) -> None:
        """Persist the states that changed since the last save."""
        dirty, self._dirty = self._dirty, set()
        self._store.save(self.states, dirty, self.fingerprints)

    async def _fit(
        self, name: str, prompt: Prompt | StreamRequest, shrink: float = 1.0,
        told: int | None = None,
    ) -> tuple[StreamRequest, FitReport] | str:
        """The request fitted for provider `name`, or why it cannot be."""
        try:
            fitted = await fit(self.providers[name], prompt, shrink, told)
        except DoesNotFit as exc:
            return f"too small a context window: {exc.message}"
        return fitted.request, fitted.report

    async def stream(
        self, request: StreamRequest | Prompt, role: str = "default", accept: Accept | None = None,
        use_cache: bool = True,
    ) -> AsyncGenerator[RouterEvent, None]:
        """Stream `request` over the role's chain; see the module docstring for the events.
        Where the role's cache applies, a served answer comes as `ProviderEvent("cache_hit")`,
        `Attempt("cache")`, the text and `Done`; a new answer is stored after its `Done`."""
        failures: list[tuple[str, str]] = []
        previous: tuple[str, str] | None = None  # (provider, why) of the last one that failed
        plain = request.request if isinstance(request, Prompt) else request
        chain = self.chain(role)
        cached = use_cache and self.cache is not None and self.cache.applies(role, plain)
        if cached:
            assert self.cache is not None
            found = await self.cache.lookup(role, chain, plain)
            why, entry = found if found is not None else (None, None)
            if why is not None and entry is not None:
                yield ProviderEvent("cache_hit", "cache", None,
                                    f"served from the cache ({why.reason}; entry "
                                    f"{entry.entry_id[:8]})")
                yield Attempt("cache", "cache")
                yield TokenDelta(entry.payload)
                if accept is not None:
                    accept("cache", entry.payload, "stop")
                yield Done("stop")
                return
        reply = Reply()
        errors: list[ProviderError] = []
        tried = 0  # providers admitted: each answered, failed, or did not fit
        unfitted: list[str] = []  # of those, the ones whose window the prompt did not fit
        try:
            for name in chain:
                state = self.states[name]
                admission = self.breaker.admit(state)
                if not admission.allowed and self.insist:  # asked for by name: tried anyway
                    admission = Admission(True)
                if not admission.allowed:
                    kind: EventType = "rate_limited" if admission.kind == "rate_limited" \
                        else "circuit_open"
                    yield ProviderEvent(kind, name, None, admission.reason)
                    failures.append((name, admission.reason))
                    previous = (name, admission.reason)
                    continue
                outcome: list[tuple[str, str]] = []
                refused: list[str] = []
                tried += 1
                # closed with this generator: a caller that stops reading stops the stream
                async with aclosing(self._attempt(name, state, admission.trial, request,
                                                  accept, previous, outcome, errors,
                                                  refused, unfitted)) as attempt:
                    async for event in attempt:
                        reply.take(event)
                        if type(event) is Done and cached and not refused:
                            assert self.cache is not None
                            await self.cache.store(role, chain, plain, reply.text,
                                                   reply.label or "", event.finish_reason)
                        yield event
                if not outcome:  # it answered
                    return
                failures.append(outcome[0])
                previous = outcome[0]
            if tried and len(unfitted) == tried:
                raise WindowTooSmall(role, failures, errors)
            raise AllProvidersFailed(role, failures, errors)
        finally:
            if self._dirty:
                self.save()

    async def _attempt(
        self, name: str, state: ProviderState, trial: bool, request: StreamRequest | Prompt,
        accept: Accept | None, previous: tuple[str, str] | None,
        outcome: list[tuple[str, str]], errors: list[ProviderError], refused: list[str],
        unfitted: list[str] | None = None,
    ) -> AsyncGenerator[RouterEvent, None]:
        """Stream from one admitted provider: fitted to its window, and fitted once more when
        its server says the prompt was too long. Ends after `Done` when it answered (`refused`
        gets the reason when `accept` returned one); else `outcome` gets (provider, why) and
        `errors` its error."""
        provider = self.providers[name]
        shrink, told, retried = 1.0, None, False
        refitting: ProviderEvent | None = None
        elsewhere = 0  # turns started again on another replica of this provider
        while True:  # again after the server said the prompt was too long, or on a replica
            try:
                fitted = await self._fit(name, request, shrink, told)
            except BaseException:
                self.breaker.release(state)
                raise
            if isinstance(fitted, str):
                self.breaker.release(state)
                yield ProviderEvent("context_too_small", name, None, fitted)
                outcome.append((name, fitted))
                if unfitted is not None:
                    unfitted.append(name)
                return
            sent, report = fitted
            if refitting is not None:
                yield refitting
                refitting = None
            if previous is not None:
                yield ProviderEvent("provider_switch", previous[0], name, previous[1])
                previous = None
            yield Attempt(name, provider.label, trial)
            yield Fitted(name, report)
            partial: list[str] = []
            done: Done | None = None
            try:
                async with aclosing(provider.stream(sent)) as events:
                    async for event in events:
                        if type(event) is TokenDelta:
                            partial.append(event.text)
                            yield event
                        elif type(event) is Done:
                            done = event
                        elif type(event) is Usage:  # what the server counted of the prompt
                            measured(provider, sent.messages, event.prompt_tokens,
                                     counts=report.counted != "estimate",
                                     added=provider.schema_prompt(sent.schema)
                                     if sent.schema is not None else "")
                            yield event
                        elif type(event) is WasReasoning:
                            for moved in reasoning_moved(name, provider.label, trial,
                                                         "".join(partial), event.text):
                                yield moved
                            partial = []
                        else:
                            yield event
                if accept is not None:
                    why = accept(name, "".join(partial), done.finish_reason if done else "")
                    if why is not None:
                        refused.append(why)
            except ContextOverflowError as exc:
                if retried:  # fitted twice and still too long: a failure
                    if unfitted is not None:
                        unfitted.append(name)
                    failed: ProviderError | None = ContextOverflowError(
                        name, f"the prompt does not fit the context window even fitted again "
                        f"({exc.detail})", exc.status, exc.window, exc.needed)
                else:
                    forget_window(provider, exc.window)
                    # said once the prompt fits again: a prompt that then cannot fit ends in
                    # one line, the window's
                    refitting = ProviderEvent(
                        "error", name, None, f"{exc.detail}; fitting the prompt again for the "
                        "context window it names" if exc.window else f"{exc.detail}; fitting "
                        "the prompt again for a smaller context window")
                    told, retried, failed = exc.window, True, None
                    shrink = refit_share(report.used, exc.needed, told)
            except ProviderError as exc:
                failed = exc
            except BaseException:  # cancelled or closed by the caller: no verdict
                self.breaker.release(state)
                raise
            else:
                if self.breaker.success(state):
                    self._dirty.add(name)
                assert done is not None  # Provider.stream guarantees Done at the end
                yield done
                return
            if failed is None:
                continue
            if partial and elsewhere < provider.replica_count - 1 and \
                    isinstance(failed, ProviderConnectionError | ProviderTimeout | ServerError) \
                    and provider.has_ready_replica():
                # a replica died mid-answer: the turn starts again on another replica of the
                # same provider (its partial text void, as after any failover)
                elsewhere += 1
                yield ProviderEvent("error", name, None, f"{failed.detail}; the turn starts "
                                    "again on another replica")
                yield PartialDiscarded(name, "".join(partial), failed.detail)
                continue
            self._dirty.add(name)
            yield ProviderEvent(failure_event(failed), name, None, failed.detail)
            for caused, reason in self.breaker.failure(state, failed):
                yield ProviderEvent(caused, name, None, reason)
            if partial:
                yield PartialDiscarded(name, "".join(partial), failed.detail)
            outcome.append((name, failed.detail))
            errors.append(failed)
            return

    async def complete(
        self, request: StreamRequest | Prompt, role: str = "default",
        accept: Accept | None = None, reply: Reply | None = None,
    ) -> RoutedCompletion:
        """Stream to the end; the answer of the provider that finished, and the events
        (`reply`, when given, is what followed them: its usage, fits and discards)."""
        reply = Reply() if reply is None else reply
        async for _ in reply.follow(self.stream(request, role, accept)):
            pass
        return reply.completion()

    async def complete_json(
        self, request: StreamRequest | Prompt, role: str = "default", reply: Reply | None = None,
    ) -> tuple[Any, RoutedCompletion]:
        """A structured answer valid against `request.schema`; a provider whose answer is not
        valid counts as failed and the next one is asked (`reply`: as for `complete`)."""
        base = request.request if isinstance(request, Prompt) else request
        schema = base.schema
        if schema is None:
            raise ValueError("complete_json needs a request with a schema")
        values: dict[str, Any] = {}

        def accept(provider: str, text: str, finish_reason: str) -> None:
            values[provider] = collect_json(provider, text, finish_reason, schema)

        done = await self.complete(request, role, accept, reply)
        return values[done.provider], done

    async def check_health(self) -> dict[str, Health]:
        """One health round over every enabled provider, concurrently; updates breakers."""
        names = list(self.providers)
        results = await asyncio.gather(*(self.providers[n].health() for n in names))
        for name, health in zip(names, results, strict=True):
            self.breaker.health(self.states[name], health.ok, health.detail, health.latency_ms,
                                health.check)
            self._dirty.add(name)
        self.save()
        # the windows of those that answered, for the Providers tab (asked once a process)
        self.seen_windows.update(await self.windows(
            names=[name for name, health in zip(names, results, strict=True) if health.ok]))
        return dict(zip(names, results, strict=True))

    def start_health_checks(self, interval: float | None = None) -> None:
        """Check every provider now and then every `interval` s (default from config), in the
        background; `aclose` stops it."""
        self.health.start(interval if interval is not None else self.config.router.health_interval)

    async def stop_health_checks(self) -> None:
        """Stop the background health checks (waits for the task to end)."""
        await self.health.stop()

    async def aclose(self) -> None:
        """Stop health checks and close every provider's connections."""
        await self.stop_health_checks()
        await asyncio.gather(*(p.aclose() for p in self.providers.values()))

