"""Context windows: how many tokens a provider takes, found once per process.

The window is, first found: `context_window` in the provider's configuration; what the server
says (llama.cpp: the slot's `n_ctx`; the `local` kind: `n_ctx / n_parallel`; Ollama: the
model's context length, capped by `num_ctx`); the default for its model or kind
(`DEFAULT_WINDOWS`). What was discovered is kept per provider configuration, for the process,
with whether the server counts a prompt's tokens exactly.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import httpx

from engine.providers import Message

if TYPE_CHECKING:
    from engine.providers import Provider

__all__ = ["DEFAULT_WINDOWS", "Window", "WindowSource", "default_window", "forget", "key_of",
           "mark_inexact", "transient", "window_of"]

log = logging.getLogger(__name__)

WindowSource = Literal["config", "server", "model", "default"]

DEFAULT_WINDOWS: dict[str, int] = {
    "openai": 128_000,
    "openai-compatible": 8_192,
    "anthropic": 200_000,
    "ollama": 4_096,
    "local": 8_192,
}
"""Per kind, when neither the configuration nor the server says: OpenAI's models take 128k,
Anthropic's 200k; an unknown OpenAI-compatible server gets a cautious 8k; Ollama runs a model at
4k unless `num_ctx` (or OLLAMA_CONTEXT_LENGTH on the server) says otherwise."""

_MODEL_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4.1", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("gemini", 1_048_576),
    ("claude", 200_000),
)
"""Known model families (by name prefix) on the official endpoints."""

@dataclass(frozen=True, slots=True)
class Window:
    """A provider's context window in tokens, where that figure came from, and whether the
    provider counts a prompt's tokens exactly."""

    tokens: int
    source: WindowSource
    exact: bool = False
    said_by: str = ""
    """Where a server's window was read (`/props`, `/model/info`, a refusal), for
    `describe`."""
    every: bool = False
    """Every prompt is counted, none bounded by earlier counts
    (`Provider.counts_every_prompt`, as the discovery found it: a provider made later for
    the same configuration has not asked yet)."""

    def describe(self) -> str:
        """Where the window came from, in a few words: `configured`, what the server said it
        in (`llama.cpp's /props`, `/model/info`, `its refusal`), `known for the model`, `the
        kind's default`."""
        if self.source == "config":
            return "configured"
        if self.source == "server":
            return self.said_by or "the server"
        return "known for the model" if self.source == "model" else "the kind's default"


def default_window(kind: str, model: str, official: bool) -> Window:
    """The window of a model nobody asked: by model family on the official endpoints, else by
    kind (`DEFAULT_WINDOWS`)."""
    if official:
        name = model.lower().rsplit("/", 1)[-1]
        for prefix, tokens in _MODEL_WINDOWS:
            if name.startswith(prefix):
                return Window(tokens, "model")
    key = kind if official or kind != "openai" else "openai-compatible"
    return Window(DEFAULT_WINDOWS[key], "default")


_windows: dict[tuple[str, str], Window] = {}
LEARNED = "learned from its refusal"
"""`Window.said_by` of a window a server's refusal named: it wins over a configured one."""


def key_of(provider: Provider) -> tuple[str, str]:
    """What a provider's discoveries are kept under: its name and configuration."""
    return provider.name, provider.config.model_dump_json()


async def _discover(provider: Provider) -> tuple[int | None, bool, bool]:
    """(window, counts exactly, worth keeping): a server that did not answer is asked again
    next time, one that answered (whatever it said) is not."""
    keep = True
    try:
        told = await provider.context_window()
    except Exception as exc:  # a server that cannot say is not a failed call
        log.info("%s: window not discovered: %s", provider.name, exc)
        told, keep = None, False
    known = provider.counts_exactly
    if known is not None:  # no probe needed (the embedded model: it would load it)
        return told, known, keep
    exact = False
    for attempt in (1, 2):  # a probe that got no answer (a busy machine) is asked once more
        try:
            exact = await provider.count_tokens([Message("user", "ok")]) is not None
            break
        except Exception as exc:
            log.info("%s: cannot count tokens: %s", provider.name, exc)
            if not transient(exc):
                break
            if attempt == 2:  # still no answer: estimate now, ask again next time
                keep = False
    return told, exact, keep


async def window_of(provider: Provider) -> Window:
    """The provider's window (see the module docstring); asks the server once per process and
    provider configuration: calls that need it while it is asked wait for that answer (an
    evaluation starting 32 claims at once asks once, not 32 times)."""
    key = key_of(provider)
    found = _windows.get(key)
    if found is None:
        loop = asyncio.get_running_loop()
        asking = _asking.get(key)
        if asking is None or asking.get_loop() is not loop:
            asking = _asking[key] = loop.create_task(_discovered(provider, key))
            asking.add_done_callback(
                lambda done: _asking.pop(key) if _asking.get(key) is done else None)
        found = await asyncio.shield(asking)  # one caller cancelled: the others still wait
    configured = provider.config.context_window
    if configured is not None and not (found.said_by == LEARNED and found.tokens < configured):
        # configured wins, but for a smaller window a refusal named since: set too high
        return replace(found, tokens=configured, source="config")
    return found


_asking: dict[Any, asyncio.Task[Window]] = {}
"""The discovery under way per provider configuration."""


async def _discovered(provider: Provider, key: Any) -> Window:
    told, exact, keep = await _discover(provider)
    every = exact and provider.counts_every_prompt
    if told is not None and told > 0:
        found = Window(told, "server", exact, provider.window_said_by, every)
    else:
        found = replace(default_window(provider.kind, provider.model, provider.official),
                        exact=exact, every=every)
    if keep:
        _windows[key] = found
    return found


def forget(provider: Provider, told: int | None = None) -> None:
    """Drop what was discovered about `provider`: its server rejected a prompt as too long.
    `told`, the window its error named, is learned for the rest of the process (a gateway in
    front of an 8k model under a kind that assumes 200k would otherwise fail every call once);
    without it the server is asked again."""
    key = key_of(provider)
    if told is None or told <= 0:
        _windows.pop(key, None)
        return
    known = _windows.get(key)
    _windows[key] = Window(told, "server", known.exact if known is not None else False,
                           LEARNED)


def mark_inexact(provider: Provider) -> None:
    """`provider`'s server cannot count after all: its prompts are estimated from now on."""
    key = key_of(provider)
    if key in _windows:
        _windows[key] = replace(_windows[key], exact=False)


def transient(exc: Exception) -> bool:
    """Whether a failure to ask a server was no answer (ask again), not a refusal."""
    return isinstance(exc, httpx.TransportError)
