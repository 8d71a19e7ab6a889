"""The anthropic kind against a loopback server speaking the Messages API's documented SSE
sequence: message_start, content_block_start, ping, content_block_delta…, content_block_stop,
message_delta, message_stop; errors as `{"type":"error","error":{"type","message"}}`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from engine import (
    AuthError,
    BadResponseError,
    Paths,
    ProviderConfig,
    ProviderConnectionError,
    RateLimitedError,
    RequestError,
    ServerError,
)
from engine.providers import Done, Message, StreamRequest, TokenDelta, Usage, create_provider
from engine.routing.structured import complete_json
from tests.support.wire import CUT, DROP, Recorded, Reply, WireServer, json_reply

KEY = "sk-ant-api03-TESTKEY-abcdefghijklmnopqrstuvwxyz0123456789"


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def message_stream(texts: list[str], stop_reason: str = "end_turn", pause: float = 0.0,
                   ) -> Iterator[Any]:
    yield sse("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": "claude-test", "stop_reason": None,
        "usage": {"input_tokens": 12, "output_tokens": 1}}})
    yield sse("content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}})
    yield sse("ping", {"type": "ping"})
    for text in texts:
        yield sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": text}})
        if pause:
            yield pause
    yield sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield sse("message_delta", {"type": "message_delta",
                                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                "usage": {"output_tokens": len(texts)}})
    yield sse("message_stop", {"type": "message_stop"})


def streaming(body: Iterator[Any]) -> Reply:
    return Reply(200, {"content-type": "text/event-stream"}, body)


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, home: object) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def make(server: WireServer, paths: Paths, **extra: Any) -> Any:
    config = ProviderConfig(kind="anthropic", model="claude-test", base_url=server.url,
                            api_key_env="ANTHROPIC_API_KEY", **extra)
    return create_provider("claude", config, paths)


async def collect(provider: Any, request: StreamRequest) -> list[Any]:
    return [event async for event in provider.stream(request)]


async def test_streams_text_usage_and_done(env: None, paths: Paths) -> None:
    with WireServer({"POST /v1/messages": lambda r: streaming(message_stream(["Hel", "lo"]))}) \
            as server:
        request = StreamRequest(
            messages=(Message("system", "Be brief."), Message("user", "Say hello.")),
            max_tokens=50,
            temperature=0.2,
        )
        events = await collect(make(server, paths), request)
    assert events == [TokenDelta("Hel"), TokenDelta("lo"), Usage(12, 2), Done("stop")]
    sent = server.requests[0]
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    body = sent.json()
    assert body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": "Say hello."}]
    assert body["stream"] is True and body["max_tokens"] == 50 and body["temperature"] == 0.2


async def test_first_delta_arrives_before_the_stream_ends(env: None, paths: Paths) -> None:
    route = {"POST /v1/messages": lambda r: streaming(message_stream(["a", "b", "c"], pause=0.3))}
    with WireServer(route) as server:
        start = time.perf_counter()
        arrivals = [(time.perf_counter() - start, e)
                    async for e in make(server, paths).stream(StreamRequest.of("x"))]
    first = next(t for t, e in arrivals if isinstance(e, TokenDelta))
    assert first < 0.25 and arrivals[-1][0] > 0.8


async def test_max_tokens_stop_reason_is_length(env: None, paths: Paths) -> None:
    route = {"POST /v1/messages": lambda r: streaming(message_stream(["a"], "max_tokens"))}
    with WireServer(route) as server:
        events = await collect(make(server, paths), StreamRequest.of("x", max_tokens=1))
    assert events[-1] == Done("length")


async def test_structured_output_by_instructions_and_validation(env: None, paths: Paths) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    answers = iter([['```json\n{"n": ', '4}\n```'], ['{"n": "four"}']])
    route = {"POST /v1/messages": lambda r: streaming(message_stream(next(answers)))}
    with WireServer(route) as server:
        provider = make(server, paths)
        assert await complete_json(provider, StreamRequest.of("2+2?", schema=schema)) == {"n": 4}
        with pytest.raises(BadResponseError, match="does not match the schema at n"):
            await complete_json(provider, StreamRequest.of("2+2?", schema=schema))
    system = server.requests[0].json()["system"]
    assert '"required": [\n    "n"\n  ]' in system and "JSON" in system


@pytest.mark.parametrize(
    ("status", "kind", "error", "headers"),
    [
        (401, "authentication_error", AuthError, {}),
        (403, "permission_error", AuthError, {}),
        (404, "not_found_error", RequestError, {}),
        (429, "rate_limit_error", RateLimitedError, {"retry-after": "7"}),
        (500, "api_error", ServerError, {}),
        (529, "overloaded_error", ServerError, {}),
    ],
)
async def test_http_errors(env: None, paths: Paths, status: int, kind: str,
                           error: type[Exception], headers: dict[str, str]) -> None:
    route = {"POST /v1/messages": lambda r: json_reply(error_body(kind, f"{kind} says no"),
                                                        status, headers)}
    with WireServer(route) as server, pytest.raises(error) as caught:
        await collect(make(server, paths), StreamRequest.of("x"))
    assert f"{kind} says no" in str(caught.value)
    if status == 429:
        assert caught.value.retry_after == 7.0  # type: ignore[attr-defined]


async def test_error_event_mid_stream(env: None, paths: Paths) -> None:
    def body() -> Iterator[Any]:
        yield from list(message_stream(["partial"]))[:4]
        yield sse("error", error_body("overloaded_error", "Overloaded"))
    with WireServer({"POST /v1/messages": lambda r: streaming(body())}) as server:
        with pytest.raises(ServerError, match="overloaded_error: Overloaded"):
            await collect(make(server, paths), StreamRequest.of("x"))


async def test_connection_cut_mid_stream(env: None, paths: Paths) -> None:
    def body() -> Iterator[Any]:
        yield from list(message_stream(["partial"]))[:4]
        yield CUT
    with WireServer({"POST /v1/messages": lambda r: streaming(body())}) as server:
        with pytest.raises(ProviderConnectionError):
            await collect(make(server, paths), StreamRequest.of("x"))


async def test_stream_that_ends_without_message_stop(env: None, paths: Paths) -> None:
    truncated = list(message_stream(["a"]))[:4]
    with WireServer({"POST /v1/messages": lambda r: streaming(iter(truncated))}) as server:
        with pytest.raises(ProviderConnectionError, match="ended before the model finished"):
            await collect(make(server, paths), StreamRequest.of("x"))


async def test_malformed_event(env: None, paths: Paths) -> None:
    def body() -> Iterator[Any]:
        yield from list(message_stream(["a"]))[:2]
        yield b"event: content_block_delta\ndata: {not json\n\n"
    with WireServer({"POST /v1/messages": lambda r: streaming(body())}) as server:
        with pytest.raises(BadResponseError, match="malformed content_block_delta"):
            await collect(make(server, paths), StreamRequest.of("x"))


async def test_missing_key_names_the_variable(home: object, paths: Paths) -> None:
    with WireServer({}) as server:
        provider = create_provider(
            "claude", ProviderConfig(kind="anthropic", model="m"), paths
        )
        with pytest.raises(AuthError, match="ANTHROPIC_API_KEY"):
            await collect(provider, StreamRequest.of("x"))
        assert server.requests == []


async def test_env_key_is_not_sent_to_a_custom_base_url_unasked(env: None, paths: Paths) -> None:
    route = {"POST /v1/messages": lambda r: streaming(message_stream(["a"]))}
    with WireServer(route) as server:
        config = ProviderConfig(kind="anthropic", model="m", base_url=server.url)
        await collect(create_provider("proxy", config, paths), StreamRequest.of("x"))
    assert "x-api-key" not in server.requests[0].headers


async def test_echoed_key_never_reaches_the_error(env: None, paths: Paths) -> None:
    def echo(request: Recorded) -> Reply:
        key = request.headers["x-api-key"]
        return json_reply(error_body("authentication_error", f"invalid x-api-key {key}"), 401)
    with WireServer({"POST /v1/messages": echo, "GET /v1/models": echo}) as server:
        provider = make(server, paths)
        with pytest.raises(AuthError) as caught:
            await collect(provider, StreamRequest.of("x"))
        health = await provider.health()
    assert KEY not in str(caught.value) and "[redacted]" in str(caught.value)
    assert not health.ok and KEY not in health.detail


async def test_health_lists_models(env: None, paths: Paths) -> None:
    models = {"data": [{"id": "claude-a", "type": "model"}, {"id": "claude-test", "type": "model"}]}
    with WireServer({"GET /v1/models": lambda r: json_reply(models)}) as server:
        health = await make(server, paths).health()
    assert health.ok and health.detail == "2 models listed"


async def test_key_command_runs_once_per_provider(home: object, paths: Paths,
                                                  tmp_path: Any) -> None:
    counter = tmp_path / "runs"
    command = f"echo run >> {counter}; echo sk-ant-from-command-0123456789"
    route = {"POST /v1/messages": lambda r: streaming(message_stream(["a"]))}
    with WireServer(route) as server:
        config = ProviderConfig(kind="anthropic", model="m", base_url=server.url,
                                api_key_cmd=command)
        provider = create_provider("claude", config, paths)
        for _ in range(3):
            await collect(provider, StreamRequest.of("x"))
    assert [r.headers["x-api-key"] for r in server.requests] == [
        "sk-ant-from-command-0123456789"] * 3
    assert counter.read_text().count("run") == 1


async def test_a_dropped_connection_is_retried_once(env: None, paths: Paths) -> None:
    replies = iter([DROP, streaming(message_stream(["ok"]))])
    with WireServer({"POST /v1/messages": lambda r: next(replies)}) as server:
        events = await collect(make(server, paths), StreamRequest.of("x"))
    assert events[0] == TokenDelta("ok") and len(server.requests) == 2
    replies = iter([DROP, DROP])
    with WireServer({"POST /v1/messages": lambda r: next(replies)}) as server:
        with pytest.raises(ProviderConnectionError):
            await collect(make(server, paths), StreamRequest.of("x"))
    assert len(server.requests) == 2


def _gatewayed(body: Iterator[Any]) -> Iterator[Any]:
    """`body` as a gateway may send it: every event named only by its data's `type`."""
    for piece in body:
        yield b"data: " + piece.split(b"data: ", 1)[1] if isinstance(piece, bytes) else piece


async def test_events_named_only_in_their_data_are_read(env: None, paths: Paths) -> None:
    route = {"POST /v1/messages": lambda r: streaming(_gatewayed(message_stream(["Hel", "lo"])))}
    with WireServer(route) as server:
        events = await collect(make(server, paths), StreamRequest.of("Hi"))
    assert [e.text for e in events if isinstance(e, TokenDelta)] == ["Hel", "lo"]
    assert events[-1] == Done("stop")


async def test_a_block_started_with_text_keeps_it(env: None, paths: Paths) -> None:
    def body() -> Iterator[Any]:
        for piece in message_stream(["there"]):
            yield piece.replace(b'"content_block": {"type": "text", "text": ""}',
                                b'"content_block": {"type": "text", "text": "Hi "}')

    with WireServer({"POST /v1/messages": lambda r: streaming(body())}) as server:
        events = await collect(make(server, paths), StreamRequest.of("Hi"))
    assert "".join(e.text for e in events if isinstance(e, TokenDelta)) == "Hi there"


async def test_a_paused_turn_is_a_cut_answer(env: None, paths: Paths) -> None:
    """`pause_turn`: the API paused a long turn mid-way; the answer is not whole."""
    route = {"POST /v1/messages": lambda r: streaming(message_stream(["Hal"], "pause_turn"))}
    with WireServer(route) as server:
        events = await collect(make(server, paths), StreamRequest.of("Hi"))
    assert events[-1] == Done("length")


async def test_an_event_that_is_no_object_is_named(env: None, paths: Paths) -> None:
    def body() -> Iterator[Any]:
        pieces = list(message_stream(["Hi"]))
        yield from pieces[:3]
        yield b"event: content_block_delta\ndata: [1]\n\n"
        yield from pieces[3:]

    with WireServer({"POST /v1/messages": lambda r: streaming(body())}) as server:
        with pytest.raises(BadResponseError, match="not an object"):
            await collect(make(server, paths), StreamRequest.of("Hi"))


@pytest.mark.parametrize(("error", "raised", "says"), [
    ({"type": "rate_limit_error", "message": "Slow down"}, RateLimitedError, "Slow down"),
    ({"type": "overloaded_error", "message": "Overloaded"}, ServerError, "Overloaded"),
    ("a gateway's own words", ServerError, "a gateway's own words"),
])
async def test_an_error_with_status_200_is_the_error_it_names(
        env: None, paths: Paths, error: object, raised: type[Exception], says: str) -> None:
    """A whole error body with status 200, or an error event of a gateway's own shape: the
    error it names (a rate limit waits), never a "bad response" or an internal error."""
    body = json.dumps({"type": "error", "error": error}).encode()
    whole = Reply(200, {"content-type": "application/json"}, [body])
    event = streaming(iter([sse("error", {"type": "error", "error": error})]))
    for reply in (whole, event):
        with WireServer({"POST /v1/messages": lambda r, reply=reply: reply}) as server:
            with pytest.raises(raised, match=says):
                await collect(make(server, paths), StreamRequest.of("Hi"))


@pytest.mark.parametrize(("stop_reason", "outputs", "limit", "expected"), [
    ("end_turn", ["a", "b", "c"], 2, "stop"),   # the server's word wins over the count
    ("max_tokens", ["a"], 5, "length"),         # and the other way round
    (None, ["a", "b"], 2, "length"),            # it says nothing: the count decides
    (None, ["a"], 5, "stop"),
])
async def test_the_stop_reason_is_the_server_s_where_it_gives_one(
        env: None, paths: Paths, stop_reason: str | None, outputs: list[str], limit: int,
        expected: str) -> None:
    def body() -> Iterator[Any]:
        for piece in message_stream(outputs, stop_reason or "end_turn"):
            if stop_reason is None:
                piece = piece.replace(b'"stop_reason": "end_turn"', b'"stop_reason": null')
            yield piece

    with WireServer({"POST /v1/messages": lambda r: streaming(body())}) as server:
        events = await collect(make(server, paths), StreamRequest.of("x", max_tokens=limit))
    assert events[-1] == Done(expected)
