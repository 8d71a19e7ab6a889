"""The router against the real llama.cpp server: `flaky` goes through the fault proxy,
`steady` straight to the server. Every fault must end on `steady` with the right events in the
right order, or in one clear error when nothing is left."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from engine import (
    AllProvidersFailed,
    Config,
    Paths,
    ProviderConfig,
)
from engine.config.models import RouterConfig
from engine.providers import (
    Done,
    Provider,
    StreamEvent,
    StreamRequest,
    TokenDelta,
    Usage,
    create_provider,
)
from engine.routing.breaker import CircuitState, ProviderState, ProviderStatus, fingerprint
from engine.routing.events import Attempt, PartialDiscarded, ProviderEvent
from engine.routing.router import Router
from tests.support.faults import FaultProxy
from tests.support.servers import LONG_PROMPT, LlamaServer, closed_port

REQUEST = StreamRequest.of(LONG_PROMPT, max_tokens=24, temperature=0)
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 30}},
    "required": ["answer"],
    "additionalProperties": False,
}


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def make_router(paths: Paths, proxy: FaultProxy, llama_server: LlamaServer,
                steady_url: str | None = None, persist: bool = False,
                clock: Clock | None = None, **settings: Any) -> Router:
    config = Config(
        providers={
            # Short deadlines for the provider under test only; steady keeps its defaults, so a
            # loaded machine slows the test down instead of failing it.
            "flaky": ProviderConfig(kind="openai", model="m", base_url=proxy.url, priority=1,
                                    first_token_timeout=1.5, stall_timeout=1.0),
            "steady": ProviderConfig(kind="openai", model="m",
                                     base_url=steady_url or llama_server.url, priority=2),
        },
        router=RouterConfig(**settings),
    )
    return Router(config, paths, persist=persist, clock=clock or time.time)


async def run(router: Router, request: StreamRequest = REQUEST) -> list[Any]:
    return [event async for event in router.stream(request)]


async def open_flaky_circuit(router: Router, proxy: FaultProxy) -> None:
    """Three HTTP 500s in a row from flaky."""
    proxy.default = "500"
    for _ in range(3):
        await run(router)
    assert router.states["flaky"].circuit is CircuitState.OPEN


def trace(events: list[Any]) -> list[tuple[Any, ...]]:
    """Events in a compact form; a run of tokens becomes one ("tokens", provider) entry."""
    out: list[tuple[Any, ...]] = []
    current = None
    for event in events:
        match event:
            case Attempt(provider):
                current = provider
                out.append(("attempt", provider))
            case TokenDelta():
                if out[-1] != ("tokens", current):
                    out.append(("tokens", current))
            case ProviderEvent(kind, source, target):
                out.append((kind, source, target))
            case PartialDiscarded(provider):
                out.append(("discarded", provider))
            case Done():
                out.append(("done",))
    return out


def text_of(events: list[Any]) -> str:
    """The answer as a caller keeps it: tokens since the last Attempt."""
    parts: list[str] = []
    for event in events:
        if isinstance(event, Attempt):
            parts = []
        elif isinstance(event, TokenDelta):
            parts.append(event.text)
    return "".join(parts)


SWITCH_BEFORE_FIRST_TOKEN = [
    ("attempt", "flaky"), ("error", "flaky", None), ("provider_switch", "flaky", "steady"),
    ("attempt", "steady"), ("tokens", "steady"), ("done",),
]


@pytest.mark.parametrize(
    ("fault", "expected", "reason"),
    [
        ("refuse", SWITCH_BEFORE_FIRST_TOKEN, "cannot connect"),
        ("500", SWITCH_BEFORE_FIRST_TOKEN, "HTTP 500: injected 500"),
        ("429:7", [("attempt", "flaky"), ("rate_limited", "flaky", None),
                   ("provider_switch", "flaky", "steady"), ("attempt", "steady"),
                   ("tokens", "steady"), ("done",)], "HTTP 429"),
        ("hold", [("attempt", "flaky"), ("timeout", "flaky", None),
                  ("provider_switch", "flaky", "steady"), ("attempt", "steady"),
                  ("tokens", "steady"), ("done",)], "no token within 1.5 s"),
        ("stall:4", [("attempt", "flaky"), ("tokens", "flaky"), ("timeout", "flaky", None),
                     ("discarded", "flaky"), ("provider_switch", "flaky", "steady"),
                     ("attempt", "steady"), ("tokens", "steady"), ("done",)],
         "no token for 1 s"),
        ("cut:4", [("attempt", "flaky"), ("tokens", "flaky"), ("error", "flaky", None),
                   ("discarded", "flaky"), ("provider_switch", "flaky", "steady"),
                   ("attempt", "steady"), ("tokens", "steady"), ("done",)],
         "connection broke: RemoteProtocolError"),
        ("malformed:4", [("attempt", "flaky"), ("tokens", "flaky"), ("error", "flaky", None),
                         ("discarded", "flaky"), ("provider_switch", "flaky", "steady"),
                         ("attempt", "steady"), ("tokens", "steady"), ("done",)],
         "malformed chunk"),
    ],
)
async def test_fault_matrix(
    fault: str, expected: list[tuple[Any, ...]], reason: str,
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths,
) -> None:
    router = make_router(paths, proxy, llama_server)
    if fault == "refuse":
        await proxy.refuse()
    else:
        proxy.plan = [fault]
    events = await run(router)
    await router.aclose()
    assert trace(events) == expected
    failure = next(e for e in events if isinstance(e, ProviderEvent))
    assert reason in failure.reason
    switch = next(e for e in events if isinstance(e, ProviderEvent)
                  and e.type == "provider_switch")
    assert switch.reason == failure.reason
    # What the caller keeps is steady's whole answer, never spliced with flaky's partial one:
    # every token after steady's Attempt, as many as steady says it generated.
    steady_at = events.index(next(e for e in events if isinstance(e, Attempt)
                                  and e.provider == "steady"))
    kept = [e for e in events[steady_at:] if isinstance(e, TokenDelta)]
    usage = next(e for e in events[steady_at:] if isinstance(e, Usage))
    assert len(kept) == usage.completion_tokens == 24
    assert text_of(events) == "".join(e.text for e in kept)
    discarded = [e for e in events if isinstance(e, PartialDiscarded)]
    if discarded:
        flaky_tokens = []
        for event in events:
            if isinstance(event, TokenDelta):
                flaky_tokens.append(event.text)
            if isinstance(event, PartialDiscarded):
                break
        assert discarded[0].text == "".join(flaky_tokens) != ""
    assert proxy.connections == (0 if fault == "refuse" else 1), "one call, no SDK retries"


async def test_invalid_json_to_a_structured_request_moves_on(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    router = make_router(paths, proxy, llama_server)
    proxy.plan = ["invalid_json"]
    request = StreamRequest.of("Is water wet? Answer as JSON.", schema=SCHEMA, temperature=0,
                               max_tokens=60)
    value, done = await router.complete_json(request)
    await router.aclose()
    assert set(value) == {"answer"} and done.provider == "steady"
    kinds = [(type(e).__name__, getattr(e, "type", None)) for e in done.events]
    assert kinds == [("ProviderEvent", "error"), ("PartialDiscarded", None),
                     ("ProviderEvent", "provider_switch")]
    assert "not JSON" in done.events[0].reason  # type: ignore[union-attr]


async def test_all_down_is_one_clear_error(proxy: FaultProxy, llama_server: LlamaServer,
                                           paths: Paths) -> None:
    router = make_router(paths, proxy, llama_server,
                         steady_url=f"http://127.0.0.1:{closed_port()}/v1")
    proxy.default = "500"
    with pytest.raises(AllProvidersFailed) as caught:
        await run(router)
    await router.aclose()
    message = str(caught.value)
    assert message.startswith("every provider for default failed — flaky: HTTP 500")
    assert "; steady: cannot connect" in message
    assert "\n" not in message
    assert [name for name, _ in caught.value.failures] == ["flaky", "steady"]


async def test_breaker_opens_at_three_skips_without_calls_and_half_opens(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    clock = Clock()
    router = make_router(paths, proxy, llama_server, clock=clock, failure_threshold=3,
                         cooldown=60)
    state = router.states["flaky"]
    proxy.default = "500"
    for attempt in (1, 2):
        events = await run(router)
        assert not any(isinstance(e, ProviderEvent) and e.type == "circuit_open" for e in events)
        assert state.circuit is CircuitState.CLOSED and state.consecutive_failures == attempt
    events = await run(router)
    assert ("circuit_open", "flaky", None) in trace(events)
    assert state.circuit is CircuitState.OPEN and proxy.connections == 3

    skipped = await run(router)
    assert trace(skipped)[:3] == [("circuit_open", "flaky", None),
                                  ("provider_switch", "flaky", "steady"), ("attempt", "steady")]
    assert proxy.connections == 3, "an open circuit makes no call"

    clock.now += 59
    assert trace(await run(router))[0] == ("circuit_open", "flaky", None)
    clock.now += 1
    proxy.default = "pass"
    recovered = await run(router)
    assert recovered[0] == Attempt("flaky", "flaky:m", trial=True)
    assert trace(recovered) == [("attempt", "flaky"), ("tokens", "flaky"), ("done",)]
    assert proxy.connections == 4
    assert state.circuit is CircuitState.CLOSED and state.consecutive_failures == 0
    await router.aclose()


async def test_mid_stream_failures_count_toward_the_breaker(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    router = make_router(paths, proxy, llama_server, failure_threshold=3)
    proxy.default = "cut:3"
    for _ in range(3):
        await run(router)
    assert router.states["flaky"].circuit is CircuitState.OPEN
    await router.aclose()


async def test_half_open_lets_exactly_one_trial_through(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    clock = Clock()
    router = make_router(paths, proxy, llama_server, clock=clock, failure_threshold=3,
                         cooldown=60)
    await open_flaky_circuit(router, proxy)
    clock.now += 60
    proxy.default = "hold"  # the trial hangs until its first-token timeout
    results = await asyncio.gather(*(run(router) for _ in range(5)))
    assert proxy.connections == 3 + 1
    trials = [events for events in results if isinstance(events[0], Attempt)]
    assert len(trials) == 1 and trials[0][0].trial
    assert ("circuit_open", "flaky", None) in trace(trials[0]), "a failed trial re-opens"
    for events in results:
        assert trace(events)[-2:] == [("tokens", "steady"), ("done",)]
    await router.aclose()


async def test_retry_after_seconds_is_honoured(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    clock = Clock()
    router = make_router(paths, proxy, llama_server, clock=clock)
    proxy.plan = ["429:7"]
    await run(router)
    state = router.states["flaky"]
    assert state.status is ProviderStatus.RATE_LIMITED
    assert state.rate_limited_until == clock.now + 7
    clock.now += 6.9
    skipped = await run(router)
    assert trace(skipped)[0] == ("rate_limited", "flaky", None)
    assert proxy.connections == 1, "no call while rate limited"
    clock.now += 0.1
    again = await run(router)
    assert trace(again) == [("attempt", "flaky"), ("tokens", "flaky"), ("done",)]
    assert proxy.connections == 2 and state.status is ProviderStatus.AVAILABLE
    await router.aclose()


async def test_retry_after_http_date_and_cap(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    clock = Clock()
    router = make_router(paths, proxy, llama_server, clock=clock, retry_after_cap=5)
    proxy.plan = [f"429:{formatdate(time.time() + 3, usegmt=True)}"]
    await run(router)
    wait = router.states["flaky"].rate_limited_until - clock.now  # type: ignore[operator]
    assert 1.0 < wait <= 3.0
    router.states["flaky"].rate_limited_until = None
    proxy.plan = ["429:3600"]
    events = await run(router)
    capped = [e for e in events if isinstance(e, ProviderEvent) and e.type == "rate_limited"]
    assert "HTTP 429" in capped[0].reason
    assert capped[1].reason == "Retry-After of 60 min 00 s capped to 5.0 s"
    assert router.states["flaky"].rate_limited_until == clock.now + 5
    await router.aclose()


async def test_health_loop_brings_a_recovered_provider_back(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    router = make_router(paths, proxy, llama_server, failure_threshold=3, cooldown=3600)
    await proxy.refuse()
    for _ in range(3):
        await run(router)
    state = router.states["flaky"]
    assert state.circuit is CircuitState.OPEN
    await proxy.accept()
    router.start_health_checks(interval=0.1)
    deadline = time.monotonic() + 5
    while state.circuit is not CircuitState.CLOSED and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert state.circuit is CircuitState.CLOSED and state.last_health_ok is True
    assert state.last_health_detail == "1 model listed"
    events = await run(router)
    assert trace(events)[0] == ("attempt", "flaky")
    await router.aclose()
    assert router.health.task is None


async def test_health_checks_never_block_the_loop(paths: Paths) -> None:
    import threading

    from tests.support.wire import WireServer, json_reply

    arrived, release = threading.Event(), threading.Event()

    def hang(recorded: Any) -> Any:  # the server takes the health check and holds it
        arrived.set()
        release.wait(60)
        return json_reply({"data": []})

    with WireServer({"GET /v1/models": hang}) as server:
        router = Router(Config(providers={"slow": ProviderConfig(
            kind="openai", model="m", base_url=server.url + "/v1", priority=1)}),
            paths, persist=False)
        router.start_health_checks(interval=30)
        try:
            assert await asyncio.to_thread(arrived.wait, 60)
            for _ in range(10):
                await asyncio.sleep(0)
            # this task ran on while the check is held: a check that waited without yielding
            # would have come back only with the server's answer, its result then recorded
            # (nothing timed: a busy machine cannot fail it)
            assert router.health.task is not None and not router.health.task.done()
            assert router.states["slow"].last_health_ok is None
        finally:
            release.set()
            await router.aclose()


async def test_cancelling_during_failover_leaves_nothing_running(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    router = make_router(paths, proxy, llama_server)
    proxy.default = "hold"
    before = asyncio.all_tasks()
    request = StreamRequest.of("hi", first_token_timeout=10)
    task = asyncio.create_task(run(router, request))
    # held: the request is in (not merely the connection accepted), so the cancellation lands
    # where the test means it to, on a client waiting for its first byte
    while proxy.connections == 0:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 30  # a bound for a busy machine, not a wait
    while proxy.open and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert proxy.open == 0, "the held connection was closed by the client"
    await asyncio.sleep(0.05)
    assert asyncio.all_tasks() - before == set()
    state = router.states["flaky"]
    assert state.consecutive_failures == 0 and not state.trial_in_flight
    await router.aclose()


async def test_breaker_state_survives_the_process(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    first = make_router(paths, proxy, llama_server, persist=True)
    await open_flaky_circuit(first, proxy)
    await first.aclose()
    second = make_router(paths, proxy, llama_server, persist=True)
    assert second.states["flaky"].circuit is CircuitState.OPEN
    events = await run(second)
    assert trace(events)[0] == ("circuit_open", "flaky", None)
    assert proxy.connections == 3
    await second.aclose()


async def test_corrupt_state_file_is_kept_aside(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    paths.data_dir.mkdir(parents=True)
    (paths.data_dir / "providers.json").write_text('{"version": 1, "providers": {"flaky": [')
    # (an earlier version's file, in the data directory: moved to the state directory first)
    router = make_router(paths, proxy, llama_server, persist=True)
    assert router.states["flaky"].circuit is CircuitState.CLOSED
    assert not (paths.data_dir / "providers.json").exists()
    aside = [p.name for p in Path(paths.state).iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1
    await router.aclose()


async def test_a_provider_whose_configuration_changed_starts_fresh(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    """Breaker state belongs to a provider's configuration: a user who fixes a wrong base URL
    (or model, or key) is not kept out for the rest of the cooldown."""
    first = make_router(paths, proxy, llama_server, persist=True)
    await open_flaky_circuit(first, proxy)
    await first.aclose()

    def reopened(**change: Any) -> Router:
        router = make_router(paths, proxy, llama_server, persist=True)
        config = router.config.model_copy(deep=True)
        config.providers["flaky"] = config.providers["flaky"].model_copy(update=change)
        return Router(config, paths, persist=True, env={"FLAKY_KEY": "sk-second-key-0000"})

    same = make_router(paths, proxy, llama_server, persist=True)
    assert same.states["flaky"].circuit is CircuitState.OPEN  # unchanged: state kept
    assert same.states["steady"].circuit is CircuitState.CLOSED
    for change in ({"base_url": llama_server.url}, {"model": "other"},
                   {"api_key_env": "FLAKY_KEY"}):
        router = reopened(**change)
        assert router.states["flaky"].circuit is CircuitState.CLOSED, change
        assert router.states["flaky"].consecutive_failures == 0
    # the fixed provider is called at once, and what it answers is saved under its new identity
    fixed = reopened(base_url=llama_server.url)
    events = await run(fixed)
    assert trace(events)[:2] == [("attempt", "flaky"), ("tokens", "flaky")]
    await fixed.aclose()
    saved = (paths.state / "providers.json").read_text()
    assert "sk-second-key" not in saved
    again = reopened(base_url=llama_server.url)
    assert again.states["flaky"].circuit is CircuitState.CLOSED
    assert again.fingerprints["flaky"] in saved
    # a changed key behind the same variable name counts as a change too
    keyed = same.config.providers["flaky"].model_copy(update={"api_key_env": "FLAKY_KEY"})
    assert fingerprint(keyed, {"FLAKY_KEY": "a"}) != fingerprint(keyed, {"FLAKY_KEY": "b"})
    assert fingerprint(keyed, {"FLAKY_KEY": "a"}) == fingerprint(keyed, {"FLAKY_KEY": "a"})
    await same.aclose()


async def test_providers_come_from_a_factory_so_a_layer_can_wrap_them(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    """The router's seam: every provider is built by a factory, so a cache layer (or a test)
    can wrap one; the router calls what the factory gave it."""
    base = make_router(paths, proxy, llama_server)
    wrapped: dict[str, Counting] = {}

    class Counting(Provider):
        def __init__(self, inner: Provider) -> None:
            super().__init__(inner.name, inner.config, {})
            self.inner, self.calls = inner, 0

        async def _stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
            self.calls += 1
            async for event in self.inner.stream(request):
                yield event

        async def _health(self) -> str:
            return (await self.inner.health()).detail

        async def aclose(self) -> None:
            await self.inner.aclose()

    def factory(name: str, config: ProviderConfig) -> Provider:
        wrapped[name] = Counting(create_provider(name, config, paths))
        return wrapped[name]

    router = Router(base.config, paths, persist=False, factory=factory)
    proxy.plan = ["500"]
    events = await run(router)
    await router.aclose()
    await base.aclose()
    assert router.providers == wrapped
    assert wrapped["flaky"].calls == 1 and wrapped["steady"].calls == 1
    assert trace(events)[-2:] == [("tokens", "steady"), ("done",)]


async def test_a_structured_answer_cut_at_the_token_limit_moves_on(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths
) -> None:
    """The one "collect JSON" check holds in the router too: a reply cut by its token limit
    is not taken, even when what arrived happens to parse."""
    router = make_router(paths, proxy, llama_server)
    proxy.scripts["cut"] = ('{"answer": "yes"}', "length")
    proxy.plan = ["script:cut"]
    request = StreamRequest.of("Is water wet? Answer as JSON.", schema=SCHEMA, temperature=0,
                               max_tokens=60)
    value, done = await router.complete_json(request)
    await router.aclose()
    assert done.provider == "steady" and set(value) == {"answer"}
    assert "cut off by the token limit" in done.events[0].reason  # type: ignore[union-attr]


def test_saving_one_provider_keeps_the_others_configuration_fingerprint(tmp_path: Path) -> None:
    """Another process saving its provider's state must not strip the fingerprint from the
    rest: otherwise a changed configuration would inherit an old open circuit."""
    from engine.routing.breaker import StateStore

    path = tmp_path / "providers.json"
    opened = ProviderState(circuit=CircuitState.OPEN, consecutive_failures=3)
    StateStore(path).save({"a": opened}, {"a"}, {"a": "fp-a-1"})
    StateStore(path).save({"b": ProviderState()}, {"b"}, {"b": "fp-b-1"})
    assert json.loads(path.read_text())["providers"]["a"]["config"] == "fp-a-1"
    changed = StateStore(path)
    assert "a" not in changed.load({"a": "fp-a-2", "b": "fp-b-1"})
    assert changed.stale == {"a"}
    assert StateStore(path).load({"a": "fp-a-1"})["a"].circuit is CircuitState.OPEN


async def test_a_cancellation_a_library_turns_into_an_error_stays_a_cancellation() -> None:
    """Some HTTP stacks answer a cancelled read with an error of their own; that must stay a
    cancellation (Ctrl-C stops the run), not become a provider failure the router falls over
    from. Pure logic: a provider whose stream does exactly that."""
    import asyncio

    from engine import ProviderConfig
    from engine.providers import Provider, StreamRequest

    started = asyncio.Event()

    class Converting(Provider):
        async def _stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                raise RuntimeError("the connection was closed") from None
            yield  # pragma: no cover

        async def _health(self) -> str:
            return "ok"

    provider = Converting("conv", ProviderConfig(kind="openai", model="m",
                                                 base_url="http://127.0.0.1:9/v1"), {})

    async def read() -> None:
        async for _ in provider.stream(StreamRequest.of("hi")):
            pass

    task = asyncio.create_task(read())
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_an_earlier_versions_state_file_moves_to_the_state_directory(paths: Paths) -> None:
    from engine.routing.breaker import state_file

    paths.data_dir.mkdir(parents=True)
    old = paths.data_dir / "providers.json"
    old.write_text('{"version": 1, "providers": {}}')
    moved = state_file(paths)
    assert moved == paths.state / "providers.json" and paths.state != paths.data_dir
    assert moved.read_text() == '{"version": 1, "providers": {}}' and not old.exists()
    old.write_text("an older copy")  # both there: the state directory's wins, nothing moves
    assert state_file(paths) == moved and old.read_text() == "an older copy"
