"""Replies as real-world servers send them: JSON in prose or fences, template markers, bodies
that are not streams. Through the fault proxy in front of the real llama.cpp server, and a
scripted loopback server for the Anthropic and Ollama wire formats."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings, strategies as st

from engine import (
    BadResponseError,
    Config,
    Paths,
    ProviderConfig,
)
from engine.providers import Done, StreamRequest, TokenDelta, create_provider
from engine.routing.router import ProviderEvent, Router
from engine.routing.structured import parse_json
from engine.text import END_OF_TURN_MARKERS, TemplateMarkers, strip_markers
from tests.support.faults import FaultProxy
from tests.support.servers import LlamaServer
from tests.support.wire import Reply, WireServer, chat, openai_behind

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"enum": ["yes", "no"]}, "score": {"type": "integer"}},
    "required": ["verdict", "score"],
    "additionalProperties": False,
}
VALUE = {"verdict": "yes", "score": 7}
WRAPPED = [
    json.dumps(VALUE),
    f"```json\n{json.dumps(VALUE, indent=2)}\n```",
    f"Here is my analysis:\n\n```json\n{json.dumps(VALUE)}\n```\n\nHope this helps!",
    f"Sure! {json.dumps(VALUE)} That is all.",
    f"```\n{json.dumps(VALUE)}```",
    f"<think>the schema wants {{\"verdict\": ...}}</think>\n{json.dumps(VALUE)}",
    f'An example would be {{"verdict": "maybe"}}; my answer: {json.dumps(VALUE)}',
]


@pytest.mark.parametrize("text", WRAPPED)
def test_the_one_valid_json_value_is_taken_from_prose_and_fences(text: str) -> None:
    assert parse_json("p", text, SCHEMA) == VALUE


@pytest.mark.parametrize(("text", "why"), [
    ("", "empty"),
    ("I cannot help with that.", "not JSON: there is no JSON value in it"),
    ('{"verdict": "maybe", "score": 1}', "does not match the schema at verdict"),
    ("```json\n{\"verdict\": \"yes\",\n```", "not JSON"),
    ('{"verdict": "yes", oops}', "not JSON: Expecting property name"),
])
def test_a_reply_without_a_valid_value_says_why(text: str, why: str) -> None:
    with pytest.raises(BadResponseError, match=why):
        parse_json("p", text, SCHEMA)


def test_a_reply_full_of_braces_stays_cheap() -> None:
    import time

    text = "{" * 200_000 + json.dumps(VALUE)
    start = time.perf_counter()
    with pytest.raises(BadResponseError):
        parse_json("p", text, SCHEMA)
    assert time.perf_counter() - start < 2.0


def router_for(paths: Paths, url: str, **provider: Any) -> Router:
    config = Config.model_validate({
        "providers": {"srv": {"kind": "openai", "model": "gemma", "base_url": url,
                              "first_token_timeout": 20, **provider}},
        "roles": {"default": ["srv"]},
    })
    return Router(config, paths, persist=False)


async def test_a_server_that_ignores_response_format_still_gives_structured_output(
    proxy: FaultProxy, paths: Paths
) -> None:
    proxy.scripts["prose"] = (WRAPPED[2], "stop")
    proxy.plan = ["script:prose"]
    router = router_for(paths, proxy.url)
    try:
        value, done = await router.complete_json(
            StreamRequest.of("Is it?", schema=SCHEMA, max_tokens=60))
    finally:
        await router.aclose()
    assert value == VALUE and done.provider == "srv"


def deltas(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TokenDelta))


@pytest.mark.parametrize(("script", "shown"), [
    ("The witness answers.<|im_end|>\n<|im_start|>user\n", "The witness answers."),
    ("Answer<end_of_turn>\n", "Answer"),
    ("Answer <|eot_id|>", "Answer "),
    ("Answer</s></s>", "Answer"),
    ("Strikes are written <s>so</s> in HTML", "Strikes are written <s>so</s> in HTML"),
    ("A marker <|im_end|> in the middle stays text", "A marker <|im_end|> in the middle stays "
     "text"),
])
async def test_template_markers_at_the_end_never_reach_the_answer(
    proxy: FaultProxy, paths: Paths, script: str, shown: str
) -> None:
    proxy.scripts["m"] = (script, "stop")
    proxy.plan = ["script:m"]
    provider = create_provider("srv", ProviderConfig(kind="openai", model="m",
                                                     base_url=proxy.url), paths)
    try:
        events = [e async for e in provider.stream(StreamRequest.of("?"))]
    finally:
        await provider.aclose()
    assert deltas(events) == shown
    assert isinstance(events[-1], Done)


def test_markers_split_anywhere_in_a_stream_are_held_then_dropped() -> None:
    text = "Yes, it does.\n<|im_end|>\n<|im_start|>user\n"
    for cut in range(1, len(text)):
        pieces = [text[:cut], text[cut:]]
        for stop in (False, True):
            markers = TemplateMarkers(stop=stop)
            shown = "".join(markers.feed(p) for p in pieces) + markers.finish()
            assert shown.rstrip() == "Yes, it does.", (cut, stop, shown)


def test_the_local_kind_ends_the_answer_at_the_first_marker() -> None:
    markers = TemplateMarkers(stop=True)
    shown = markers.feed("Paris.<end_of_turn>\n<start_of_turn>user\nAnd Rome?")
    assert shown == "Paris." and markers.stopped and markers.feed("more") == ""
    assert strip_markers("a<|im_end|>b", stop=True) == "a"
    assert strip_markers("a<|im_end|>b") == "a<|im_end|>b"


async def test_the_local_server_stops_at_end_of_turn_markers(
    llama_server: LlamaServer,
) -> None:
    """A raw prompt in ChatML makes the tiny model write `<|im_end|>` next; the server run by
    `detektiv local-server` stops there instead of writing turns of its own."""
    prompt = ("<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\nhi<|im_end|>\n"
              "<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\nhi")
    async with httpx.AsyncClient(base_url=llama_server.base, timeout=60) as http:
        reply = (await http.post("/completion", json={
            "prompt": prompt, "n_predict": 64, "temperature": 0})).json()
    assert not any(marker in reply["content"] for marker in END_OF_TURN_MARKERS), reply
    assert reply["stop_type"] == "word" and reply["stopping_word"] in END_OF_TURN_MARKERS


@pytest.mark.parametrize(("fault", "says"), [
    ("html", "the server answered text/html, not a stream: <!DOCTYPE html>"),
    ("json200", "the server answered application/json, not a stream: quota exhausted"),
])
async def test_a_reply_that_is_not_a_stream_fails_over_saying_what_it_was(
    proxy: FaultProxy, llama_server: LlamaServer, paths: Paths, fault: str, says: str
) -> None:
    config = Config.model_validate({
        "providers": {
            "proxied": {"kind": "openai", "model": "m", "base_url": proxy.url, "priority": 1},
            "direct": {"kind": "openai", "model": "m", "base_url": llama_server.url,
                       "priority": 2},
        },
        "roles": {"default": ["proxied", "direct"]},
    })
    router = Router(config, paths, persist=False)
    proxy.plan = [fault]
    try:
        events = [e async for e in router.stream(StreamRequest.of("Hi", max_tokens=8))]
    finally:
        await router.aclose()
    failure = next(e for e in events if isinstance(e, ProviderEvent) and e.type == "error")
    assert says in failure.reason
    assert "ended before the model finished" not in failure.reason
    assert isinstance(events[-1], Done)


@pytest.mark.parametrize("fault", ["whole", "relabel"])
async def test_a_whole_completion_or_a_relabelled_stream_is_taken(
    proxy: FaultProxy, paths: Paths, fault: str
) -> None:
    proxy.plan = [fault]
    provider = create_provider("srv", ProviderConfig(kind="openai", model="m",
                                                     base_url=proxy.url), paths)
    try:
        events = [e async for e in provider.stream(
            StreamRequest.of("What is the capital of France?", max_tokens=16, temperature=0))]
    finally:
        await provider.aclose()
    assert isinstance(events[-1], Done) and events[-1].finish_reason in ("stop", "length")
    assert deltas(events).strip()


def anthropic(server: WireServer, paths: Paths) -> Any:
    config = ProviderConfig(kind="anthropic", model="claude", api_key_env="K",
                            base_url=f"http://127.0.0.1:{server.port}")
    return create_provider("claude", config, paths, env={"K": "sk-ant-test"})


def ollama(server: WireServer, paths: Paths) -> Any:
    config = ProviderConfig(kind="ollama", model="llama3",
                            base_url=f"http://127.0.0.1:{server.port}")
    return create_provider("ollama", config, paths, env={})


HTML = Reply(200, {"content-type": "text/html"},
             [b"<!DOCTYPE html>\n<html><title>Captive portal</title></html>"])


@pytest.mark.parametrize(("make", "route"), [
    (anthropic, "POST /v1/messages"), (ollama, "POST /api/chat"),
])
async def test_every_kind_names_a_reply_that_is_not_a_stream(
    paths: Paths, make: Any, route: str
) -> None:
    with WireServer({route: lambda _: HTML}) as server:
        provider = make(server, paths)
        with pytest.raises(BadResponseError, match="answered text/html, not a stream: "
                                                   "<!DOCTYPE html>"):
            [e async for e in provider.stream(StreamRequest.of("x"))]
        await provider.aclose()


async def test_anthropic_takes_a_whole_message_from_a_server_that_ignored_stream(
    paths: Paths,
) -> None:
    message = {"type": "message", "content": [{"type": "text", "text": "Whole answer"}],
               "stop_reason": "max_tokens", "usage": {"input_tokens": 3, "output_tokens": 2}}
    reply = Reply(200, {"content-type": "application/json"}, [json.dumps(message).encode()])
    with WireServer({"POST /v1/messages": lambda _: reply}) as server:
        provider = anthropic(server, paths)
        events = [e async for e in provider.stream(StreamRequest.of("x"))]
        await provider.aclose()
    assert deltas(events) == "Whole answer" and events[-1] == Done("length")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("ab <|>/_\n") + ["<|im_end|>", "</s>", "<s>",
                                                      "<end_of_turn>", "im_end", "user"]),
                max_size=30),
       st.lists(st.integers(min_value=0, max_value=120), max_size=6))
def test_streaming_the_filter_equals_filtering_the_whole(parts: list[str],
                                                         cuts: list[int]) -> None:
    """However an answer is cut into pieces, what is shown equals the filter applied to the
    whole answer; text without a marker comes through unchanged."""
    text = "".join(parts)
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    for stop in (False, True):
        markers = TemplateMarkers(stop=stop)
        shown = "".join(markers.feed(p) for p in pieces) + markers.finish()
        assert shown.rstrip() == strip_markers(text, stop).rstrip()
        if not any(m in text for m in END_OF_TURN_MARKERS):
            assert shown == text


def _openai_stream(*contents: object, finish: object = "stop") -> Reply:
    chunks = [{"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
              for c in contents]
    chunks.append({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    body = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
    return Reply(200, {"content-type": "text/event-stream"}, [*body, b"data: [DONE]\n\n"])


async def _openai_events(reply: Reply, paths: Paths) -> list[Any]:
    async with openai_behind(chat(reply), paths) as provider:
        return [e async for e in provider.stream(StreamRequest.of("x"))]


async def test_content_sent_as_a_list_of_text_parts_is_read_as_its_text(paths: Paths) -> None:
    """Some OpenAI-compatible servers send `content` as parts, streamed or whole."""
    events = await _openai_events(_openai_stream(
        "Plain, ", [{"type": "text", "text": "then parts"}, {"type": "text", "text": "."}]),
        paths)
    assert deltas(events) == "Plain, then parts." and events[-1] == Done("stop")
    whole = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
             "choices": [{"index": 0, "finish_reason": "stop", "message": {
                 "role": "assistant", "content": [{"type": "text", "text": "Whole."}]}}]}
    events = await _openai_events(
        Reply(200, {"content-type": "application/json"}, [json.dumps(whole).encode()]), paths)
    assert deltas(events) == "Whole." and events[-1] == Done("stop")


@pytest.mark.parametrize(("content", "finish", "says"), [
    (["undetermined", 0.5], "stop", "the content was list, not text: \"['undetermined', 0.5]\""),
    (42, "stop", "the content was int, not text: '42'"),
    ({"text": "nested"}, "stop", "the content was dict, not text"),
    ([{"type": "image_url", "image_url": {"url": "x"}}], "stop", "the content was list"),
    ("fine", 7, "a finish reason that is not text: 7"),
])
async def test_content_that_is_not_text_is_a_bad_response_that_names_it(
        paths: Paths, content: object, finish: object, says: str) -> None:
    """Never an internal error (a TypeError deep in the engine): the provider failed, and
    the router moves on."""
    with pytest.raises(BadResponseError) as raised:
        await _openai_events(_openai_stream(content, finish=finish), paths)
    assert says in raised.value.message


async def test_an_anthropic_text_delta_that_is_not_text_is_a_bad_response(paths: Paths) -> None:
    events = [("message_start", {"type": "message_start", "message": {"usage": {}}}),
              ("content_block_delta", {"type": "content_block_delta",
                                       "delta": {"type": "text_delta", "text": ["x", 1]}})]
    body = [f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events]
    reply = Reply(200, {"content-type": "text/event-stream"}, body)
    with WireServer({"POST /v1/messages": lambda _: reply}) as server:
        provider = anthropic(server, paths)
        with pytest.raises(BadResponseError, match="the content was list, not text"):
            [e async for e in provider.stream(StreamRequest.of("x"))]
        await provider.aclose()


@pytest.mark.parametrize("usage", [5, "many", [1, 2], {"prompt_tokens": "12"}, None])
async def test_odd_usage_beside_an_answer_never_costs_the_answer(paths: Paths,
                                                                 usage: object) -> None:
    """What a server reports beside the answer may be nonsense: the answer stands, and the
    counts it could not read are left to be estimated."""
    from engine.providers import Usage

    reply = _openai_stream("The answer.")
    tail = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [], "usage": usage}
    body = list(reply.body)
    body.insert(-1, f"data: {json.dumps(tail)}\n\n".encode())
    events = await _openai_events(Reply(reply.status, reply.headers, body), paths)
    assert deltas(events) == "The answer." and events[-1] == Done("stop")
    counted = [e for e in events if isinstance(e, Usage)]
    if isinstance(usage, dict):
        assert counted == [Usage("12", None)]  # type: ignore[arg-type]  # count_tokens judges
    else:
        assert all(e.prompt_tokens is None and e.completion_tokens is None for e in counted)


@pytest.mark.parametrize("message", [
    {"usage": 5}, {"usage": {"input_tokens": [3]}}, "a string", None, {"usage": None},
])
async def test_anthropic_odd_usage_or_stop_reason_never_costs_the_answer(
        paths: Paths, message: object) -> None:
    events = [("message_start", {"type": "message_start", "message": message}),
              ("content_block_delta", {"type": "content_block_delta",
                                       "delta": {"type": "text_delta", "text": "Kept."}}),
              ("message_delta", {"type": "message_delta", "delta": {"stop_reason": ["x"]},
                                 "usage": "lots"}),
              ("message_stop", {"type": "message_stop"})]
    body = [f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events]
    reply = Reply(200, {"content-type": "text/event-stream"}, body)
    with WireServer({"POST /v1/messages": lambda _: reply}) as server:
        provider = anthropic(server, paths)
        got = [e async for e in provider.stream(StreamRequest.of("x"))]
        await provider.aclose()
    assert deltas(got) == "Kept." and got[-1] == Done("stop")
