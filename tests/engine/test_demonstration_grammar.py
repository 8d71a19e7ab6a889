"""A demonstration model's question is held to its form by a grammar (one line, ending in
"?", 200 characters at most) on the real llama.cpp engine, in-process and served; a capable
model is never constrained that way."""

from __future__ import annotations

import re

import pytest

from engine import Paths
from engine.config.providers import ProviderConfig
from engine.interrogation.questions import QUESTION_GRAMMAR
from engine.providers import StreamRequest, create_provider
from engine.routing.structured import complete
from tests.support.scripted import ScriptedModel
from tests.support.servers import LlamaServer

SHAPE = re.compile(r"[A-Z][^\n?<]{8,190}\?")
PROMPT = ("Write one question to a witness about owls, then the witness's answer on the "
          "next line, then another question.")


def request() -> StreamRequest:
    return StreamRequest.of(PROMPT, max_tokens=200, temperature=0.8,
                            demonstration_grammar=QUESTION_GRAMMAR)


@pytest.mark.parametrize("kind", ["local", "served"])
async def test_a_demonstration_model_asks_one_line_that_ends_in_a_question_mark(
    kind: str, llama_server: LlamaServer, paths: Paths
) -> None:
    if kind == "local":
        config = ProviderConfig(kind="local", model="gemma-3-270m", n_ctx=4096)
    else:
        config = ProviderConfig(kind="openai", model="gemma-3-270m", base_url=llama_server.url)
    assert config.is_demonstration
    provider = create_provider("demo", config, paths)
    try:
        for _ in range(4):  # four samples: a marker spelled as text ends none of them
            done = await complete(provider, request())
            assert SHAPE.fullmatch(done.text), done.text
    finally:
        await provider.aclose()


async def test_the_grammar_reaches_only_a_demonstration_model(paths: Paths) -> None:
    with ScriptedModel(lambda _: "Where do owls hunt?") as server:
        for model, constrained in (("gemma-3-270m", True), ("qwen2.5-7b-instruct", False)):
            config = server.provider_config(model=model)
            assert config.is_demonstration is constrained
            provider = create_provider("p", config, paths)
            try:
                await complete(provider, request())
            finally:
                await provider.aclose()
            assert server.bodies[-1].get("grammar") == (QUESTION_GRAMMAR if constrained
                                                         else None)
        # and never with a schema: structured output has its own grammar
        provider = create_provider("p", server.provider_config(model="gemma-3-270m"), paths)
        try:
            await complete(provider, StreamRequest.of(
                "x", schema={"type": "object"}, demonstration_grammar=QUESTION_GRAMMAR))
        finally:
            await provider.aclose()
        assert "grammar" not in server.bodies[-1]


async def test_a_demonstration_models_reply_is_capped_and_a_capable_ones_is_not(
        paths: Paths) -> None:
    """A tiny model rambles to any limit (a 2,048-token audit narrative failed a run)."""
    from engine.config.providers import DEMONSTRATION_REPLY

    with ScriptedModel(lambda _: "A summary.") as server:
        for model, cap in (("smollm2-135m", DEMONSTRATION_REPLY), ("qwen2.5-7b-instruct", 2048)):
            provider = create_provider("p", server.provider_config(model=model), paths)
            try:
                await complete(provider, StreamRequest.of("Summarise.", max_tokens=2048))
            finally:
                await provider.aclose()
            assert server.bodies[-1]["max_tokens"] == cap, model


def test_the_measured_speed_is_learned_from_llama_cpps_timings() -> None:
    from engine.providers._llama import Speed

    timings = {"prompt_n": 300, "prompt_per_second": 150.0, "predicted_n": 64,
               "predicted_per_second": 10.0}
    first = Speed.first(timings)
    assert first == Speed(150.0, 10.0)
    assert first.seconds(300, 100) == pytest.approx(2 + 10)
    slower = first.learned({**timings, "predicted_per_second": 4.0})
    assert slower == Speed(150.0, 7.0)
    # too few tokens to mean anything: left out
    assert Speed.first({"predicted_n": 2, "predicted_per_second": 500.0}) is None
    assert first.learned({"prompt_n": 3, "prompt_per_second": 9e9, "predicted_n": 1,
                          "predicted_per_second": 9e9}) == first


async def test_the_embedded_models_deadline_is_fitted_to_its_measured_speed(
        paths: Paths) -> None:
    from engine.config.providers import LOCAL_TIMEOUT, UNMEASURED_TIMEOUT

    config = ProviderConfig(kind="local", model="smollm2-135m", n_ctx=2048, n_parallel=1)
    provider = create_provider("local", config, paths)
    long = StreamRequest.of("Tell me about owls.", max_tokens=2048)
    try:
        assert provider.reply_deadline(long) == UNMEASURED_TIMEOUT  # not measured yet
        await complete(provider, StreamRequest.of("Name three birds of prey.", max_tokens=48))
        speed = provider.engine().speed  # type: ignore[attr-defined]
        assert speed is not None and speed.reply > 0
        expected = speed.seconds(len("Tell me about owls.") // 3, 2048) * 1.5 + 15
        assert provider.reply_deadline(long) == min(LOCAL_TIMEOUT[2],
                                                   max(LOCAL_TIMEOUT[0], round(expected)))
        assert "tokens a second measured here for 2,048 tokens" in \
            provider.deadline_note(long)
    finally:
        await provider.aclose()
    mine = create_provider("local", ProviderConfig(kind="local", model="smollm2-135m",
                                                   n_ctx=2048, n_parallel=1, timeout=200),
                           paths)
    assert mine.reply_deadline(long) == 200 and mine.deadline_note(long) == ""  # theirs wins


def test_the_embedded_model_counts_no_stall_of_its_own_unless_told(paths: Paths) -> None:
    """In-process, a token that waits waits for the other slots on the same cores."""
    busy = create_provider("local", ProviderConfig(kind="local", model="smollm2-135m"), paths)
    assert busy.stall_deadline(300.0) == 300.0
    told = create_provider("local", ProviderConfig(kind="local", model="smollm2-135m",
                                                   stall_timeout=20), paths)
    assert told.stall_deadline(300.0) == 20
    served = create_provider("s", ProviderConfig(kind="openai", model="m",
                                                 base_url="http://127.0.0.1:9/v1"), paths)
    assert served.stall_deadline(300.0) == served.config.between_tokens_timeout
