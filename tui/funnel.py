"""The error funnel's guard: an exception in a handler never stops a message loop.

Textual ends a message pump's loop after an exception in one of its handlers (and the app's
loop is the app: it exits). Every screen, widget and the app itself in `tui/` derive from
`Guarded`, whose dispatch hands such an exception to the app's funnel (a notification and a
log record) and goes on with the next message. A test checks that no class in `tui/` forgets.

Textual has no public hook for this, so this module — and only this module — overrides three
private methods (`PRIVATE_HOOKS`). Textual is pinned to a major version (pyproject.toml), and
`check_private_hooks` (run by a test) fails loudly when an upgrade renames one or changes its
parameters, instead of the funnel silently doing nothing.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any

from textual.message import Message
from textual.message_pump import MessagePump

from tui.host import Host, host

if TYPE_CHECKING:
    from textual.app import App
    from textual.dom import DOMNode

__all__ = ["PRIVATE_HOOKS", "Guarded", "GuardedApp", "check_private_hooks"]

PRIVATE_HOOKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "_dispatch_message": ("textual.message_pump.MessagePump", ("self", "message")),
    "_handle_exception": ("textual.app.App", ("self", "error")),
    "_dispatch_action": ("textual.app.App",
                         ("self", "namespace", "action_name", "params")),
}
"""The private Textual methods the funnel overrides: where each is, and its parameters."""


def check_private_hooks() -> list[str]:
    """What no longer matches in the installed Textual (empty: every hook is as expected)."""
    from textual.app import App

    owners: dict[str, type[Any]] = {"textual.message_pump.MessagePump": MessagePump,
                                    "textual.app.App": App}
    problems: list[str] = []
    for name, (owner, params) in PRIVATE_HOOKS.items():
        method = getattr(owners[owner], name, None)
        if method is None:
            problems.append(f"{owner}.{name} is gone")
            continue
        found = tuple(inspect.signature(method).parameters)
        if found != params:
            problems.append(f"{owner}.{name}{found} is not {params}")
    return problems


class Guarded:
    """Mix in before the Textual base class: `class MyScreen(Guarded, Screen[None])`."""

    app: App[Any]

    @property
    def host(self) -> Host:
        """The app, as far as a screen or widget may use it (`tui.host`)."""
        return host(self.app)

    async def _dispatch_message(self, message: Message) -> None:
        try:
            await super()._dispatch_message(message)  # type: ignore[misc]
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.app._handle_exception(error)


class GuardedApp(Guarded):
    """The app's side of the funnel: an exception in a handler, an action, a timer or a worker
    goes to `_report` (a notification and a log record) and the app keeps running."""

    def _report(self, error: BaseException) -> None:
        raise NotImplementedError

    def _handle_exception(self, error: Exception) -> None:
        try:
            self._report(error)
        except Exception:  # pragma: no cover - reporting itself failed: fall back to Textual
            super()._handle_exception(error)  # type: ignore[misc]

    async def _dispatch_action(self, namespace: DOMNode, action_name: str, params: Any) -> bool:
        """Run an action (a key binding, the palette, a link); one that raises is reported
        and counts as handled, so the key is not passed on."""
        try:
            return await super()._dispatch_action(  # type: ignore[misc, no-any-return]
                namespace, action_name, params)
        except Exception as error:
            self._handle_exception(error)
            return True
