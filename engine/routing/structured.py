"""Structured output: collect a streamed answer and hold it to its JSON schema.

Providers ask for structured output in their native mode (json_schema, Ollama `format`,
instructions for Anthropic); this module is the one place that checks the result, whatever
the kind. jsonschema is imported on first use.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine.errors import BadResponseError
from engine.jsondata import TOO_DEEP, raw_decode, read_json
from engine.providers import (
    FILTERED,
    Done,
    Provider,
    StreamRequest,
    TokenDelta,
    Usage,
    WasReasoning,
)

__all__ = [
    "Completion",
    "SchemaError",
    "check_schema",
    "collect_json",
    "complete",
    "complete_json",
    "json_candidates",
    "parse_json",
]

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)


class SchemaError(ValueError):
    """A JSON schema that is itself invalid."""


@dataclass(frozen=True, slots=True)
class Completion:
    """A whole answer: its text, why it ended, and token usage when reported."""

    text: str
    finish_reason: str
    usage: Usage | None


def check_schema(schema: Any) -> None:
    """Raise `SchemaError` unless `schema` is a valid JSON schema object."""
    from jsonschema import SchemaError as _JsonSchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict):
        raise SchemaError("a JSON schema must be an object")
    try:
        validator_for(schema).check_schema(schema)
    except _JsonSchemaError as exc:
        raise SchemaError(exc.message) from None


_MAX_CANDIDATES = 64


def json_candidates(text: str) -> Iterator[Any]:
    """Every JSON object or array in `text`, in the order a reader would take them: the whole
    text, then each code fence's body, then each value that starts at a `{` or `[` in prose.

    Servers that ignore `response_format`, and models that were asked for JSON only, still
    wrap it in a fence or in a sentence ("Here is the analysis: {…} Hope this helps").
    At most 64 starting points are tried, so a reply full of braces stays cheap.
    """
    stripped = text.strip()
    try:
        yield read_json(stripped)
        return
    except ValueError:
        pass
    for fenced in _FENCE.finditer(text):
        try:
            yield read_json(fenced.group(1))
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    tried = 0
    position = 0
    while tried < _MAX_CANDIDATES:
        starts = [i for i in (text.find("{", position), text.find("[", position)) if i != -1]
        if not starts:
            return
        start = min(starts)
        tried += 1
        try:
            value, end = raw_decode(decoder, text, start)
        except ValueError:
            position = start + 1
            continue
        if isinstance(value, dict | list):
            yield value
        position = end


def _no_json(text: str) -> str:
    stripped = text.strip()
    if not stripped:
        return "the answer is empty"
    if stripped[0] in "{[":
        try:
            read_json(stripped)
        except ValueError as exc:
            return f"the answer is not JSON: {exc}"
    return "the answer is not JSON: there is no JSON value in it"


def parse_json(provider: str, text: str, schema: dict[str, Any]) -> Any:
    """The one JSON value in `text` that is valid against `schema`: the whole reply, or the
    value inside a code fence or surrounding prose (see `json_candidates`).

    Raises `BadResponseError` naming the first problem.
    """
    from jsonschema.validators import validator_for

    validator = validator_for(schema)(schema)
    first_error: Any = None
    for value in json_candidates(text):
        try:
            error = next(iter(validator.iter_errors(value)), None)
        except RecursionError:  # a value deep enough to pass the parser, not the check
            raise BadResponseError(provider, TOO_DEEP) from None
        if error is None:
            return value
        first_error = first_error or error
    if first_error is None:
        raise BadResponseError(provider, _no_json(text))
    where = "/".join(str(part) for part in first_error.absolute_path) or "(root)"
    raise BadResponseError(provider, f"the answer does not match the schema at {where}: "
                           f"{first_error.message}")


async def complete(provider: Provider, request: StreamRequest) -> Completion:
    """Stream `request` to the end and return the whole answer."""
    parts: list[str] = []
    usage: Usage | None = None
    reason = "stop"
    async for event in provider.stream(request):
        match event:
            case TokenDelta(text):
                parts.append(text)
            case WasReasoning():  # the text so far was the model's thinking
                parts = []
            case Usage():
                usage = event
            case Done(finish_reason):
                reason = finish_reason
    return Completion("".join(parts), reason, usage)


def collect_json(provider: str, text: str, finish_reason: str, schema: dict[str, Any]) -> Any:
    """The one check of a whole structured answer, for every caller (a provider asked
    directly, the router, the interrogation): not cut off by the token limit, and holding one
    JSON value valid against `schema` (see `parse_json`), and not stopped by the provider's
    content filter. Raises `BadResponseError`."""
    if finish_reason == "content_filter":
        raise BadResponseError(provider, FILTERED)
    if finish_reason == "length":
        if not text.strip():  # a reasoning model that thought until the limit
            raise BadResponseError(provider, "the whole token budget went before any JSON "
                                   "(a reasoning model thinking?)")
        raise BadResponseError(provider, "the answer was cut off by the token limit before the "
                               "JSON was complete")
    return parse_json(provider, text, schema)


async def complete_json(provider: Provider, request: StreamRequest) -> Any:
    """Stream a structured request to the end; the validated JSON value."""
    if request.schema is None:
        raise ValueError("complete_json needs a request with a schema")
    done = await complete(provider, request)
    return collect_json(provider.name, done.text, done.finish_reason, request.schema)
