"""The one tab registry: a new tab is one entry here.

Each tab is a mode with its own screen stack; its number key (and F-key, which also works
while typing in a field) switches to it, the palette lists it, and the tab bar shows it. A
tab's screen module is imported when the tab is first shown, never before the first frame.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from textual.binding import Binding
from textual.screen import Screen

__all__ = ["TABS", "Tab", "tab_bindings"]


@dataclass(frozen=True, slots=True)
class Tab:
    """A tab: its mode name, its label, and where its screen class lives."""

    mode: str
    label: str
    screen: str
    """`"package.module:Class"`, imported on first use."""

    def build(self) -> Screen[Any]:
        """A new instance of the tab's screen."""
        module, _, name = self.screen.partition(":")
        screen: Screen[Any] = getattr(importlib.import_module(module), name)()
        return screen


TABS = (
    Tab("sessions", "Sessions", "tui.screens.sessions:SessionsScreen"),
    Tab("live", "Live", "tui.screens.live:LiveScreen"),
    Tab("oracles", "Oracles", "tui.screens.oracles:OraclesScreen"),
    Tab("cache", "Cache", "tui.screens.cache:CacheScreen"),
    Tab("providers", "Providers", "tui.screens.providers:ProvidersScreen"),
)


def tab_bindings() -> list[Binding]:
    """`1`/`F1` … for every tab, in order (ids `tab-<mode>`, remappable)."""
    return [
        Binding(f"{number},f{number}", f"tab('{tab.mode}')", tab.label, id=f"tab-{tab.mode}",
                show=False)
        for number, tab in enumerate(TABS, start=1)
    ]
