"""Structured output: collect a streamed answer and hold it to its JSON schema.

Providers ask for structured output in their native mode (json_schema, Ollama `format`,
instructions for Anthropic); this module is the one place that checks the result, whatever
the kind. jsonschema is imported on first use.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from engine.errors import BadResponseError
from engine.providers import Done, Provider, StreamRequest, TokenDelta, Usage

__all__ = ["Completion", "SchemaError", "check_schema", "complete", "complete_json", "parse_json"]

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


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


def parse_json(provider: str, text: str, schema: dict[str, Any]) -> Any:
    """The JSON value in `text` (a code fence around it is tolerated), valid against `schema`.

    Raises `BadResponseError` naming the first problem.
    """
    from jsonschema.validators import validator_for

    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise BadResponseError(provider, f"the answer is not JSON: {exc}") from None
    validator = validator_for(schema)(schema)
    error = next(iter(validator.iter_errors(value)), None)
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(root)"
        raise BadResponseError(provider, f"the answer does not match the schema at {where}: "
                               f"{error.message}")
    return value


async def complete(provider: Provider, request: StreamRequest) -> Completion:
    """Stream `request` to the end and return the whole answer."""
    parts: list[str] = []
    usage: Usage | None = None
    reason = "stop"
    async for event in provider.stream(request):
        match event:
            case TokenDelta(text):
                parts.append(text)
            case Usage():
                usage = event
            case Done(finish_reason):
                reason = finish_reason
    return Completion("".join(parts), reason, usage)


async def complete_json(provider: Provider, request: StreamRequest) -> Any:
    """Stream a structured request to the end; the validated JSON value."""
    if request.schema is None:
        raise ValueError("complete_json needs a request with a schema")
    done = await complete(provider, request)
    if done.finish_reason == "length":
        raise BadResponseError(provider.name, "the answer was cut off by max tokens before the "
                               "JSON was complete")
    return parse_json(provider.name, done.text, request.schema)
