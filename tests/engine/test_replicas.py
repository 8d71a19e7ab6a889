"""A provider over several replicas, on loopback OpenAI-wire servers: calls spread by fewest in
flight within slots, a dead replica set aside while the others carry on, a 429 storm waited out
instead of failing calls, a slow replica taking fewer calls; rates held per process."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from engine import Paths
from engine.config.models import Config
from engine.providers import StreamRequest, create_provider
from engine.providers._http import rate_limit_wait
from engine.providers._replicas import ReplicatedProvider
from engine.routing.router import Router
from tests.support.servers import closed_port
from tests.support.wire import Recorded, Reply, WireServer, json_reply


class Replica(WireServer):
    """An OpenAI-wire replica that answers "ok from N" after `delay` seconds, counts the calls
    it has in flight, and answers 429 to the first `limited` calls."""

    def __init__(self, number: int, delay: float = 0.05, limited: int = 0,
                 retry_after: str = "0.3") -> None:
        self.number, self.delay, self.limited, self.retry_after = number, delay, limited, \
            retry_after
        self.lock = threading.Lock()
        self.in_flight = self.most = self.served = self.refused = 0
        super().__init__({"POST /v1/chat/completions": self._chat,
                          "GET /v1/models": lambda r: json_reply(
                              {"object": "list", "data": [{"id": "m", "object": "model"}]})})

    def _chat(self, recorded: Recorded) -> Reply:
        with self.lock:
            if self.refused < self.limited:
                self.refused += 1
                return json_reply({"error": {"message": "Rate limit reached", "type":
                                             "requests"}}, 429,
                                  {"retry-after": self.retry_after})
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        return Reply(200, {"content-type": "text/event-stream"}, self._body())

    def _body(self) -> Iterator[Any]:
        time.sleep(self.delay)
        for data in ({"choices": [{"index": 0, "delta": {"content": f"ok from {self.number}"},
                                   "finish_reason": None}]},
                     {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}):
            yield f"data: {json.dumps({'id': 'x', 'object': 'chat.completion.chunk', 'created': 0, 'model': 'm', **data})}\n\n".encode()  # noqa: E501
        yield b"data: [DONE]\n\n"
        with self.lock:
            self.in_flight -= 1
            self.served += 1


def router_for(paths: Paths, replicas: list[dict[str, Any]], **extra: Any) -> Router:
    config = Config.model_validate({"providers": {"pool": {
        "kind": "openai", "model": "m", "replicas": replicas, "priority": 1,
        "first_token_timeout": 20, "stall_timeout": 10, **extra}}})
    return Router(config, paths, persist=False)


async def ask(router: Router, n: int) -> list[str]:
    done = await asyncio.gather(*(router.complete(StreamRequest.of(f"q{i}"))
                                  for i in range(n)))
    return [d.text for d in done]


async def test_calls_spread_by_fewest_in_flight_within_slots(paths: Paths) -> None:
    servers = [Replica(i, delay=0.3) for i in range(3)]
    with servers[0], servers[1], servers[2]:
        router = router_for(paths, [{"base_url": s.url + "/v1", "slots": 2} for s in servers])
        try:
            texts = await ask(router, 12)
        finally:
            await router.aclose()
    # every replica takes its share (4 each when all calls arrive at once; a busy machine
    # staggers them), and none ever more calls at once than its slots
    assert sum(s.served for s in servers) == 12 and min(s.served for s in servers) >= 2
    assert all(s.most <= 2 for s in servers) and max(s.most for s in servers) == 2
    assert {t for t in texts} == {"ok from 0", "ok from 1", "ok from 2"}


async def test_two_roles_on_the_same_replicas_share_their_slots(paths: Paths) -> None:
    """A detective and a witness configured over the same two servers (two slots each): the
    calls of both count against one server's slots, so none ever serves more than two."""
    servers = [Replica(0, delay=0.3), Replica(1, delay=0.3)]
    with servers[0], servers[1]:
        replicas = [{"base_url": s.url + "/v1", "slots": 2} for s in servers]
        config = Config.model_validate({"providers": {
            role: {"kind": "openai", "model": "m", "replicas": replicas, "priority": n,
                   "first_token_timeout": 20, "stall_timeout": 10}
            for n, role in enumerate(("det", "wit"), 1)}})
        providers = [create_provider(name, config.providers[name], paths)
                     for name in ("det", "wit")]

        async def call(provider: Any) -> None:
            async for _ in provider.stream(StreamRequest.of("q")):
                pass

        try:
            await asyncio.gather(*(call(providers[i % 2]) for i in range(8)))
        finally:
            for provider in providers:
                await provider.aclose()
    assert sum(s.served for s in servers) == 8
    assert max(s.most for s in servers) == 2  # four at a time, two to each server


async def test_a_weight_takes_its_share(paths: Paths) -> None:
    servers = [Replica(0, delay=1.0), Replica(1, delay=1.0)]
    with servers[0], servers[1]:
        router = router_for(paths, [{"base_url": servers[0].url + "/v1", "weight": 3},
                                    {"base_url": servers[1].url + "/v1", "weight": 1}])
        try:
            await ask(router, 8)
        finally:
            await router.aclose()
    assert servers[0].served >= 5 and servers[0].served + servers[1].served == 8  # 4:4 unweighted


async def test_a_dead_replica_is_set_aside_and_the_others_carry_on(paths: Paths) -> None:
    servers = [Replica(0), Replica(1)]
    with servers[0], servers[1]:
        dead = f"http://127.0.0.1:{closed_port()}/v1"
        router = router_for(paths, [{"base_url": dead}] + [{"base_url": s.url + "/v1"}
                                                           for s in servers])
        try:
            texts = await ask(router, 10)
            health = await router.providers["pool"].health()
        finally:
            await router.aclose()
    assert len(texts) == 10 and servers[0].served + servers[1].served == 10
    assert router.states["pool"].consecutive_failures == 0  # the router saw no failure
    assert not health.ok or health.detail.startswith("2 of 3 replicas ok")
    assert health.ok and dead in health.detail


async def test_a_429_storm_is_waited_out_instead_of_failing_calls(paths: Paths) -> None:
    """One replica answering 429 (Retry-After 0.3 s) to its first six calls: every call is
    answered, none fails, and the time spent waiting is known."""
    server = Replica(0, limited=6, retry_after="0.3")
    with server:
        router = router_for(paths, [{"base_url": server.url + "/v1"}])
        try:
            texts = await ask(router, 4)
        finally:
            await router.aclose()
        provider = router.providers["pool"]
    assert texts == ["ok from 0"] * 4 and server.refused == 6 and server.served == 4
    assert isinstance(provider, ReplicatedProvider) and provider.waited >= 0.3
    assert router.states["pool"].consecutive_failures == 0


async def test_a_429_on_one_replica_sends_its_calls_to_the_other(paths: Paths) -> None:
    limited, free = Replica(0, limited=100, retry_after="30"), Replica(1)
    with limited, free:
        router = router_for(paths, [{"base_url": limited.url + "/v1"},
                                    {"base_url": free.url + "/v1"}])
        try:
            start = time.monotonic()
            await ask(router, 6)
            took = time.monotonic() - start
        finally:
            await router.aclose()
    # asked only by the calls that went out before its first 429 came back, then left alone
    assert free.served == 6 and limited.refused <= 3
    assert took < 10


async def test_a_slow_replica_takes_fewer_calls(paths: Paths) -> None:
    """Four callers, each asking again as soon as it is answered: the fast replica frees its
    calls sooner, so it is the one with fewer in flight more often."""
    slow, fast = Replica(0, delay=1.0), Replica(1, delay=0.05)

    async def caller(router: Router) -> None:
        for _ in range(5):
            await router.complete(StreamRequest.of("q"))

    with slow, fast:
        router = router_for(paths, [{"base_url": slow.url + "/v1", "slots": 4},
                                    {"base_url": fast.url + "/v1", "slots": 4}])
        try:
            await asyncio.gather(*(caller(router) for _ in range(4)))
        finally:
            await router.aclose()
    assert slow.served + fast.served == 20 and fast.served >= 2 * slow.served


def test_replicas_are_configured_as_urls_or_a_table() -> None:
    config = Config.model_validate({"providers": {
        "a": {"kind": "openai", "model": "m", "priority": 1,
              "base_urls": ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]},
        "b": {"kind": "openai", "model": "m", "priority": 2,
              "replicas": [{"base_url": "http://127.0.0.1:3/v1", "weight": 2, "slots": 8}]}}})
    assert [r.base_url for r in config.providers["a"].replicas] == [
        "http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]
    assert config.providers["b"].replicas[0].slots == 8 and config.providers["a"].is_local
    with pytest.raises(ValueError, match="not both"):
        Config.model_validate({"providers": {"c": {
            "kind": "openai", "model": "m", "base_url": "http://127.0.0.1:1/v1",
            "base_urls": ["http://127.0.0.1:2/v1"]}}})


async def test_requests_per_minute_are_kept(paths: Paths, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    """Three calls a minute: the fourth waits until the first is a minute old (a fake clock
    whose sleeps pass at once)."""
    from engine.providers import _replicas

    now = [1000.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(_replicas.asyncio, "sleep", sleep)
    server = Replica(0, delay=0.0)
    with server:
        config = Config.model_validate({"providers": {"pool": {
            "kind": "openai", "model": "m", "base_url": server.url + "/v1",
            "requests_per_minute": 3}}}).providers["pool"]
        provider = create_provider("pool", config, paths)
        assert isinstance(provider, ReplicatedProvider)
        provider._clock = lambda: now[0]
        for _ in range(4):
            [e async for e in provider.stream(StreamRequest.of("q"))]
            now[0] += 1.0
        await provider.aclose()
    assert server.served == 4
    assert slept and sum(slept) == pytest.approx(57.0, abs=0.1)  # 60 s after the first, less 3


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"Retry-After": "7"}, 7.0),
    ({"retry-after-ms": "1500"}, 1.5),
    ({"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "20ms"}, 360.0),
    ({"x-ratelimit-reset-tokens": "1.5s"}, 1.5),
    ({"anthropic-ratelimit-requests-reset": "2026-11-26T00:00:30Z"}, 30.0),
    ({"content-type": "application/json"}, None),
    # no finite number is no wait (Python's float reads all three): the next header says
    ({"Retry-After": "inf", "retry-after-ms": "2000"}, 2.0),
    ({"Retry-After": "1e999", "x-ratelimit-reset-requests": "nan"}, None),
    ({"Retry-After": "-3"}, 0.0),
])
def test_how_long_a_429_asks_to_wait(headers: dict[str, str], seconds: float | None) -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 11, 26, tzinfo=UTC).timestamp()
    assert rate_limit_wait(headers, now) == seconds


async def test_an_evaluation_over_replicas_fills_their_slots(paths: Paths) -> None:
    """`eval --concurrency auto`: as many items at once as the replicas of the role with the
    fewest slots serve (the witness's two replicas of two slots: 4), and every item judged."""
    from engine import EvalItemDone, EvalRequest, EvalStarted, Workspace
    from engine.evals.datasets import dataset_path
    from engine.evals.items import read_items, sample
    from tests.support.evals import detective, knows, witness
    from tests.support.scripted import ScriptedModel

    items = sample(read_items(dataset_path(paths, "demo")), 8, 2)
    verdicts = detective(knows(items))
    with ScriptedModel(verdicts) as d1, ScriptedModel(verdicts) as d2, \
            ScriptedModel(witness) as w1, ScriptedModel(witness) as w2:
        config = Config.model_validate({
            "providers": {
                "det": {"kind": "openai", "model": "m", "priority": 1, "replicas": [
                    {"base_url": d1.url + "/v1", "slots": 3},
                    {"base_url": d2.url + "/v1", "slots": 3}]},
                "wit": {"kind": "openai", "model": "m", "priority": 2, "replicas": [
                    {"base_url": w1.url + "/v1", "slots": 2},
                    {"base_url": w2.url + "/v1", "slots": 2}]}},
            "roles": {"detective": ["det"], "witness": ["wit"]},
            "interrogation": {"min_rounds": 1, "iteration_limit": 5}})
        workspace = Workspace(paths, config)
        try:
            run = await workspace.evals.start(EvalRequest("demo", n=8, seed=2, mode="open"))
            events = [event async for event in run.events()]
        finally:
            await workspace.aclose()
    started = next(e for e in events if isinstance(e, EvalStarted))
    done = [e for e in events if isinstance(e, EvalItemDone)]
    assert started.concurrency == 4
    assert len(done) == 8 and done[-1].failed == 0
    assert min(len(w1.chats), len(w2.chats)) >= 2 and min(len(d1.chats), len(d2.chats)) >= 2


async def test_auto_concurrency_is_capped_whatever_a_server_says(paths: Paths) -> None:
    """A server that says it serves 4,000 at once does not get 4,000 sessions started."""
    from engine import EvalRequest, Workspace
    from engine.workspace.evals import MAX_CONCURRENCY

    props = {"total_slots": 4000, "default_generation_settings": {"n_ctx": 8192}}
    routes = {"GET /props": lambda r: json_reply(props),
              "GET /v1/models": lambda r: json_reply({"data": [{"id": "m"}]})}
    with WireServer(routes) as server:
        config = Config.model_validate({
            "providers": {"big": {"kind": "openai", "model": "m", "priority": 1,
                                  "base_url": server.url + "/v1"}},
            "roles": {"detective": ["big"], "witness": ["big"]}})
        workspace = Workspace(paths, config)
        try:
            assert await (await workspace.router()).providers["big"].slots() == 4000
            run = await workspace.evals.start(EvalRequest("demo", n=2, mode="open"))
        finally:
            await workspace.aclose()
    assert run.concurrency == MAX_CONCURRENCY == 64


async def test_a_replica_that_dies_mid_answer_hands_the_turn_to_another(paths: Paths) -> None:
    """Half an answer, then the connection is cut: the turn starts again on the other replica
    (the partial text void, never spliced), and the router counts no failure."""
    from engine.routing.events import PartialDiscarded
    from tests.support.wire import CUT

    def dying(_: Recorded) -> Reply:
        chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": "half an ans"},
                              "finish_reason": None}]}
        return Reply(200, {"content-type": "text/event-stream"},
                     [f"data: {json.dumps(chunk)}\n\n".encode(), CUT])

    healthy = Replica(1)
    with WireServer({"POST /v1/chat/completions": dying}) as broken, healthy:
        router = router_for(paths, [{"base_url": broken.url + "/v1"},
                                    {"base_url": healthy.url + "/v1"}])
        try:
            done = await router.complete(StreamRequest.of("q"))
        finally:
            await router.aclose()
    assert done.text == "ok from 1"
    assert [e.text for e in done.events if isinstance(e, PartialDiscarded)] == ["half an ans"]
    assert router.states["pool"].consecutive_failures == 0
