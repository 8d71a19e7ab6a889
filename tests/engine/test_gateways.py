"""What gateways (LiteLLM's proxy, openai-forward, OpenRouter) and servers' own quirks do to
the wire, each on a loopback server speaking it: usage reported late or in cache fields, a
stop reason that hides a cut, window errors in every server's words and over several lines,
what a failed call had streamed, a misspelt model, an anthropic URL with `/v1`, a port a
gateway's connection kept in TIME_WAIT."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from engine import Paths, ProviderConfig
from engine.config.models import Config, Price
from engine.context.windows import window_of
from engine.costs import call_cost
from engine.errors import ContextOverflowError, RequestError, is_context_overflow, overflow_window
from engine.interrogation.calls import count_tokens
from engine.models.usage import TokenTally
from engine.providers import Done, Message, StreamRequest, TokenDelta, Usage, create_provider
from engine.providers._http import error_for_status
from engine.routing.collect import Reply as Collected
from engine.routing.events import Attempt, PartialDiscarded
from engine.routing.router import Router
from engine.workspace.models import _port_free
from tests.support.wire import Reply, WireServer, json_reply

KEY = "sk-ant-gateway-key-0123456789abcdef"


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def anthropic_stream(texts: list[str], start_usage: dict[str, int],
                     end_usage: dict[str, int], stop: str = "end_turn") -> Iterator[bytes]:
    yield sse("message_start", {"type": "message_start", "message": {
        "id": "m", "type": "message", "role": "assistant", "content": [], "model": "c",
        "usage": start_usage}})
    yield sse("content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}})
    for text in texts:
        yield sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": text}})
    yield sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                                "usage": end_usage})
    yield sse("message_stop", {"type": "message_stop"})


def streaming(body: Iterator[bytes]) -> Reply:
    return Reply(200, {"content-type": "text/event-stream"}, body)


async def anthropic_events(paths: Paths, monkeypatch: pytest.MonkeyPatch, body: Iterator[bytes],
                           request: StreamRequest) -> list[Any]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with WireServer({"POST /v1/messages": lambda r: streaming(body)}) as server:
        provider = create_provider("gw", ProviderConfig(
            kind="anthropic", model="c", base_url=server.url, api_key_env="ANTHROPIC_API_KEY"),
            paths)
        return [event async for event in provider.stream(request)]


# 1. usage where each wire puts it --------------------------------------------------------

async def test_litellm_s_late_input_count_is_the_one_kept(paths: Paths,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    body = anthropic_stream(["Hi."], {"input_tokens": 0, "output_tokens": 0},
                            {"input_tokens": 35, "output_tokens": 3})
    events = await anthropic_events(paths, monkeypatch, body, StreamRequest.of("x"))
    assert Usage(35, 3, cached_tokens=None, cache_write_tokens=None) in events


async def test_llama_cpp_s_cache_reads_count_as_prompt_tokens(
        paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    body = anthropic_stream(["Hi."], {"input_tokens": 1, "cache_read_input_tokens": 35,
                                      "output_tokens": 0},
                            {"output_tokens": 3})
    events = await anthropic_events(paths, monkeypatch, body, StreamRequest.of("x"))
    usage = next(e for e in events if isinstance(e, Usage))
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (36, 35, 3)


def test_cached_input_is_priced_at_its_own_rate() -> None:
    price = Price(input=3, output=15, cached_input=0.3, cache_write=3.75)
    assert call_cost(price, 1_000_000, 0, cached=1_000_000) == pytest.approx(0.3)
    assert call_cost(price, 1_000_000, 0, written=1_000_000) == pytest.approx(3.75)
    assert call_cost(Price(input=3, output=15), 1_000_000, 0, cached=1_000_000) == \
        pytest.approx(3.0)  # no cache price: input price


def test_a_session_tally_keeps_cached_and_reasoning_tokens_and_their_price() -> None:
    config = Config.model_validate({"prices": {"api": {"input": 2, "output": 8,
                                                       "cached_input": 0.5}}})
    reply = Collected()
    for event in (Attempt("api", "api:m"), TokenDelta("ok"),
                  Usage(1000, 100, cached_tokens=800, reasoning_tokens=60), Done("stop")):
        reply.take(event)
    tally = TokenTally()
    count_tokens(tally, reply, config)
    assert (tally.prompt, tally.cached, tally.completion, tally.reasoning) == (1000, 800, 100, 60)
    assert tally.cost == pytest.approx((200 * 2 + 800 * 0.5 + 100 * 8) / 1e6)
    assert not tally.estimated


# 2. the server's stop reason wins over counting output tokens ---------------------------

@pytest.mark.parametrize(("stop", "output", "finish"), [
    ("end_turn", 40, "stop"), ("end_turn", 2, "stop"), ("max_tokens", 40, "length")])
async def test_the_stop_reason_said_wins_over_the_output_count(
        paths: Paths, monkeypatch: pytest.MonkeyPatch, stop: str, output: int,
        finish: str) -> None:
    """A gateway that did not pass `max_tokens` on answers past it and says `end_turn` for a
    whole answer: 40 output tokens of 40 asked is not called cut when the server says the turn
    ended."""
    body = anthropic_stream(["The answer"], {"input_tokens": 9, "output_tokens": 1},
                            {"output_tokens": output}, stop)
    events = await anthropic_events(paths, monkeypatch, body,
                                    StreamRequest.of("x", max_tokens=40))
    assert events[-1] == Done(finish)


# 3. the window in every server's words, learned for the rest of the run ------------------

LITELLM = (
    "litellm.ContextWindowExceededError: litellm.BadRequestError: OpenAIException - Error "
    "code: 400 - {'error': {'code': 400, 'message': 'request (18023 tokens) exceeds the "
    "available context size (8192 tokens), try increasing it', 'type': "
    "'exceed_context_size_error', 'n_prompt_tokens': 18023, 'n_ctx': 8192}}\n"
    "model=local. context_window_fallbacks=None. fallbacks=None.\n\n"
    "Set 'context_window_fallback' - https://docs.litellm.ai/docs/routing#fallbacks\n"
    "Received Model Group=local\nAvailable Model Group Fallbacks=None")

WINDOW_MESSAGES = [
    ("litellm", LITELLM, 8192),
    ("vllm", "This model's maximum context length is 4096 tokens. However, your request has "
             "5130 input tokens. Please reduce the length of the input messages.", 4096),
    ("vllm-max-tokens", "'max_tokens' or 'max_completion_tokens' is too large: 1024. This "
                        "model's maximum context length is 4096 tokens and your request has "
                        "3500 input tokens (1024 > 4096 - 3500).", 4096),
    ("llama.cpp", "request (9000 tokens) exceeds the available context size (8192 tokens), "
                  "try increasing it", 8192),
    ("llama.cpp-old", "the request exceeds the available context size, try increasing it",
     None),
    ("ollama", "prompt too long; exceeded max context length by 118 tokens", None),
    ("openai", "This model's maximum context length is 128000 tokens. However, your messages "
               "resulted in 130512 tokens. Please reduce the length of the messages.", 128000),
    ("anthropic", "prompt is too long: 208310 tokens > 200000 maximum", 200000),
    ("anthropic-max-tokens", "input length and `max_tokens` exceed context limit: 188240 + "
                             "21333 > 200000, decrease input length or `max_tokens` and try "
                             "again", 200000),
    ("gemini", "The input token count (1290000) exceeds the maximum number of tokens allowed "
               "(1048576).", 1048576),
]


@pytest.mark.parametrize(("server", "message", "window"), WINDOW_MESSAGES,
                         ids=[m[0] for m in WINDOW_MESSAGES])
def test_every_server_s_window_error_is_recognised(server: str, message: str,
                                                   window: int | None) -> None:
    assert is_context_overflow(message)
    assert overflow_window(message) == window
    error = error_for_status("gw", 400, message)
    assert isinstance(error, ContextOverflowError) and error.window == window


def test_an_ordinary_bad_request_is_not_an_overflow() -> None:
    assert not is_context_overflow("Invalid model name passed in model=gpt-4o-mni")
    assert not isinstance(error_for_status("gw", 400, "unknown parameter: foo"),
                          ContextOverflowError)


async def test_a_window_a_gateway_names_is_learned_for_the_rest_of_the_run(
        paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    """An anthropic provider assumes 200,000 tokens; the 8k model behind LiteLLM refuses the
    first prompt (the whole LiteLLM message, over several lines); it is fitted to 8,192 and
    sent again, and every later call is fitted to 8,192 at once."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    calls: list[int] = []

    def messages(recorded: Any) -> Reply:
        body = recorded.json()
        calls.append(body["max_tokens"])
        if len(calls) == 1:
            return json_reply({"error": {"message": LITELLM, "type": None, "param": None,
                                         "code": "400"}}, 400)
        return streaming(anthropic_stream(["ok"], {"input_tokens": 5, "output_tokens": 1},
                                          {"output_tokens": 1}))

    with WireServer({"POST /v1/messages": messages}) as server:
        config = Config.model_validate({"providers": {"gw": {
            "kind": "anthropic", "model": "local", "base_url": server.url,
            "api_key_env": "ANTHROPIC_API_KEY", "priority": 1}}})
        router = Router(config, paths)
        try:
            first = await router.complete(StreamRequest.of("x", max_tokens=50_000))
            second = await router.complete(StreamRequest.of("y", max_tokens=50_000))
            window = await window_of(router.providers["gw"])
        finally:
            await router.aclose()
    assert first.text == second.text == "ok"
    assert len(calls) == 3 and calls[0] == 50_000  # one refusal, then two fitted calls
    assert calls[1] < 8192 and calls[2] < 8192
    assert window.tokens == 8192


# 4. what a failed call streamed is counted ------------------------------------------------

def test_what_a_call_streamed_before_it_failed_is_counted_and_priced() -> None:
    config = Config.model_validate({"prices": {"api": {"input": 1, "output": 10}}})
    reply = Collected()
    for event in (Attempt("api", "api:m"), TokenDelta("x" * 3328),
                  PartialDiscarded("api", "x" * 3328, "no token for 15 s")):
        reply.take(event)
    tally = TokenTally()
    count_tokens(tally, reply, config)
    assert tally.completion == 832 and tally.estimated
    assert tally.cost == pytest.approx(832 * 10 / 1e6)


# 6. several lines from a gateway: one is shown, all are logged ------------------------------

def test_a_message_of_several_lines_shows_its_first_and_logs_the_rest(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        error = error_for_status("gw", 400, "Invalid model name passed in model=x\n"
                                 "Traceback (most recent call last):\n  File \"proxy.py\"")
    assert "\n" not in str(error) and "Traceback" not in str(error)
    assert str(error).startswith("gw: HTTP 400: Invalid model name passed in model=x")
    assert "whole message is in the log" in str(error)
    assert "Traceback (most recent call last)" in caplog.text


# 7. the configured model among those listed ------------------------------------------------

@pytest.mark.parametrize(("listed", "model", "ok"), [
    (["gpt-4o", "gpt-4o-mini"], "gpt-4o-mni", False),
    (["gpt-4o", "gpt-4o-mini"], "gpt-4o-mini", True),
    (["models/gemini-2.5-flash"], "gemini-2.5-flash", True),
    (["qwen3:latest"], "qwen3", True),
])
async def test_health_says_when_the_model_is_not_listed(paths: Paths, listed: list[str],
                                                        model: str, ok: bool) -> None:
    data = {"object": "list", "data": [{"id": n, "object": "model", "created": 0,
                                        "owned_by": "x"} for n in listed]}
    with WireServer({"GET /v1/models": lambda r: json_reply(data)}) as server:
        provider = create_provider("gw", ProviderConfig(kind="openai", model=model,
                                                        base_url=server.url + "/v1"), paths)
        health = await provider.health()
        await provider.aclose()
    assert health.ok is ok, health.detail
    if not ok:
        assert f"model {model!r} is not among the 2 the server lists" in health.detail


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize(("body", "says"), [
    (b'[{"id": "m"}]', "the model list is not a JSON object"),
    (b"<html>models</html>", "the model list is not a JSON object"),
    (b'{"data": null}', "0 models listed"),
    (b'{"data": [{"id": "m"}, {"id": 7}, "x"]}', "1 model listed"),
])
async def test_a_model_list_is_read_alike_by_each_provider(
        paths: Paths, monkeypatch: pytest.MonkeyPatch, kind: str, body: bytes,
        says: str) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    routes = {"GET /v1/models": lambda r: Reply(200, {"content-type": "application/json"},
                                                [body]),
              "POST /v1/messages/count_tokens": lambda r: json_reply({"input_tokens": 1}),
              "GET /model/info": lambda r: json_reply({"error": "no"}, 404)}
    with WireServer(routes) as server:
        base = server.url + ("/v1" if kind == "openai" else "")
        env = "ANTHROPIC_API_KEY" if kind == "anthropic" else None
        provider = create_provider("p", ProviderConfig(kind=kind, model="m", base_url=base,
                                                       api_key_env=env), paths)
        health = await provider.health()
        await provider.aclose()
    assert health.ok is says.endswith("listed"), health.detail
    assert says in health.detail, health.detail


async def test_llama_cpp_serves_its_one_model_whatever_it_is_called(
        paths: Paths) -> None:
    data = {"object": "list", "data": [{"id": "qwen.gguf", "object": "model"}]}
    routes = {"GET /v1/models": lambda r: json_reply(data),
              "GET /props": lambda r: json_reply({"default_generation_settings":
                                                  {"n_ctx": 4096}})}
    with WireServer(routes) as server:
        provider = create_provider("gw", ProviderConfig(kind="openai", model="anything",
                                                        base_url=server.url + "/v1"), paths)
        health = await provider.health()
        await provider.aclose()
    assert health.ok and health.detail == "1 model listed"


# 8. an anthropic base_url with /v1 ---------------------------------------------------------

async def test_an_anthropic_url_with_v1_says_what_it_should_be(
        paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with WireServer({}) as server:  # every path is a 404
        provider = create_provider("gw", ProviderConfig(
            kind="anthropic", model="c", base_url=server.url + "/v1",
            api_key_env="ANTHROPIC_API_KEY"), paths)
        with pytest.raises(RequestError) as caught:
            [e async for e in provider.stream(StreamRequest.of("x"))]
    message = str(caught.value)
    assert "HTTP 404" in message and "/v1/v1/messages" in message
    assert f'without /v1 (base_url = "{server.url}")' in message


# 9. a port in TIME_WAIT is free to a server that binds as llama.cpp does -----------------

def test_a_port_whose_connections_wait_out_time_wait_is_free() -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # the server side closes first: its end waits in TIME_WAIT
    client.recv(1)
    client.close()
    listener.close()
    with socket.socket() as plain:  # what the old check did
        with pytest.raises(OSError):
            plain.bind(("127.0.0.1", port))
    assert _port_free(port)


def test_the_usage_line_says_what_was_cached_and_what_was_thought() -> None:
    from engine.costs import usage_line

    tally = TokenTally(prompt=1000, completion=100, cached=800, reasoning=60)
    assert usage_line(tally) == ("1,000 tokens in (800 cached), 100 out (60 reasoning) · "
                                 "cost $0.00")
    assert usage_line(TokenTally(prompt=5, completion=2)) == "5 tokens in, 2 out · cost $0.00"


@pytest.mark.parametrize(("error", "kind", "shown"), [
    ({"message": "Rate limit exceeded: free-models-per-min", "code": 429}, "RateLimitedError",
     "Rate limit exceeded"),
    ({"message": "litellm.APIConnectionError: Connection error.", "code": "500"}, "ServerError",
     "litellm.APIConnectionError"),
    ({"message": "upstream went away", "code": "upstream_error"}, "ServerError",
     "upstream went away"),
])
async def test_an_error_inside_a_stream_is_named_by_its_code(
        paths: Paths, error: dict[str, Any], kind: str, shown: str) -> None:
    """OpenRouter, vLLM and LiteLLM's proxy send `{"error": …}` as an event after the stream
    began (status 200): its `code`, when it is a status, says what kind of failure it is."""
    from engine.errors import ProviderError

    def body() -> Iterator[bytes]:
        yield b'data: {"choices": [{"index": 0, "delta": {"content": "Once"}}]}\n\n'
        yield f"data: {json.dumps({'error': error})}\n\n".encode()

    with WireServer({"POST /v1/chat/completions": lambda _: streaming(body())}) as server:
        provider = create_provider("gw", ProviderConfig(
            kind="openai", model="m", base_url=server.url + "/v1"), paths)
        try:
            with pytest.raises(ProviderError) as caught:
                async for _ in provider.stream(StreamRequest.of("q")):
                    pass
        finally:
            await provider.aclose()
    assert type(caught.value).__name__ == kind and shown in str(caught.value)


# 10. a window LiteLLM does not know: its llama.cpp backend's, on the same host ---------------

@pytest.mark.parametrize(("backend", "expected"), [("loopback", 2048), ("elsewhere", None)])
async def test_a_window_litellm_does_not_know_is_asked_of_its_backend_on_this_host(
        paths: Paths, monkeypatch: pytest.MonkeyPatch, backend: str,
        expected: int | None) -> None:
    """LiteLLM's /model/info says `max_input_tokens: null` for a model its cost map lacks
    (`openai/…` at a llama.cpp server): the backend it names is asked for its slot's window,
    with no key, when it is on loopback or the gateway's host; a backend elsewhere is not
    contacted (`.invalid` never resolves: asking it would fail the test)."""
    asked: list[str] = []

    def props(_: object) -> Reply:
        asked.append("props")
        return json_reply({"default_generation_settings": {"n_ctx": 2048}})

    with WireServer({"GET /props": props}) as llama:
        base = llama.url + "/v1" if backend == "loopback" else "http://backend.invalid/v1"
        info = {"data": [{"model_name": "m", "litellm_params": {"model": "openai/x",
                                                                 "api_base": base},
                          "model_info": {"max_input_tokens": None}}]}
        with WireServer({"GET /model/info": lambda r: json_reply(info),
                         "GET /v1/models": lambda r: json_reply({"data": [{"id": "m"}]})}) as gw:
            monkeypatch.setenv("GW_KEY", KEY)
            provider = create_provider("gw", ProviderConfig(
                kind="openai", model="m", base_url=gw.url + "/v1", api_key_env="GW_KEY"), paths)
            try:
                window = await provider.context_window()
            finally:
                await provider.aclose()
    assert window == expected
    assert asked == (["props"] if backend == "loopback" else [])
    if backend == "loopback":
        assert all("authorization" not in {k.lower() for k in r.headers}
                   for r in llama.requests)


@pytest.mark.parametrize(("routes", "expected"), [
    # OpenRouter lists `context_length` (and its top provider's)
    ({"GET /v1/models": {"data": [{"id": "m", "context_length": 131072}]}}, 131072),
    ({"GET /v1/models": {"data": [{"id": "m", "top_provider": {"context_length": 32768}}]}},
     32768),
    # vLLM lists `max_model_len`
    ({"GET /v1/models": {"data": [{"id": "other", "max_model_len": 4096},
                                  {"id": "m", "max_model_len": 16384}]}}, 16384),
    # Ollama's OpenAI-compatible route: its /api/show (the model's 8k, Ollama's 4k default)
    ({"GET /v1/models": {"data": [{"id": "m"}]},
      "POST /api/show": {"model_info": {"llama.context_length": 8192}}}, 4096),
    # a server that says nothing: the default stands
    ({"GET /v1/models": {"data": [{"id": "m"}]}}, None),
])
async def test_the_window_is_asked_of_whatever_server_is_in_front(
        paths: Paths, routes: dict[str, Any], expected: int | None) -> None:
    def answer(body: Any) -> Any:
        return lambda _: json_reply(body)

    served = {route: answer(body) for route, body in routes.items()}
    with WireServer(served) as server:
        provider = create_provider("srv", ProviderConfig(
            kind="openai", model="m", base_url=server.url + "/v1"), paths)
        try:
            assert await provider.context_window() == expected
        finally:
            await provider.aclose()


async def test_the_opt_in_probe_is_one_request_for_one_token(paths: Paths) -> None:
    from tests.support.scripted import ScriptedModel
    from tests.support.servers import closed_port

    with ScriptedModel(["OK"]) as model:
        provider = create_provider("p", model.provider_config(health_check="probe"), paths)
        try:
            health = await provider.health()
        finally:
            await provider.aclose()
        assert model.bodies and model.bodies[-1]["max_tokens"] == 1
    assert (health.ok, health.check, health.word) == (True, "probe", "ok")
    assert health.detail.startswith("answered a 1-token request")
    dead = create_provider("p", ProviderConfig(
        kind="openai", model="m", base_url=f"http://127.0.0.1:{closed_port()}/v1",
        health_check="probe"), paths)
    try:
        down = await dead.health()
    finally:
        await dead.aclose()
    assert (down.ok, down.check, down.word) == (False, "probe", "down")


# 6. a gateway in front of llama.cpp: its backend counts the prompts ------------------------

def _litellm_in_front_of(*backends: str) -> WireServer:
    """LiteLLM's `/model/info` as the proxy answers it for a model group `local` whose
    backends are `backends` (their `api_base`), the window not told to LiteLLM."""
    entries = [{"model_name": "local", "litellm_params": {"model": "openai/gemma",
                                                          "api_base": base},
                "model_info": {"max_input_tokens": None}} for base in backends]
    return WireServer({"GET /model/info": lambda _: json_reply({"data": entries})})


SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}},
          "required": ["answer"]}


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_gateway_in_front_of_llamacpp_has_its_prompts_counted_by_the_backend(
        kind: str, llama_server: Any, paths: Paths) -> None:
    """Through LiteLLM to a llama.cpp server, every prompt is counted exactly by the backend,
    as the server itself counts it (none bounded by earlier counts): on the anthropic route
    the schema it sends as text is counted in the system prompt, where the server reads it."""
    from engine.context.budget import fit

    direct = create_provider("direct", llama_server.provider_config(), paths)
    with _litellm_in_front_of(llama_server.url) as gateway:
        base = gateway.url + "/v1" if kind == "openai" else gateway.url
        config = ProviderConfig.model_validate(
            {"kind": kind, "model": "local", "base_url": base, "api_key": "sk-gw-0000"})
        provider = create_provider("gw", config, paths)
        # made later for the same configuration (another run in the process): the window
        # is known already, and its first prompt is counted all the same
        later = create_provider("gw", config, paths)
        request = StreamRequest(messages=(Message("system", "Answer in JSON."),
                                          Message("user", "Is water wet?")),
                                schema=SCHEMA, max_tokens=32)
        try:
            window = await window_of(provider)
            fits = [await fit(provider, request) for _ in range(3)]
            fits.append(await fit(later, request))
            read = provider.read_messages(request.messages, SCHEMA)
            expected = await direct.count_tokens(read)
        finally:
            await provider.aclose()
            await later.aclose()
            await direct.aclose()
    assert window.exact and window.every and window.tokens == 2048
    assert [f.report.counted for f in fits] == ["exact"] * 4
    assert expected is not None and all(f.report.used == expected for f in fits)
    schema_read = any(SCHEMA_TEXT in m.content for m in read)
    assert schema_read == (kind == "anthropic")


SCHEMA_TEXT = '"answer"'


async def test_a_model_group_with_a_backend_that_cannot_count_is_not_counted(
        llama_server: Any, paths: Paths) -> None:
    """A call may go to any backend of a model group: when one of them does not say what it
    is (here a server with no llama.cpp endpoints), no count is taken for the group."""
    with WireServer({}) as other, _litellm_in_front_of(llama_server.url, other.url) as gateway:
        provider = create_provider("gw", ProviderConfig.model_validate(
            {"kind": "openai", "model": "local", "base_url": gateway.url + "/v1",
             "api_key": "sk-gw-0000"}), paths)
        try:
            counted = await provider.count_tokens([Message("user", "ok")])
        finally:
            await provider.aclose()
    assert counted is None and not provider.counts_every_prompt
    # a backend is asked without the gateway's key
    assert other.requests and not any(
        {"authorization", "x-api-key"} & set(r.headers) for r in other.requests)
