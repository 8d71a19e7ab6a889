"""The workspace's case-agent operations (SPEC §6): the vault and agent runs.

`Workspace` inherits them; they use its configuration, store, context policy, conversations
and routers, and the front ends call them on the workspace like any other operation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.workspace_parts import WorkspaceParts

if TYPE_CHECKING:
    from engine.agent.run import AgentRun
    from engine.agent.segments import PromptSegment
    from engine.agent.vault import Vault, VaultHit

__all__ = ["AgentOperations"]


class AgentOperations(WorkspaceParts):
    """The vault and the case agent; mixed into `Workspace`."""

    _vault: Vault | None = None
    _segments: list[PromptSegment] | None = None

    @property
    def vault(self) -> Vault:
        """The vault index (`vault.sqlite3` in the data directory; rebuilt if damaged)."""
        if self._vault is None:
            from engine.agent.vault import Vault

            self._vault = Vault(self.paths.data_dir / "vault.sqlite3", self.store)
        return self._vault

    def vault_search(self, query: str, limit: int = 10) -> list[VaultHit]:
        """The vault's best matches for `query`, the index synced with the sessions first."""
        return self.vault.search(query, limit=limit)

    @property
    def agent_segments(self) -> list[PromptSegment]:
        """The prompt segments (read once; `AgentError` naming a missing or empty file)."""
        if self._segments is None:
            from engine.agent.segments import load_segments

            self._segments = load_segments()
        return self._segments

    async def agent(
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
        from engine.agent.tools import Toolbox
        from engine.context.conversations import ConversationTurn, load_recent
        from engine.errors import ConfigError

        text = question.strip()
        if not text:
            raise ConfigError("the question is empty")
        segments = self.agent_segments
        settings = self.config.agent
        role, own = "agent", False
        if provider:
            from engine.providers import discover_ollama
            from engine.roles import apply_chains

            if provider not in self.config.providers and ":" not in provider:
                await discover_ollama(self.config)
            config = apply_chains(self.config, {"agent": [provider]})  # unknown names fail
            router = await self.new_router(config, discover=False)
            own = True
        else:
            router = await self.router()
        limits = self.context_policy.limits("agent")
        store = self.conversations
        conversation_id = self.conversation_id(CLIENT_ID, conversation, continue_last)
        history = load_recent(store, CLIENT_ID, conversation_id, limits).turns
        store.append(CLIENT_ID, conversation_id, ConversationTurn("user", text))
        toolbox = Toolbox(self.vault, self.store, settings.code_dir,
                          settings.tool_output_chars)
        return AgentRun(
            text, router=router, role=role, settings=settings, segments=segments,
            toolbox=toolbox, conversations=store, conversation_id=conversation_id,
            history=history, policy=self.context_policy,
            log_dir=self.paths.data_dir / "agent" / "runs", sessions=self.store.directories,
            close=router.aclose if own else None,
        )
