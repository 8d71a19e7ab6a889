"""Small things a user trips over: the help after Escape-and-a-key, Enter documented in the
form's footer, copying over SSH, the theme from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Footer, Static, TextArea

from tests.support.app import app_for, until
from tui.screens.dialogs import HelpScreen


async def test_help_closes_on_escape_and_a_quick_key_and_says_how_to_copy(home: Path) -> None:
    app = app_for(home)
    async with app.run_test() as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one(Static).render())
        assert "set -g set-clipboard on" in text and "Enter in the Live tab's form" in text
        await pilot.press("alt+x")  # Escape then x, as the terminal delivers them over SSH
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen), timeout=10)
        assert not app.internal_errors


async def test_the_footer_says_enter_starts_a_run_from_the_form(home: Path) -> None:
    app = app_for(home)
    async with app.run_test(size=(130, 40)) as pilot:
        await pilot.press("2")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.focused, TextArea), timeout=10)
        await pilot.pause()
        app.screen.query_one(Footer)  # the footer shows what `active_bindings` has
        keys = [(active.binding.key, active.binding.description)
                for active in app.screen.active_bindings.values() if active.binding.show]
        assert ("enter", "Start run") in keys
        assert not any(key == "ctrl+s" for key, _ in keys)


async def test_the_theme_from_the_environment_wins_over_the_config(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_THEME", "detektiv-light")
    app = app_for(home, '[ui]\ntheme = "detektiv-dark"\n')
    async with app.run_test():
        assert app.theme == "detektiv-light"


async def test_the_hypothesis_takes_lines_and_comes_back_from_the_editor(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "\\nwritten in the editor\\n" >> "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    app = app_for(home)
    async with app.run_test(size=(130, 40)) as pilot:
        await pilot.press("2", "n")
        area = app.screen.query_one("#hypothesis", TextArea)
        await until(pilot, lambda: app.focused is area, timeout=10)
        await pilot.press(*"The sea", "ctrl+j", *"is salty")
        assert area.text == "The sea\nis salty"
        await pilot.press("ctrl+e")
        await until(pilot, lambda: "written in the editor" in area.text, timeout=20)
        assert area.text == "The sea\nis salty\nwritten in the editor"
        assert not app.internal_errors


async def test_a_browser_tab_says_the_editor_cannot_open(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DETEKTIV_SERVED", "1")
    monkeypatch.setenv("EDITOR", "/bin/false")
    app = app_for(home)
    async with app.run_test(size=(130, 40)) as pilot:
        await pilot.press("2", "n")
        await until(pilot, lambda: isinstance(app.focused, TextArea), timeout=10)
        await pilot.press("ctrl+e")
        assert any("cannot open $EDITOR" in message for _, message in app.notices)
        # the browser keymap: the theme is on f9 there (ctrl+t opens a browser tab)
        assert app.key_for("toggle-theme", "ctrl+t") == "f9"


@pytest.mark.parametrize("size", [(130, 40), (100, 24)])
async def test_the_empty_cache_tab_shows_its_whole_hint(home: Path,
                                                       size: tuple[int, int]) -> None:
    app = app_for(home)
    async with app.run_test(size=size) as pilot:
        await pilot.press("4")
        await until(pilot, lambda: "cache is empty" in str(
            app.screen.query_one("#cache-detail", Static).render()), timeout=20)
        await pilot.pause()
        shown = app.export_screenshot().replace("&#160;", " ")
        for piece in ("The cache is empty", "Put an answer", "detektiv cache put",
                      "--answer"):  # every line of it, wherever it wraps
            assert piece in shown, piece
