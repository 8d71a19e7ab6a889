"""Small modal dialogs: confirm, ask for a line of text, help."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from tui.funnel import Guarded

__all__ = ["ChoiceDialog", "ConfirmDialog", "HelpScreen", "PromptDialog", "TextDialog"]

DIALOG_CSS = """
ConfirmDialog, PromptDialog, HelpScreen, ChoiceDialog, TextDialog { align: center middle; }
TextDialog #dialog { width: 90; }
HelpScreen #dialog { width: 92; }
TextDialog TextArea { height: 14; }
ChoiceDialog OptionList { max-height: 20; }
#dialog { width: 70; height: auto; max-height: 90%; border: round $accent; padding: 1 2;
          background: $panel; }
#dialog Static { width: 100%; }
"""


class ConfirmDialog(Guarded, ModalScreen[bool]):
    """Yes or no; `y`/`enter` confirm, `n`/`escape` cancel."""

    DEFAULT_CSS = DIALOG_CSS
    BINDINGS = [
        Binding("y,enter", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Content(self.question))
            yield Static(Content.styled("y / enter: yes    n / esc: no", "dim"))

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class PromptDialog(Guarded, ModalScreen[str | None]):
    """One line of text; `enter` accepts, `escape` cancels (None)."""

    DEFAULT_CSS = DIALOG_CSS
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="prompt-cancel")]

    def __init__(self, question: str, value: str = "") -> None:
        super().__init__()
        self.question = question
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Content(self.question))
            yield Input(value=self.value, id="answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


HELP_NOTES = (
    "A run starts with Enter in the Live tab's form (ctrl+s too, where the terminal lets it "
    "through: tmux and screen may take it).\n"
    "Copying (c, C) goes through the terminal (OSC 52). Over SSH in tmux, enable it with "
    "`set -g set-clipboard on` in ~/.tmux.conf.")


class HelpScreen(Guarded, ModalScreen[None]):
    """Every binding of the tab it was opened from, and the global ones."""

    DEFAULT_CSS = DIALOG_CSS
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close", id="help-close")]

    def __init__(self, rows: list[tuple[str, str, str]],
                 tips: dict[str, str] | None = None) -> None:
        super().__init__()
        self.rows = rows
        self.tips = tips or {}
        """What a key does where its name is too short to say (by binding id)."""

    def compose(self) -> ComposeResult:
        width = max((len(keys) for keys, _, _ in self.rows), default=4)
        lines = [Content.styled("Keys (remap any by its id in [keymap])", "bold"), Content("")]
        for keys, description, binding_id in self.rows:
            lines.append(Content.assemble(
                Content.styled(keys.ljust(width + 2), "bold"),
                Content(description.ljust(28)),
                Content.styled(binding_id, "dim"),
            ))
            if self.tips.get(binding_id):
                lines.append(Content.styled(" " * (width + 2) + self.tips[binding_id], "dim"))
        lines += [Content(""), Content(HELP_NOTES)]
        with VerticalScroll(id="dialog"):  # a short terminal scrolls it, never cuts it off
            yield Static(Content("\n").join(lines))

    def action_close(self) -> None:
        self.dismiss(None)

    def on_key(self, event: events.Key) -> None:
        """Escape and the next key, typed quickly over SSH or in tmux, arrive as one alt+key
        (the terminal cannot tell them apart): that closes the help too."""
        if event.key.startswith("alt+"):
            event.stop()
            self.dismiss(None)


class ChoiceDialog(Guarded, ModalScreen[str | None]):
    """Pick one of `choices` (key, label); `enter` picks, `escape` cancels (None)."""

    DEFAULT_CSS = DIALOG_CSS
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="choice-cancel")]

    def __init__(self, question: str, choices: list[tuple[str, str]]) -> None:
        super().__init__()
        self.question = question
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Content(self.question))
            yield OptionList(*[Option(Content(label), id=key) for key, label in self.choices])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class TextDialog(Guarded, ModalScreen[str | None]):
    """Several lines of text; `ctrl+s` keeps them, `escape` cancels (None)."""

    DEFAULT_CSS = DIALOG_CSS
    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="text-save", priority=True),
        Binding("escape", "cancel", "Cancel", id="text-cancel"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Content(self.question))
            yield TextArea(id="text", soft_wrap=True)
            yield Static(Content.styled("ctrl+s: save    esc: cancel", "dim"))

    def action_save(self) -> None:
        self.dismiss(self.query_one(TextArea).text)

    def action_cancel(self) -> None:
        self.dismiss(None)
