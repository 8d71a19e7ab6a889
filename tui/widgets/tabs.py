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
        self.line: str | list[str] = ""

    def on_mount(self) -> None:
        self.show_fetch(getattr(self.app, "fetch_line", ""))

    def on_resize(self) -> None:
        self._draw()

    def show_fetch(self, line: str | list[str]) -> None:
        """The tabs, then `line` (the capable model's fetch; several: the same, ever shorter),
        or the help hint."""
        self.line = line
        self._draw()

    def _draw(self) -> None:
        parts: list[Content | str] = []
        used = 0
        for number, tab in enumerate(TABS, start=1):
            text = f" {number} {tab.label} "
            parts.append(Content.styled(text, "bold reverse") if tab.mode == self.current
                         else Content(text))
            parts.append(" ")
            used += len(text) + 1
        room = self.content_region.width - used - 2 if self.content_region.width else 10_000
        lines = [self.line] if isinstance(self.line, str) else list(self.line)
        if any(lines):
            fits = next((line for line in lines if len(line) <= room), None)
            if fits is None:  # the shortest, cut where it must be
                shortest = lines[-1]
                fits = shortest[:max(0, room - 1)] + "…" if room > 1 else ""
            parts.append(Content.styled(f"  {fits}", "bold"))
        elif room >= 20:
            parts.append(Content.styled(" ? help  ^p commands", "dim"))
        elif room >= 7:
            parts.append(Content.styled(" ? help", "dim"))
        self.update(Content.assemble(*parts))
