"""Messages between the app's screens, past tense: a screen says what happened and the app
routes it. Screens never reach into each other."""

from __future__ import annotations

from textual.message import Message

__all__ = ["NewSessionWanted", "SessionOpened"]


class SessionOpened(Message):
    """A stored session was chosen: the Live tab shows it (following it while it runs)."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory


class NewSessionWanted(Message):
    """The user asked to start a new interrogation: the Live tab's form takes the cursor."""
