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
from pathlib import Path
from typing import Any

from pydantic import (
    ValidationError,
)

from engine.config.models import Config, OracleConfig
from engine.config.providers import (
    GEMINI_URL,
    LOCAL_PRIORITY,
    ProviderConfig,
    default_local_model,
)
from engine.errors import ConfigError
from engine.paths import Paths
from engine.storage.atomic import atomic_write_text

__all__ = ["load_config", "parse_adhoc", "save_config"]


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
        return tomllib.loads(raw.decode("utf-8-sig"))  # a BOM (an editor's) is no TOML
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


def _implicit_providers(config: Config, env: Mapping[str, str],
                        data_dir: Path | None = None) -> None:
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
        shared = env.get("DETEKTIV_LOCAL_SERVER")  # `detektiv serve`: one model for all tabs
        config.providers["local"] = ProviderConfig(
            kind="openai" if shared else "local", base_url=shared or None,
            model=default_local_model(data_dir), priority=max(next_priority, LOCAL_PRIORITY),
            origin="default",
        )


def load_config(paths: Paths, env: Mapping[str, str] | None = None) -> Config:
    """Read, validate and complete the configuration; raises `ConfigError` with one line."""
    env = os.environ if env is None else env
    path = paths.config_file
    data = _read_file(path)
    try:
        config = Config.model_validate(data, context={"data_dir": paths.data_dir})
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
    _implicit_providers(config, env, paths.data_dir)
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
