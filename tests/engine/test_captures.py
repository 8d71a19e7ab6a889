"""Real exchanges with LiteLLM's proxy (1.108.7, in front of `detektiv local-server`) and with
llama.cpp's own `/v1/messages`, recorded by `make captures` into tests/data/captures/ and
replayed here byte for byte on loopback: each provider kind meets the gateway's real wire."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import Paths, ProviderConfig
from engine.config.models import Config
from engine.errors import (
    AuthError,
    ContextOverflowError,
    ProviderError,
    RequestError,
    ServerError,
)
from engine.providers import Done, StreamRequest, TokenDelta, Usage, create_provider
from engine.routing.events import ProviderEvent
from tests.support.captures import QUESTION, capture_server, load

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
    # LiteLLM without a database answers an unknown key 400 "No connected db.": a key problem
    ("litellm-openai-wrong-key", AuthError, "No connected db."),
    ("litellm-anthropic-wrong-key", AuthError, "No connected db."),
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
    if error is AuthError:
        assert "refused the API key" in message and "[providers.gw]" in message


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


# ---- what detektiv asks of the gateway beside the chat (tests/support/captures.py) ---------

def gateway(server_url: str, kind: str, model: str, **settings: Any) -> ProviderConfig:
    base = server_url if kind == "anthropic" else server_url + "/v1"
    return ProviderConfig(kind=kind, model=model, base_url=base, api_key_env="GATEWAY_KEY",
                          **settings)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_the_window_is_learned_from_litellm_s_model_info(
        paths: Paths, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """No /props, no /slots behind the proxy: its /model/info says `max_input_tokens`."""
    from engine.context.windows import window_of

    monkeypatch.setenv("GATEWAY_KEY", KEY)
    with capture_server("litellm-v1-models", "litellm-model-info") as server:
        provider = create_provider("gw", gateway(server.url, kind, "sized"), paths)
        try:
            window = await window_of(provider)
        finally:
            await provider.aclose()
    assert (window.tokens, window.source, window.exact) == (1024, "server", False)


@pytest.mark.parametrize(("kind", "refusal"), [
    ("openai", "litellm-openai-window-exceeded"),
    ("anthropic", "litellm-anthropic-window-exceeded")])
async def test_a_window_error_is_learned_and_the_prompt_fitted_again_once(
        paths: Paths, monkeypatch: pytest.MonkeyPatch, kind: str, refusal: str) -> None:
    """A gateway that says nothing of its window (no /model/info here): the default is
    assumed, LiteLLM's ContextWindowExceededError names 1024 and the prompt's 1471 tokens,
    the window is learned and the prompt is fitted again, once, for it; the answer comes."""
    from engine.context.conversations import ConversationTurn, conversation_prompt
    from engine.context.policy import Limits
    from engine.context.windows import window_of
    from engine.routing.events import Fitted
    from engine.routing.router import Router

    monkeypatch.setenv("GATEWAY_KEY", KEY)
    answer_capture = "litellm-openai-stream" if kind == "openai" else "litellm-anthropic-stream"
    # a conversation of 40 turns (~2,500 tokens): all of it fits the window assumed, its
    # older turns give way for the one the server names
    history = [ConversationTurn("user" if n % 2 == 0 else "assistant",
                                f"Turn {n}: " + "rivers run to the sea, " * 12)
               for n in range(40)]
    prompt = conversation_prompt(StreamRequest.of(QUESTION, max_tokens=24), history,
                                 Limits(True, 100, 1e9, 10**6))
    with capture_server(refusal, answer_capture) as server:
        config = Config.model_validate({"providers": {"gw": gateway(server.url, kind, "local")
                                                      .model_dump(exclude={"origin"})}})
        router = Router(config, paths, persist=False)
        events = [e async for e in router.stream(prompt)]
        learned = await window_of(router.providers["gw"])
        await router.aclose()
    fits = [e.report for e in events if isinstance(e, Fitted)]
    assert [f.window for f in fits] == [8192 if kind == "openai" else 200_000, 1024]
    assert not fits[0].trim and fits[1].trim.omitted  # older turns left out the second time
    assert fits[1].used <= 1024 - 24 and learned.tokens == 1024
    notes = [e.reason for e in events if isinstance(e, ProviderEvent)]
    assert any("fitting the prompt again for the context window it names" in n for n in notes)
    assert answer(events).startswith("The river that flows through Paris")
    assert isinstance(events[-1], Done)


async def test_a_prompt_that_still_does_not_fit_says_context_window(
        paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.errors import AllProvidersFailed
    from engine.routing.router import Router

    monkeypatch.setenv("GATEWAY_KEY", KEY)
    with capture_server("litellm-openai-window-exceeded") as server:  # refuses every time
        config = Config.model_validate({"providers": {"gw": gateway(
            server.url, "openai", "local").model_dump(exclude={"origin"})}})
        router = Router(config, paths, persist=False)
        with pytest.raises(AllProvidersFailed) as caught:
            [e async for e in router.stream(StreamRequest.of("x " * 300, max_tokens=24))]
        await router.aclose()
    line = str(caught.value)
    assert "context window" in line and "\n" not in line


def test_the_bound_covers_the_real_count_where_the_gateway_s_counter_does_not() -> None:
    """LiteLLM's /utils/token_counter counts with OpenAI's tokenizer ("local_estimate"):
    1455 for the prompt the model counted 1471. detektiv's bound is above the real count."""
    from engine.context.tokens import bound_messages
    from engine.errors import overflow_tokens
    from engine.providers import Message

    counter = json.loads("".join(load("litellm-token-counter")["response"]["chunks"]))
    refused = "".join(load("litellm-openai-window-exceeded")["response"]["chunks"])
    real = overflow_tokens(refused)
    messages = [Message("user", load("litellm-token-counter")["request"]["body"]["messages"][0]
                        ["content"])]
    assert real == 1471 and counter["count_source"] == "local_estimate"
    assert counter["total_tokens"] < real <= bound_messages(messages)


@pytest.mark.parametrize(("model", "word", "said"), [
    ("local", "ok", "LiteLLM's check: 1 of 1 backend answered"),
    ("dead", "down", "LiteLLM's check: no backend answered — litellm.InternalServerError")])
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_health_behind_litellm_is_its_check_of_the_backend(
        paths: Paths, monkeypatch: pytest.MonkeyPatch, kind: str, model: str, word: str,
        said: str) -> None:
    """The proxy lists `dead` although its backend is down: the listing says nothing of it;
    LiteLLM's /health (a real call) does, and the check is named."""
    from tests.support.captures import health_server

    monkeypatch.setenv("GATEWAY_KEY", KEY)
    with health_server(model) as server:
        for setting, check, expected in (("auto", "gateway", word), ("list", "list", "listed")):
            provider = create_provider("gw", gateway(server.url, kind, model,
                                                     health_check=setting), paths)
            try:
                health = await provider.health()
            finally:
                await provider.aclose()
            assert (health.word, health.check) == (expected, check)
            if check == "gateway":
                assert health.detail.startswith(said) and "\n" not in health.detail
                assert "Traceback" not in health.detail


async def test_the_server_s_stop_reason_wins_for_a_whole_sentence_past_max_tokens(
        paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    events = await replay("litellm-anthropic-small-limit", paths, monkeypatch)
    assert answer(events) == "The capital of France is Paris."
    usage = next(e for e in events if isinstance(e, Usage))
    assert usage.completion_tokens == 8 > 5  # max_tokens 5 was not passed on
    assert events[-1] == Done("stop")


async def test_no_python_object_repr_reaches_the_error_line(
        paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = "".join(load("litellm-anthropic-backend-down")["response"]["chunks"])
    assert "ssl:<ssl.SSLContext object at 0x" in raw  # what LiteLLM relayed
    with pytest.raises(ServerError) as caught:
        await replay("litellm-anthropic-backend-down", paths, monkeypatch)
    assert " at 0x" not in str(caught.value) and "Cannot connect to host" in str(caught.value)


@pytest.mark.parametrize(("kind", "capture", "base", "hint"), [
    ("anthropic", "litellm-anthropic-v1-doubled", "/v1",
     "an anthropic provider's base_url is the server's root, without /v1"),
    ("openai", "litellm-openai-wrong-prefix", "/api",
     "an openai provider's base_url ends where the API's paths begin, most often in /v1")])
async def test_a_wrong_base_url_gets_the_hint_in_the_answer_and_in_health(
        paths: Paths, monkeypatch: pytest.MonkeyPatch, kind: str, capture: str, base: str,
        hint: str) -> None:
    monkeypatch.setenv("GATEWAY_KEY", KEY)
    with capture_server(capture, "litellm-openai-wrong-prefix-models") as server:
        config = ProviderConfig(kind=kind, model="local", base_url=server.url + base,
                                api_key_env="GATEWAY_KEY")
        provider = create_provider("gw", config, paths)
        try:
            with pytest.raises(RequestError) as caught:
                [e async for e in provider.stream(StreamRequest.of("x"))]
            health = await provider.health()
        finally:
            await provider.aclose()
    for line in (str(caught.value), health.detail):
        assert "HTTP 404" in line and hint in line and "\n" not in line
    assert not health.ok


@pytest.mark.parametrize(("kind", "capture", "pasted", "fixed"), [
    ("openai", "litellm-openai-pasted-endpoint", "/v1/chat/completions", "/v1"),
    ("anthropic", "litellm-anthropic-pasted-endpoint", "/v1/messages", "")])
async def test_a_pasted_endpoint_gets_the_base_url_to_set(
        paths: Paths, monkeypatch: pytest.MonkeyPatch, kind: str, capture: str, pasted: str,
        fixed: str) -> None:
    """`base_url = ".../v1/chat/completions"`: the 404 names the URL asked and the base_url
    that works, in one line, for both kinds."""
    monkeypatch.setenv("GATEWAY_KEY", KEY)
    with capture_server(capture) as server:
        provider = create_provider("gw", ProviderConfig(
            kind=kind, model="local", base_url=server.url + pasted,
            api_key_env="GATEWAY_KEY"), paths)
        try:
            with pytest.raises(RequestError) as caught:
                [e async for e in provider.stream(StreamRequest.of("x"))]
        finally:
            await provider.aclose()
    line = str(caught.value)
    assert "HTTP 404" in line and "\n" not in line
    assert f"detektiv asked {server.url}{pasted}" in line
    assert f'base_url = "{server.url}{fixed}"' in line


async def test_the_openai_route_counts_no_schema_in_its_usage(
        paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM passes a schema on to llama.cpp as a grammar: the recorded structured request
    reports the same prompt tokens as the plain one (38), so the openai kind adds no schema
    text to what a reply's count is measured against; the anthropic kind writes it into the
    system prompt, which the count then holds."""
    monkeypatch.setenv("GATEWAY_KEY", KEY)
    body = load("litellm-openai-schema")["request"]["body"]
    schema = body["response_format"]["json_schema"]["schema"]
    with capture_server("litellm-openai-schema") as server:
        provider = create_provider("gw", ProviderConfig(
            kind="openai", model="local", base_url=server.url + "/v1",
            api_key_env="GATEWAY_KEY"), paths)
        try:
            events = [e async for e in provider.stream(StreamRequest.of(
                body["messages"][0]["content"], max_tokens=40, schema=schema))]
        finally:
            await provider.aclose()
    usage = next(e for e in events if isinstance(e, Usage))
    plain = load("litellm-openai-stream")
    assert usage.prompt_tokens == 38 and "usage" in "".join(plain["response"]["chunks"])
    assert provider.schema_prompt(schema) == ""
    anthropic = create_provider("gwa", ProviderConfig(kind="anthropic", model="local",
                                                      base_url="http://127.0.0.1:9"), paths)
    assert json.dumps(schema, indent=2) in anthropic.schema_prompt(schema)


async def test_a_gateway_s_window_holds_after_its_health_was_checked(paths: Paths) -> None:
    """The health check asks the window first and learns the server is no llama.cpp: the
    window asked after it is still the gateway's (it was the kind's 8,192 default), and says
    where it was read."""
    from engine.context.windows import window_of

    with capture_server("litellm-v1-models", "litellm-model-info",
                        "litellm-health-local") as server:
        provider = create_provider("gw", ProviderConfig(
            kind="openai", model="sized", base_url=server.url + "/v1", api_key=KEY), paths)
        try:
            await provider.health()
            window = await window_of(provider)
        finally:
            await provider.aclose()
    assert (window.tokens, window.source, window.describe()) == (1024, "server", "/model/info")
