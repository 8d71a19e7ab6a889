"""What a screen may use of the app it runs in: the workspace, the key the user's keymap gives
a binding, and the session on show. Screens are typed against this, not the app class, so the
app imports its screens and no screen imports the app; for the rest (a screen to push, a
worker's thread) they use Textual's own `App` API, and for news they post a message
(`tui.messages`) that the app routes."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from textual.app import App

from engine import Workspace

if TYPE_CHECKING:
    from tui.background import Background

__all__ = ["Host", "host"]


@runtime_checkable
class Host(Protocol):
    """The app as its screens see it."""

    @property
    def workspace(self) -> Workspace: ...

    @property
    def background(self) -> Background:
        """The app's thread work in flight, drained before the workspace closes."""

    @property
    def current_session(self) -> str | None:
        """The session the Live tab shows (the Oracles tab's default)."""

    def key_for(self, binding_id: str, default: str) -> str:
        """The key the user's keymap gives a binding (for texts that name it)."""

    @property
    def fetch_stop(self) -> threading.Event | None:
        """Set to stop the capable model's fetch in flight (None: none runs)."""

    def fetch_capable(self, offer: str = "") -> None:
        """Fetch the capable local model on a thread, its progress in every tab bar."""

    def stop_fetch(self) -> None:
        """Stop the fetch, and remember it: it does not start by itself again."""


def host(app: App[Any]) -> Host:
    """The running app, seen through `Host` (the app class satisfies it: a test checks)."""
    return cast(Host, app)
