"""What servers really send: each one's word for why it stopped, a stream framed every way
the SSE standard allows, an error sent as an `event: error`. Loopback servers speaking the
wire (`tests.support.wire`); the words and the checks that use them are pure logic."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from engine import (
    BadResponseError,
    Paths,
    ProviderConfig,
    ProviderConnectionError,
    ProviderError,
    RateLimitedError,
    ServerError,
)
from engine.interrogation.checks import answer_problem
from engine.providers import FILTERED, Done, StreamRequest, TokenDelta, create_provider
from engine.providers._reading import (
    stream_lines,
)
from engine.routing.structured import collect_json
from tests.engine.test_anthropic_wire import KEY, message_stream, streaming
from tests.support.servers import closed_port
from tests.support.wire import CUT, Reply, WireServer, chat, openai_behind


def _chunk(delta: dict[str, Any], finish: object = None) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _sse(*chunks: dict[str, Any], end: str = "\n\n", done: bool = True) -> list[bytes]:
    body = [f"data: {json.dumps(c)}{end}".encode() for c in chunks]
    return [*body, f"data: [DONE]{end}".encode()] if done else body


async def _events(body: list[bytes], paths: Paths) -> list[Any]:
    reply = Reply(200, {"content-type": "text/event-stream"}, body)
    async with openai_behind(chat(reply), paths) as provider:
        return [e async for e in provider.stream(StreamRequest.of("x"))]


def _text(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TokenDelta))


@pytest.mark.parametrize(("said", "meant"), [
    ("stop", "stop"), ("eos_token", "stop"), ("stop_sequence", "stop"), ("STOP", "stop"),
    ("length", "length"), ("model_length", "length"), ("max_tokens", "length"),
    ("MAX_TOKENS", "length"), ("content_filter", "content_filter"),
    ("SAFETY", "content_filter"), ("refusal", "content_filter"), ("tool_calls", "tool_calls"),
    ("something_new", "something_new"),
])
async def test_each_servers_word_for_why_it_stopped_is_ours(said: str, meant: str,
                                                           paths: Paths) -> None:
    """vLLM, TGI, Mistral, Gemini and gateways each name the end their way; a cut answer must
    read as cut whoever served it (Mistral's `model_length` used to pass for complete)."""
    events = await _events(_sse(_chunk({"content": "Yes."}), _chunk({}, said)), paths)
    assert _text(events) == "Yes." and events[-1] == Done(meant)


async def test_a_stream_ended_by_its_server_without_a_reason_stopped_there(
        paths: Paths) -> None:
    """Some OpenAI-compatible servers never name a finish reason: their `[DONE]` is the end.
    With neither, the stream was cut: a failure, never a short answer."""
    events = await _events(_sse(_chunk({"content": "Yes."})), paths)
    assert _text(events) == "Yes." and events[-1] == Done("stop")
    with pytest.raises(ProviderConnectionError, match="ended before the model finished"):
        await _events(_sse(_chunk({"content": "Half an"}), done=False), paths)


@pytest.mark.parametrize("said", ["abort", "error"])
async def test_an_aborted_generation_is_a_failure_never_a_short_answer(said: str,
                                                                      paths: Paths) -> None:
    with pytest.raises(ServerError, match=f"the server stopped the answer \\({said}\\)"):
        await _events(_sse(_chunk({"content": "Half an"}), _chunk({}, said)), paths)


@pytest.mark.parametrize(("framing", "body"), [
    ("CRLF line ends", _sse(_chunk({"content": "Hel"}), _chunk({"content": "lo"}, "stop"),
                            end="\r\n\r\n")),
    ("CR line ends", _sse(_chunk({"content": "Hel"}), _chunk({"content": "lo"}, "stop"),
                          end="\r\r")),
    ("a byte order mark first", [b"\xef\xbb\xbf" + _sse(_chunk({"content": "Hel"}))[0],
                                 *_sse(_chunk({"content": "lo"}, "stop"))]),
    ("no space after the colon, comments, ids and retry fields", [
        b": keep-alive\n\n", b"id: 1\nretry: 3000\n",
        f"data:{json.dumps(_chunk({'content': 'Hel'}))}\n\n".encode(), b": ping\n\n",
        f"id: 2\ndata:{json.dumps(_chunk({'content': 'lo'}, 'stop'))}\n\n".encode(),
        b"data:[DONE]\n\n"]),
    ("one chunk's JSON over two data lines", [
        b'data: {"id": "c", "object": "chat.completion.chunk",\n'
        b'data: "choices": [{"index": 0, "delta": {"content": "Hello"}, '
        b'"finish_reason": "stop"}]}\n\n', b"data: [DONE]\n\n"]),
    ("every event split across writes", [piece for chunk in _sse(
        _chunk({"content": "Hel"}), _chunk({"content": "lo"}, "stop"))
        for piece in (chunk[:7], chunk[7:20], chunk[20:])]),
    ("no [DONE] after the finish", _sse(_chunk({"content": "Hello"}, "stop"), done=False)),
])
async def test_every_framing_the_standard_allows_reads_the_same(framing: str,
                                                                body: list[bytes],
                                                                paths: Paths) -> None:
    events = await _events(body, paths)
    assert (_text(events), events[-1]) == ("Hello", Done("stop")), framing


async def test_an_error_event_is_the_error_it_names(paths: Paths) -> None:
    """`event: error` (some gateways), its data a line of text or an error object."""
    first = _sse(_chunk({"content": "Once"}), done=False)
    with pytest.raises(ServerError, match="upstream went away"):
        await _events([*first, b"event: error\ndata: upstream went away\n\n"], paths)
    limited = json.dumps({"message": "slow down", "code": 429})
    with pytest.raises(RateLimitedError, match="slow down"):
        await _events([*first, f"event: error\ndata: {limited}\n\n".encode()], paths)


async def test_anthropic_refusal_and_a_full_window_are_named(paths: Paths,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             home: object) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    for said, meant in (("refusal", "content_filter"),
                        ("model_context_window_exceeded", "length")):
        with WireServer({"POST /v1/messages": lambda _, s=said: streaming(
                message_stream(["I can"], stop_reason=s))}) as server:
            provider = create_provider("claude", ProviderConfig(
                kind="anthropic", model="claude-test", base_url=server.url,
                api_key_env="ANTHROPIC_API_KEY"), paths)
            try:
                events = [e async for e in provider.stream(StreamRequest.of("x"))]
            finally:
                await provider.aclose()
        assert events[-1] == Done(meant)


def test_a_filtered_answer_is_named_never_taken() -> None:
    """Testimony the provider's filter stopped is named as such; structured output it
    stopped is no answer, however much of the JSON came."""
    assert answer_problem("The suspect was at", "Where was he?", "content_filter") == FILTERED
    assert answer_problem("The suspect was at home.", "Where was he?", "stop") is None
    with pytest.raises(BadResponseError, match=FILTERED):
        collect_json("p", '{"verdict": "true"}', "content_filter",
                     {"type": "object", "properties": {"verdict": {"type": "string"}}})
    assert collect_json("p", '{"verdict": "true"}', "stop", {"type": "object"}) == {
        "verdict": "true"}


async def _lines(chunks: list[bytes]) -> list[str]:
    async def source() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
    return [line async for line in stream_lines("p", source())]


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\r\n",
                                               blacklist_categories=("Cs",))), min_size=1),
       st.lists(st.sampled_from(["\n", "\r", "\r\n"]), min_size=1), st.data())
@settings(max_examples=200, deadline=None)
def test_lines_read_the_same_however_the_bytes_are_cut(lines: list[str], ends: list[str],
                                                       data: st.DataObject) -> None:
    """Every line end the standard allows, cut anywhere (inside a CRLF, inside a character
    of several bytes): the lines of the whole text read at once."""
    text = "".join(line + ends[i % len(ends)] for i, line in enumerate(lines))
    raw = text.encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    whole = re.split(r"\r\n|\r|\n", text)[:-1]  # the text ends with a line end
    assert asyncio.run(_lines(chunks)) == whole
    assert len(whole) == len(lines) - sum(  # an LF after a CR ending an empty line joins it
        1 for i in range(1, len(lines)) if ends[(i - 1) % len(ends)] == "\r"
        and lines[i] == "" and ends[i % len(ends)].startswith("\n"))


async def test_a_line_that_never_ends_is_refused_before_it_fills_memory(paths: Paths) -> None:
    """A broken or hostile server: 64 MiB without a line end."""
    body = [b'data: {"choices": [{"delta": {"content": "', *([b"a" * (1 << 20)] * 64)]
    with pytest.raises(BadResponseError, match="a line of the stream ran past 16,777,216"):
        await _events(body, paths)


async def test_a_server_that_ignores_max_tokens_is_stopped(paths: Paths) -> None:
    chunks = [*[_chunk({"content": "word " * 2000})] * 20, _chunk({}, "stop")]
    reply = Reply(200, {"content-type": "text/event-stream"}, _sse(*chunks))
    async with openai_behind(chat(reply), paths) as provider:
        with pytest.raises(BadResponseError, match="does not keep to max_tokens"):
            async for _ in provider.stream(StreamRequest.of("x", max_tokens=16)):
                pass
        # the same reply within its limit is an answer
        events = [e async for e in provider.stream(StreamRequest.of("x", max_tokens=4096))]
        assert len(_text(events)) == 200_000


async def test_an_endless_body_is_read_only_as_far_as_it_matters(paths: Paths) -> None:
    """A whole reply past 16 MiB is no answer; an error's body is read for its message only."""
    huge = [b'{"choices": [{"message": {"content": "', *([b"a" * (1 << 20)] * 20), b'"}}]}']
    reply = Reply(200, {"content-type": "application/json"}, huge)
    async with openai_behind(chat(reply), paths) as provider:
        with pytest.raises(BadResponseError, match="the reply ran past 16,777,216 bytes"):
            await _drain(provider)
    failing = Reply(500, {"content-type": "text/plain"},
                    [b"upstream exploded\n", *([b"x" * (1 << 20)] * 64)])
    async with openai_behind(chat(failing), paths) as provider:
        with pytest.raises(ServerError, match="upstream exploded"):
            await _drain(provider)


async def _drain(provider: Any) -> None:
    async for _ in provider.stream(StreamRequest.of("x")):
        pass


async def test_what_a_server_says_about_itself_is_read_bounded(paths: Paths) -> None:
    """`/props`, `/models`: 20 MiB where a few hundred bytes belong is no answer (the window
    unknown, the health check failing with the reason), never a process out of memory."""
    endless = [b'{"default_generation_settings": {"n_ctx": 4096}, "pad": "',
               *([b"a" * (1 << 20)] * 20), b'"}']
    routes = {"GET /props": lambda _: Reply(200, {"content-type": "application/json"}, endless),
              "GET /slots": lambda _: Reply(404, {}, [b"no"]),
              "GET /v1/models": lambda _: Reply(200, {"content-type": "application/json"},
                                                endless)}
    async with openai_behind(routes, paths) as provider:
        assert await provider.context_window() is None
        health = await provider.health()
        assert not health.ok and "the reply ran past 16,777,216 bytes" in health.detail
    small = [b'{"default_generation_settings": {"n_ctx": 4096}}']
    routes["GET /props"] = lambda _: Reply(200, {"content-type": "application/json"}, small)
    async with openai_behind(routes, paths) as provider:
        assert await provider.context_window() == 4096


def _reasoning(events: list[Any]) -> str:
    from engine.providers import ReasoningDelta

    return "".join(e.text for e in events if isinstance(e, ReasoningDelta))


async def test_content_in_parts_keeps_the_thinking_apart(paths: Paths) -> None:
    """Mistral's Magistral streams `content` as a list of parts: `thinking` parts (their own
    text parts inside) are reasoning, `text` parts the answer, a `reference` part neither."""
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Paris, surely."}]}
    events = await _events(_sse(
        _chunk({"content": [thinking]}),
        _chunk({"content": [{"type": "text", "text": "Paris."},
                            {"type": "reference", "reference_ids": [1]}]}),
        _chunk({}, "stop")), paths)
    assert _text(events) == "Paris." and _reasoning(events) == "Paris, surely."
    events = await _events(_sse(
        _chunk({"content": [{"type": "reasoning", "text": "Hm."},
                            {"type": "output_text", "text": "Yes."}]}), _chunk({}, "stop")), paths)
    assert _text(events) == "Yes." and _reasoning(events) == "Hm."
    with pytest.raises(BadResponseError, match="not text"):
        await _events(_sse(_chunk({"content": [{"type": "text"}]}), _chunk({}, "stop")), paths)


async def test_a_refusal_ends_as_the_content_filters(paths: Paths) -> None:
    """OpenAI streams a refusal in a field of its own, the content null: the refusal shows,
    and the answer is named as the filter's, never an empty answer that ended well."""
    events = await _events(_sse(_chunk({"role": "assistant", "content": None, "refusal": ""}),
                                _chunk({"refusal": "I can't help with that."}),
                                _chunk({}, "stop")), paths)
    assert _text(events) == "I can't help with that."
    assert events[-1] == Done("content_filter")
    assert answer_problem(_text(events), "Why?", "content_filter") == FILTERED


async def test_only_the_first_choice_is_the_answer(paths: Paths) -> None:
    """A server that streams more choices than the one asked for (or numbers from 1): the
    first choice it names is read, the others never mixed in."""
    other = {"choices": [{"index": 1, "delta": {"content": "OTHER"}, "finish_reason": None}]}
    events = await _events(_sse(_chunk({"content": "Hi"}), other, _chunk({}, "stop")), paths)
    assert _text(events) == "Hi"
    from_one = [{"choices": [{"index": 1, "delta": {"content": "Hi"}, "finish_reason": "stop"}]}]
    assert _text(await _events(_sse(*from_one), paths)) == "Hi"


async def test_a_chunk_that_sends_a_message_instead_of_a_delta_is_read(paths: Paths) -> None:
    chunk = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"},
                          "finish_reason": "stop"}]}
    assert _text(await _events(_sse(chunk), paths)) == "Hi"


@pytest.mark.parametrize(("code", "raised"), [(429, RateLimitedError), ("503", ServerError),
                                              ("overloaded", BadResponseError)])
async def test_an_error_body_with_status_200_is_the_error_it_names(
        code: object, raised: type[Exception], paths: Paths) -> None:
    """A gateway that answers a stream request with status 200 and a JSON error: the error
    its code names when that is a status, as a stream's error event is (a rate limit waits);
    else a reply that is not a stream, with its message."""
    body = json.dumps({"error": {"message": "Try again later", "code": code}}).encode()
    reply = Reply(200, {"content-type": "application/json"}, [body])
    async with openai_behind(chat(reply), paths) as provider:
        with pytest.raises(raised, match="Try again later"):
            _ = [e async for e in provider.stream(StreamRequest.of("x"))]


async def test_a_whole_completion_reads_its_parts_and_its_refusal(paths: Paths) -> None:
    """A server that ignored `stream`: its message is read as a delta is."""
    for message, text, thought, finish in (
            ({"content": [{"type": "thinking", "thinking": "Hm."},
                          {"type": "text", "text": "Yes."}]}, "Yes.", "Hm.", "stop"),
            ({"content": None, "refusal": "No."}, "No.", "", "content_filter")):
        body = json.dumps({"choices": [{"index": 0, "message": message,
                                        "finish_reason": "stop"}]}).encode()
        reply = Reply(200, {"content-type": "application/json"}, [body])
        async with openai_behind(chat(reply), paths) as provider:
            events = [e async for e in provider.stream(StreamRequest.of("x"))]
        assert (_text(events), _reasoning(events), events[-1]) == (text, thought, Done(finish))


@pytest.mark.parametrize(("status", "body", "says"), [
    (400, [{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                      "status": "INVALID_ARGUMENT"}}], "API key not valid"),       # Gemini
    (404, {"detail": "Not Found"}, "Not Found"),                                   # FastAPI
    (422, {"detail": [{"loc": ["body", "model"], "msg": "field required",
                       "type": "value_error.missing"}]}, "body.model: field required"),
    (400, {"message": "top-level message"}, "top-level message"),
])
async def test_an_error_body_is_read_whatever_its_shape(status: int, body: object, says: str,
                                                       paths: Paths) -> None:
    """Each server wraps its error its own way; the user reads the server's words, never only
    a status code."""
    reply = Reply(status, {"content-type": "application/json"}, [json.dumps(body).encode()])
    async with openai_behind(chat(reply), paths) as provider:
        with pytest.raises(ProviderError, match=says):
            _ = [e async for e in provider.stream(StreamRequest.of("x"))]


def _cut_after_one(first: bytes) -> Reply:
    def body() -> Any:
        yield first
        yield CUT
    kind = "application/x-ndjson" if first.startswith(b"{") else "text/event-stream"
    return Reply(200, {"content-type": kind}, body())


@pytest.mark.parametrize("kind", ["openai", "anthropic", "ollama"])
async def test_every_provider_names_a_transport_failure_in_the_same_words(
        kind: str, paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    """One wording (`providers._http.connection_error`): nothing listening is "cannot
    connect", a reply cut after its first event is "connection broke"."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    first = {
        "openai": f"data: {json.dumps(_chunk({'content': 'partial'}))}\n\n".encode(),
        "anthropic": next(message_stream(["partial"])),
        "ollama": json.dumps({"model": "m", "created_at": "2026-01-01T00:00:00Z", "done": False,
                              "message": {"role": "assistant", "content": "partial"}}
                             ).encode() + b"\n",
    }[kind]
    path = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages",
            "ollama": "/api/chat"}[kind]

    def provider(base: str) -> Any:
        root = base + "/v1" if kind == "openai" else base
        return create_provider(kind, ProviderConfig(kind=kind, model="m", base_url=root,
                                                    api_key_env="ANTHROPIC_API_KEY"
                                                    if kind == "anthropic" else None), paths)

    with pytest.raises(ProviderConnectionError) as refused:
        await _drain(provider(f"http://127.0.0.1:{closed_port()}"))
    said = refused.value.detail
    assert said.startswith("cannot connect to "), said  # the host and port, no class name
    assert "127.0.0.1:" in said and "ConnectError" not in said, said
    assert ("to Ollama at http://127.0.0.1:" in said) == (kind == "ollama"), said

    with WireServer({f"POST {path}": lambda r: _cut_after_one(first)}) as server:
        with pytest.raises(ProviderConnectionError) as cut:
            await _drain(provider(server.url))
    assert cut.value.detail.startswith("connection broke: "), cut.value.detail


async def _drain(provider: Any) -> None:
    try:
        async for _ in provider.stream(StreamRequest.of("x")):
            pass
    finally:
        await provider.aclose()


@pytest.mark.parametrize("kind", ["openai", "anthropic", "ollama"])
async def test_a_redirect_is_named_where_it_points_and_never_followed(
        kind: str, paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    """An http address a proxy sends on to https: said, with the address to put in base_url;
    not followed by any provider (the key would go along)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    path = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages",
            "ollama": "/api/chat"}[kind]
    listing = {"openai": "GET /v1/models", "anthropic": "GET /v1/models",
               "ollama": "GET /api/version"}[kind]
    elsewhere = "https://127.0.0.1:9/moved"

    def moved(recorded: Any) -> Reply:
        return Reply(307, {"location": elsewhere, "content-type": "text/html"},
                     [b"<html>moved</html>"])

    with WireServer({f"POST {path}": moved, listing: moved}) as server:
        root = server.url + "/v1" if kind == "openai" else server.url
        provider = create_provider(kind, ProviderConfig(
            kind=kind, model="m", base_url=root,
            api_key_env="ANTHROPIC_API_KEY" if kind == "anthropic" else None), paths)
        with pytest.raises(ProviderError) as caught:
            await _drain(provider)
        health = await create_provider(kind, ProviderConfig(
            kind=kind, model="m", base_url=root,
            api_key_env="ANTHROPIC_API_KEY" if kind == "anthropic" else None), paths).health()
    says = f"HTTP 307: the server redirects to {elsewhere}"
    assert caught.value.detail.startswith(says), caught.value.detail
    assert not health.ok and health.detail.startswith(says), health.detail
    assert len(server.requests) == 2  # one each: nothing sent on
