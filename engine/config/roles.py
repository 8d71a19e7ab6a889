"""Which providers play which role in a session: the session's own chains over the config.

A session may name its detective and witness chains (`--detective`, `--witness`, the Live
form): configured provider names or ad hoc `kind:model` entries, stored in the session so that
resuming it uses them again.
"""

from __future__ import annotations

from engine.config.models import Config
from engine.config.providers import ProviderConfig
from engine.errors import SessionError
from engine.providers import select_provider

__all__ = ["apply_chains", "apply_roles", "split_chain"]


def split_chain(value: str | None) -> list[str]:
    """`"cloud, local"` → `["cloud", "local"]`: a chain as typed (`--detective`, the Live
    form); empty parts are dropped."""
    return [part.strip() for part in value.split(",") if part.strip()] if value else []


def apply_roles(config: Config, detective: list[str], witness: list[str]) -> Config:
    """A copy of `config` whose detective/witness chains are the given providers.

    Each entry is a configured provider name or an ad hoc `kind:model`.
    """
    return apply_chains(config, {"detective": detective, "witness": witness})


def apply_chains(config: Config, chains: dict[str, list[str]]) -> Config:
    """A copy of `config` whose chain for each role in `chains` is the given providers
    (configured names or ad hoc `kind:model`; an empty list leaves the role as it is)."""

    config = config.model_copy(deep=True)
    top = max((p.priority for p in config.providers.values()), default=0)
    for role, specs in chains.items():
        if not specs:
            continue
        names: list[str] = []
        for spec in specs:
            name, provider = select_provider(config, spec)
            if name not in config.providers:
                name = _adhoc_name(config, provider)
                top += 10
                provider = provider.model_copy(update={"priority": top})
                config.providers[name] = provider
            elif not provider.enabled:
                config.providers[name] = provider.model_copy(update={"enabled": True})
            names.append(name)
        config.roles[role] = names
    return config


def _adhoc_name(config: Config, provider: ProviderConfig) -> str:
    for suffix in ("", *(f"-{i}" for i in range(2, 100))):
        name = f"{provider.kind}{suffix}"
        if name not in config.providers:
            return name
    raise SessionError("too many ad hoc providers")  # pragma: no cover
