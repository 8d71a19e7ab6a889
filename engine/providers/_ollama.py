"""`ollama` kind: Ollama's native API through the `ollama` package's AsyncClient.

Streaming chat (NDJSON) with `format` set to the JSON schema, `keep_alive` and `options`; the
model list; pull with progress; the version as the cheap health call. The host is the
provider's `base_url`, else `OLLAMA_HOST`, else http://127.0.0.1:11434.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

import httpx

from engine.config.providers import OLLAMA_URL
from engine.errors import BadResponseError, ProviderError, ServerError
from engine.jsondata import read_json
from engine.providers._base import Provider
from engine.providers._events import (
    Done,
    PullProgress,
    ReasoningDelta,
    StreamEvent,
    StreamRequest,
    TokenDelta,
    Usage,
    finish_reason_of,
)
from engine.providers._http import (
    connection_error,
    error_for_status,
    error_message,
    not_a_stream,
    server_dropped_connection,
)
from engine.providers._reading import bound_lines

if TYPE_CHECKING:
    import ollama

__all__ = ["OLLAMA_DEFAULT_CTX", "OllamaProvider", "ollama_host", "ollama_window"]


def ollama_host(base_url: str | None, env: Mapping[str, str]) -> str:
    """Normalise a host the way `ollama serve` accepts it (`host`, `host:port`, a URL)."""
    raw = (base_url or env.get("OLLAMA_HOST") or OLLAMA_URL).strip().rstrip("/")
    bare = "://" not in raw  # like Ollama: only a bare host gets the default port 11434
    scheme, _, rest = (f"http://{raw}" if bare else raw).partition("://")
    host, slash, path = rest.partition("/")
    if host.startswith("0.0.0.0"):  # a listen address: connect to loopback
        host = "127.0.0.1" + host[len("0.0.0.0") :]
    if bare and ":" not in host.rsplit("]", 1)[-1]:
        host += ":11434"
    return f"{scheme}://{host}{slash}{path}"


def _think(effort: str | None) -> bool | str | None:
    """Ollama's `think` option from `reasoning_effort`: a level passes as it is (gpt-oss takes
    `low`/`medium`/`high`), `true`/`false` (or `on`/`off`, `none`) switch thinking."""
    if effort is None:
        return None
    word = effort.strip().lower()
    if word in ("true", "on", "yes"):
        return True
    if word in ("false", "off", "no", "none"):
        return False
    return word


class OllamaProvider(Provider):
    """Streams from an Ollama server."""

    can_list_models = True
    can_pull = True

    _client: ollama.AsyncClient | None = None

    @property
    def host(self) -> str:
        """The Ollama URL this provider talks to."""
        return ollama_host(self.config.base_url, self._env)

    @property
    def server_url(self) -> str | None:
        return self.host

    def _get_client(self) -> ollama.AsyncClient:
        if self._client is None:
            import ollama

            self._client = ollama.AsyncClient(
                host=self.host,
                timeout=httpx.Timeout(self.config.total_timeout, connect=10.0),
                event_hooks={"response": [self._check_chat_reply]},
                follow_redirects=False,  # as every provider: the SDK would follow
            )
        return self._client

    async def _check_chat_reply(self, response: httpx.Response) -> None:
        """A successful chat reply must be JSON lines: anything else (an HTML page from a
        proxy) fails with what it was, not as a "malformed line". An unlabelled body that
        starts with JSON is let through; it streams from what was read. A redirect, to any
        endpoint, is named where it points (followed by no provider: `error_for_status`)."""
        if 300 <= response.status_code < 400:
            raise error_for_status(self.name, response.status_code, "",
                                   location=response.headers.get("location"))
        if response.status_code >= 400 or not response.url.path.endswith("/api/chat"):
            return
        content_type = response.headers.get("content-type")
        labelled = "json" in (content_type or "").lower()
        # the SDK reads lines with no end in sight; a body labelled otherwise is named below
        bound_lines(response, self.name, objects=labelled)
        if labelled:
            return
        body = await response.aread()
        if body.lstrip().startswith(b"{"):
            return
        raise BadResponseError(self.name, not_a_stream(content_type, body))

    def _map(self, exc: BaseException, mid_stream: bool = False) -> ProviderError:
        """`exc` as the engine names it; `mid_stream`: the reply had begun."""
        import ollama

        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, ollama.ResponseError):
            if exc.status_code == -1:  # an error line inside the stream
                return ServerError(self.name, str(exc.error))
            return error_for_status(self.name, exc.status_code, str(exc.error))
        if isinstance(exc, ConnectionError | httpx.TransportError):
            return connection_error(self.name, exc, mid_stream, server=f"Ollama at {self.host}")
        if isinstance(exc, ValueError):  # json.JSONDecodeError, pydantic validation
            first = next(iter(str(exc).splitlines()), "")  # pydantic's first line
            return BadResponseError(self.name, f"malformed NDJSON line: {first}")
        return BadResponseError(self.name, f"unexpected {type(exc).__name__}: {exc}")

    async def _stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
        client = self._get_client()
        options: dict[str, Any] = dict(self.config.options)
        if request.max_tokens is not None:
            options["num_predict"] = request.max_tokens
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.frequency_penalty is not None:
            options["frequency_penalty"] = request.frequency_penalty
        if request.seed is not None:
            options["seed"] = request.seed
        arguments: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "stream": True,
            "format": request.schema,
            "options": options or None,
            "keep_alive": self.config.keep_alive,
        }
        think = _think(self.config.reasoning_effort)
        if think is not None:
            arguments["think"] = think
        parts: Any = None
        part: Any = None
        try:
            # The request goes out on the first iteration; a server that dropped a pooled
            # connection without answering gets one retry on a fresh one.
            parts = await client.chat(**arguments)
            try:
                part = await anext(parts, None)
            except Exception as exc:
                if not server_dropped_connection(exc):
                    raise
                await parts.aclose()
                parts = await client.chat(**arguments)
                part = await anext(parts, None)
            while part is not None:
                text = part.message.content if part.message is not None else None
                thought = part.message.thinking if part.message is not None else None
                if thought:
                    yield ReasoningDelta(thought)
                if text:
                    yield TokenDelta(text)
                if part.done:
                    yield Usage(part.prompt_eval_count, part.eval_count)
                    yield Done(finish_reason_of(self.name, part.done_reason or "stop"))
                    return
                part = await anext(parts, None)
        except Exception as exc:
            raise self._map(exc, mid_stream=part is not None) from None
        finally:
            if parts is not None:
                await parts.aclose()

    async def version(self) -> str:
        """The server's version (GET /api/version)."""
        try:
            async with httpx.AsyncClient(base_url=self.host, timeout=5.0) as http:
                reply = await http.get("/api/version")
        except httpx.TransportError as exc:
            raise self._map(exc) from None
        if reply.status_code >= 300:
            message = error_message(reply.content, reply.reason_phrase)
            raise error_for_status(self.name, reply.status_code, message,
                                   location=reply.headers.get("location"))
        try:
            return str(read_json(reply.content)["version"])
        except (ValueError, KeyError, TypeError):
            raise BadResponseError(self.name, "no version in /api/version") from None

    async def list_models(self) -> list[str]:
        """Names of the models the server has (GET /api/tags)."""
        try:
            listing = await self._get_client().list()
        except Exception as exc:
            raise self._map(exc) from None
        return [m.model for m in listing.models if m.model]

    async def pull(self, model: str) -> AsyncGenerator[PullProgress, None]:
        """Pull `model`, yielding progress until the server reports success."""
        parts: Any = None
        try:
            parts = await self._get_client().pull(model, stream=True)
            async for part in parts:
                yield PullProgress(part.status or "", part.digest, part.completed, part.total)
        except Exception as exc:
            raise self._map(exc) from None
        finally:
            if parts is not None:
                await parts.aclose()

    async def context_window(self) -> int | None:
        """`num_ctx` (this provider's options, else the model's parameters, else Ollama's
        default of 4096), never more than the model's own context length (POST /api/show)."""
        async with httpx.AsyncClient(base_url=self.host, timeout=5.0) as http:
            reply = await http.post("/api/show", json={"model": self.config.model})
        if reply.status_code != 200:
            return None
        try:
            data = read_json(reply.content)
        except ValueError:
            return None
        self.window_said_by = "/api/show"
        return ollama_window(data, self.config.options.get("num_ctx"))

    async def _health(self) -> str:
        return f"Ollama {await self.version()}"

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()  # type: ignore[no-untyped-call]


OLLAMA_DEFAULT_CTX = 4096
"""The context Ollama gives a model whose request and Modelfile set no `num_ctx` (on most
machines; the server's OLLAMA_CONTEXT_LENGTH can raise it, which a client cannot see)."""


def _positive(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
    return number if 0 < number <= 10_000_000 else None


def ollama_window(show: object, num_ctx: object = None) -> int | None:
    """The window from an /api/show reply and the provider's own `num_ctx` option."""
    if not isinstance(show, dict):
        return None
    trained = None
    info = show.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if isinstance(key, str) and key.endswith(".context_length"):
                trained = _positive(value)
    runtime = _positive(num_ctx)
    if runtime is None and isinstance(show.get("parameters"), str):
        for line in show["parameters"].splitlines():
            name, _, value = line.strip().partition(" ")
            if name == "num_ctx":
                runtime = _positive(value.strip())
    runtime = runtime or OLLAMA_DEFAULT_CTX
    return min(runtime, trained) if trained else runtime


async def probe_ollama(env: Mapping[str, str], timeout: float = 0.5) -> list[str] | None:
    """The models of an Ollama answering on OLLAMA_HOST, or None when none answers."""
    host = ollama_host(None, env)
    try:
        async with httpx.AsyncClient(base_url=host, timeout=timeout) as http:
            reply = await http.get("/api/tags")
            reply.raise_for_status()
            data = read_json(reply.content)
    except (httpx.HTTPError, ValueError):
        return None
    try:
        return [str(m["model"] if "model" in m else m["name"]) for m in data.get("models", [])]
    except (TypeError, KeyError, AttributeError):
        return None

