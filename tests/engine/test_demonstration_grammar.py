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
