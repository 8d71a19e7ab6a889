"""The Live tab shows a testimony (issue 53): the paragraph with each claim's sentence marked
by its state and symbol, the claims listed beside it, `[` / `]` moving between claims and
Enter on one showing its rounds; the Sessions list counts the claims."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, OptionList, Static

from tests.support.app import app_for, fixed_testimony, until
from tui.widgets.testimony import MarkedTestimony
from tui.widgets.transcript import TranscriptView


async def test_a_testimony_is_marked_claim_by_claim_in_the_live_tab(home: Path) -> None:
    fixed_testimony(home / "data" / "sessions")
    app = app_for(home)
    async with app.run_test(size=(80, 40)) as pilot:
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 1)
        listed = str(table.get_row_at(0)[-1])
        assert listed.startswith("[1/4 held, 1 contradicted, 1 unsure, 1 not checkable]")
        await pilot.press("o")
        await until(pilot, lambda: app.live.status_text.startswith("completed"))
        view = app.live.query_one(MarkedTestimony)
        assert view.display
        marked = str(view.query_one("#testimony-text", Static).render())
        assert "Niacin is vitamin B3. [✓1]" in marked
        assert "Niacin is also called pantothenic acid. [✗3]" in marked
        assert "You should eat more fish. [~4]" in marked
        options = view.query_one(OptionList)
        assert options.option_count == 4
        assert str(options.get_option_at_index(2).prompt).startswith("✗ 3 contradicted")
        transcript = app.live.query_one(TranscriptView)
        # the footer names what `[` / `]` move between: claims here, not answers
        keys = {b.binding.description for b in app.screen.active_bindings.values()}
        assert {"Prev claim", "Next claim"} <= keys and "Next" not in keys
        await pilot.press("]")  # the first claim, its round shown
        assert options.highlighted == 0 and not transcript.follow
        await pilot.press("]", "]")
        assert options.highlighted == 2
        top = transcript.scroll_y
        options.focus()
        await pilot.press("up", "enter")  # claim 2: the transcript goes to its round
        await pilot.pause()
        assert transcript.scroll_y != top
        plain = transcript.plain_text()
        assert "The testimony, marked" in plain and "verdict: false" in plain


async def test_without_a_testimony_the_brackets_move_between_answers(home: Path) -> None:
    """From a cold start (nothing shown), `[` / `]` are the answers' keys, and work."""
    app = app_for(home)
    async with app.run_test(size=(80, 40)) as pilot:
        await pilot.press("2")
        await until(pilot, lambda: app.screen is app.live)
        keys = {b.binding.description for b in app.screen.active_bindings.values()}
        assert {"Prev", "Next"} <= keys and "Next claim" not in keys
        await pilot.press("]", "[")  # nothing to move to: no error, the app goes on
        assert app.is_running and app.screen is app.live
