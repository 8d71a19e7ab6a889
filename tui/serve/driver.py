"""The driver of a served tab's app process: Textual's web driver, plus one message.

When a browser tab closes, the server sends `detach` instead of textual-serve's `quit`: the
app ends at once unless it is running an interrogation, which then finishes first (the server
keeps reading what the app draws and throws it away). The next tab attaches to the run as
`detektiv watch` does. When the server itself is gone (its pipe closed), the app ends: an
interrogation it ran is then `interrupted`, and `resume` continues it.
"""

from __future__ import annotations

from textual import messages
from textual.drivers.web_driver import WebDriver

from tui.messages import TabClosed

__all__ = ["BROWSER_KEYMAP", "ServedDriver"]

BROWSER_KEYMAP = {"toggle-theme": "f9", "resume": "f6"}
"""Keys a browser keeps for itself, moved: ctrl+t (new tab) and ctrl+r (reload); the user's
own keymap still wins."""


class ServedDriver(WebDriver):
    """See the module docstring."""

    def run_input_thread(self) -> None:
        super().run_input_thread()
        if not self.exit_event.is_set():  # the server is gone: nobody sees or drives this
            self._app.post_message(messages.ExitApp())

    def on_meta(self, packet_type: str, payload: dict[str, object]) -> None:
        if packet_type == "detach":
            self._app.post_message(TabClosed())
            return
        super().on_meta(packet_type, payload)
