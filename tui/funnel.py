"""The error funnel's guard: an exception in a handler never stops a message loop.

Textual ends a message pump's loop after an exception in one of its handlers (and the app's
loop is the app: it exits). Every screen, widget and the app itself in `tui/` derive from
`Guarded`, whose dispatch hands such an exception to the app's funnel (a notification and a
log record) and goes on with the next message. A test checks that no class in `tui/` forgets.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from textual.app import App

__all__ = ["Guarded"]


class Guarded:
    """Mix in before the Textual base class: `class MyScreen(Guarded, Screen[None])`."""

    app: App[Any]

    async def _dispatch_message(self, message: Message) -> None:
        try:
            await super()._dispatch_message(message)  # type: ignore[misc]
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.app._handle_exception(error)
