"""The deadlines a provider's stream is awaited under (`engine.providers._deadline`): one timer
for the stream's life, moved on at each token. Pure logic: a provider whose stream is a
script of waits and tokens; the real servers' deadlines are tested in test_real_providers.py
and the fault matrix of test_router.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator

import pytest

from engine import ProviderConfig
from engine.errors import FirstTokenTimeout, StallTimeout, TotalTimeout
from engine.providers import Provider, StreamRequest
from engine.providers._events import Done, StreamEvent, TokenDelta


class Scripted(Provider):
    """Waits and yields as `script` says: a number is a sleep, a string a token."""

    script: list[float | str] = []
    swallow = False  # turn a cancellation into an error of its own, as some libraries do
    shrug = False  # swallow a cancellation whole and go on to the next step
    waiting: asyncio.Event  # set once the stream waits

    async def _stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
        for step in self.script:
            if isinstance(step, str):
                yield TokenDelta(step)
                continue
            self.waiting.set()
            try:
                await asyncio.sleep(step)
            except asyncio.CancelledError:
                if self.shrug:
                    continue
                if self.swallow:
                    raise RuntimeError("the connection was closed") from None
                raise
        yield Done("stop")

    async def _health(self) -> str:
        return "ok"


def scripted(script: list[float | str], swallow: bool = False, shrug: bool = False
             ) -> Scripted:
    provider = Scripted("s", ProviderConfig(kind="openai", model="m",
                                            base_url="http://127.0.0.1:9/v1"), {})
    provider.script, provider.swallow, provider.shrug = script, swallow, shrug
    provider.waiting = asyncio.Event()
    return provider


async def answer(provider: Provider, request: StreamRequest, pause: float = 0.0) -> str:
    parts: list[str] = []
    async for event in provider.stream(request):
        if isinstance(event, TokenDelta):
            parts.append(event.text)
            await asyncio.sleep(pause)
    return "".join(parts)


async def test_a_slow_consumer_is_not_the_providers_stall() -> None:
    provider = scripted(["a", "b", "c"])
    request = StreamRequest.of("hi", stall_timeout=0.05)
    assert await answer(provider, request, pause=0.2) == "abc"


async def test_a_stall_shorter_than_the_first_token_wait_applies_after_the_first_token(
) -> None:
    provider = scripted(["a", 30.0, "b"])
    request = StreamRequest.of("hi", first_token_timeout=30, stall_timeout=0.2)
    started = time.perf_counter()
    with pytest.raises(StallTimeout) as caught:
        await answer(provider, request)
    assert time.perf_counter() - started < 5
    assert "no token for 0.2 s" in str(caught.value)


async def test_each_token_moves_the_stall_deadline_on() -> None:
    # 6 waits of 0.1 s: 0.6 s in all, past a 0.25 s stall if it did not move on
    provider = scripted(["a", 0.1, "b", 0.1, "c", 0.1, "d", 0.1, "e", 0.1, "f", 0.1, "g"])
    request = StreamRequest.of("hi", stall_timeout=0.25)
    assert await answer(provider, request) == "abcdefg"


async def test_the_first_token_and_total_deadlines() -> None:
    with pytest.raises(FirstTokenTimeout):
        await answer(scripted([30.0, "a"]), StreamRequest.of("hi", first_token_timeout=0.1))
    tokens: list[float | str] = ["a", 0.1] * 20
    with pytest.raises(TotalTimeout) as caught:
        await answer(scripted(tokens), StreamRequest.of("hi", stall_timeout=5, timeout=0.5))
    assert "answer not finished within 0.5 s" in str(caught.value)


async def test_a_deadline_a_library_turns_into_an_error_is_still_the_deadline() -> None:
    provider = scripted(["a", 30.0, "b"], swallow=True)
    with pytest.raises(StallTimeout):
        await answer(provider, StreamRequest.of("hi", stall_timeout=0.1))


async def test_a_stream_that_swallows_the_deadline_and_answers_goes_on_uncancelled(
) -> None:
    # as `asyncio.timeout` does when its body ends anyway: the cancellation is taken back, so
    # a later failure is not mistaken for the deadline, nor this task for a cancelled one
    provider = scripted(["a", 30.0, "b", "c"], shrug=True)
    task = asyncio.current_task()
    assert task is not None
    seen = [(event.text, task.cancelling())
            async for event in provider.stream(StreamRequest.of("hi", stall_timeout=0.1))
            if isinstance(event, TokenDelta)]
    assert seen == [("a", 0), ("b", 0), ("c", 0)]


async def test_no_deadline_outlives_its_stream() -> None:
    provider = scripted(["a", "b"])
    assert await answer(provider, StreamRequest.of("hi", first_token_timeout=0.05,
                                                    stall_timeout=0.05)) == "ab"
    await asyncio.sleep(0.3)  # well past every deadline the stream had: nothing cancels us
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_cancellation_during_a_wait_stays_a_cancellation() -> None:
    provider = scripted([30.0, "a"])
    task = asyncio.create_task(answer(provider, StreamRequest.of("hi",
                                                                 first_token_timeout=60)))
    await asyncio.wait_for(provider.waiting.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_stream_read_from_one_task_then_another_times_out_in_the_one_reading_it(
) -> None:
    provider = scripted(["a", 30.0, "b"])
    stream = provider.stream(StreamRequest.of("hi", stall_timeout=0.2))
    first = await asyncio.create_task(anext(stream))  # the first token, read by a task
    assert isinstance(first, TokenDelta) and first.text == "a"
    with pytest.raises(StallTimeout):
        await anext(stream)  # the next one, read here: this task's wait times out
    await stream.aclose()


async def test_a_timeout_names_the_setting_that_allows_longer() -> None:
    provider = scripted(["a", 0.1] * 20)
    with pytest.raises(TotalTimeout) as caught:
        await answer(provider, StreamRequest.of("hi", stall_timeout=5, timeout=0.3))
    assert "raise the provider's timeout ([providers.s] in config.toml); the session can be " \
        "resumed" in str(caught.value)
    with pytest.raises(StallTimeout) as stalled:
        await answer(scripted(["a", 30.0]), StreamRequest.of("hi", stall_timeout=0.1))
    assert "raise the provider's stall_timeout ([providers.s] in config.toml)" in \
        str(stalled.value)
