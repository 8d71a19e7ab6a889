"""The driver of a served tab's app process: Textual's web driver, plus one message.

When a browser tab closes, the server sends `detach` instead of textual-serve's `quit`: the
app ends at once unless it is running an interrogation, which then finishes first (the server
keeps reading what the app draws and throws it away). The next tab attaches to the run as
`detektiv watch` does.
"""

from __future__ import annotations

from textual.drivers.web_driver import WebDriver

from tui.messages import TabClosed

__all__ = ["BROWSER_KEYMAP", "ServedDriver"]

BROWSER_KEYMAP = {"toggle-theme": "f9", "resume": "f6"}
"""Keys a browser keeps for itself, moved: ctrl+t (new tab) and ctrl+r (reload); the user's
own keymap still wins."""


class ServedDriver(WebDriver):
    """See the module docstring."""

    def on_meta(self, packet_type: str, payload: dict[str, object]) -> None:
        if packet_type == "detach":
            self._app.post_message(TabClosed())
            return
        super().on_meta(packet_type, payload)
