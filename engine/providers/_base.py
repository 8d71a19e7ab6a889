"""The one provider interface: `stream(request) -> AsyncIterator[StreamEvent]`.

A subclass implements `_stream` (its wire protocol, raising `engine.errors` for what it knows)
and `_health`. This base class owns what every kind shares:

- deadlines: time to first token, between tokens (a stall) and total, enforced while *we* wait
  for the provider and never while the caller handles an event (a slow consumer is not the
  provider's fault);
- a stream that ends without the model saying it finished is a cut stream
  (`ProviderConnectionError`), never silently accepted as a complete answer;
- chat-template markers (`<|im_end|>`…) a server lets through never reach the answer
  (`engine.text.TemplateMarkers`);
- reasoning is its own stream: `<think>` blocks written into the answer are split out
  (`ThinkBlocks`) and come as `ReasoningDelta`, like the wire's own reasoning channel; with
  `reasoning = "hide"` neither is passed on;
- anything unexpected from a library becomes `BadResponseError`, never a crash;
- closing the iterator (or cancelling its task) closes the underlying stream at once.
"""

from __future__ import annotations

import asyncio
import json
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from engine.config.providers import (
    ANTHROPIC_URL,
    CLOUD_TIMEOUT,
    DEMONSTRATION_REPLY,
    GEMINI_URL,
    LOCAL_TIMEOUT,
    ProviderConfig,
    is_loopback,
)
from engine.errors import (
    AuthError,
    BadResponseError,
    DetektivError,
    FirstTokenTimeout,
    ProviderError,
    ProviderTimeout,
    RequestError,
    StallTimeout,
    TotalTimeout,
)
from engine.providers._deadline import Deadline, Speed, fitted
from engine.providers._events import (
    MOST_CHARACTERS,
    Done,
    Health,
    HealthCheck,
    Message,
    PullProgress,
    ReasoningDelta,
    StreamEvent,
    StreamRequest,
    TokenChoices,
    TokenDelta,
    WasReasoning,
    most_characters,
    too_long,
)
from engine.providers._http import connection_error, not_text, unfinished
from engine.providers._llamacpp import api_root
from engine.providers._reasoning import ThinkBlocks
from engine.providers._slots import ASK_TIMEOUT as SLOTS_TIMEOUT, gate_of
from engine.secrets import KeyResolutionError, register_secret, run_key_command
from engine.text import TemplateMarkers, strip_control

__all__ = ["Provider", "standard_key_env"]

def standard_key_env(config: ProviderConfig) -> str | None:
    """The conventional key variable for official endpoints; None for self-hosted servers."""
    if config.kind == "anthropic":
        base = (config.base_url or ANTHROPIC_URL).rstrip("/")
        return "ANTHROPIC_API_KEY" if base == ANTHROPIC_URL else None
    if config.kind == "openai":
        if config.base_url is None or "api.openai.com" in config.base_url:
            return "OPENAI_API_KEY"
        if config.base_url.rstrip("/") == GEMINI_URL.rstrip("/"):
            return "GEMINI_API_KEY"
    return None


def _split(blocks: ThinkBlocks, text: str | None, shown: bool
           ) -> list[TokenDelta | ReasoningDelta | WasReasoning]:
    """The events `text` makes once inline reasoning blocks are split out (None: the reply
    ended, what was held back comes out); reasoning only when `shown`."""
    if text == "":
        return []
    reasoning, answer = blocks.feed(text) if text is not None else blocks.finish()
    events: list[TokenDelta | ReasoningDelta | WasReasoning] = []
    if blocks.rethought is not None:
        events.append(WasReasoning(blocks.rethought if shown else ""))
        blocks.rethought = None
    if reasoning and shown:
        events.append(ReasoningDelta(reasoning))
    if answer:
        events.append(TokenDelta(answer))
    return events


class Provider(ABC):
    """A configured model provider. Create with `engine.providers.create_provider`."""

    def __init__(self, name: str, config: ProviderConfig, env: Mapping[str, str]) -> None:
        self.name = name
        self.config = config
        self._env = env
        self._key: tuple[str | None] | None = None  # resolved once, then reused
        self.speed: Speed | None = None
        """How fast the server's model ran, when its replies say so (a llama.cpp server's
        `timings`): its deadline for a reply is then fitted to it (`reply_deadline`)."""

    stops_at_markers = False
    """True for a kind whose model runs under a template it may not know (the embedded one):
    the first chat-template marker ends the answer. Other kinds lose only trailing markers."""

    @property
    def kind(self) -> str:
        """The provider kind (openai, anthropic, ollama, local)."""
        return self.config.kind

    @property
    def model(self) -> str:
        """The model name this provider calls."""
        return self.config.model

    @property
    def label(self) -> str:
        """`"{provider}:{model}"`, as recorded in `provider_used`."""
        return f"{self.name}:{self.model}"

    async def resolved_key(self) -> str | None:
        """`api_key()`, resolved once per provider; a key command runs on a worker thread."""
        if self._key is None:
            if self.config.api_key_cmd and not self.config.api_key_env:
                self._key = (await asyncio.to_thread(self.api_key),)
            else:
                self._key = (self.api_key(),)
        return self._key[0]

    def api_key(self) -> str | None:
        """Resolve the key (`engine.config.models` says the order); `AuthError` if missing."""
        config = self.config
        if config.api_key_env:
            value = self._env.get(config.api_key_env, "").strip()
            if not value:
                raise AuthError(
                    self.name, f"no API key: environment variable {config.api_key_env} is not set"
                )
            register_secret(value)
            return value
        if config.api_key_cmd:
            try:
                return run_key_command(config.api_key_cmd)
            except KeyResolutionError as exc:
                raise AuthError(self.name, f"no API key: {exc}") from None
        standard = standard_key_env(config)
        if standard and self._env.get(standard, "").strip():
            value = self._env[standard].strip()
            register_secret(value)
            return value
        if config.api_key is not None:
            value = config.api_key.get_secret_value()
            register_secret(value)
            return value
        if standard:
            raise AuthError(
                self.name, f"no API key: set {standard}, or api_key_env / api_key_cmd in config"
            )
        return None

    async def stream(self, request: StreamRequest, *, gated: bool = True
                     ) -> AsyncGenerator[StreamEvent, None]:
        """Stream the answer to `request` as typed events, ending with `Done`.

        Raises a `ProviderError` subclass on any failure. Closing the iterator early (or
        cancelling the task consuming it) closes the provider's stream immediately. `gated`:
        held within the server's slots (`_slots`); a health probe is not (it measures the
        server, not the calls waiting for it).
        """
        if self.config.is_demonstration and (request.max_tokens or 0) > DEMONSTRATION_REPLY:
            # a tiny model rambles to any limit it is given (a 2,048-token audit narrative)
            request = replace(request, max_tokens=DEMONSTRATION_REPLY)
        first_timeout = request.first_token_timeout or self.config.ttft_timeout
        total_timeout = request.timeout or self.reply_deadline(request)
        stall_timeout = request.stall_timeout or self.stall_deadline(total_timeout)
        if request.first_token_timeout is None and self.config.first_token_timeout is None:
            first_timeout = total_timeout  # the first token may take what the reply may
        first_timeout = min(first_timeout, total_timeout)
        note = "" if request.timeout else self.deadline_note(request)
        await self._prepare()  # our own set-up (an SDK's import) is not the server's time
        gate = gate_of(self) if gated else None
        if gate is not None:  # sent when the server has a slot for it (`_slots`)
            holder = await gate.acquire(self, min(first_timeout, SLOTS_TIMEOUT))
        try:
            async with aclosing(self._timed(request, first_timeout, total_timeout,
                                            stall_timeout, note)) as events:
                async for event in events:
                    yield event
        finally:
            if gate is not None:
                gate.release(holder)

    async def _timed(self, request: StreamRequest, first_timeout: float, total_timeout: float,
                     stall_timeout: float, note: str) -> AsyncGenerator[StreamEvent, None]:
        """`stream` once sent: its deadlines run from now."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        total_deadline = start + total_timeout
        deadline = start + first_timeout
        phase: type[ProviderTimeout] = FirstTokenTimeout  # which deadline `deadline` is
        raw = self._stream(request)
        finished = False
        markers = TemplateMarkers(stop=self.stops_at_markers)
        blocks = ThinkBlocks()
        shown = self.config.reasoning != "hide"
        room = {TokenDelta: most_characters(request.max_tokens), ReasoningDelta: MOST_CHARACTERS}
        watch = Deadline(self.server_working)
        try:
            while True:
                # a first token or a stall that runs late on a server that says it is working
                # (another slot's prompt taken in first) is waited for, up to the whole reply's
                watch.wait(deadline, total_deadline if phase is not TotalTimeout else None)
                try:
                    event = await anext(raw)
                except StopAsyncIteration:
                    if watch.expired:  # the stream swallowed the deadline's cancellation
                        watch.uncancel()
                    break
                except (Exception, asyncio.CancelledError) as exc:
                    if watch.expired and watch.uncancel():
                        # the deadline passed (whatever a library made of its cancellation)
                        if watch.when >= total_deadline:  # waited on to the reply's end
                            phase = TotalTimeout
                        raise self._timed_out(phase, first_timeout, stall_timeout,
                                              total_timeout, note) from None
                    if isinstance(exc, asyncio.CancelledError | DetektivError):
                        raise
                    task = asyncio.current_task()
                    if task is not None and task.cancelling():
                        # a library turned our cancellation (Ctrl-C, a stopped worker)
                        # into an error of its own: it stays a cancellation, or the run
                        # would fail over and go on as if nobody had asked it to stop
                        raise asyncio.CancelledError from exc
                    if isinstance(exc, TimeoutError):
                        raise connection_error(self.name, exc) from None
                    raise BadResponseError(
                        self.name, f"unexpected {type(exc).__name__}: {exc}"
                    ) from exc
                finally:
                    watch.done()
                if watch.expired:
                    watch.returned_anyway()
                if type(event) is TokenDelta or type(event) is ReasoningDelta:
                    if not isinstance(event.text, str):  # whatever a provider let through
                        raise BadResponseError(self.name, not_text(event.text))
                    room[type(event)] -= len(event.text)
                    if room[type(event)] < 0:
                        raise BadResponseError(self.name, too_long(event, request.max_tokens))
                    stall_deadline = loop.time() + stall_timeout
                    if stall_deadline < total_deadline:
                        deadline, phase = stall_deadline, StallTimeout
                    else:
                        deadline, phase = total_deadline, TotalTimeout
                    if type(event) is ReasoningDelta:
                        if shown and event.text:
                            yield event
                        continue
                    for piece in _split(blocks, markers.feed(event.text), shown):
                        yield piece
                    if markers.stopped:  # the model left its turn: that is its answer
                        for piece in _split(blocks, None, shown):
                            yield piece
                        finished = True
                        yield Done("stop")
                        break
                    continue
                if type(event) is TokenChoices and blocks.unclosed:
                    continue  # a token of inline reasoning: never read as the answer's
                if type(event) is Done:
                    finished = True
                    for piece in _split(blocks, markers.finish(), shown):
                        yield piece
                    for piece in _split(blocks, None, shown):
                        yield piece
                yield event
        finally:
            watch.close()
            await raw.aclose()
        if not finished:
            raise unfinished(self.name)

    def measured(self, timings: object) -> None:
        """Take in the speed one reply's llama.cpp `timings` report (anything else is left
        out)."""
        self.speed = Speed.taken(self.speed, timings)

    def reply_deadline(self, request: StreamRequest) -> float:
        """Seconds a reply to `request` may take in all: the configured `timeout`; else, once
        the server has reported its speed (`measured`), the time that speed needs for the
        request (`_deadline.fitted`: never less than the kind's default, never more than its
        largest); else the kind's default."""
        if self.config.timeout is not None or self.speed is None:
            return self.config.total_timeout
        _, _, largest = LOCAL_TIMEOUT if self.config.is_local else CLOUD_TIMEOUT
        return fitted(self.speed, sum(len(m.content) for m in request.messages),
                      request.max_tokens, self.config.total_timeout, largest)

    def deadline_note(self, request: StreamRequest) -> str:
        """How `reply_deadline` was fitted, for a timeout's message ("" when it was not)."""
        if self.config.timeout is not None or self.speed is None:
            return ""
        return (f"fitted to the {self.speed.reply:.1f} tokens a second the server reported "
                f"for {request.max_tokens or 512:,} tokens")

    def stall_deadline(self, total: float) -> float:
        """Seconds between two tokens before the stream counts as stalled (`total`: the
        reply's whole deadline): the configured `stall_timeout`, or the kind's default."""
        return self.config.between_tokens_timeout

    def _timed_out(self, phase: type[ProviderTimeout], first: float, stall: float,
                   total: float, note: str = "") -> ProviderTimeout:
        """The timeout error of the deadline that passed (`phase`), in words, with the
        setting that allows longer."""
        fitted = f", {note}" if note else ""
        if phase is FirstTokenTimeout:
            setting = "first_token_timeout" if self.config.first_token_timeout is not None \
                else "timeout"
            return phase(self.name, f"no token within {first:g} s{fitted}; raise the "
                         f"provider's {setting} ({self._where()})", first)
        if phase is StallTimeout:
            return phase(self.name, f"no token for {stall:g} s; raise the provider's "
                         f"stall_timeout ({self._where()})", stall)
        return phase(self.name, f"answer not finished within {total:g} s{fitted}; raise the "
                     f"provider's timeout ({self._where()}); the session can be resumed",
                     total)

    def _where(self) -> str:
        """Where this provider's settings go."""
        if self.config.origin == "adhoc":
            return "configure it as a provider in config.toml"
        return f"[providers.{self.name}] in config.toml"

    async def health(self, timeout: float = 5.0) -> Health:
        """One cheap live call; never raises. `detail` says what answered, or why not."""
        start = time.perf_counter()
        ok, detail = False, ""
        check: HealthCheck = "probe" if self.config.health_check == "probe" else \
            self._health_asks()
        try:
            async with asyncio.timeout(timeout):
                if check == "probe":
                    detail = await self._probe()
                else:
                    said = await self._health()
                    detail, check = said if isinstance(said, tuple) else (said, "server")
                ok = True
        except TimeoutError:
            detail = f"no answer in {timeout:g} s"
        except ProviderError as exc:
            detail = exc.detail
            check = getattr(exc, "check", check)  # the check that found it down
        except Exception as exc:  # a health check must never take the caller down
            detail = BadResponseError(self.name, f"{type(exc).__name__}: {exc}").detail
        # what answered is often a server's own words (its version, its models' names)
        return Health(ok, (time.perf_counter() - start) * 1000, strip_control(detail),
                      check=check)

    async def _probe(self) -> str:
        """`health_check = "probe"`: one request for one token, answered to its end."""
        request = StreamRequest.of("Say OK.", max_tokens=1, temperature=0)
        async for event in self.stream(request, gated=False):
            if isinstance(event, Done):
                return f"answered a 1-token request ({event.finish_reason})"
        raise BadResponseError(self.name, "the 1-token request ended without an answer")

    # ---- capabilities some kinds have (Ollama: both) ----------------------------------------

    # ---- the context window (engine.context asks; each kind says what it knows) -----------

    @property
    def schema_is_text(self) -> bool:
        """Whether a request's schema reaches the model as prompt text, to be counted in the
        window: the anthropic kind writes it into the system prompt, a vendor's API turns it
        into text of its own. Elsewhere (llama.cpp, vLLM, Ollama, a gateway in front of them)
        it becomes a grammar, which takes no room."""
        return self.kind == "anthropic" or self.official

    @property
    def refuses_overflow(self) -> bool:
        """Whether a prompt longer than the window is refused (a 400 that names it), not
        silently cut: only then is a prompt sent that the estimate fits and the bound does
        not (`engine.context.budget`). Ollama cuts the prompt's start to `num_ctx` instead."""
        return self.kind != "ollama"

    @property
    def server_url(self) -> str | None:
        """The URL of the server this provider talks to; None for a vendor's API named by
        its kind alone."""
        return self.config.base_url

    def slot_key(self) -> str | None:
        """The server whose slots this provider's calls share (`_slots`): its API root, or
        None for a vendor's API with no `slots` configured (no limit of ours to keep)."""
        if self.server_url:
            return api_root(self.server_url).lower()
        if self.config.slots is not None:
            return f"{self.kind}:{self.name}"
        return None

    shares_cores = False
    """Whether its slots share this machine's CPU cores (the embedded model): calls side by
    side then mostly wait for one another's prompts (`routing.slots.role_slots`)."""

    @property
    def on_this_machine(self) -> bool:
        """Whether the server runs here (loopback): one slot is assumed until it says more."""
        host = urlsplit(self.server_url).hostname if self.server_url else None
        return host is not None and is_loopback(host)

    async def server_working(self) -> bool:
        """Whether the server says it is working on a request (llama.cpp's `/slots`): a call
        waiting for its first token, or stalled mid-answer while the server takes in another
        slot's prompt, is not a dead server. False where the server cannot say."""
        return False

    def schema_prompt(self, schema: dict[str, Any]) -> str:
        """The text a request's `schema` adds to the prompt (`schema_is_text`), else "": what
        the window keeps room for and what a reply's prompt count is measured with. A
        vendor's API makes text of its own of it: about the schema's compact JSON."""
        if not self.schema_is_text:
            return ""
        return json.dumps(schema, separators=(",", ":"))

    def read_messages(self, messages: Sequence[Message],
                      schema: dict[str, Any] | None) -> list[Message]:
        """`messages` as the model reads them, for an exact count: as they are sent, the
        schema a grammar (the anthropic kind joins its system prompt, the schema's text in
        it)."""
        return list(messages)

    @property
    def official(self) -> bool:
        """True for the vendor's own endpoint (its model names mean what they say)."""
        return self.kind == "anthropic" or standard_key_env(self.config) is not None

    counts_exactly: bool | None = None
    """Whether `count_tokens` counts exactly, when known without asking the server (None:
    `engine.context.windows` asks it once)."""

    window_said_by = ""
    """Where `context_window` read the window it returned (`/props`, `/model/info`, …)."""

    async def context_window(self) -> int | None:
        """The context window the server gives one request, in tokens; None when it cannot
        say (then `engine.context` uses the configured or default figure)."""
        return None

    async def slots(self) -> int | None:
        """How many requests the server serves at once, when it says (llama.cpp's slots);
        None otherwise."""
        return None

    async def count_tokens(self, messages: Sequence[Message]) -> int | None:
        """The exact prompt tokens of `messages` as the server would see them, template
        included; None when this kind cannot count."""
        return None

    _counters: tuple[str, ...] = ()
    """The llama.cpp servers behind a gateway that count its prompts (`_gateway.backend_count`),
    as the gateway's `/model/info` named them when the window was asked."""

    @property
    def counts_every_prompt(self) -> bool:
        """Whether every prompt is counted exactly, none bounded by earlier counts
        (`engine.context.measure.within_bound`): a gateway whose llama.cpp backend counts.
        Its replies report what the gateway counted, which a bound by earlier counts is up to
        half again above, and the anthropic kind's schema is text there, which such a bound
        leaves out; a count is two round trips to a server on the gateway's host."""
        return bool(self._counters)

    replica_count = 1
    """Endpoints this provider spreads its calls over (`ReplicatedProvider`: its replicas)."""

    def has_ready_replica(self) -> bool:
        """Whether another call could go to a replica not set aside (always False for a
        provider of one endpoint: the router then fails over to the next provider)."""
        return False

    can_list_models = False
    """True when `list_models` asks the server (the others raise `RequestError`)."""
    @property
    def gives_logprobs(self) -> bool:
        """True when the wire sends the answer's token log-probabilities when asked
    (`StreamRequest.top_logprobs` → `TokenChoices`); a judgement then reads its probability
    from them, else from the model's stated one (`engine.interrogation.judgement`)."""
        return False
    can_pull = False
    """True when `pull` can fetch a model onto the server."""

    async def list_models(self) -> list[str]:
        """Names of the models the server has; `RequestError` for a kind that cannot say."""
        raise RequestError(self.name, f"a {self.kind} provider cannot list its models")

    async def pull(self, model: str) -> AsyncGenerator[PullProgress, None]:
        """Fetch `model` onto the server, yielding progress; `RequestError` for a kind that
        cannot."""
        raise RequestError(self.name, f"a {self.kind} provider cannot pull models")
        yield  # pragma: no cover - makes this an async generator, like the real ones

    async def aclose(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Release connections; the provider can still be used afterwards (they reopen)."""

    async def _prepare(self) -> None:  # noqa: B027 - optional hook, not abstract
        """What a call needs before it is sent (a client built, its SDK imported), done before
        the deadlines start: the time to the first token is the server's, not ours."""

    @abstractmethod
    def _stream(self, request: StreamRequest) -> AsyncGenerator[StreamEvent, None]:
        """The wire protocol: yield events, raise `engine.errors`, close resources on exit."""

    @abstractmethod
    async def _health(self) -> str | tuple[str, HealthCheck]:
        """A cheap live call; return a short description of what answered, with what was
        asked when that is not the model's own server (`HealthCheck`). An error raised may
        carry a `check` attribute: the check that found the provider down."""

    def _health_asks(self) -> HealthCheck:
        """What `_health` asks, as far as known before it runs."""
        return "server"
