"""What a provider is asked and what it streams back: the request, the typed events (answer
text, reasoning, usage, the end), each server's word for why it stopped in ours, and how much
text a reply may bring before the server counts as broken."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.errors import ServerError
from engine.text import one_line

__all__ = [
    "CHARACTERS_PER_TOKEN",
    "FILTERED",
    "MOST_CHARACTERS",
    "Done",
    "Health",
    "HealthCheck",
    "Message",
    "PullProgress",
    "ReasoningDelta",
    "StreamEvent",
    "StreamRequest",
    "TokenChoices",
    "TokenDelta",
    "Usage",
    "WasReasoning",
    "finish_reason_of",
    "health_word",
    "most_characters",
    "too_long",
]

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """What to ask a provider. Timeouts left `None` take the provider's configured values."""

    messages: tuple[Message, ...]
    schema: dict[str, Any] | None = None
    """JSON schema the answer must satisfy (the provider's native structured-output mode)."""
    schema_name: str = "answer"
    max_tokens: int | None = None
    temperature: float | None = None
    first_token_timeout: float | None = None
    stall_timeout: float | None = None
    timeout: float | None = None
    demonstration_grammar: str | None = None
    """A GBNF grammar that holds a demonstration model to the reply's form (a tiny model
    cannot keep it unaided). Only a provider running a shipped demonstration model on
    llama.cpp applies it; a capable model is never constrained this way."""
    top_logprobs: int | None = None
    """Ask for the log-probabilities of the answer's tokens and of this many alternatives
    to each (`TokenChoices`), where the wire gives them (`Provider.gives_logprobs`); a
    provider that cannot just answers."""
    frequency_penalty: float | None = None
    """Lower a token's odds by how often it has appeared already (OpenAI's
    `frequency_penalty`, which llama.cpp, vLLM and Ollama take too): what keeps a small model
    out of a repetition loop in a long list. A wire without it (Anthropic) just answers."""
    seed: int | None = None
    """The sampler's seed, so a sampled call can be drawn again the same (OpenAI's `seed`,
    which llama.cpp, vLLM and Ollama honour); a wire without it (Anthropic) just answers."""

    @classmethod
    def of(cls, prompt: str, **kwargs: Any) -> StreamRequest:
        """A single-user-message request."""
        return cls(messages=(Message("user", prompt),), **kwargs)


@dataclass(frozen=True, slots=True)
class TokenDelta:
    """A piece of answer text, in order."""

    text: str


@dataclass(frozen=True, slots=True)
class TokenChoices:
    """One answer token as the model chose it, with its log-probability and the most likely
    alternatives at that place (`token`, `logprob` pairs, the chosen one among them), as
    asked for by `StreamRequest.top_logprobs`. Comes after the `TokenDelta` it belongs to."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (its thinking before the answer), in order: from the
    wire's own channel, or split out of the answer (`engine.providers._reasoning`). Never part
    of the answer."""

    text: str


@dataclass(frozen=True, slots=True)
class WasReasoning:
    """The answer text this reply streamed so far was the model's reasoning: the reply began
    inside its think block (the template opened it) and has just closed it. That text is void
    as answer; `text` is it as reasoning ("" when reasoning is hidden). What follows is the
    answer (`engine.providers._reasoning`)."""

    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts, when the provider reports them. `prompt_tokens` is the whole prompt, the
    cached part (`cached_tokens`, read from the server's prompt cache) and the part written to
    it (`cache_write_tokens`) included; `completion_tokens` includes `reasoning_tokens`."""

    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Done:
    """The model finished. `finish_reason` is `stop`, `length` (cut at the token limit or the
    window), `content_filter` (the provider's filter stopped it), `tool_calls`, or the
    provider's own word (`finish_reason_of`)."""

    finish_reason: str


_FINISH_REASONS = {
    **dict.fromkeys("stop end_turn stop_sequence eos eos_token end stop_token".split(), "stop"),
    **dict.fromkeys("length max_tokens max_output_tokens model_length max_length token_limit "
                    "model_context_window_exceeded pause_turn".split(), "length"),
    **dict.fromkeys("content_filter content_filtered refusal safety recitation blocklist "
                    "prohibited_content spii".split(), "content_filter"),
    **dict.fromkeys("tool_calls tool_use function_call".split(), "tool_calls"),
}
"""Each server's word for why it stopped (OpenAI, vLLM, TGI, Mistral, Gemini, Anthropic,
Ollama) in ours."""
FILTERED = "the provider's content filter stopped the answer"
"""How an answer that ended with `content_filter` is named, wherever it shows."""
_FAILED = frozenset("abort aborted error cancelled canceled".split())


MOST_CHARACTERS = 8_000_000
"""The most text (answer or reasoning) one reply may bring: a server past it is broken."""
CHARACTERS_PER_TOKEN = 64
"""More than any tokenizer's longest token: an answer past `max_tokens` × this (and 64 KiB)
comes from a server that does not keep to `max_tokens`."""


def most_characters(max_tokens: int | None) -> int:
    """The most answer text a reply of at most `max_tokens` tokens can hold."""
    if max_tokens is None:
        return MOST_CHARACTERS
    return min(MOST_CHARACTERS, max_tokens * CHARACTERS_PER_TOKEN + (64 << 10))


def too_long(event: TokenDelta | ReasoningDelta, max_tokens: int | None) -> str:
    if type(event) is ReasoningDelta or max_tokens is None:
        return f"the reply ran past {MOST_CHARACTERS:,} characters"
    return (f"the answer ran past {most_characters(max_tokens):,} characters, more than "
            f"{max_tokens:,} tokens hold: the server does not keep to max_tokens")


def finish_reason_of(provider: str, reason: str) -> str:
    """A server's finish reason in our words (`_FINISH_REASONS`; another word as it came,
    lower-cased). A generation the server aborted is a `ServerError`, never a short answer."""
    word = reason.strip().lower()
    if word in _FAILED:
        raise ServerError(provider, f"the server stopped the answer ({one_line(reason, 40)})")
    return _FINISH_REASONS.get(word, word)


StreamEvent = TokenDelta | ReasoningDelta | WasReasoning | TokenChoices | Usage | Done


@dataclass(frozen=True, slots=True)
class PullProgress:
    """One progress report of a model pull: `completed`/`total` bytes when known."""

    status: str
    digest: str | None
    completed: int | None
    total: int | None


HealthCheck = Literal["server", "list", "gateway", "probe"]
"""What a health check asked: the model's own server (llama.cpp, Ollama, the embedded model),
a model list (a gateway or a cloud API lists what it routes, live or not), a gateway's own
check of its backends (LiteLLM's `/health`: a real call), or a 1-token request."""


@dataclass(frozen=True, slots=True)
class Health:
    """The result of one health check: `check` says what was asked."""

    ok: bool
    latency_ms: float
    detail: str
    checked_at: float = field(default_factory=time.time)
    check: HealthCheck = "server"

    @property
    def word(self) -> str:
        """`health_word` of this check."""
        return health_word(self.ok, self.check)


def health_word(ok: bool, check: str | None) -> str:
    """A health check's result in a word: `ok`, `listed` (only a model list answered: the
    model may not), or `down`."""
    if not ok:
        return "down"
    return "listed" if check == "list" else "ok"
