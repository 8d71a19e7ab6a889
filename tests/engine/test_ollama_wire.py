"""The ollama kind against a loopback server speaking Ollama's documented API: NDJSON for
/api/chat and /api/pull, JSON for /api/tags and /api/version, `{"error": "…"}` bodies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from engine import (
    BadResponseError,
    Paths,
    ProviderConfig,
    ProviderConnectionError,
    RequestError,
    ServerError,
)
from engine.providers import Done, PullProgress, StreamRequest, TokenDelta, Usage, create_provider
from engine.providers._ollama import OllamaProvider, ollama_host
from engine.routing.structured import complete_json
from tests.support.servers import closed_port
from tests.support.wire import CUT, DROP, Reply, WireServer, json_reply

STAMP = "2026-11-22T10:00:00.000000Z"


def line(data: dict[str, Any]) -> bytes:
    return (json.dumps(data) + "\n").encode()


def chat_stream(texts: list[str], reason: str = "stop") -> Iterator[bytes]:
    for text in texts:
        yield line({"model": "llama3.2", "created_at": STAMP,
                    "message": {"role": "assistant", "content": text}, "done": False})
    yield line({"model": "llama3.2", "created_at": STAMP,
                "message": {"role": "assistant", "content": ""}, "done": True,
                "done_reason": reason, "total_duration": 1000, "load_duration": 10,
                "prompt_eval_count": 26, "prompt_eval_duration": 100, "eval_count": len(texts),
                "eval_duration": 500})


def ndjson(body: Iterator[Any]) -> Reply:
    return Reply(200, {"content-type": "application/x-ndjson"}, body)


def make(server: WireServer, paths: Paths, **extra: Any) -> OllamaProvider:
    config = ProviderConfig(kind="ollama", model="llama3.2", base_url=server.url, **extra)
    provider = create_provider("ollama", config, paths)
    assert isinstance(provider, OllamaProvider)
    return provider


async def collect(provider: Any, request: StreamRequest) -> list[Any]:
    return [event async for event in provider.stream(request)]


async def test_chat_stream(paths: Paths) -> None:
    route = {"POST /api/chat": lambda r: ndjson(chat_stream(["The sky", " is blue."]))}
    with WireServer(route) as server:
        provider = make(server, paths, keep_alive="10m", options={"num_ctx": 4096})
        events = await collect(provider, StreamRequest.of("Why?", max_tokens=64, temperature=0))
    assert events == [TokenDelta("The sky"), TokenDelta(" is blue."), Usage(26, 2), Done("stop")]
    body = server.requests[0].json()
    assert body["model"] == "llama3.2" and body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": "Why?"}]
    assert body["keep_alive"] == "10m"
    assert body["options"] == {"num_ctx": 4096, "num_predict": 64, "temperature": 0}


async def test_schema_goes_in_format(paths: Paths) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    route = {"POST /api/chat": lambda r: ndjson(chat_stream(['{"ok":', " true}"]))}
    with WireServer(route) as server:
        value = await complete_json(make(server, paths), StreamRequest.of("?", schema=schema))
    assert value == {"ok": True}
    assert server.requests[0].json()["format"] == schema


async def test_length_reason(paths: Paths) -> None:
    route = {"POST /api/chat": lambda r: ndjson(chat_stream(["a"], reason="length"))}
    with WireServer(route) as server:
        events = await collect(make(server, paths), StreamRequest.of("?"))
    assert events[-1] == Done("length")


async def test_model_not_found(paths: Paths) -> None:
    route = {"POST /api/chat": lambda r: json_reply({"error": "model 'nope' not found"}, 404)}
    with WireServer(route) as server, pytest.raises(RequestError) as caught:
        await collect(make(server, paths), StreamRequest.of("?"))
    assert "model 'nope' not found" in str(caught.value) and caught.value.status == 404


async def test_server_error_status(paths: Paths) -> None:
    route = {"POST /api/chat": lambda r: json_reply({"error": "out of memory"}, 500)}
    with WireServer(route) as server, pytest.raises(ServerError, match="out of memory"):
        await collect(make(server, paths), StreamRequest.of("?"))


async def test_error_line_mid_stream(paths: Paths) -> None:
    def body() -> Iterator[bytes]:
        yield next(chat_stream(["partial"]))
        yield line({"error": "an error was encountered while running the model"})
    with WireServer({"POST /api/chat": lambda r: ndjson(body())}) as server:
        with pytest.raises(ServerError, match="error was encountered"):
            await collect(make(server, paths), StreamRequest.of("?"))


async def test_malformed_line(paths: Paths) -> None:
    def body() -> Iterator[bytes]:
        yield next(chat_stream(["partial"]))
        yield b'{"model": "llama3.2", "message": \n'
    with WireServer({"POST /api/chat": lambda r: ndjson(body())}) as server:
        with pytest.raises(BadResponseError):
            await collect(make(server, paths), StreamRequest.of("?"))


async def test_cut_mid_stream(paths: Paths) -> None:
    def body() -> Iterator[Any]:
        yield next(chat_stream(["partial"]))
        yield CUT
    with WireServer({"POST /api/chat": lambda r: ndjson(body())}) as server:
        with pytest.raises(ProviderConnectionError):
            await collect(make(server, paths), StreamRequest.of("?"))


async def test_connection_refused(paths: Paths) -> None:
    config = ProviderConfig(kind="ollama", model="m", base_url=f"127.0.0.1:{closed_port()}")
    provider = create_provider("ollama", config, paths)
    with pytest.raises(ProviderConnectionError, match="cannot connect to Ollama"):
        await collect(provider, StreamRequest.of("?"))
    assert not (await provider.health()).ok


async def test_models_version_and_health(paths: Paths) -> None:
    tags = {"models": [
        {"name": "llama3.2:latest", "model": "llama3.2:latest", "modified_at": STAMP,
         "size": 2019393189, "digest": "a80c4f17acd5", "details": {"format": "gguf"}},
        {"name": "qwen3:8b", "model": "qwen3:8b", "modified_at": STAMP, "size": 5,
         "digest": "b", "details": {}},
    ]}
    routes = {
        "GET /api/tags": lambda r: json_reply(tags),
        "GET /api/version": lambda r: json_reply({"version": "0.12.6"}),
    }
    with WireServer(routes) as server:
        provider = make(server, paths)
        assert await provider.list_models() == ["llama3.2:latest", "qwen3:8b"]
        assert await provider.version() == "0.12.6"
        health = await provider.health()
    assert health.ok and health.detail == "Ollama 0.12.6"


async def test_pull_progress(paths: Paths) -> None:
    def body() -> Iterator[bytes]:
        yield line({"status": "pulling manifest"})
        for done in (0, 500, 1000):
            yield line({"status": "pulling a80c4f17acd5", "digest": "sha256:a80c4f17acd5",
                        "total": 1000, "completed": done})
        yield line({"status": "verifying sha256 digest"})
        yield line({"status": "success"})
    with WireServer({"POST /api/pull": lambda r: ndjson(body())}) as server:
        progress = [p async for p in make(server, paths).pull("llama3.2")]
    assert progress[0] == PullProgress("pulling manifest", None, None, None)
    assert [p.completed for p in progress[1:4]] == [0, 500, 1000]
    assert progress[-1].status == "success"
    assert server.requests[0].json()["model"] == "llama3.2"


async def test_pull_unknown_model(paths: Paths) -> None:
    route = {"POST /api/pull": lambda r: json_reply({"error": "pull model manifest: file does "
                                                              "not exist"}, 500)}
    with WireServer(route) as server, pytest.raises(ServerError, match="manifest"):
        [p async for p in make(server, paths).pull("nope")]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, "http://127.0.0.1:11434"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("example.internal:8000", "http://example.internal:8000"),
        ("https://ollama.example/api-prefix", "https://ollama.example/api-prefix"),
        ("http://0.0.0.0:9999", "http://127.0.0.1:9999"),
    ],
)
def test_host_normalisation(given: str | None, expected: str) -> None:
    assert ollama_host(given, {}) == expected


async def test_discovered_when_one_answers_on_ollama_host(
    paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine import load_config
    from engine.providers import discover_ollama

    tags = {"models": [{"name": "qwen3:8b", "model": "qwen3:8b", "modified_at": STAMP,
                        "size": 1, "digest": "d", "details": {}}]}
    with WireServer({"GET /api/tags": lambda r: json_reply(tags)}) as server:
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{server.port}")
        config = load_config(paths)
        assert await discover_ollama(config) is True
    ollama = config.providers["ollama"]
    assert (ollama.kind, ollama.model, ollama.origin) == ("ollama", "qwen3:8b", "env")
    assert [name for name, _ in config.by_priority()] == ["ollama", "local"]


async def test_not_added_when_nothing_answers(paths: Paths) -> None:
    from engine import load_config
    from engine.providers import discover_ollama

    config = load_config(paths)  # the home fixture points OLLAMA_HOST at a closed port
    assert await discover_ollama(config) is False
    assert list(config.providers) == ["local"]


async def test_a_dropped_connection_is_retried_once(paths: Paths) -> None:
    replies = iter([DROP, ndjson(chat_stream(["ok"]))])
    with WireServer({"POST /api/chat": lambda r: next(replies)}) as server:
        events = await collect(make(server, paths), StreamRequest.of("?"))
    assert events[0] == TokenDelta("ok") and len(server.requests) == 2
    replies = iter([DROP, DROP])
    with WireServer({"POST /api/chat": lambda r: next(replies)}) as server:
        with pytest.raises(ProviderConnectionError):
            await collect(make(server, paths), StreamRequest.of("?"))
    assert len(server.requests) == 2


async def test_model_listing_and_pull_are_capabilities_of_the_provider_interface(
    paths: Paths,
) -> None:
    from engine import RequestError

    other = create_provider("srv", ProviderConfig(kind="openai", model="m",
                                                  base_url="http://127.0.0.1:9/v1"), paths)
    assert not other.can_list_models and not other.can_pull
    with pytest.raises(RequestError, match="cannot list its models"):
        await other.list_models()
    with pytest.raises(RequestError, match="cannot pull models"):
        [p async for p in other.pull("m")]
    ollama = create_provider("o", ProviderConfig(kind="ollama", model="m"), paths, env={})
    assert ollama.can_list_models and ollama.can_pull


async def test_an_endless_line_is_refused_before_it_fills_memory(paths: Paths) -> None:
    """The Ollama SDK reads its NDJSON line by line with no limit: a server that never ends a
    line (64 MiB here) is a bad response past 16 MiB, and a long reply in many lines is not."""
    endless = [line({"model": "m", "created_at": STAMP, "done": False,
                     "message": {"role": "assistant", "content": "Hi"}}),
               b'{"model": "m", "message": {"content": "', *([b"a" * (1 << 20)] * 64)]
    with WireServer({"POST /api/chat": lambda r: ndjson(iter(endless))}) as server:
        with pytest.raises(BadResponseError, match="a line of the stream ran past 16,777,216"):
            await collect(make(server, paths), StreamRequest.of("Why?"))
    lines = list(chat_stream(["word " * 10] * 100_000))  # over 16 MiB, 5 MB of it answer
    assert sum(map(len, lines)) > 1 << 24
    batched = [b"".join(lines[i:i + 1000]) for i in range(0, len(lines), 1000)]
    with WireServer({"POST /api/chat": lambda r: ndjson(iter(batched))}) as server:
        events = await collect(make(server, paths), StreamRequest.of("Why?"))
    assert sum(len(e.text) for e in events if isinstance(e, TokenDelta)) == 5_000_000 \
        and events[-1] == Done("stop")


async def test_blank_lines_between_the_lines_are_no_error(paths: Paths) -> None:
    """A proxy's keep-alive (an empty line) carries no NDJSON: it is left out."""
    def body() -> Iterator[bytes]:
        stream = list(chat_stream(["Hi", " there"]))
        yield b"\n"
        yield stream[0] + b"\r\n\n"
        yield from stream[1:]

    with WireServer({"POST /api/chat": lambda r: ndjson(body())}) as server:
        events = await collect(make(server, paths), StreamRequest.of("Why?"))
    assert "".join(e.text for e in events if isinstance(e, TokenDelta)) == "Hi there"
    assert events[-1] == Done("stop")


@pytest.mark.parametrize("odd", [b"[1, 2]\n", b"garbage\n", b"42\n"])
async def test_a_line_that_is_no_json_object_is_named(odd: bytes, paths: Paths) -> None:
    def body() -> Iterator[bytes]:
        stream = list(chat_stream(["Hi"]))
        yield stream[0]
        yield odd
        yield from stream[1:]

    with WireServer({"POST /api/chat": lambda r: ndjson(body())}) as server:
        with pytest.raises(BadResponseError, match="no JSON object"):
            await collect(make(server, paths), StreamRequest.of("Why?"))
