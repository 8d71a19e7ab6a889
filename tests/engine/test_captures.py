"""Real exchanges with LiteLLM's proxy (1.108.7, in front of `detektiv local-server`) and with
llama.cpp's own `/v1/messages`, recorded by `make captures` into tests/data/captures/ and
replayed here byte for byte on loopback: each provider kind meets the gateway's real wire."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import Paths, ProviderConfig
from engine.errors import (
    ContextOverflowError,
    ProviderError,
    RequestError,
    ServerError,
)
from engine.providers import Done, StreamRequest, TokenDelta, Usage, create_provider
from tests.support.captures import capture_server, load

KEY = "sk-capture-master-0000"


def recorded_request(name: str) -> StreamRequest:
    body = load(name)["request"]["body"]
    return StreamRequest.of(body["messages"][0]["content"], max_tokens=body["max_tokens"],
                            temperature=body["temperature"])


async def replay(name: str, paths: Paths, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setenv("GATEWAY_KEY", KEY)
    kind = "anthropic" if "anthropic" in name or "messages" in name else "openai"
    with capture_server(name) as server:
        base = server.url if kind == "anthropic" else server.url + "/v1"
        provider = create_provider("gw", ProviderConfig(kind=kind, model="local", base_url=base,
                                                        api_key_env="GATEWAY_KEY"), paths)
        try:
            return [event async for event in provider.stream(recorded_request(name))]
        finally:
            await provider.aclose()


def answer(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TokenDelta))


def sse_text(name: str) -> str:
    """The text the recorded stream carried, read straight from its bytes."""
    text = []
    for line in "".join(load(name)["response"]["chunks"]).splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        data = json.loads(line[6:])
        for choice in data.get("choices", []):
            text.append(choice.get("delta", {}).get("content") or "")
        delta = data.get("delta", {})
        if delta.get("type") == "text_delta":
            text.append(delta["text"])
    return "".join(text)


async def test_the_openai_route_streamed(paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    events = await replay("litellm-openai-stream", paths, monkeypatch)
    assert answer(events) == sse_text("litellm-openai-stream") != ""
    assert Usage(38, 24, cached_tokens=0, reasoning_tokens=0) in events
    assert events[-1] == Done("length")


async def test_the_openai_route_whole(paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    events = await replay("litellm-openai-whole", paths, monkeypatch)
    assert answer(events).startswith("The river that flows through Paris")
    assert Usage(38, 24, cached_tokens=37) in events and events[-1] == Done("length")


@pytest.mark.parametrize("name", ["litellm-anthropic-stream", "litellm-anthropic-whole"])
async def test_the_anthropic_route_counts_what_litellm_reports_last(
        paths: Paths, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """LiteLLM opens with `input_tokens: 0`: the prompt is 1 fresh + 37 cached tokens. It says
    `end_turn`, and the server's own stop reason wins over counting output tokens."""
    events = await replay(name, paths, monkeypatch)
    assert answer(events).startswith("The river that flows through Paris")
    usage = next(e for e in events if isinstance(e, Usage))
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (38, 37, 24)
    assert events[-1] == Done("stop")


async def test_the_server_s_stop_reason_wins_over_counting_output_tokens(
        paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM did not pass `max_tokens: 8` on: 16 tokens came, with `end_turn`. Counting them
    against the limit would call any such answer cut (a whole sentence too); the server said
    how it ended, and that is what is reported."""
    events = await replay("litellm-anthropic-stream-at-max-tokens", paths, monkeypatch)
    assert answer(events) == sse_text("litellm-anthropic-stream-at-max-tokens")
    usage = next(e for e in events if isinstance(e, Usage))
    assert usage.completion_tokens == 16 > load(
        "litellm-anthropic-stream-at-max-tokens")["request"]["body"]["max_tokens"]
    assert events[-1] == Done("stop")


@pytest.mark.parametrize("name", ["llamacpp-messages-stream", "llamacpp-messages-whole"])
async def test_llama_cpp_s_own_messages_route(paths: Paths, monkeypatch: pytest.MonkeyPatch,
                                              name: str) -> None:
    events = await replay(name, paths, monkeypatch)
    assert answer(events).startswith("The river that flows through Paris")
    assert Usage(38, 24, cached_tokens=37) in events  # not the 1 token input_tokens says
    assert events[-1] == Done("length")


@pytest.mark.parametrize(("name", "error", "first_line"), [
    ("litellm-openai-window-exceeded", ContextOverflowError,
     "litellm.ContextWindowExceededError: litellm.BadRequestError"),
    ("litellm-anthropic-window-exceeded", ContextOverflowError,
     "litellm.ContextWindowExceededError"),
    ("litellm-openai-backend-down", ServerError, "litellm.InternalServerError"),
    ("litellm-anthropic-backend-down", ServerError, "litellm.InternalServerError"),
    ("litellm-openai-wrong-key", RequestError, "No connected db."),
    ("litellm-anthropic-wrong-key", RequestError, "No connected db."),
])
async def test_gateway_errors_are_one_line_of_the_right_kind(
        paths: Paths, monkeypatch: pytest.MonkeyPatch, name: str, error: type[ProviderError],
        first_line: str) -> None:
    with pytest.raises(error) as caught:
        await replay(name, paths, monkeypatch)
    message = str(caught.value)
    assert "\n" not in message and first_line in message
    if error is ContextOverflowError:
        assert caught.value.window == 1024  # type: ignore[attr-defined]


async def test_a_backend_killed_mid_answer_is_a_failure_never_a_short_answer(
        paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[Any] = []
    monkeypatch.setenv("GATEWAY_KEY", KEY)
    with capture_server("litellm-openai-backend-killed") as server:
        provider = create_provider("gw", ProviderConfig(
            kind="openai", model="victim", base_url=server.url + "/v1",
            api_key_env="GATEWAY_KEY"), paths)
        with pytest.raises(ProviderError) as caught:
            async for event in provider.stream(recorded_request(
                    "litellm-openai-backend-killed")):
                events.append(event)
        await provider.aclose()
    assert answer(events) == "Once"  # what streamed before the backend died
    assert not any(isinstance(e, Done) for e in events)
    assert "Connection error" in str(caught.value)
