"""Messages between the app's screens, past tense: a screen says what happened and the app
routes it. Screens never reach into each other."""

from __future__ import annotations

from textual.message import Message

__all__ = ["InterrogationWanted", "ModelsChanged", "NewSessionWanted", "SessionOpened",
           "SessionShown", "TabClosed"]


class SessionOpened(Message):
    """A stored session was chosen: the Live tab shows it (following it while it runs), or
    the Oracles tab when it has no interrogation yet (`notes`)."""

    def __init__(self, directory: str, notes_only: bool = False) -> None:
        super().__init__()
        self.directory = directory
        self.notes_only = notes_only


class NewSessionWanted(Message):
    """The user asked to start a new interrogation: the Live tab's form takes the cursor."""


class SessionShown(Message):
    """The Live tab now shows a session (opened, or started there): the Oracles tab works on
    it unless the user picked another."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory


class InterrogationWanted(Message):
    """The user wants to interrogate in a notes-only case: the Live tab's form takes the
    cursor, and the run it starts goes into that session (its notes kept)."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory


class TabClosed(Message):
    """The browser tab showing this app (`detektiv serve`) was closed: the app ends, once the
    interrogation it runs, if any, has finished."""


class ModelsChanged(Message):
    """The configured models changed under the app (the capable local model arrived): what a
    screen says about who plays the detective is said again."""
