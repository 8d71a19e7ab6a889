"""The engine's one door for the front ends: configuration, the session store and the
router's lifecycle, and the session operations.

    workspace = Workspace(paths)                 # config loaded on first use
    run = workspace.start("Tea contains caffeine", limit=8, detective=["cloud"])
    async for event in run.events():             # typed events, each stored before it comes
        ...
    workspace.resume(ref) / follow(ref) / status(ref) / export(ref, "md") / delete(ref)

The CLI and the app both come through here and build no router, interrogation or store of
their own. Every rule about a session (the iteration limit, an empty hypothesis, what can be
resumed, when a stored `running` session is `interrupted`) is checked here or below, once;
the front ends present the errors it raises. Features to come add their operations here.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Literal

from engine.agent.operations import AgentOperations
from engine.errors import ConfigError
from engine.oracles.casefile import CaseFileOperations

if TYPE_CHECKING:
    from engine.cache.cache import ResponseCache
    from engine.config import Config, ProviderConfig
    from engine.context.budget import Prompt
    from engine.context.conversations import ConversationStore, ConversationTurn
    from engine.context.policy import ContextPolicy
    from engine.gguf.models import LocalModels
    from engine.models.events import InterrogationEvent, Record
    from engine.models.session import InterrogationSession
    from engine.paths import Paths
    from engine.providers import Provider, StreamRequest
    from engine.router import Router
    from engine.storage.sessions import SessionJournal, SessionStore

__all__ = ["LIMITS", "Asked", "Run", "Workspace"]

LIMITS = (5, 20)
"""The smallest and largest iteration limit a session may have."""

OnRecord = Callable[["Record"], None]


def _preimport() -> None:
    """Import the provider SDKs (slow) on a worker thread, not on an event loop."""
    import openai  # noqa: F401

    import engine.providers._ollama  # noqa: F401
    import engine.providers._openai  # noqa: F401


class Run:
    """A session taken to be run (new or resumed), its lock held; `events()` runs it."""

    def __init__(self, workspace: Workspace, journal: SessionJournal, resumed: bool) -> None:
        self.workspace = workspace
        self.journal = journal
        self.resumed = resumed

    @property
    def session(self) -> InterrogationSession:
        """The session being run (updated as it goes)."""
        return self.journal.session

    async def events(self) -> AsyncIterator[InterrogationEvent]:
        """Run the interrogation to its end, yielding every event; see
        `engine.interrogation`. The session's own chains (set at start) get a router of their
        own, closed at the end; otherwise the workspace's shared router is used."""
        from engine.interrogation import Interrogation
        from engine.roles import apply_roles

        session = self.journal.session
        workspace = self.workspace
        own = bool(session.detective or session.witness)
        if own:
            config = apply_roles(workspace.config, session.detective, session.witness)
            router = await workspace.new_router(config,
                                                discover=not (session.detective
                                                              and session.witness))
        else:
            config, router = workspace.config, await workspace.router()
        interrogation = Interrogation(router, self.journal, config.interrogation,
                                      resumed=self.resumed)
        try:
            async for event in interrogation.run():
                yield event
        finally:
            self.journal.close()
            if own:
                await router.aclose()


class Asked:
    """A question put through the workspace: the prompt to send (the conversation's history
    in it, fitted to each provider's window), and the conversation its answer goes to."""

    def __init__(self, workspace: Workspace, prompt: Prompt, client_id: str,
                 conversation_id: str | None, history: list[ConversationTurn]) -> None:
        self.workspace = workspace
        self.prompt = prompt
        self.client_id = client_id
        self.conversation_id = conversation_id
        """None when conversations are off (`context.toml`)."""
        self.history = history
        """The earlier turns loaded for it (before fitting to a window)."""

    def answered(self, text: str, provider: str | None = None) -> None:
        """Keep the answer as the conversation's next turn."""
        if self.conversation_id is None:
            return
        from engine.context.conversations import ConversationTurn

        self.workspace.conversations.append(
            self.client_id, self.conversation_id,
            ConversationTurn("assistant", text, meta={"provider": provider} if provider else {}),
        )


class Workspace(CaseFileOperations, AgentOperations):
    """Config, store and router for one user's data; see the module docstring. The case-file
    operations (notes, oracles, consultations) come from `CaseFileOperations`, the vault and
    the case agent from `AgentOperations`."""

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
        self.warnings: list[str] = []
        """Problems that changed nothing but should be seen (an invalid context.toml)."""

    # ---- configuration, store, router -----------------------------------------------------

    @property
    def config(self) -> Config:
        """The validated configuration (loaded on first use; `ConfigError` when invalid)."""
        if self._config is None:
            with self._config_lock:
                if self._config is None:
                    from engine.config import load_config

                    self._config = load_config(self.paths)
        return self._config

    @property
    def config_loaded(self) -> bool:
        """True once the configuration has been loaded and validated."""
        return self._config is not None

    @property
    def store(self) -> SessionStore:
        """The session store (temp files of killed writes swept the first time)."""
        if self._store is None:
            from engine.storage.sessions import SessionStore

            store = SessionStore(self.paths.data_dir / "sessions")
            store.sweep()
            self._store = store
        return self._store

    async def new_router(self, config: Config | None = None, discover: bool = True) -> Router:
        """A router of its own for `config` (default: the workspace's), Ollama discovered
        when `discover`; the caller closes it."""
        from engine.providers import discover_ollama
        from engine.router import Router

        config = self.config if config is None else config
        if self.preimport:
            await asyncio.to_thread(_preimport)
        if discover:
            await discover_ollama(config)
        layer = None
        if self.use_cache and config.cache.enabled:
            from engine.cache.layer import CacheLayer

            layer = CacheLayer(config.cache, lambda: self.cache)
        return Router(config, self.paths, cache=layer)

    async def provider(self, spec: str) -> Provider:
        """One provider by configured name or ad hoc `kind:model`, called directly (whatever
        the router remembers about it). An unknown name makes Ollama be looked for first."""
        from engine.providers import create_provider, discover_ollama, select_provider

        config = self.config
        if spec not in config.providers and ":" not in spec:
            await discover_ollama(config)  # `providers` may have shown a discovered one
        name, provider_config = select_provider(config, spec)
        return create_provider(name, provider_config, self.paths)

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

    def save_config(self) -> None:
        """Write the configuration (as changed in place) to the config file, atomically."""
        from engine.config import save_config

        save_config(self.config, self.paths.config_file)

    def update_providers(self, providers: dict[str, ProviderConfig]) -> Router | None:
        """Change providers and write the config file once, now. The shared router is let go
        (the next `router()` builds one for the new config); it is returned for the caller
        to close."""
        self.config.providers.update(providers)
        self.save_config()
        old, self._router = self._router, None
        return old

    @property
    def context_policy(self) -> ContextPolicy:
        """`context.toml` beside the config file, over the defaults (read once). An invalid
        file gives the defaults and a line in `warnings`."""
        if self._policy is None:
            from engine.context.policy import load_policy

            self._policy, warnings = load_policy(self.paths.config_file.parent / "context.toml")
            self.warnings += warnings
        return self._policy

    @property
    def conversations(self) -> ConversationStore:
        """The conversation store (`conversations.sqlite3` in the data directory)."""
        if self._conversations is None:
            from engine.context.conversations import SQLiteConversations

            self._conversations = SQLiteConversations(
                self.paths.data_dir / "conversations.sqlite3"
            )
        return self._conversations

    @property
    def cache(self) -> ResponseCache:
        """The response cache: PostgreSQL at `[cache] url`, else `cache.sqlite3` in the data
        directory (`ConfigError` when the server cannot be reached)."""
        if self._cache is None:
            from engine.cache.cache import ResponseCache
            from engine.cache.store import CacheStore, SQLiteCacheStore

            settings = self.config.cache
            store: CacheStore
            if settings.url:
                from engine.cache.postgres import PostgresCacheStore

                store = PostgresCacheStore(settings.url)
            else:
                store = SQLiteCacheStore(self.paths.data_dir / "cache.sqlite3")
            self._cache = ResponseCache(store, settings.threshold,
                                        int(settings.max_mb * 1024 * 1024))
        return self._cache

    async def aclose(self) -> None:
        """Release what the workspace holds (the shared router's connections and tasks)."""
        if self._cache is not None:
            self._cache.store.close()
            self._cache = None
        await self.reset_router()
        if self._conversations is not None:
            self._conversations.close()
            self._conversations = None
        if self._vault is not None:
            self._vault.close()
            self._vault = None

    # ---- the rules ------------------------------------------------------------------------

    def advice(self, role: str = "detective") -> str | None:
        """What to tell the user before a run when a demonstration model plays `role` first
        in the configured chain (None: a capable model does)."""
        from engine.report import demonstration_note
        from engine.router import chain_for

        config = self.config
        chain = chain_for(config, role, self.paths.config_file)
        return demonstration_note([config.providers[name] for name in chain], role)

    @property
    def models(self) -> LocalModels:
        """The local GGUF models: list, pull, remove (`engine.gguf`)."""
        from engine.gguf.models import LocalModels

        return LocalModels(self.paths, self.config)

    def check_limit(self, limit: int | None) -> int:
        """`limit`, or the configured default when None; `ConfigError` outside 5–20."""
        value = self.config.interrogation.iteration_limit if limit is None else limit
        low, high = LIMITS
        if not low <= value <= high:
            raise ConfigError(f"the iteration limit must be between {low} and {high} "
                              f"(got {value})")
        return value

    def status(self, ref: str, session: InterrogationSession | None = None) -> str:
        """The session's status as a user should read it: `interrupted` for a stored
        `running` one that no live process runs any more."""
        session = self.store.load(ref) if session is None else session
        if session.status == "running" and not self.store.is_live(ref):
            return "interrupted"
        return session.status

    # ---- operations -----------------------------------------------------------------------

    def start(
        self,
        hypothesis: str,
        limit: int | None = None,
        detective: Sequence[str] = (),
        witness: Sequence[str] = (),
        on_record: OnRecord | None = None,
        session: str | None = None,
    ) -> Run:
        """A new session, stored at once; `Run.events()` runs it. With `session`, the
        interrogation of that notes-only session (`new_case`) instead. Raises `ConfigError`
        for an empty hypothesis, a limit outside 5–20 or an unknown provider, before anything
        is stored."""
        from engine.roles import apply_roles

        text = hypothesis.strip()
        if not text:
            raise ConfigError("the hypothesis is empty")
        value = self.check_limit(limit)
        apply_roles(self.config, list(detective), list(witness))  # unknown names fail here
        if session is not None:
            journal = self.store.begin(session, text, value, detective=list(detective),
                                       witness=list(witness), on_record=on_record)
        else:
            journal = self.store.create(text, value, detective=list(detective),
                                        witness=list(witness), on_record=on_record)
        return Run(self, journal, resumed=False)

    def resume(self, ref: str, on_record: OnRecord | None = None) -> Run:
        """Take a stored session to continue it from its last completed round. Raises
        `SessionError` when it ended already or another process runs it."""
        from engine.models.session import check_resumable

        check_resumable(self.store.load(ref))
        return Run(self, self.store.open(ref, on_record=on_record), resumed=True)

    def follow(self, ref: str) -> AsyncIterator[Record]:
        """Every event of a session so far, then new ones until its run ends (or its process
        dies: then `status` says `interrupted`)."""
        from engine.errors import SessionError

        session = self.store.load(ref)
        if session.status == "notes":
            raise SessionError(f"session {session.short_id} has no interrogation to watch yet")
        return self.store.follow(ref)

    def export(self, ref: str, fmt: Literal["md", "json"]) -> str:
        """A session as markdown (for people, with its status as a user reads it, its notes
        and oracle answers in full) or JSON (the whole session; loads back equal)."""
        from engine.export import to_json, to_markdown

        session = self.store.load(ref)
        if fmt == "json":
            return to_json(session)
        return to_markdown(session, self.status(ref, session), self.note_texts(ref, session),
                           self.answer_texts(ref, session))

    def ask(
        self,
        request: StreamRequest,
        *,
        client_id: str = "cli",
        conversation: str | None = None,
        continue_last: bool = False,
    ) -> Asked:
        """A question in a conversation: a new one, `conversation` (by id; created when
        new) or, with `continue_last`, the client's most recent one. Its history comes from
        `load_recent` under the `ask` policy; the user's turn is stored now, before any
        provider is called. With conversations off in `context.toml`, the question is asked
        alone and nothing is kept (`ConfigError` when a conversation was asked for)."""
        from engine.context.budget import Prompt
        from engine.context.conversations import (
            ConversationTurn,
            conversation_prompt,
            load_recent,
        )

        limits = self.context_policy.limits("ask")
        if not limits.enabled:
            if conversation or continue_last:
                raise ConfigError("conversations are off for ask in context.toml "
                                  "(enabled = false)")
            return Asked(self, Prompt.whole(request), client_id, None, [])
        store = self.conversations
        conversation_id = self.conversation_id(client_id, conversation, continue_last)
        history = load_recent(store, client_id, conversation_id, limits).turns
        store.append(client_id, conversation_id,
                     ConversationTurn("user", request.messages[-1].content))
        prompt = conversation_prompt(request, history, limits)
        return Asked(self, prompt, client_id, conversation_id, history)

    def conversation_id(self, client_id: str, conversation: str | None,
                        continue_last: bool) -> str:
        """The conversation a question goes to: `conversation` (checked; created when new),
        the client's most recent one (`continue_last`; a new one when it has none), else a
        new id."""
        import secrets

        if conversation is not None:
            name = conversation.strip()
            if not name or len(name) > 64 or not name.isprintable():
                raise ConfigError(f"--conversation {conversation!r}: use 1–64 printable "
                                  "characters")
            return name
        if continue_last:
            latest = self.conversations.conversations(client_id)
            if latest:
                return latest[0].conversation_id
        return secrets.token_hex(4)
