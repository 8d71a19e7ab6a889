"""Model providers: one streaming interface over openai, anthropic, ollama and local kinds.

    provider = create_provider("localsrv", config.providers["localsrv"], paths)
    async for event in provider.stream(StreamRequest.of("Name a colour.")):
        match event:
            case TokenDelta(text): ...
            case Usage(): ...
            case Done(reason): ...

Provider modules (and their SDKs) are imported only when a provider of that kind is created.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from engine.config.load import parse_adhoc
from engine.config.models import Config
from engine.config.providers import ProviderConfig
from engine.paths import Paths
from engine.providers._base import Provider
from engine.providers._events import (
    FILTERED,
    Done,
    Health,
    Message,
    PullProgress,
    ReasoningDelta,
    StreamEvent,
    StreamRequest,
    TokenChoices,
    TokenDelta,
    Usage,
    WasReasoning,
)
from engine.providers._llama import LlamaEngine, LlamaOptions
from engine.providers._local import LocalProvider

__all__ = [
    "FILTERED",
    "Done",
    "Health",
    "LlamaEngine",
    "LlamaOptions",
    "Message",
    "Provider",
    "PullProgress",
    "ReasoningDelta",
    "StreamEvent",
    "StreamRequest",
    "TokenChoices",
    "TokenDelta",
    "Usage",
    "WasReasoning",
    "create_provider",
    "discover_ollama",
    "select_provider",
]


def create_provider(
    name: str, config: ProviderConfig, paths: Paths, env: Mapping[str, str] | None = None
) -> Provider:
    """Build the provider for one configuration entry (no network call is made): one
    provider per replica behind a `ReplicatedProvider` when the entry has replicas or rate
    limits."""
    env = os.environ if env is None else env
    if config.replicated:
        from engine.providers._replicas import ReplicatedProvider

        plain = config.model_copy(update={"replicas": [], "base_urls": None,
                                          "requests_per_minute": None,
                                          "tokens_per_minute": None})
        # each replica's own slots held by its provider too (`_slots`): what it is sent is
        # within them however the pool chose
        urls: list[tuple[str | None, int | None]] = \
            [(r.base_url, r.slots) for r in config.replicas] or [(config.base_url, None)]
        inner = [create_provider(name, plain.model_copy(update={
            "base_url": url, "slots": slots or config.slots}), paths, env)
            for url, slots in urls]
        return ReplicatedProvider(name, config, env, inner)
    match config.kind:
        case "openai":
            from engine.providers._openai import OpenAIProvider

            return OpenAIProvider(name, config, env)
        case "anthropic":
            from engine.providers._anthropic import AnthropicProvider

            return AnthropicProvider(name, config, env)
        case "ollama":
            from engine.providers._ollama import OllamaProvider

            return OllamaProvider(name, config, env)
        case "local":

            return LocalProvider(name, config, env, paths)
    raise AssertionError(config.kind)  # pragma: no cover - pydantic restricts kind


def select_provider(config: Config, spec: str) -> tuple[str, ProviderConfig]:
    """A configured provider by name, or an ad hoc one from `kind:model`."""
    if spec in config.providers:
        return spec, config.providers[spec]
    return spec, parse_adhoc(spec)


async def discover_ollama(config: Config, env: Mapping[str, str] | None = None) -> bool:
    """Add an `ollama` provider when none is configured and one answers on OLLAMA_HOST.

    Its model is the first the server lists; a server with no model is not added. Returns
    whether one was added.
    """
    from engine.providers._ollama import probe_ollama

    env = os.environ if env is None else env
    if any(p.kind == "ollama" for p in config.providers.values()) or "ollama" in config.providers:
        return False
    models = await probe_ollama(env)
    if not models:
        return False
    local_priority = config.providers["local"].priority if "local" in config.providers else 1000
    taken = {p.priority for p in config.providers.values() if p.enabled}
    priority = local_priority - 1
    while priority in taken and priority > 0:
        priority -= 1
    config.providers["ollama"] = ProviderConfig(
        kind="ollama", model=models[0], priority=priority, origin="env"
    )
    return True
