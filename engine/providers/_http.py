"""HTTP facts shared by the providers: status codes to errors, Retry-After, what a reply that
is not a stream was, the OpenAI-compatible usage object (`usage_of`). Reading a reply
(bounded lines, SSE events, whole bodies) is `engine.providers._reading`."""

from __future__ import annotations

import functools
import logging
import math
import re
import ssl
import time
from collections.abc import Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from engine.errors import (
    AuthError,
    BadResponseError,
    ContextOverflowError,
    ProviderConnectionError,
    ProviderError,
    RateLimitedError,
    RequestError,
    ServerError,
    is_context_overflow,
    overflow_window,
)
from engine.jsondata import read_json
from engine.providers._events import Usage

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

__all__ = [
    "connection_error",
    "content_parts",
    "error_for_status",
    "error_message",
    "field_of",
    "first_line",
    "model_listed",
    "model_names",
    "models_listed",
    "not_a_stream",
    "not_text",
    "parse_retry_after",
    "path_hint",
    "rate_limit_wait",
    "send_streamed",
    "server_dropped_connection",
    "shared_tls",
    "unfinished",
    "unlisted_model",
    "usage_of",
]


@functools.cache
def shared_tls() -> ssl.SSLContext:
    """One TLS context for every provider's client in the process: building one loads the
    CA bundle (~25 ms), and an evaluation over eight replicas made 33 of them. httpx's own
    defaults (certifi, or `SSL_CERT_FILE` / `SSL_CERT_DIR`)."""
    import httpx

    return httpx.create_ssl_context()


def server_dropped_connection(exc: BaseException) -> bool:
    """True when a request failed because the server closed a kept-alive connection without
    sending any response (httpx's RemoteProtocolError, possibly wrapped by an SDK).

    Servers close idle pooled connections; a request that races the close never reached the
    application, so one immediate retry on a fresh connection is safe. The SDKs do this with
    their own retries, which we turn off; this is the one retry we keep.
    """
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return False
        if type(seen).__name__ == "RemoteProtocolError":
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def unfinished(provider: str) -> ProviderConnectionError:
    """A stream that ended (the connection closed in good order) before the model said it had
    finished."""
    return ProviderConnectionError(provider, "the stream ended before the model finished")


def connection_error(provider: str, exc: BaseException, mid_stream: bool = False,
                     server: str = "") -> ProviderConnectionError:
    """A transport failure (httpx's, or an SDK's over it) in the one wording every provider
    uses: during the reply, "connection broke"; before it, "cannot connect" (to `server`, when
    named), "timed out", or "connection failed"; each with the library's class name."""
    import httpx

    kind = type(exc).__name__
    if mid_stream:
        return ProviderConnectionError(provider, f"connection broke: {kind}")
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return ProviderConnectionError(provider, f"timed out ({kind})")
    if isinstance(exc, httpx.ConnectError | ConnectionError):
        where = server or _host_port(exc)
        said = str(exc).lower()
        why = "refused: is the server running there?" if "refused" in said or \
            "all connection attempts failed" in said else \
            "no such host" if "name or service" in said or "nodename" in said else \
            f"{kind}"
        return ProviderConnectionError(
            provider, f"cannot connect{f' to {where}' if where else ''} ({why})")
    return ProviderConnectionError(provider, f"connection failed ({kind})")


def _host_port(exc: BaseException) -> str:
    """The host and port an httpx error was about ("" when it does not say)."""
    try:
        url = exc.request.url  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # httpx raises RuntimeError when none was set
        return ""
    port = url.port or (443 if url.scheme == "https" else 80)
    return f"{url.host}:{port}" if url.host else ""


async def send_streamed(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """`request` sent for a streamed reply (the caller closes it): once more on a fresh
    connection when the server dropped a pooled one without answering
    (`server_dropped_connection`)."""
    try:
        return await client.send(request, stream=True)
    except Exception as exc:
        if not server_dropped_connection(exc):
            raise
        return await client.send(request, stream=True)  # on a fresh connection


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def _number(value: str) -> float | None:
    """A header's plain number of seconds, never below 0; None when it is no finite number
    ("inf", "nan" and 1e999 are words Python's `float` reads, and no wait anyone can do)."""
    try:
        number = float(value)
    except ValueError:
        return None
    return max(0.0, number) if math.isfinite(number) else None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _reset_seconds(value: str, now: float) -> float | None:
    """One reset header's value in seconds: OpenAI's durations (`1s`, `6m0s`, `20ms`), plain
    seconds, or an RFC 3339 time (Anthropic's `anthropic-ratelimit-*-reset`)."""
    value = value.strip()
    seconds = _number(value)
    if seconds is not None:
        return seconds
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        return sum(float(n) * _UNIT[u] for n, u in parts)
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, when.timestamp() - now) if when.tzinfo else None


def rate_limit_wait(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds a 429 asks to wait: `Retry-After` (seconds or an HTTP date), `retry-after-ms`,
    else the latest reset the rate-limit headers name (OpenAI's `x-ratelimit-reset-requests`
    and `-tokens`, Anthropic's `anthropic-ratelimit-*-reset`); None when none says."""
    lowered = {k.lower(): v for k, v in headers.items()}
    now = time.time() if now is None else now
    found = parse_retry_after(lowered.get("retry-after"), now)
    if found is not None:
        return found
    milliseconds = _number(lowered.get("retry-after-ms", ""))
    if milliseconds is not None:
        return milliseconds / 1000
    resets = [seconds for name, value in lowered.items()
              if (name.startswith("x-ratelimit-reset") or (
                  name.startswith("anthropic-ratelimit-") and name.endswith("-reset")))
              and (seconds := _reset_seconds(value, now)) is not None]
    return max(resets) if resets else None


MESSAGE_KEPT = 4000
"""Characters of a server's error message kept (for the log, and to read a window from)."""
LINE_SHOWN = 300
"""Characters of its first line shown to the user."""


def error_message(body: bytes | str, fallback: str) -> str:
    """The human part of an error body, whole (up to `MESSAGE_KEPT` characters), lines and all
    (`error_for_status` decides what is shown): OpenAI/Anthropic `{"error": {"message"}}`,
    Ollama `{"error": "…"}`, a top-level `message`, Gemini's list of such objects, FastAPI's
    `{"detail": …}` (vLLM, TGI, custom servers; its validation errors as `where: what`), or
    plain text."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data = read_json(text)
    except ValueError:
        return text.strip()[:MESSAGE_KEPT] or fallback
    message = _said(data)
    return message[:MESSAGE_KEPT] if message else fallback


def _said(data: object, depth: int = 0) -> str:
    """What an error object says, or "" (see `error_message`)."""
    if depth > 3:
        return ""
    if isinstance(data, str):
        return data.strip()
    if isinstance(data, list):  # Gemini: [{"error": {…}}]; FastAPI: a list of validation errors
        return "; ".join(filter(None, (_said(item, depth + 1) for item in data[:5])))
    if not isinstance(data, dict):
        return ""
    if "msg" in data and isinstance(data["msg"], str):  # one FastAPI validation error
        where = ".".join(str(part) for part in data.get("loc") or [] if part is not None)
        return f"{where}: {data['msg']}" if where else data["msg"]
    for key in ("error", "message", "detail", "error_description"):
        found = _said(data.get(key), depth + 1)
        if found:
            return found
    kind = data.get("type")
    return kind if isinstance(kind, str) else ""


def first_line(message: str, provider: str = "", status: int | None = None) -> str:
    """What a user is shown of a server's message: its first line (gateways such as
    LiteLLM's proxy send several, a traceback among them), cut to `LINE_SHOWN`; the whole
    message goes to the log."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return message.strip()
    shown = lines[0] if len(lines[0]) <= LINE_SHOWN else _cut_at_word(lines[0], LINE_SHOWN - 1)
    if len(lines) > 1 or shown != lines[0]:
        log.warning("%s: HTTP %s, the server's whole message:\n%s", provider or "provider",
                    status, message)
        shown += " (the whole message is in the log)"
    return shown


def _cut_at_word(line: str, most: int) -> str:
    """`line` cut to at most `most` characters and "…", at the last space or punctuation
    before the cut, never inside a word or a number (`"n_ctx":102…` read as a window of
    102); the hard cut only when the line has no such place in its second half."""
    head = line[:most]
    at = max(head.rfind(" "), head.rfind(","), head.rfind(";"))
    if at >= most // 2:
        head = head[:at]
    return head.rstrip(" ,;:") + "…"


_ENDPOINTS = ("/chat/completions", "/completions", "/messages", "/responses", "/models",
              "/embeddings")
"""Paths a provider's base_url must not end in: detektiv adds them."""


def path_hint(status: int, kind: str, base_url: str, path: str) -> str:
    """What a 404 most often means for a provider of `kind` at `base_url` (detektiv asked
    `base_url + path`): the `/v1` detektiv adds itself (anthropic) or does not (openai) is
    missing or doubled. "" for any other status, and when the URL looks right (a 404 then
    says something else: an unknown model)."""
    base = base_url.rstrip("/")
    asked = f"{base}{path}"
    pasted = next((end for end in _ENDPOINTS if base.lower().endswith(end)), None)
    if pasted is not None and 400 <= status < 500:  # a whole endpoint pasted as base_url
        fixed = base[: -len(pasted)]
        if kind == "anthropic" and fixed.endswith("/v1"):  # the server's root, for this kind
            fixed = fixed[:-3]
        return (f" — detektiv asked {asked}: base_url names an endpoint, and detektiv adds "
                f"{path} itself (base_url = \"{fixed}\")")
    if status != 404:
        return ""
    if kind == "anthropic":
        if base.endswith("/v1"):
            return (f" — detektiv asked {asked}: an anthropic provider's base_url is the "
                    f"server's root, without /v1 (base_url = \"{base[:-3]}\")")
        return (f" — detektiv asked {asked}: an anthropic provider's base_url is the "
                "server's root (https://api.anthropic.com, or a gateway's address such as "
                "http://127.0.0.1:4000), detektiv adds /v1/messages")
    if kind == "openai" and not re.search(r"/v\d", base):
        return (f" — detektiv asked {asked}: an openai provider's base_url ends where the "
                f"API's paths begin, most often in /v1 (base_url = \"{base}/v1\")")
    return ""


_NO_DB = re.compile(r"no[ _]connected[ _]db|no_db_connection", re.IGNORECASE)


def error_for_status(
    provider: str, status: int, message: str, retry_after: float | None = None,
    hint: str = "", location: str | None = None,
) -> ProviderError:
    """The engine error for an HTTP status from a provider: its text is the message's first
    line (`first_line`) and `hint` (said whatever the message's length); what it means (an
    overflow, and the window it names) is read from the whole message. A redirect (3xx, to
    `location`) is a request error: no provider follows one, as the API key would go along."""
    if 300 <= status < 400:
        to = f" to {first_line(location)[:200]}" if location else ""
        return RequestError(provider, f"HTTP {status}: the server redirects{to}; detektiv "
                            "follows no redirect (the API key would go along): set base_url "
                            "to the address it points to", status)
    text = f"HTTP {status}: {first_line(message, provider, status)}{hint}"
    if status in (401, 403) or _NO_DB.search(message):
        # LiteLLM's proxy without a database answers a key it does not know with 400 "No
        # connected db." (its type `no_db_connection`): a key problem, said as one
        return AuthError(provider, f"{text} — the server refused the API key: check the "
                         f"key this provider sends ([providers.{provider}] api_key_env, "
                         "api_key_cmd or api_key)")
    if status == 429:
        return RateLimitedError(provider, text, retry_after)
    if 400 <= status < 500:
        if is_context_overflow(message):
            return ContextOverflowError(provider, text, status, overflow_window(message))
        return RequestError(provider, text, status)
    return ServerError(provider, text, status)


_THINKING_PARTS = frozenset({"thinking", "reasoning", "reasoning_text"})
"""Content parts that hold the model's thinking, never its answer."""


def content_parts(value: object) -> tuple[str, str] | None:
    """A message's or a delta's `content` as (answer, thinking): a string is the answer; a list
    of content parts is read part by part: a part with text (`{"type": "text", "text": …}`,
    as some OpenAI-compatible servers send it, or `output_text`) is the answer, a `thinking`
    part (Mistral's Magistral: its own parts, or text) or a `reasoning` one is thinking, kept
    apart, and Magistral's `reference` part is left out. None when it is anything else (a
    number, an object, a part that is no object or holds no text, such as an image), which
    the caller names as a bad response."""
    if isinstance(value, str):
        return value, ""
    if not isinstance(value, list):
        return None
    answer: list[str] = []
    thinking: list[str] = []
    for part in value:
        if not isinstance(part, dict):
            return None
        kind, text = part.get("type"), part.get("text")
        if kind in _THINKING_PARTS:
            inner = part.get("thinking", text)
            thought = inner if isinstance(inner, str) else content_parts(inner)
            if thought is None:
                return None
            thinking.append(thought if isinstance(thought, str) else "".join(thought))
        elif isinstance(text, str):  # `text`, `output_text`…: a part that holds text
            answer.append(text)
        elif kind != "reference":
            return None  # no text: an image, a text part without text, no type at all
    return "".join(answer), "".join(thinking)


def field_of(value: object, name: str) -> Any:
    """`value[name]` or `value.name`; None when there is no such field. For what a server
    reports beside the answer (usage counts, a stop reason): an odd value there is ignored
    (the counts are then estimated), never a reason to throw the answer away."""
    if isinstance(value, dict):
        return value.get(name)
    if value is None or isinstance(value, str | int | float | list):
        return None
    return getattr(value, name, None)


def not_text(value: object) -> str:
    """How a content that is not text is named in the error: its type and its start."""
    return f"the content was {type(value).__name__}, not text: {str(value)[:80]!r}"


def not_a_stream(content_type: str | None, body: bytes) -> str:
    """What a successful reply that is not a model stream was, for the error message: its
    content type and the first line of its body (an HTML login page from a proxy, a JSON error
    body…). Secrets in it are masked by the error that carries it."""
    kind = (content_type or "").split(";")[0].strip() or "no content type"
    text = body.decode("utf-8", "replace").strip()
    if kind.endswith("json"):
        message = error_message(body, "")
        if message:
            return f"the server answered {kind}, not a stream: {message[:200]}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    first = "".join(ch for ch in first if ch.isprintable())[:160]
    return (f"the server answered {kind}, not a stream"
            + (f": {first}" if first else " (an empty body)"))


def model_listed(model: str, names: list[str]) -> bool:
    """Whether the server's model list has `model`: as listed, or as Gemini (`models/…`) and
    Ollama (`…:latest`) spell the same name."""
    wanted = {model, f"models/{model}", f"{model}:latest", model.removeprefix("models/"),
              model.removesuffix(":latest")}
    return any(name in wanted or name.removeprefix("models/") in wanted for name in names)


def model_names(provider: str, body: bytes) -> list[str]:
    """The model ids a `/models` reply names (`{"data": [{"id": …}, …]}`: OpenAI's shape, and
    Anthropic's); entries without a text id are left out. `BadResponseError` when the body is
    no JSON object."""
    try:
        data = read_json(body)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise BadResponseError(provider, "the model list is not a JSON object")
    models = data.get("data")
    if not isinstance(models, list):
        return []
    return [m["id"] for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]


def models_listed(names: list[str]) -> str:
    """A health check's word for a model list: "2 models listed"."""
    return f"{len(names)} model{'s' if len(names) != 1 else ''} listed"


def unlisted_model(provider: str, model: str, names: list[str]) -> RequestError:
    """The health check's finding that the configured model is not among the server's: every
    call would fail (`HTTP 400 … Invalid model name`)."""
    shown = ", ".join(sorted(names)[:8]) + (f" and {len(names) - 8} more" if len(names) > 8
                                            else "")
    return RequestError(provider, f"model {model!r} is not among the {len(names)} the server "
                        f"lists ({shown}): check the name in the config")


def usage_of(usage: object) -> Usage:
    """OpenAI's usage object (or dict) as `Usage`: the cached prompt tokens in
    `prompt_tokens_details.cached_tokens`, the reasoning tokens in
    `completion_tokens_details.reasoning_tokens`."""
    return Usage(
        field_of(usage, "prompt_tokens"), field_of(usage, "completion_tokens"),
        cached_tokens=field_of(field_of(usage, "prompt_tokens_details"), "cached_tokens"),
        reasoning_tokens=field_of(field_of(usage, "completion_tokens_details"),
                                  "reasoning_tokens"),
    )
