"""The embedded llama.cpp engine (xllamacpp): model file, loading, and the thread bridge.

`xllamacpp.Server` runs llama.cpp in-process. `handle_chat_completions(body, callback)` blocks
its calling thread and calls `callback(chunk)` for every streamed chunk; returning True stops
generation. `LlamaEngine.chat` runs that call on a thread of its own and hands chunks to
asyncio through `call_soon_threadsafe`; closing the async iterator makes the next callback
return True, so the model stops within one token.

The same server also listens on HTTP (OpenAI-compatible). In-process that port is locked with a
random API key; `serve()` opens it for `detektiv local-server`.

A generation still running when the interpreter exits (a run stopped by SIGTERM, the app quit
mid-answer) is stopped and waited for at exit (`_stop_generations`, up to `EXIT_WAIT`
seconds): a daemon thread left inside llama.cpp is torn down by CPython's finalisation with a
forced unwind that llama.cpp's `catch (...)` swallows, and the process aborted with "FATAL:
exception not rethrown" instead of exiting with its code.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import secrets
import threading
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.providers._deadline import Speed
from engine.providers._speculation import Speculation
from engine.text import END_OF_TURN_MARKERS

__all__ = [
    "LlamaEngine",
    "LlamaOptions",
    "default_threads",
]

_END = object()
log = logging.getLogger(__name__)

EXIT_WAIT = 15.0
"""Seconds the interpreter's exit waits for generations it stopped (one token each, or the
prompt being read)."""

_generations: set[tuple[threading.Thread, threading.Event]] = set()
_generations_lock = threading.Lock()


@atexit.register
def _stop_generations() -> None:
    """Stop every generation still running and wait for its thread (see the docstring)."""
    with _generations_lock:
        running = list(_generations)
    for _, stop in running:
        stop.set()
    deadline = time.monotonic() + EXIT_WAIT
    for thread, _ in running:
        thread.join(max(0.0, deadline - time.monotonic()))


def default_threads() -> int:
    """All the cores this process may use, but one.

    llama.cpp's threads meet at a barrier after every operation: when one of them loses its
    core, all wait. Measured here (2 cores, 64 tokens): two threads take 1.7 s idle but 28 s
    with the other core busy; one thread takes 3.0 s either way. Leaving a core free keeps the
    model steady beside the TUI, a second model or anything else the user runs.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 2
    return max(1, cores - 1)


@dataclass(frozen=True)
class LlamaOptions:
    """How to load a model. Engines are shared per distinct options within a process."""

    model_path: Path
    n_ctx: int = 32768
    n_parallel: int = 4
    n_threads: int = 0
    """CPU threads; 0 means `default_threads()`."""
    port: int = 0
    host: str = "127.0.0.1"
    public: bool = False
    """False: lock the HTTP port with a random key (in-process use). True: serve it openly."""
    speculation: Speculation = Speculation()
    """How it decodes (`engine.providers._speculation`): plain unless a draft or n-grams."""


class LlamaEngine:
    """One loaded model, shared by every `local` provider with the same options."""

    _engines: dict[LlamaOptions, LlamaEngine] = {}
    _engines_lock = threading.Lock()

    def __init__(self, options: LlamaOptions) -> None:
        self.options = options
        self._server: Any = None
        self._load_lock = threading.Lock()
        self.address: str | None = None
        self.auth: dict[str, str] = {}
        """Headers that open the HTTP port (its random key, in-process)."""
        self.speed: Speed | None = None
        """How fast the model ran here (None until a reply measured it): each provider's
        deadline for a reply is fitted to it (`LocalProvider.reply_deadline`)."""
        self.last_timings: dict[str, Any] = {}
        """The last reply's llama.cpp `timings`."""
        self.speculation: Speculation = options.speculation
        """How it decodes once loaded: plain, with the reason, where the draft failed to
        load."""

    def measured(self, timings: object) -> None:
        """Take in one reply's llama.cpp `timings` (kept whole as `last_timings`: its
        `draft_n` and `draft_n_accepted` say what speculation proposed and kept)."""
        self.speed = Speed.taken(self.speed, timings)
        if isinstance(timings, dict):
            self.last_timings = dict(timings)

    @classmethod
    def shared(cls, options: LlamaOptions) -> LlamaEngine:
        """The process-wide engine for `options` (created, not yet loaded)."""
        with cls._engines_lock:
            engine = cls._engines.get(options)
            if engine is None:
                engine = cls._engines[options] = cls(options)
            return engine

    @property
    def loaded(self) -> bool:
        """True once the model is in memory."""
        return self._server is not None

    def load(self) -> None:
        """Load the model (blocking; ~1 s for the bundled one). Safe to call repeatedly."""
        with self._load_lock:
            if self._server is not None:
                return
            import xllamacpp

            path = self.options.model_path
            if not path.is_file():
                raise FileNotFoundError(f"model file not found: {path}")
            speculation = self.options.speculation
            try:
                self._server = xllamacpp.Server(self._params(speculation))
            except Exception as exc:
                if speculation.kind == "off":
                    raise
                # the draft (or the kind) is what failed: the model alone, said once
                what = (f"draft {speculation.draft.name}" if speculation.draft is not None
                        else speculation.label().removeprefix("speculative: "))
                speculation = Speculation(why=f"{what} failed to load: {str(exc)[:160]}")
                log.warning("%s: %s", path.name, speculation.label())
                self._server = xllamacpp.Server(self._params(speculation))
            self.speculation = speculation
            self.address = self._server.listening_address

    def _params(self, speculation: Speculation) -> Any:
        """xllamacpp's parameters for this engine's options, with `speculation`."""
        import xllamacpp

        path = self.options.model_path
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = self.options.n_ctx
        params.n_parallel = self.options.n_parallel
        threads = self.options.n_threads or default_threads()
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.port = self.options.port
        params.hostnames = [self.options.host]
        # llama.cpp logs every request to stderr; -1 keeps it quiet (the TUI also sends
        # fd 2 to a log file, for what still gets through).
        params.verbosity = -1
        # The bundled GGUF carries no chat template; llama.cpp falls back to ChatML, which
        # the base model does not know: it writes `<|im_end|>` and then turns of its own.
        # Every request that names no `stop` stops at the markers of the common templates
        # (served ones too, for `local-server`). Gemma's own template was tried: the model
        # then pads JSON with whitespace until the token limit, and structured output fails.
        params.antiprompt = list(END_OF_TURN_MARKERS)
        params.endpoint_slots = True
        params.endpoint_metrics = True
        if not self.options.public:
            if not self.auth:
                self.auth = {"Authorization": f"Bearer {secrets.token_hex(16)}"}
            params.api_keys = [self.auth["Authorization"].removeprefix("Bearer ")]
        speculation.apply(params)
        return params

    async def ensure_loaded(self) -> None:
        """Load the model on a worker thread; never blocks the event loop."""
        if self._server is None:
            await asyncio.to_thread(self.load)

    async def chat(self, body: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
        """Stream chat-completion chunks (dicts, OpenAI's shape) for `body`.

        Errors from llama.cpp arrive as chunks carrying `error`/`code`; a request it rejects
        outright raises ValueError. Closing the iterator stops generation at the next token.
        """
        await self.ensure_loaded()
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        stop = threading.Event()
        put = queue.put_nowait

        def on_chunk(chunk: dict[str, Any]) -> bool:
            if stop.is_set():
                return True
            try:
                loop.call_soon_threadsafe(put, chunk)
            except RuntimeError:  # the loop is gone: nobody is listening any more
                return True
            return False

        def run() -> None:
            try:
                self._server.handle_chat_completions({**body, "stream": True}, on_chunk)
            except BaseException as exc:  # handed to the consumer, not lost on this thread
                outcome: Any = exc
            else:
                outcome = _END
            finally:
                with _generations_lock:
                    _generations.discard(generation)
            try:
                loop.call_soon_threadsafe(put, outcome)
            except RuntimeError:
                pass

        thread = threading.Thread(target=run, name="detektiv-llama", daemon=True)
        generation = (thread, stop)
        with _generations_lock:
            _generations.add(generation)
        thread.start()
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
