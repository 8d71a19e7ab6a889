"""The Live view's reasoning panel: the thinking of the call that thinks now (or thought last),
dimmed, its last lines until `r` shows all of it. Model output is data: shown through
`strip_control`, never as markup."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static

from engine import one_line, reasoning_title, strip_control
from tui.funnel import Guarded

__all__ = ["REASONING_LINES", "REASONING_WIDTH", "ReasoningPanel"]

REASONING_LINES = 4
"""Lines of a reasoning model's thinking the Live view shows until `r` expands it."""
REASONING_WIDTH = 160
"""Characters a collapsed line keeps."""


class ReasoningPanel(Guarded, Vertical):
    """A heading and the thinking of one call (`add`), hidden while there is none."""

    def __init__(self) -> None:
        super().__init__(id="reasoning-box")
        self.thought = ""
        """The reasoning of the call that thinks now (or thought last)."""
        self.call: tuple[str, str, int | None] | None = None
        self.expanded = False

    def compose(self) -> ComposeResult:
        yield Static(Content.styled("Reasoning", "bold"), classes="heading",
                     id="reasoning-heading")
        yield Static(Content(""), id="reasoning")

    def add(self, role: str, phase: str, sequence: int | None, text: str) -> None:
        """More thinking of the call (`role`, `phase`, `sequence`); a new call's replaces
        the last."""
        if (role, phase, sequence) != self.call:
            self.call, self.thought = (role, phase, sequence), ""
        self.thought += text
        self.redraw()

    def clear(self) -> None:
        self.thought, self.call = "", None
        self.redraw()

    def toggle(self) -> bool:
        """All of the thinking, or its last lines again; whether there is any to show."""
        self.expanded = not self.expanded
        self.redraw()
        return bool(self.thought)

    def redraw(self) -> None:
        heading = self.query_one("#reasoning-heading", Static)
        panel = self.query_one("#reasoning", Static)
        shown = bool(self.thought) and self.call is not None
        heading.display = panel.display = shown
        if not shown or self.call is None:
            return
        role, phase, sequence = self.call
        where = phase if sequence is None else f"{phase} {sequence}"
        key = "r: " + ("last lines" if self.expanded else "all")
        heading.update(Content.styled(f"{reasoning_title(role)} ({where}) · {key}", "bold"))
        lines = strip_control(self.thought).strip().splitlines()
        if not self.expanded:
            lines = [one_line(line, REASONING_WIDTH) for line in lines[-REASONING_LINES:]]
        panel.update(Content.styled("\n".join(lines), "dim"))
