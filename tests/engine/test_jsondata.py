"""JSON nested past Python's recursion limit is malformed JSON like any other, wherever it
comes from: a server's stream, a model's answer, a dataset, the session index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import BadResponseError, Paths
from engine.evals.items import DatasetError, read_items
from engine.jsondata import TOO_DEEP, read_json
from engine.providers import StreamRequest
from engine.routing.structured import parse_json
from tests.support.wire import Reply, chat, openai_behind

DEEP = "[" * 100_000 + "]" * 100_000


def test_nesting_too_deep_is_a_value_error() -> None:
    with pytest.raises(RecursionError):
        json.loads(DEEP)  # what Python does: past every `except ValueError`
    with pytest.raises(ValueError, match=TOO_DEEP):
        read_json(DEEP)
    assert read_json("[[1]]") == [[1]]


async def test_a_server_that_streams_it_is_a_bad_response(paths: Paths) -> None:
    reply = Reply(200, {"content-type": "text/event-stream"}, [f"data: {DEEP}\n\n".encode()])
    async with openai_behind(chat(reply), paths) as provider:
        with pytest.raises(BadResponseError, match=f"malformed chunk: {TOO_DEEP}"):
            async for _ in provider.stream(StreamRequest.of("x")):
                pass


def test_a_model_that_answers_it_is_named() -> None:
    with pytest.raises(BadResponseError, match="p: "):
        parse_json("p", f"Here you go: {DEEP}", {"type": "object"})
    deep_object = '{"a":' * 900 + "1" + "}" * 900  # parses; the check of it must not crash
    schema = {"type": "object", "properties": {"a": {"$ref": "#"}}}
    with pytest.raises(BadResponseError):
        parse_json("p", deep_object, schema | {"required": ["b"]})


def test_a_dataset_line_of_it_says_which_line(tmp_path: Path) -> None:
    path = tmp_path / "claims.jsonl"
    path.write_text('{"claim": "The sky is blue.", "label": true}\n' + DEEP + "\n")
    with pytest.raises(DatasetError, match=f"claims.jsonl line 2: not valid JSON \\({TOO_DEEP}"):
        read_items(path)
