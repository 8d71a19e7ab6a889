"""What `Workspace` provides to the operation groups mixed into it (case files, the agent):
declared once, so that each group type-checks alone and none repeats the list."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.config.models import Config
    from engine.context.conversations import ConversationStore
    from engine.context.policy import ContextPolicy
    from engine.models.session import InterrogationSession
    from engine.paths import Paths
    from engine.routing.router import Router
    from engine.storage.sessions import SessionStore

__all__ = ["WorkspaceParts"]


class WorkspaceParts:
    """The workspace's configuration, store, policy, conversations and routers; every member
    is provided by `engine.workspace.core.Workspace`."""

    paths: Paths

    @property
    def config(self) -> Config:
        raise NotImplementedError

    @property
    def store(self) -> SessionStore:
        raise NotImplementedError

    @property
    def context_policy(self) -> ContextPolicy:
        raise NotImplementedError

    @property
    def conversations(self) -> ConversationStore:
        raise NotImplementedError

    async def router(self) -> Router:
        raise NotImplementedError

    async def new_router(self, config: Config | None = None, discover: bool = True) -> Router:
        raise NotImplementedError

    def status(self, ref: str, session: InterrogationSession | None = None) -> str:
        raise NotImplementedError

    def conversation_id(self, client_id: str, conversation: str | None,
                        continue_last: bool) -> str:
        raise NotImplementedError
