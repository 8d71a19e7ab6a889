"""The Live tab's line of badges: who asks, who answers, the verdict, the cost, the status.

One line at any width: the verdict and the cost are never cut, the two providers share what
is left (a long model name ends in an ellipsis, each keeping at least its role), and the
status takes the rest, ending in an ellipsis itself (the transcript has it whole)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import Static

from engine import strip_control
from tui.funnel import Guarded

PROVIDERS = ("detective", "witness")
GAP = 2
"""Columns between two badges (their right margin)."""
LEAST = 14
"""The narrowest a provider badge gets: its role and the start of the name."""


class Badges(Guarded, Horizontal):
    """The badges; `set(name, text, kind)` changes one and fits the line again."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.texts: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        for role in PROVIDERS:
            yield Static(Content(f"{role}: –"), id=f"{role}-badge", classes="badge")
        yield Static(Content("verdict: –"), id="verdict-badge", classes="badge")
        yield Static(Content("cost: –"), id="cost-badge", classes="badge")
        yield Static(Content("idle"), id="status")

    def set(self, name: str, text: str, kind: str | None = None) -> None:
        """Badge `name` (detective, witness, verdict, cost or status) now reads `text`
        (model output in it is data: control characters stripped, never markup); `kind`
        styles the verdict (true, false, undetermined, none)."""
        text = strip_control(text)
        self.texts[name] = text
        widget = self.query_one("#status" if name == "status" else f"#{name}-badge", Static)
        widget.update(Content(text))
        if kind is not None:
            widget.set_classes(f"badge verdict-{kind}" if kind else "badge")
        self.fit()

    def reset(self) -> None:
        for role in PROVIDERS:
            self.set(role, f"{role}: –")
        self.set("verdict", "verdict: –", kind="")
        self.set("cost", "cost: –")

    def on_resize(self) -> None:
        self.fit()

    def fit(self) -> None:
        """The providers share the room the verdict, the cost and a short status leave."""
        width = self.content_size.width
        if not width:
            return
        whole = sum(len(self.texts.get(name, name + ": –")) + GAP for name in ("verdict", "cost"))
        room = max(2 * LEAST, width - whole - 6) // 2 - GAP
        for role in PROVIDERS:
            badge = self.query_one(f"#{role}-badge", Static)
            badge.styles.max_width = max(LEAST, room)
            badge.tooltip = self.texts.get(role)  # the whole name, where it was cut
