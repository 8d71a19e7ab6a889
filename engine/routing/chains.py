"""Which providers a role tries, in order (`[roles]`, else by kind and priority)."""

from __future__ import annotations

from pathlib import Path

from engine.config.models import Config
from engine.errors import ConfigError

__all__ = ["chain_for"]


def chain_for(config: Config, role: str, config_file: Path | None = None) -> list[str]:
    """The provider names a role tries, in order.

    From `[roles]` when set (unknown names are a `ConfigError`; disabled ones are left out).
    Otherwise: `witness` = local providers (embedded, Ollama, loopback servers) by priority;
    `detective`, `oracle` and `agent` = cloud providers by priority, then the witness chain as
    the last resort, less its demonstration models (a shipped tiny model never stands in for
    a capable one unless `[roles]` puts it there, or nothing else could play the role); any
    other role = every enabled provider by priority.
    """
    enabled = {name for name, p in config.providers.items() if p.enabled}
    if role in config.roles:
        for name in config.roles[role]:
            if name not in config.providers:
                where = f"{config_file}: " if config_file else ""
                raise ConfigError(f"{where}roles.{role}: unknown provider {name!r}")
        return [name for name in config.roles[role] if name in enabled]
    ranked = config.by_priority()
    if role == "witness":
        return [name for name, p in ranked if p.is_local]
    if role in ("detective", "oracle", "agent"):
        local = chain_for(config, "witness")
        capable = [name for name, p in ranked if not p.is_local] + [
            name for name in local if not config.providers[name].is_demonstration]
        return capable or local
    return [name for name, _ in ranked]
