"""A provider's configuration: its kind, model, endpoint, key and deadlines, and the facts
about the shipped models (which one is the embedded default, which are demonstration models).
Every field is documented; an invalid value is one `ConfigError` line naming it."""

from __future__ import annotations

import functools
from ipaddress import ip_address
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    model_validator,
)

from engine.config.shipped import BUNDLED_MODEL, SMOLLM2_MODEL, default_local_model

__all__ = ["ANTHROPIC_URL", "BUNDLED_MODEL", "DEMONSTRATION_MODELS", "GEMINI_URL", "OLLAMA_URL",
           "SMOLLM2_MODEL", "ProviderConfig", "ProviderKind", "Replica", "default_local_model",
           "is_loopback"]

ProviderKind = Literal["openai", "anthropic", "ollama", "local"]


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1, also as `[::1]`)."""
    if host == "localhost":
        return True
    try:
        return ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@functools.lru_cache(maxsize=256)
def _on_loopback(url: str) -> bool:
    """Whether `url`'s host is a loopback one (asked every call: kept for the few URLs a
    configuration names)."""
    host = urlsplit(url).hostname
    return host is not None and is_loopback(host)


DEMONSTRATION_MODELS = frozenset({"gemma-3-270m", "gemma3-270m", "gemma-3-270m-q4_k_m",
                                  "bundled", "smollm2-135m", "smollm2"})
"""Names of the small models that ship with the app: they test the plumbing, never the
hypothesis (see `ProviderConfig.is_demonstration`)."""
OLLAMA_URL = "http://127.0.0.1:11434"
ANTHROPIC_URL = "https://api.anthropic.com"
GEMINI_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"

# (default, minimum, maximum) seconds, per SPEC §2.
CLOUD_TIMEOUT = (30.0, 15.0, 120.0)
LOCAL_TIMEOUT = (120.0, 15.0, 1800.0)
UNMEASURED_TIMEOUT = 360.0
"""Seconds the embedded model's reply may take before any reply has measured its speed."""
CLOUD_STALL = 15.0
LOCAL_STALL = 30.0
DEMONSTRATION_REPLY = 384
"""Tokens a demonstration model's reply may have at most, whatever the request allows: a tiny
model rambles to any limit it is given (a 2,048-token audit narrative took 120 s and failed
the run), and what it says only shows the loop."""
LOCAL_PRIORITY = 1000
"""The embedded model's priority when its table sets none: after every other provider."""
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


class Replica(BaseModel):
    """One endpoint of a replicated provider: `[[providers.NAME.replicas]]`."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(min_length=1)
    """The replica's API base URL (as `base_url` would be)."""
    weight: float = Field(default=1.0, gt=0, le=1000)
    """Its share of the calls: a replica of weight 2 takes twice the calls in flight."""
    slots: int | None = Field(default=None, ge=1, le=4096)
    """Calls it serves at once; unset: asked of the server (llama.cpp's `/props`), else
    unlimited."""


class ProviderConfig(BaseModel):
    """One model provider, a `[providers.NAME]` table."""

    model_config = ConfigDict(extra="forbid")

    kind: ProviderKind
    """openai (any OpenAI-compatible base URL), anthropic, ollama, or local (embedded GGUF)."""
    model: str = Field(min_length=1)
    """Model name; for `local`, a model of `detektiv models` (`smollm2-135m`, `gemma-3-270m`,
    a pulled name) or the path of a GGUF file."""
    base_url: str | None = None
    """API base URL; defaults per kind (OpenAI, Anthropic, OLLAMA_HOST)."""
    priority: int = Field(default=100, ge=0)
    """Lower goes first; unique among enabled providers. A `local` provider's default is
    `LOCAL_PRIORITY` (last)."""
    enabled: bool = True
    """Disabled providers are listed but never called."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key."""
    api_key_cmd: str | None = None
    """Shell command printing the key (e.g. `pass show openai`)."""
    api_key: SecretStr | None = None
    """The key itself; only accepted when the config file is private (mode 0600)."""
    first_token_timeout: float | None = None
    """Seconds to wait for the first token; defaults to `timeout`."""
    stall_timeout: float | None = None
    """Seconds without a token, once tokens have started; cloud default 15, local 30."""
    timeout: float | None = None
    """Seconds for the whole answer: cloud 15–120 (default 30), local 15–1,800 (default 120;
    fitted to a llama.cpp model's measured speed where it reports one)."""
    keep_alive: str | float | None = None
    """Ollama: how long the model stays loaded after a call (e.g. "5m")."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Ollama: model options (num_ctx, top_p …); merged under per-request settings."""
    context_window: int | None = Field(default=None, ge=256)
    """Tokens one request may use, prompt and reply together; unset: asked of the server, else
    the kind's default (see `engine.context`)."""
    slots: int | None = Field(default=None, ge=1, le=4096)
    """Calls the server answers at once; more wait inside detektiv, their deadlines not yet
    running. Unset: asked of the server (llama.cpp's `/props`), else one for a server on this
    machine and no limit for a remote API."""
    n_ctx: int = Field(default=32768, ge=512)
    """local: context size shared by the parallel slots (each gets n_ctx / n_parallel)."""
    n_parallel: int = Field(default=4, ge=1, le=16)
    """local: how many streams the embedded model serves at once."""
    n_threads: int | None = Field(default=None, ge=1, le=256)
    """local: CPU threads; default all cores but one (see `default_threads`)."""
    speculation: Literal["auto", "draft", "ngram", "off"] = "auto"
    """local: speculative decoding. `auto`: what measured fastest here — plain decoding on
    CPU (docs/benchmarks.md, issue 74); `draft`: with the model's draft (`detektiv models
    pull qwen2.5-coder-0.5b` for the capable model) or `draft_model`, a missing one said;
    `ngram`: llama.cpp's draft-free n-gram lookup; `off`: plain decoding. Only the embedded
    model: a server detektiv does not start decides its own."""
    draft_model: str | None = Field(default=None, min_length=1)
    """local: the draft model for `speculation` (a pulled name or a GGUF path, of the same
    tokenizer as `model`); unset: the model's own draft, if it has one."""
    base_urls: list[str] | None = None
    """Several endpoints of the same model (replicas, equal weight): calls go to the healthy
    one with the fewest in flight. Shorthand for `replicas`."""
    replicas: list[Replica] = Field(default_factory=list)
    """The replicas of this provider with their weight and slots (see `Replica`); each one's
    failures are its own, the others carry on."""
    requests_per_minute: float | None = Field(default=None, gt=0, le=1_000_000)
    """At most this many calls a minute from this process (the rest wait their turn)."""
    tokens_per_minute: float | None = Field(default=None, gt=0, le=1_000_000_000)
    """At most this many tokens a minute (prompt estimated, reply allowance counted)."""
    reasoning: Literal["show", "hide"] = "show"
    """A reasoning model's thinking (its own channel, or `<think>` blocks in the answer):
    `show` streams it to the views and keeps it in the session as its own events; `hide`
    drops it. Either way it never becomes the answer."""
    reasoning_effort: str | None = Field(default=None, min_length=1, max_length=32)
    """Asked of the server where its wire takes one: OpenAI-compatible `reasoning_effort`
    (`low`, `medium`, `high`), Ollama's `think` (`low`/`medium`/`high`, or `true`/`false`)."""
    reasoning_budget: int | None = Field(default=None, ge=0, le=1_000_000)
    """Tokens the model may think, where the wire takes a budget: Anthropic's
    `thinking.budget_tokens` (at least 1024; added to the reply's allowance), Gemini's
    `thinking_budget` (0 turns thinking off)."""
    health_check: Literal["auto", "list", "gateway", "probe"] = "auto"
    """How a health check asks: `auto` asks the model's own server where it is one
    (llama.cpp, Ollama, the embedded model), LiteLLM's `/health` behind LiteLLM's proxy (a real
    call to each backend of the model), else the model list (shown as `listed`: a list is not
    an answer); `list` only the list; `gateway` LiteLLM's `/health`; `probe` one request for
    one token (a real call, billed as one)."""
    origin: Literal["config", "env", "default", "adhoc"] = Field(default="config", exclude=True)
    """Where this provider came from (not written back to the file)."""

    @property
    def is_local(self) -> bool:
        """True for the embedded model, Ollama, and any OpenAI-compatible server on loopback
        (replicas: all of them on loopback)."""
        if self.kind in ("local", "ollama"):
            return True
        urls = [r.base_url for r in self.replicas] or [self.base_url or ""]
        return all(_on_loopback(url) for url in urls)

    @property
    def replicated(self) -> bool:
        """True when calls are spread over replicas or held to a rate."""
        return bool(self.replicas) or self.requests_per_minute is not None or \
            self.tokens_per_minute is not None

    @model_validator(mode="before")
    @classmethod
    def _replicas_from_urls(cls, data: Any) -> Any:
        """`base_urls = [...]` is `replicas` of weight 1."""
        if isinstance(data, dict) and data.get("base_urls"):
            if data.get("replicas"):
                raise ValueError("give base_urls or replicas, not both")
            urls = data["base_urls"]
            if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
                raise ValueError("base_urls must be a list of URLs")
            data = {**data, "replicas": [{"base_url": url} for url in urls]}
        return data

    @model_validator(mode="after")
    def _check_speculation(self) -> ProviderConfig:
        if self.kind != "local" and ({"speculation", "draft_model"} & self.model_fields_set):
            asked = self.speculation if "speculation" in self.model_fields_set else "a draft"
            if asked not in ("auto", "off"):
                raise ValueError(
                    f"speculation ({asked}) is unsupported for a {self.kind} provider: only "
                    "the embedded model (kind local) decodes speculatively under detektiv; a "
                    "server detektiv does not start decides its own decoding")
        return self

    @model_validator(mode="after")
    def _check_replicas(self) -> ProviderConfig:
        if self.replicas and self.kind == "local":
            raise ValueError("a local provider has no replicas (it runs here)")
        if self.replicas and self.base_url is not None:
            raise ValueError("give base_url or replicas (base_urls), not both")
        return self

    @property
    def is_demonstration(self) -> bool:
        """True for a small model shipped with the app (the embedded default), run here or by
        a server on this machine (`detektiv local-server`, as `serve` shares it)."""
        return self.model.lower() in DEMONSTRATION_MODELS and self.is_local

    @property
    def total_timeout(self) -> float:
        """The total deadline in seconds, with the kind's default applied."""
        default = (LOCAL_TIMEOUT if self.is_local else CLOUD_TIMEOUT)[0]
        return self.timeout if self.timeout is not None else default

    @property
    def between_tokens_timeout(self) -> float:
        """The stall deadline in seconds, with the kind's default applied."""
        if self.stall_timeout is not None:
            return self.stall_timeout
        return LOCAL_STALL if self.is_local else CLOUD_STALL

    @property
    def ttft_timeout(self) -> float:
        """The time-to-first-token deadline in seconds (never longer than the total)."""
        if self.first_token_timeout is None:
            return self.total_timeout
        return min(self.first_token_timeout, self.total_timeout)

    @model_validator(mode="after")
    def _check_timeouts(self) -> ProviderConfig:
        _, low, high = LOCAL_TIMEOUT if self.is_local else CLOUD_TIMEOUT
        where = "local" if self.is_local else "cloud"
        if self.timeout is not None and not low <= self.timeout <= high:
            raise ValueError(
                f"timeout must be between {low:g} and {high:g} s for a {where} provider"
            )
        for name in ("first_token_timeout", "stall_timeout"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= high:
                raise ValueError(f"{name} must be between 1 and {high:g} s")
        return self


