"""The tab bar at the top of every tab: number keys switch, the current one is lit."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from tui.funnel import Guarded
from tui.tabs import TABS

__all__ = ["ModeTabs"]


class ModeTabs(Guarded, Static):
    """Shows `1 Sessions  2 Live  3 Providers` with `current` highlighted (F1–F3 work too)."""

    DEFAULT_CSS = """
    ModeTabs { height: 1; padding: 0 1; background: $panel; color: $text-muted; }
    """

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def on_mount(self) -> None:
        self.show_fetch(getattr(self.app, "fetch_line", ""))

    def show_fetch(self, line: str) -> None:
        """The tabs, then `line` (the capable model's fetch), or the help hint."""
        parts: list[Content | str] = []
        for number, tab in enumerate(TABS, start=1):
            text = f" {number} {tab.label} "
            if tab.mode == self.current:
                parts.append(Content.styled(text, "bold reverse"))
            else:
                parts.append(Content(text))
            parts.append(" ")
        if line:
            parts.append(Content.styled(f"  {line}", "bold"))
        else:
            parts.append(Content.styled(" ? help  ^p commands", "dim"))
        self.update(Content.assemble(*parts))
