"""The engine's one door for the front ends: configuration, the session store and the
router's lifecycle, and the parts that do the work.

    workspace = Workspace(paths)                 # config loaded on first use
    workspace.sessions.start(…) / resume / follow / status / export / delete
    workspace.cases.new_case(…) / add_note / import_notes / consultation
    workspace.agent.run(…) / search           workspace.ask.question(…)
    workspace.models.list() / pull / remove
    workspace.evals.start(…) / runs / summary / report
    await workspace.aclose()

The CLI and the app both come through here and build no router, interrogation or store of
their own. A feature adds a part (a class given the workspace), not a mixin.

This module imports the engine on first use, not at its top: the app builds its workspace
before its first frame, which must not wait for pydantic and the rest (`bench/startup.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import ConfigError, StoreClosed
from engine.paths import Paths
from engine.prompts import PromptFile, prompt_files, use_prompts

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from engine.cache.cache import ResponseCache, Semantic
    from engine.cache.contract import CacheStore
    from engine.config.models import Config
    from engine.config.providers import ProviderConfig
    from engine.context.conversations import ConversationStore
    from engine.context.policy import ContextPolicy
    from engine.gguf.capable import CapableState
    from engine.providers import Provider
    from engine.providers._lent import Answer
    from engine.report.providers import ProviderRow
    from engine.routing.router import Router
    from engine.storage.sessions import SessionStore
    from engine.workspace.agent import Agent
    from engine.workspace.ask import Ask
    from engine.workspace.cases import Cases
    from engine.workspace.evals import Evals
    from engine.workspace.models import LocalModels
    from engine.workspace.sessions import Sessions

__all__ = ["Workspace"]


def _preimport() -> None:
    """Import the provider SDKs (slow) on a worker thread, not on an event loop."""
    import engine.providers._ollama  # noqa: F401
    import engine.providers._openai  # noqa: F401


class Workspace:
    """Config, store and router for one user's data, and its parts; see the module
    docstring."""

    def __init__(self, paths: Paths, config: Config | None = None, *,
                 preimport: bool = False, use_cache: bool = True) -> None:
        """`preimport`: import the provider SDKs on a worker thread before a router is built
        (an app's event loop must not stall for them; a command-line run does not care).
        `use_cache`: False bypasses the response cache (`--no-cache`)."""
        self.paths = paths
        self.preimport = preimport
        self.use_cache = use_cache
        self._config = config
        self._config_lock = threading.Lock()
        self._store: SessionStore | None = None
        self._router: Router | None = None
        self._router_lock: asyncio.Lock | None = None
        self._policy: ContextPolicy | None = None
        self._conversations: ConversationStore | None = None
        self._cache: ResponseCache | None = None
        self._open_lock = threading.Lock()
        self._closed = False
        self._lent: dict[str, tuple[ProviderConfig, Answer]] = {}
        self._retired: list[Router] = []
        self.warnings: list[str] = []
        """Problems that changed nothing but should be seen (an invalid context.toml)."""
        use_prompts(self.user_prompts_dir)

    @property
    def user_prompts_dir(self) -> Path:
        """The user's `prompts/` (beside the config file): files there override the shipped
        prompts by name (`engine.prompts`)."""
        return self.paths.config_file.parent / "prompts"

    def prompts(self) -> list[PromptFile]:
        """Every prompt as a run would use it (shipped or the user's), with what is wrong."""
        return prompt_files()

    # ---- the parts (each built, and its module imported, on first use) --------------------

    @cached_property
    def sessions(self) -> Sessions:
        """Interrogations: start, resume, follow, status, export, delete."""
        from engine.workspace.sessions import Sessions

        return Sessions(self)

    @cached_property
    def cases(self) -> Cases:
        """Notes, oracles and consultations."""
        from engine.workspace.cases import Cases

        return Cases(self)

    @cached_property
    def agent(self) -> Agent:
        """The vault and the case agent."""
        from engine.workspace.agent import Agent

        return Agent(self)

    @cached_property
    def evals(self) -> Evals:
        """Evaluation runs (`detektiv eval`)."""
        from engine.workspace.evals import Evals

        return Evals(self)

    @cached_property
    def ask(self) -> Ask:
        """Questions in conversations (`detektiv ask`)."""
        from engine.workspace.ask import Ask

        return Ask(self)

    # ---- configuration, store, router -----------------------------------------------------

    @property
    def config(self) -> Config:
        """The validated configuration (loaded on first use; `ConfigError` when invalid)."""
        from engine.config.load import load_config

        if self._config is None:
            with self._config_lock:
                if self._config is None:
                    self._config = self._with_lent(load_config(self.paths))
        return self._config

    def _with_lent(self, config: Config) -> Config:
        """`config` with the lent providers among its own (`lend`)."""
        config.providers.update({name: entry for name, (entry, _) in self._lent.items()})
        return config

    def lend(self, name: str, model: str, answer: Answer, timeout: float = 120.0) -> None:
        """Lend the workspace a provider of the embedding program's own, named `name` for a
        role to name (`witness=[name]`): each of its replies is given whole by `answer`
        (`engine.providers.LentProvider`; Inspect AI's model, for its scorer). Routers built
        after this use it; it is never written to the config file. `ConfigError` when the
        config has a provider of that name already."""
        from engine.config.providers import ProviderConfig

        config = self.config
        if name in config.providers and name not in self._lent:
            raise ConfigError(f"a provider named {name!r} is configured already: lend it "
                              "under another name")
        others = [p.priority for n, p in config.providers.items() if n != name and p.enabled]
        entry = ProviderConfig(kind="openai", model=model, timeout=timeout,
                               priority=max(others, default=0) + 1)
        self._lent[name] = (entry, answer)
        config.providers[name] = entry

    def _provider_for(self, name: str, config: ProviderConfig) -> Provider:
        """The router's factory: a lent provider by its name, else the configured one."""
        from engine.providers import create_provider
        from engine.providers._lent import LentProvider

        lent = self._lent.get(name)
        if lent is not None:
            return LentProvider(name, config, lent[1])
        return create_provider(name, config, self.paths)

    @property
    def config_loaded(self) -> bool:
        """True once the configuration has been loaded and validated."""
        return self._config is not None

    @property
    def store(self) -> SessionStore:
        """The session store (temp files of killed writes swept the first time)."""
        from engine.storage.sessions import SessionStore

        if self._store is None:
            store = SessionStore.of(self.paths)
            store.sweep()
            self._store = store
        return self._store

    async def new_router(self, config: Config | None = None, discover: bool = True) -> Router:
        """A router of its own for `config` (default: the workspace's), Ollama discovered
        when `discover`; the caller closes it."""
        from engine.cache.layer import CacheLayer
        from engine.providers import discover_ollama
        from engine.routing.router import Router

        config = self.config if config is None else config
        if self.preimport:
            await asyncio.to_thread(_preimport)
        if discover:
            await discover_ollama(config)
        layer = None
        if self.use_cache and config.cache.enabled:

            layer = CacheLayer(config.cache, lambda: self.cache)
        return Router(config, self.paths, cache=layer,
                      factory=self._provider_for if self._lent else None)

    async def provider(self, spec: str) -> Provider:
        """One provider by configured name or ad hoc `kind:model`, called directly (whatever
        the router remembers about it). An unknown name makes Ollama be looked for first."""
        from engine.providers import create_provider, discover_ollama, select_provider

        config = self.config
        if spec not in config.providers and ":" not in spec:
            await discover_ollama(config)  # `providers` may have shown a discovered one
        name, provider_config = select_provider(config, spec)
        return create_provider(name, provider_config, self.paths)

    async def routed(self, chains: dict[str, list[str]], discover: bool = True
                     ) -> tuple[Router, bool]:
        """A router for roles given their own chains (`{"oracle-…": ["cloud"]}`), and True:
        the caller closes it; with no chains, the shared router, and False. A name that is not
        configured (nor `kind:model`) makes Ollama be looked for first; an unknown one is a
        `ConfigError`."""
        from engine.config.roles import apply_chains
        from engine.providers import discover_ollama

        if not chains:
            return await self.router(), False
        config = self.config
        if any(name not in config.providers and ":" not in name
               for chain in chains.values() for name in chain):
            await discover_ollama(config)  # `providers` may have shown a discovered one
        return await self.new_router(apply_chains(config, chains), discover=discover), True

    async def router(self) -> Router:
        """The shared router (built on first use; `reset_router` drops it)."""
        if self._router_lock is None:
            self._router_lock = asyncio.Lock()
        async with self._router_lock:
            if self._router is None:
                self._router = await self.new_router()
            return self._router

    @property
    def shared_router(self) -> Router | None:
        """The shared router if it was built, else None."""
        return self._router

    async def reset_router(self) -> None:
        """Close the shared router; the next `router()` builds one for the current config."""
        old, self._router = self._router, None
        if old is not None:
            await old.aclose()

    def provider_rows(self) -> list[ProviderRow]:
        """Every provider as the shared router now knows it (no router yet: config alone)."""
        from engine.report.providers import provider_rows

        router = self._router
        return provider_rows(self.config, router.states if router is not None else None,
                             router.seen_windows if router is not None else None)

    async def check_providers(self) -> list[ProviderRow]:
        """Every provider, each enabled one health-checked now (a router of its own)."""
        from engine.report.providers import provider_rows

        router = await self.new_router()
        try:
            await router.check_health()
            return provider_rows(self.config, router.states, await router.windows())
        finally:
            await router.aclose()

    async def watch_health(self) -> None:
        """Start the shared router's background health checks (the app's Providers tab)."""
        (await self.router()).start_health_checks()

    async def check_health(self) -> None:
        """One health round over the shared router's providers, now."""
        await (await self.router()).check_health()

    async def configured_provider(self, name: str) -> Provider:
        """The shared router's provider `name` (to list or pull its models); `ConfigError`
        for a name it does not have."""
        router = await self.router()
        if name not in router.providers:
            raise ConfigError(f"no enabled provider named {name!r}")
        return router.providers[name]

    def save_config(self) -> None:
        """Write the configuration (as changed in place) to the config file, atomically."""
        from engine.config.load import save_config

        config = self.config
        if self._lent:  # lent for this process only, never written
            config = config.model_copy(update={"providers": {
                n: p for n, p in config.providers.items() if n not in self._lent}})
        save_config(config, self.paths.config_file)

    def reload_config(self) -> None:
        """Read the configuration again (a new embedded default: the capable model just
        fetched). The shared router is retired, as `update_providers` does (`_retire`).
        `ConfigError` leaves the old configuration in place."""
        from engine.config.load import load_config

        with self._config_lock:
            self._config = self._with_lent(load_config(self.paths))
        self._retire()

    def update_providers(self, providers: dict[str, ProviderConfig]) -> None:
        """Change providers and write the config file once, now. The shared router is retired
        (the next `router()` builds one for the new config)."""
        self.config.providers.update(providers)
        self.save_config()
        self._retire()

    def _retire(self) -> None:
        """Let the shared router go: the next `router()` builds one for the configuration as
        it is now, while a run in flight keeps the one it has; the retired routers close with
        the workspace (`aclose`)."""
        old, self._router = self._router, None
        if old is not None:
            self._retired.append(old)

    @property
    def context_policy(self) -> ContextPolicy:
        """`context.toml` beside the config file, over the defaults (read once). An invalid
        file gives the defaults and a line in `warnings`."""
        from engine.context.policy import load_policy

        if self._policy is None:
            self._policy, warnings = load_policy(self.paths.config_file.parent / "context.toml")
            self.warnings += warnings
        return self._policy

    @property
    def conversations(self) -> ConversationStore:
        """The conversation store (`conversations.sqlite3` in the data directory)."""
        from engine.context.conversations import SQLiteConversations

        with self._open_lock:  # workers of the app ask for it from several threads
            self.check_open("the conversation store")
            if self._conversations is None:
                self._conversations = SQLiteConversations(
                    self.paths.data_dir / "conversations.sqlite3"
                )
            return self._conversations

    @property
    def cache(self) -> ResponseCache:
        """The response cache: PostgreSQL at `[cache] url`, else `cache.sqlite3` in the data
        directory (`ConfigError` when the server cannot be reached)."""
        with self._open_lock:  # workers of the app ask for it from several threads
            self.check_open("the response cache")
            if self._cache is None:
                self._cache = self._open_cache()
            return self._cache

    def _open_cache(self) -> ResponseCache:
        # imported on first use: most runs never open the cache (psycopg is heavy)
        from engine.cache.cache import ResponseCache
        from engine.cache.store import SQLiteCacheStore

        settings = self.config.cache
        store: CacheStore
        if settings.url:
            from engine.cache.postgres import PostgresCacheStore

            store = PostgresCacheStore(settings.url)
        else:
            store = SQLiteCacheStore(self.paths.data_dir / "cache.sqlite3")
        return ResponseCache(store, settings.threshold, int(settings.max_mb * 1024 * 1024),
                             self._semantic_tier())

    def _semantic_tier(self) -> Semantic | None:
        """The cache's semantic tier, when `[cache.embeddings]` configures one (a model that
        cannot be set up leaves it off, logged: the cache never fails over it)."""
        from engine.cache.cache import Semantic
        from engine.cache.embeddings import EmbeddingError, open_embedder

        settings = self.config.cache.embeddings
        if settings is None or not settings.semantic:
            return None
        try:
            return Semantic(open_embedder(settings, self.paths), settings.similarity,
                            settings.neighbours)
        except (EmbeddingError, FileNotFoundError) as exc:
            log.warning("the cache's semantic tier is off: %s", exc)
            return None

    @property
    def closed(self) -> bool:
        """True once `aclose` began: the stores it held refuse further use."""
        return self._closed

    def check_open(self, what: str) -> None:
        """`StoreClosed` naming `what` once the workspace is closed (a worker still running at
        shutdown must not open a store nobody would close)."""
        if self._closed:
            raise StoreClosed(f"{what} is closed: detektiv is shutting down")

    async def aclose(self) -> None:
        """Release what the workspace holds (the shared router's connections and tasks, the
        stores). The front end first stops what uses them (the app drains its workers); a use
        racing this gets its result or `StoreClosed`, and nothing is opened again."""
        with self._open_lock:
            self._closed = True
            cache, self._cache = self._cache, None
            conversations, self._conversations = self._conversations, None
        if cache is not None:
            cache.store.close()
            if cache.semantic is not None:
                cache.semantic.embedder.close()
        await self.reset_router()
        retired, self._retired = self._retired, []
        for router in retired:
            with contextlib.suppress(Exception):  # each closed, whatever one of them does
                await router.aclose()
        if conversations is not None:
            conversations.close()
        if "agent" in self.__dict__:  # built: its vault may be open
            self.agent.close()

    # ---- the rules ------------------------------------------------------------------------

    def advice(self, role: str = "detective") -> str | None:
        """What to tell the user before a run when a demonstration model plays `role` first
        in the configured chain (None: a capable model does)."""
        from engine.report.cells import demonstration_note
        from engine.routing.chains import chain_for

        config = self.config
        chain = chain_for(config, role, self.paths.config_file)
        return demonstration_note([config.providers[name] for name in chain], role)

    def capable_offer(self) -> CapableState | None:
        """The capable model's state when the app should fetch it by itself: a demonstration
        model plays the detective, the model is not here, and the user never stopped a fetch
        (None otherwise); or the model is here and its draft is not (the draft alone, for
        speculative decoding). Its `refused` says why it cannot start (`quiet`: downloads are
        off on purpose, nothing to say)."""
        from engine.gguf.capable import capable_state

        state = capable_state(self.paths)
        if state.complete or state.declined:
            return None
        return state if state.present or self.advice("detective") is not None else None

    @property
    def models(self) -> LocalModels:
        """The local GGUF models: list, pull, remove (`engine.gguf`)."""
        from engine.workspace.models import LocalModels

        return LocalModels(self.paths, self.config)
