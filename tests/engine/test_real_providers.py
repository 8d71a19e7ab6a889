"""The provider contract, against real llama.cpp: the `openai` kind talking HTTP to
`detektiv local-server`, and the `local` kind running the same model in-process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator

import pytest

from engine import (
    FirstTokenTimeout,
    Paths,
    ProviderConfig,
    ProviderConnectionError,
    RequestError,
    TotalTimeout,
)
from engine.providers import (
    Done,
    Provider,
    StreamRequest,
    TokenChoices,
    TokenDelta,
    Usage,
    create_provider,
)
from engine.routing.structured import complete, complete_json
from tests.support.servers import LONG_PROMPT, ROOT, HangingServer, LlamaServer, closed_port

KINDS = ["openai", "local"]

SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "maxLength": 40},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
    },
    "required": ["answer", "confidence"],
    "additionalProperties": False,
}

SHORT = StreamRequest.of(LONG_PROMPT, max_tokens=3, temperature=0)
"""Three tokens the tiny model is sure to write (it ends most short prompts at once)."""


@pytest.fixture(params=KINDS)
async def provider(
    request: pytest.FixtureRequest, llama_server: LlamaServer, paths: Paths
) -> AsyncIterator[Provider]:
    if request.param == "openai":
        config = llama_server.provider_config()
    else:
        config = ProviderConfig(kind="local", model="gemma-3-270m", n_ctx=4096, n_parallel=2)
    built = create_provider(request.param, config, paths)
    try:
        yield built
    finally:
        await built.aclose()


def generation_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "detektiv-llama" and t.is_alive())


async def assert_generation_stopped(provider: Provider, llama_server: LlamaServer) -> None:
    """The model itself stopped within 2 s, not just our reading of it."""
    if provider.kind == "openai":
        assert await llama_server.wait_idle(timeout=2.0) < 2.0
        return
    deadline = time.monotonic() + 2.0
    while generation_threads() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert generation_threads() == 0


async def test_streams_incrementally(provider: Provider) -> None:
    arrivals: list[tuple[float, object]] = []
    request = StreamRequest.of(LONG_PROMPT, max_tokens=40, temperature=0)
    async for event in provider.stream(request):
        arrivals.append((time.perf_counter(), event))
    deltas = [t for t, e in arrivals if isinstance(e, TokenDelta)]
    done_at = arrivals[-1][0]
    assert isinstance(arrivals[-1][1], Done)
    assert len(deltas) >= 10, "tokens arrive one by one, not as one block"
    # The first token was in hand well before the stream ended: ~40 tokens take ~1 s here.
    assert done_at - deltas[0] > 0.3
    assert deltas == sorted(deltas)


async def test_honours_max_tokens(provider: Provider) -> None:
    events = [e async for e in provider.stream(StreamRequest.of(LONG_PROMPT,
                                                                 max_tokens=7, temperature=0))]
    usage = next(e for e in events if isinstance(e, Usage))
    assert usage.completion_tokens == 7
    assert events[-1] == Done("length")


async def test_structured_output_is_schema_valid(provider: Provider) -> None:
    request = StreamRequest.of(
        "Is the sky blue? Answer as JSON.", schema=SCHEMA, temperature=0, max_tokens=120
    )
    value = await complete_json(provider, request)
    assert set(value) == {"answer", "confidence"}
    assert isinstance(value["answer"], str) and len(value["answer"]) <= 40
    assert 0 <= value["confidence"] <= 100


async def test_cancel_mid_stream_stops_generation(
    provider: Provider, llama_server: LlamaServer
) -> None:
    stream = provider.stream(StreamRequest.of(LONG_PROMPT, max_tokens=1500, temperature=0))
    seen = 0
    async for event in stream:
        if isinstance(event, TokenDelta):
            seen += 1
            if seen == 3:
                break
    start = time.perf_counter()
    await stream.aclose()
    assert time.perf_counter() - start < 0.5
    await assert_generation_stopped(provider, llama_server)


async def test_cancelling_the_consumer_task_stops_generation(
    provider: Provider, llama_server: LlamaServer
) -> None:
    first = asyncio.Event()

    async def consume() -> None:
        async for event in provider.stream(StreamRequest.of(LONG_PROMPT,
                                                            max_tokens=1500, temperature=0)):
            if isinstance(event, TokenDelta):
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await assert_generation_stopped(provider, llama_server)


async def test_total_timeout(provider: Provider) -> None:
    request = StreamRequest.of(LONG_PROMPT, max_tokens=1500, timeout=1.0, temperature=0)
    start = time.perf_counter()
    with pytest.raises(TotalTimeout) as caught:
        async for _ in provider.stream(request):
            pass
    assert 0.9 < time.perf_counter() - start < 2.0
    assert caught.value.timeout == 1.0


async def test_prompt_over_context_is_a_request_error(provider: Provider) -> None:
    # 2048 tokens per slot here; this prompt is far longer.
    request = StreamRequest.of("lighthouse " * 6000, max_tokens=5)
    with pytest.raises(RequestError) as caught:
        async for _ in provider.stream(request):
            pass
    assert "context" in caught.value.message.lower()


async def test_health(provider: Provider) -> None:
    health = await provider.health()
    assert health.ok, health.detail
    assert health.latency_ms >= 0


async def test_openai_first_token_timeout_on_a_silent_server(
    hanging_server: HangingServer, paths: Paths
) -> None:
    # its slots configured: no /props asked first, so every connection counted is the call's
    config = ProviderConfig(
        kind="openai", model="m", base_url=f"http://127.0.0.1:{hanging_server.port}/v1",
        slots=1,
    )
    provider = create_provider("silent", config, paths)
    start = time.perf_counter()
    with pytest.raises(FirstTokenTimeout) as caught:
        async for _ in provider.stream(StreamRequest.of("hi", first_token_timeout=0.5)):
            pass
    elapsed = time.perf_counter() - start
    await provider.aclose()
    assert 0.45 < elapsed < 1.5
    assert hanging_server.accepted == 1, "the SDK's own retries are off"
    assert "silent" in str(caught.value)


async def test_local_first_token_timeout_while_reading_a_long_prompt(paths: Paths) -> None:
    config = ProviderConfig(kind="local", model="gemma-3-270m", n_ctx=4096, n_parallel=2)
    provider = create_provider("local", config, paths)
    await provider.stream(StreamRequest.of("warm up", max_tokens=1)).__anext__()
    request = StreamRequest.of("lighthouse " * 900, max_tokens=5, first_token_timeout=0.05)
    with pytest.raises(FirstTokenTimeout):
        async for _ in provider.stream(request):
            pass
    # The engine is free again afterwards.
    done = await complete(provider, SHORT)
    assert done.finish_reason == "length"


async def test_connection_refused(paths: Paths) -> None:
    config = ProviderConfig(
        kind="openai", model="m", base_url=f"http://127.0.0.1:{closed_port()}/v1"
    )
    provider = create_provider("dead", config, paths)
    with pytest.raises(ProviderConnectionError) as caught:
        async for _ in provider.stream(StreamRequest.of("hi")):
            pass
    assert caught.value.provider == "dead"
    health = await provider.health()
    assert not health.ok
    await provider.aclose()


@pytest.mark.parametrize("drops", [1, 2])
async def test_a_dropped_connection_is_retried_once(
    drops: int, llama_server: LlamaServer, paths: Paths
) -> None:
    from tests.support.faults import FaultProxy

    proxy = FaultProxy(llama_server.base)
    await proxy.start()
    proxy.plan = ["drop"] * drops
    provider = create_provider("p", ProviderConfig(kind="openai", model="m",
                                                   base_url=proxy.url), paths)
    try:
        if drops == 1:
            done = await complete(provider, SHORT)
            assert done.finish_reason == "length"
        else:
            with pytest.raises(ProviderConnectionError):
                await complete(provider, SHORT)
    finally:
        await provider.aclose()
        await proxy.stop()
    assert proxy.connections == 2, "one retry, never more"


EXITS_MID_ANSWER = f"""
import asyncio
from engine import Paths, ProviderConfig
from engine.providers import StreamRequest, TokenDelta, create_provider

async def main() -> None:
    provider = create_provider("local", ProviderConfig(kind="local", model="gemma-3-270m"),
                               Paths.from_env())
    seen = 0
    request = StreamRequest.of({LONG_PROMPT!r}, max_tokens=400, temperature=0)
    async for event in provider.stream(request):
        if isinstance(event, TokenDelta) and event.text:
            seen += 1
            if seen == 3:
                print("streaming", flush=True)
                raise SystemExit(0)  # the process ends while llama.cpp generates
    print("the answer ended after", seen, "pieces")

asyncio.run(main())
"""


def test_a_process_that_exits_mid_answer_exits_with_its_code(home: object) -> None:
    """The embedded model's thread is stopped and waited for at exit: left running, CPython's
    finalisation tore it down inside llama.cpp and the process aborted ("FATAL: exception not
    rethrown", SIGABRT) instead of exiting 0 (as `detektiv run` did on SIGTERM)."""
    done = subprocess.run([sys.executable, "-c", EXITS_MID_ANSWER], capture_output=True,
                          text=True, cwd=ROOT, timeout=240)
    assert done.stdout == "streaming\n", (done.stdout, done.stderr[-2000:])
    assert done.returncode == 0 and "FATAL" not in done.stderr, done.stderr[-2000:]


async def test_log_probabilities_come_with_each_token_of_the_answer(provider: Provider) -> None:
    """Asked for (`top_logprobs`), every answer token comes with its log-probability and its
    alternatives: the chosen tokens spell the answer, each a probability (≤ 0), the chosen one
    among its alternatives, the most likely first at temperature 0. Not asked for: none."""
    asked = StreamRequest.of(LONG_PROMPT, max_tokens=8, temperature=0, top_logprobs=5)
    events = [event async for event in provider.stream(asked)]
    text = "".join(e.text for e in events if isinstance(e, TokenDelta))
    choices = [e for e in events if isinstance(e, TokenChoices)]
    assert provider.gives_logprobs and text and choices
    assert "".join(c.token for c in choices) == text
    for place in choices:
        assert 1 <= len(place.top) <= 5 and all(logprob <= 0 for _, logprob in place.top)
        assert (place.token, place.logprob) in place.top
        assert place.logprob == max(logprob for _, logprob in place.top)
    plain = [event async for event in provider.stream(SHORT)]
    assert not any(isinstance(e, TokenChoices) for e in plain)


async def test_a_loopback_llama_cpp_server_gets_the_deadline_its_measured_speed_needs(
        llama_server: LlamaServer, paths: Paths) -> None:
    """The speed llama.cpp reports with each reply (`timings`) fits the deadline, as the
    embedded model's: a long answer on a slow machine gets the time it needs."""
    from engine.config.providers import LOCAL_TIMEOUT
    from engine.providers._deadline import fitted

    config = llama_server.provider_config()
    assert config.is_local and config.timeout is None
    provider = create_provider("openai", config, paths)
    long = StreamRequest.of("Tell me about owls.", max_tokens=100_000)
    try:
        assert provider.reply_deadline(long) == LOCAL_TIMEOUT[0]  # nothing measured yet
        assert provider.deadline_note(long) == ""
        await complete(provider, StreamRequest.of("Name three birds of prey.", max_tokens=48,
                                                  temperature=0))
        speed = provider.speed
        assert speed is not None and speed.reply > 0 and speed.prompt > 0
        deadline = provider.reply_deadline(long)
        assert deadline == fitted(speed, len("Tell me about owls."), 100_000,
                                  LOCAL_TIMEOUT[0], LOCAL_TIMEOUT[2])
        assert LOCAL_TIMEOUT[0] < deadline <= 1800  # more than the fixed default: what it needs
        assert "tokens a second the server reported for 100,000 tokens" in \
            provider.deadline_note(long)
    finally:
        await provider.aclose()


def test_a_local_timeout_may_be_set_up_to_half_an_hour() -> None:
    base = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    assert ProviderConfig(**base, timeout=1800).total_timeout == 1800
    with pytest.raises(ValueError, match="timeout must be between 15 and 1800 s for a local"):
        ProviderConfig(**base, timeout=1801)
    with pytest.raises(ValueError, match="between 15 and 120 s for a cloud"):
        ProviderConfig(kind="openai", model="m", base_url="https://api.example.com/v1",
                       timeout=1800)
