"""The Cache tab with Pilot: search as you type, the why box, invalidate, delete, export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from engine import Paths, Workspace
from tests.support.app import until
from tui.app import build_app
from tui.screens.cache import CacheScreen


def text(screen: CacheScreen, widget_id: str) -> str:
    return str(screen.query_one(widget_id, Static).render())


async def test_the_cache_tab_from_the_keyboard(home: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    workspace = Workspace(Paths.from_env())
    workspace.cache.put("Is coffee bad for the heart?", "Not in moderation.")
    workspace.cache.put("Who wrote Hamlet?", "Shakespeare [bold]x[/bold] \x1b[31mred")
    await workspace.aclose()
    app = build_app(Paths.from_env())
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("4")
        screen = app.screen
        assert isinstance(screen, CacheScreen)
        table = screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 2)
        assert "2 entries" in screen.stats_text
        await pilot.press("slash", *"hamlet")
        await until(pilot, lambda: table.row_count == 1)
        table.focus()
        await until(pilot, lambda: "validation PASSED" in text(screen, "#cache-detail"))
        detail = text(screen, "#cache-detail")
        assert "Shakespeare [bold]x[/bold] [31mred" in detail and "\x1b" not in detail
        assert "validation PASSED" in detail and "✓ non_empty" in detail
        await pilot.press("w", *"Is coffee good for the heart?", "enter")
        await until(pilot, lambda: "MISS" in text(screen, "#cache-explanation"))
        assert "antonyms: opposites: good/bad" in text(screen, "#cache-explanation")
        await until(pilot, lambda: "guard rejects 1" in screen.stats_text)
        table.focus()
        await pilot.press("x")
        await until(pilot, lambda: "invalidated" in str(table.get_row_at(0)[1]))
        await pilot.press("e")
        target = home / "data" / "exports" / "detektiv-cache.json"  # never the working dir
        exported = json.loads(target.read_text())
        assert len(exported) == 2 and not (tmp_path / "detektiv-cache.json").exists()
        assert any(str(target) in message for _, message in app.notices)
        await pilot.press("d", "y")
        await until(pilot, lambda: table.row_count == 0)
        assert app.internal_errors == []
