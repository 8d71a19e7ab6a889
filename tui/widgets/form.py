"""The Live tab's form fields: Enter starts the run in every one of them, and the footer says
so (ctrl+s does too, but tmux, screen and terminal flow control may take it)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input, TextArea

from tui._editor import edit_file
from tui.funnel import Guarded

__all__ = ["FormInput", "HypothesisArea"]


class FormInput(Guarded, Input):
    """A field of the Live form: Enter starts the run, and the footer says so (ctrl+s does
    too, but tmux, screen and terminal flow control may take it)."""

    BINDINGS = [Binding("enter", "submit", "Start run", id="form-start")]


class HypothesisArea(Guarded, TextArea):
    """The hypothesis, on as many lines as it needs (up to a few shown): Enter starts the run
    as in the other fields, ctrl+j (or alt+enter) starts a new line, a paste keeps its lines,
    ctrl+e opens it in $EDITOR, and ↑ in the empty field brings back the last one run."""

    BINDINGS = [
        Binding("enter", "submit", "Start run", id="hypothesis-start"),
        Binding("ctrl+j,alt+enter,shift+enter", "newline", "New line", id="hypothesis-newline",
                show=False),
        Binding("ctrl+e", "edit", "$EDITOR", id="hypothesis-editor"),
    ]

    class Submitted(Message):
        """Enter in the hypothesis."""

    last = ""
    """The hypothesis of the last run started from here: a new one starts empty, and ↑ in
    the empty field brings the last one back."""

    def started(self) -> None:
        """A run started from the field: it is kept as `last`, and the field is emptied."""
        self.last = self.text
        self.text = ""

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":  # TextArea inserts a line break on Enter; here it starts
            event.stop()
            event.prevent_default()
            self.action_submit()
            return
        if event.key == "up" and not self.text and self.last:
            event.stop()
            event.prevent_default()
            self.text = self.last
            self.move_cursor(self.document.end)
            return
        await super()._on_key(event)

    def action_submit(self) -> None:
        self.post_message(self.Submitted())

    def action_newline(self) -> None:
        self.insert("\n")

    def action_edit(self) -> None:
        """Edit the hypothesis in $EDITOR (the app suspends), then take the file back."""
        if getattr(self.app, "served", False):
            self.notify("A browser tab cannot open $EDITOR: paste the text, or use ctrl+j "
                        "for a new line.", severity="warning", markup=False)
            return
        with tempfile.TemporaryDirectory(prefix="detektiv-") as folder:
            path = Path(folder) / "hypothesis.md"
            path.write_text(self.text, encoding="utf-8")
            problem = edit_file(self.app, path)
            if problem:
                self.notify(problem, severity="warning", markup=False)
                return
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                self.notify(f"Cannot read the edited hypothesis back: {exc}",
                            severity="warning", markup=False)
                return
        self.text = text.rstrip("\n")
        self.move_cursor(self.document.end)
        self.focus()
