"""Every failure the engine reports, as one exception tree.

    DetektivError                     anything the engine raises on purpose
    ├── ConfigError                   a config file or value is invalid (names file and field)
    ├── AllProvidersFailed            the router ran out of providers; `failures` says each why
    │   └── WindowTooSmall            … because the prompt fit no provider's context window
    ├── InterrogationFailed           a model's structured reply stayed invalid after a retry
    ├── SessionError                  a stored session cannot be used
    │   ├── SessionNotFound           no session matches the id given (or it is ambiguous)
    │   ├── SessionBusy               another live process is running the session
    │   ├── SessionCorrupt            a session file is damaged; names the file, changes nothing
    │   └── NoteRefused               a file cannot be a note (its type, size or encoding)
    ├── OracleError                   no oracle matches, or the one named is invalid (says why)
    ├── ModelError                a local model cannot be pulled, found or removed (one line)
    │   └── PullBusy              another pull of the same model holds its lock
    ├── AgentError                    the case agent cannot start (a prompt segment is missing
    │                                 or empty: names the file) or a tool was given bad input
    ├── StoreClosed                   a store (cache, vault, conversations) was used after it
    │                                 was closed: the app is shutting down, nothing is lost
    └── ProviderError                 a model provider failed; carries `provider`
        ├── AuthError                 401/403: missing, wrong or unauthorised API key
        ├── RateLimitedError          429: carries `retry_after` seconds when the server said
        ├── ProviderTimeout           a deadline of ours passed
        │   ├── FirstTokenTimeout     no token before the time-to-first-token deadline
        │   ├── StallTimeout          tokens stopped coming for longer than the stall deadline
        │   └── TotalTimeout          the whole stream took longer than its deadline
        ├── ProviderConnectionError   refused, reset, DNS, TLS, or cut mid-stream
        ├── BadResponseError          the reply cannot be understood (malformed chunk, bad JSON,
        │   │                         structured output that does not match its schema)
        │   └── UnusableReplyError    well-formed, but nonsense for its purpose (an empty or
        │                             echoed question): the model's fault, not the server's
        ├── RequestError              4xx other than the above: unknown model, bad parameters
        │   └── ContextOverflowError      the prompt was longer than the provider's window
        └── ServerError               5xx or an error event inside the stream; carries `status`

Messages never contain secrets: every message passes through `engine.secrets.redact` when the
exception is built, so an API key echoed back by a server is masked before anyone can log it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from engine.secrets import redact
from engine.text import strip_control, without_reprs

__all__ = [
    "EXIT_CODES",
    "AgentError",
    "AllProvidersFailed",
    "WindowTooSmall",
    "AuthError",
    "BadResponseError",
    "ConfigError",
    "ContextOverflowError",
    "DatasetError",
    "DetektivError",
    "FirstTokenTimeout",
    "exit_family",
    "failure_family",
    "session_exit_code",
    "InterrogationFailed",
    "ModelError",
    "PullBusy",
    "NoteRefused",
    "OracleError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeout",
    "RateLimitedError",
    "RequestError",
    "ServerError",
    "SessionBusy",
    "SessionCorrupt",
    "SessionError",
    "SessionNotFound",
    "UnusableReplyError",
    "StallTimeout",
    "StoreClosed",
    "TotalTimeout",
    "is_context_overflow",
    "overflow_tokens",
    "overflow_window",
]


class DetektivError(Exception):
    """Base of every error the engine raises on purpose; its message is safe to show."""

    def __init__(self, message: str) -> None:
        self.message = shown(message)
        super().__init__(self.message)


def shown(message: str) -> str:
    """`message` as it may be shown: no key (`redact`), no Python object's repr, no terminal
    control or invisible format character (a server's words are often in it)."""
    return strip_control(redact(without_reprs(message)))


class ConfigError(DetektivError):
    """The configuration is invalid; the message names the file and the field."""


class ModelError(DetektivError):
    """A local model cannot be pulled, found or removed; the message says why and what to do."""


class PullBusy(ModelError):
    """Another pull of the same model holds its lock (another detektiv process, most often):
    it will bring the model; this one does not."""


class ProviderError(DetektivError):
    """A provider failed. `provider` is the configured name (never a key or a URL with one)."""

    #: Short machine-readable reason, used in audit trails and `providers --json`.
    reason = "error"

    def __init__(self, provider: str, message: str) -> None:
        self.provider = provider
        super().__init__(f"{provider}: {message}")
        self.detail = shown(message)


class AuthError(ProviderError):
    """The provider rejected the credentials (HTTP 401 or 403)."""

    reason = "auth"


class RateLimitedError(ProviderError):
    """The provider answered 429; `retry_after` is in seconds when the server gave one."""

    reason = "rate_limited"

    def __init__(self, provider: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(provider, message)
        self.retry_after = retry_after


class ProviderTimeout(ProviderError):
    """One of our deadlines passed; `timeout` is the deadline in seconds."""

    reason = "timeout"

    def __init__(self, provider: str, message: str, timeout: float) -> None:
        super().__init__(provider, message)
        self.timeout = timeout


class FirstTokenTimeout(ProviderTimeout):
    """No token arrived before the time-to-first-token deadline."""

    reason = "first_token_timeout"


class StallTimeout(ProviderTimeout):
    """Tokens had started, then none came for longer than the stall deadline."""

    reason = "stall_timeout"


class TotalTimeout(ProviderTimeout):
    """The stream did not finish before its total deadline."""

    reason = "total_timeout"


class ProviderConnectionError(ProviderError):
    """The connection could not be made or broke (refused, reset, cut mid-stream)."""

    reason = "connection"


class BadResponseError(ProviderError):
    """The provider answered something we cannot use (malformed chunk, invalid JSON)."""

    reason = "bad_response"


class UnusableReplyError(BadResponseError):
    """A well-formed reply that is no use for what was asked (`engine.interrogation.checks`). The
    server works: it does not count towards opening the provider's circuit."""

    reason = "unusable"


class RequestError(ProviderError):
    """The provider refused the request itself (unknown model, bad parameter; HTTP 4xx)."""

    reason = "request"

    def __init__(self, provider: str, message: str, status: int | None = None) -> None:
        super().__init__(provider, message)
        self.status = status


class ContextOverflowError(RequestError):
    """The provider refused the prompt as longer than its context window; `window` is the
    window its message names, when it names one."""

    reason = "context"

    def __init__(self, provider: str, message: str, status: int | None = None,
                 window: int | None = None, needed: int | None = None) -> None:
        super().__init__(provider, message, status)
        self.window = window or overflow_window(message)
        self.needed = needed or overflow_tokens(message)
        """The prompt's tokens as the server counted them, when its message says."""


_WINDOW_IN_MESSAGE = (  # real messages of each server: tests/engine/test_overflow.py
    re.compile(r"context size \((\d+) tokens?\)", re.IGNORECASE),       # llama.cpp
    re.compile(r"""["']n_ctx["']\s*:\s*(\d+)""", re.IGNORECASE),         # llama.cpp's JSON
    re.compile(r"maximum context length is (\d+) tokens?", re.IGNORECASE),  # OpenAI, vLLM
    re.compile(r"context (?:window|length) of (\d+) tokens?", re.IGNORECASE),
    re.compile(r"\d+ tokens? > (\d+) maximum", re.IGNORECASE),             # Anthropic
    re.compile(r"\d+ \+ \d+ > (\d+)", re.IGNORECASE),                       # Anthropic
    re.compile(r"maximum number of tokens allowed \((\d+)\)", re.IGNORECASE),  # Gemini
)


_TOKENS_IN_MESSAGE = (
    re.compile(r"request \((\d+) tokens?\) exceeds", re.IGNORECASE),        # llama.cpp
    re.compile(r"""["']n_prompt_tokens["']\s*:\s*(\d+)""", re.IGNORECASE),  # llama.cpp's JSON
    re.compile(r"resulted in (\d+) tokens?", re.IGNORECASE),                # OpenAI, vLLM
    re.compile(r"prompt is too long: (\d+) tokens?", re.IGNORECASE),        # Anthropic
    re.compile(r"input token count \((\d+)\)", re.IGNORECASE),             # Gemini
)


def _first_number(patterns: tuple[re.Pattern[str], ...], message: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(message)
        if match:
            value = int(match.group(1))
            return value if 0 < value <= 10_000_000 else None
    return None


def overflow_window(message: str) -> int | None:
    """The window a context-overflow message names (`… context size (2048 tokens)`)."""
    return _first_number(_WINDOW_IN_MESSAGE, message)


def overflow_tokens(message: str) -> int | None:
    """The prompt's size a context-overflow message names (`request (1471 tokens) …`)."""
    return _first_number(_TOKENS_IN_MESSAGE, message)


_OVERFLOW_WORDS = (
    "contextwindowexceeded",  # LiteLLM's ContextWindowExceededError
    "context_window_exceeded",
    "exceed context limit",  # Anthropic: input length and `max_tokens` exceed context limit
    "exceeds the maximum number of tokens",  # Gemini
    "max context length",  # Ollama: prompt too long; exceeded max context length by N tokens
    "input length exceeds",  # Ollama
    "context size",
    "context length",
    "context window",
    "context_length_exceeded",
    "exceed_context_size",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    "reduce the length",
)


def is_context_overflow(message: str) -> bool:
    """Whether a provider's error message says the prompt did not fit its window."""
    lowered = message.lower()
    return any(words in lowered for words in _OVERFLOW_WORDS)


class ServerError(ProviderError):
    """The provider failed on its side (HTTP 5xx, overloaded, an error event mid-stream)."""

    reason = "server"

    def __init__(self, provider: str, message: str, status: int | None = None) -> None:
        super().__init__(provider, message)
        self.status = status


class AllProvidersFailed(DetektivError):
    """Every provider of a chain failed or was skipped; `failures` is (provider, why) in order."""

    def __init__(self, role: str, failures: list[tuple[str, str]],
                 causes: Sequence[ProviderError] = ()) -> None:
        self.role = role
        self.failures = failures
        self.causes = list(causes)
        """The providers' own errors, in order (a skipped provider has none)."""
        if failures:
            detail = "; ".join(f"{name}: {why}" for name, why in failures)
            super().__init__(f"{self._lead(role)} — {detail}")
        else:
            super().__init__(f"no enabled provider for {role}")

    @staticmethod
    def _lead(role: str) -> str:
        """What the message says before each provider's reason."""
        return f"every provider for {role} failed"


class WindowTooSmall(AllProvidersFailed):
    """Every provider of a chain that was tried was skipped because the prompt does not fit
    its context window, even at its smallest: no provider failed. A caller whose prompt was
    an addition of its own (a retry) ends the retry instead of the session."""

    @staticmethod
    def _lead(role: str) -> str:
        return f"the {role}'s prompt fits no provider's context window, even at its smallest"

    @property
    def last_reason(self) -> str:
        """The last provider's reason (its window, what the prompt needs), for a line of its
        own."""
        return self.failures[-1][1] if self.failures else self.message


class InterrogationFailed(DetektivError):
    """The interrogation cannot go on: a structured reply stayed invalid after one retry."""


class SessionError(DetektivError):
    """A stored session cannot be used as asked."""


class SessionNotFound(SessionError):
    """No session matches the id (or prefix, or folder name) given, or several do."""


class SessionBusy(SessionError):
    """The session is being run by another live process."""


class SessionCorrupt(SessionError):
    """A session file is damaged. The message names the file; nothing was changed on disk."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = path
        super().__init__(f"{path}: {problem}")


class NoteRefused(SessionError):
    """A file cannot be taken as a note; the message names it and says why."""


class OracleError(DetektivError):
    """No oracle matches the name, id or slug given, or the one named is invalid."""


class AgentError(DetektivError):
    """The case agent cannot start (a prompt segment file is missing or empty: the message
    names it), or a tool was given input it cannot use."""


class StoreClosed(DetektivError):
    """A store was used after it was closed (`engine.storage.shared`): a read racing a
    shutdown gets this or its result, never a crash."""


class DatasetError(DetektivError):
    """An evaluation's labelled claims cannot be read, fetched or trusted; the message names
    the file (and line) or the dataset and says why."""


EXIT_CODES = {"ok": 0, "failed": 1, "usage": 2, "connection": 3, "timeout": 4,
              "interrupted": 130}
"""The documented exit code families of every command."""


def session_exit_code(status: str, family: str | None = None) -> int:
    """How `run`, `resume` and `watch` exit for a session that ended `status`: 0 completed or
    limit-reached, 130 cancelled (by the user or its `--max-cost`), a failed one by its
    `family` (`Finished.family`: 3 unreachable, 4 timed out, else 1)."""
    if status in ("completed", "limit-reached"):
        return EXIT_CODES["ok"]
    if status == "cancelled":
        return EXIT_CODES["interrupted"]
    if status == "failed" and family in ("connection", "timeout"):
        return EXIT_CODES[family]
    return EXIT_CODES["failed"]


def exit_family(error: BaseException) -> str:
    """Which exit code family an error belongs to: `usage` for configuration and usage,
    `connection` when a provider could not be reached, `timeout` when it did not answer in
    time (for a whole chain: its last provider's failure), else `failed`."""
    if isinstance(error, ConfigError):
        return "usage"
    return failure_family(error)


FailureFamily = Literal["failed", "connection", "timeout"]
"""How a model or provider failed, as an exit code family."""


def failure_family(error: BaseException) -> FailureFamily:
    """`exit_family` of a failure that is no usage error: `connection`, `timeout` or
    `failed`."""
    if isinstance(error, AllProvidersFailed) and error.causes:
        error = error.causes[-1]
    if isinstance(error, ProviderConnectionError):
        return "connection"
    if isinstance(error, ProviderTimeout):
        return "timeout"
    return "failed"
