"""The workspace's agent part (SPEC §6): the vault and case-agent runs.

    run = await workspace.agent.run("Which sessions mention Paris?")
    workspace.agent.search("Paris")
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from engine.agent.segments import load_segments
from engine.agent.tools import Toolbox
from engine.agent.vault import Vault
from engine.context.conversations import ConversationTurn, load_recent
from engine.errors import ConfigError

if TYPE_CHECKING:
    from engine.agent.run import AgentRun
    from engine.agent.segments import PromptSegment
    from engine.agent.vault import Vault, VaultHit
    from engine.workspace.core import Workspace

__all__ = ["Agent"]


class Agent:
    """The vault and the case agent of one workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._vault: Vault | None = None
        self._vault_lock = threading.Lock()  # the agent's tools and the app's workers race
        self._segments: list[PromptSegment] | None = None

    @property
    def vault(self) -> Vault:
        """The vault index (`vault.sqlite3` in the cache directory, rebuilt from the sessions
        when missing or damaged; one an earlier version left in the data directory is
        removed)."""
        with self._vault_lock:
            self.workspace.check_open("the vault")
            if self._vault is None:
                paths = self.workspace.paths
                for stale in (paths.data_dir / "vault.sqlite3",
                              paths.data_dir / "vault.sqlite3-wal",
                              paths.data_dir / "vault.sqlite3-shm"):
                    if paths.cache_dir != paths.data_dir:
                        stale.unlink(missing_ok=True)
                self._vault = Vault(paths.cache_dir / "vault.sqlite3", self.workspace.store)
            return self._vault

    def close(self) -> None:
        """Close the vault's database, if it was opened."""
        with self._vault_lock:
            vault, self._vault = self._vault, None
        if vault is not None:
            vault.close()

    def search(self, query: str, limit: int = 10) -> list[VaultHit]:
        """The vault's best matches for `query`, the index synced with the sessions first."""
        return self.vault.search(query, limit=limit)

    @property
    def segments(self) -> list[PromptSegment]:
        """The prompt segments (read once; `AgentError` naming a missing or empty file)."""
        if self._segments is None:

            self._segments = load_segments()
        return self._segments

    async def run(
        self,
        question: str,
        *,
        provider: str | None = None,
        conversation: str | None = None,
        continue_last: bool = False,
    ) -> AgentRun:
        """A run of the case agent on `question`, in a new conversation, `conversation` (by
        id) or the most recent one (`continue_last`); `provider` answers every turn (else the
        `agent` role's chain). The question is stored in the conversation now.
        `ConfigError` for an empty question or an unknown provider, `AgentError` when a
        prompt segment is missing; nothing is stored then."""
        from engine.agent.run import CLIENT_ID, AgentRun

        text = question.strip()
        if not text:
            raise ConfigError("the question is empty")
        segments = self.segments
        settings = self.workspace.config.agent
        workspace = self.workspace
        router, own = await workspace.routed({"agent": [provider]} if provider else {},
                                             discover=False)
        limits = workspace.context_policy.limits("agent")
        store = workspace.conversations
        conversation_id = workspace.ask.conversation_id(CLIENT_ID, conversation, continue_last)
        history = load_recent(store, CLIENT_ID, conversation_id, limits).turns
        store.append(CLIENT_ID, conversation_id, ConversationTurn("user", text))
        toolbox = Toolbox(self.vault, workspace.store, settings.code_dir,
                          settings.tool_output_chars)
        return AgentRun(
            text, router=router, role="agent", settings=settings, segments=segments,
            toolbox=toolbox, conversations=store, conversation_id=conversation_id,
            history=history, policy=workspace.context_policy,
            log_dir=workspace.paths.data_dir / "agent" / "runs",
            sessions=workspace.store.directories,
            close=router.aclose if own else None,
        )
