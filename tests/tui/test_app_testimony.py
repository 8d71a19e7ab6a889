"""The Live tab shows a testimony (issues 53 and 73): its claims first, a line each (state and
P(false) whole at the right), then the paragraph with each claim's sentence marked (markdown
read, not shown as stars); `[` / `]` or Enter open a claim's rounds in a pane of their own in
the paragraph's place, `t` brings the paragraph back, and the transcript below goes on
following the run. The Sessions list counts the claims."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable, OptionList, Static

from tests.support.app import app_for, fixed_testimony, long_testimony, screen_text, until
from tui.app import DetektivApp
from tui.screens.dialogs import HelpScreen
from tui.widgets.side import SidePanel
from tui.widgets.testimony import MarkedTestimony
from tui.widgets.transcript import TranscriptView


async def opened(pilot: Pilot[int], app: DetektivApp) -> MarkedTestimony:
    """The stored testimony opened from the Sessions tab, its replay ended."""
    await until(pilot, lambda: app.screen.query_one(DataTable).row_count == 1)
    await pilot.press("o")
    await until(pilot, lambda: app.live.status_text.startswith("completed"))
    return app.live.query_one(MarkedTestimony)


def prompts(options: OptionList) -> list[str]:
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def test_a_testimony_is_marked_claim_by_claim_in_the_live_tab(home: Path) -> None:
    fixed_testimony(home / "data" / "sessions")
    app = app_for(home)
    async with app.run_test(size=(200, 40)) as pilot:
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 1)
        listed = str(table.get_row_at(0)[-1])  # the request first, its claims counted after
        assert listed == ("Summarize the health benefits of vitamin B3 "
                          "[1/4 held, 1 contradicted, 1 unsure, 1 not checkable]")
        await pilot.press("o")
        await until(pilot, lambda: app.live.status_text.startswith("completed"))
        view = app.live.query_one(MarkedTestimony)
        assert view.display
        marked = str(view.query_one("#testimony-text", Static).render())
        assert "Niacin is vitamin B3. [✓1]" in marked
        assert "Niacin is also called pantothenic acid. [✗3]" in marked
        assert "You should eat more fish. [~4]" in marked
        options = view.query_one(OptionList)
        rows = prompts(options)
        assert len(rows) == 4
        assert rows[2].startswith("✗ 3 Niacin is also called pantothenic acid.")
        assert rows[2].endswith("contradicted 0.96") and rows[3].endswith("not checkable")
        side = str(app.live.query_one(SidePanel).query_one("#gaps-heading", Static).render())
        assert side == "Claims"


async def test_brackets_open_a_claims_rounds_in_a_pane_and_t_brings_the_testimony_back(
        home: Path) -> None:
    fixed_testimony(home / "data" / "sessions")
    app = app_for(home)
    async with app.run_test(size=(100, 40)) as pilot:
        view = await opened(pilot, app)
        transcript = app.live.query_one(TranscriptView)
        pane = view.query_one("#claim-rounds", TranscriptView)
        paragraph = view.query_one("#testimony-text-box")
        assert not pane.display and paragraph.display
        # the footer has one pair of brackets, and `t` only once a claim is open
        keys = {b.binding.id for b in app.screen.active_bindings.values()}
        shown = [b.binding.description for b in app.screen.active_bindings.values()
                 if b.binding.show and b.enabled]
        assert shown.count("Prev") == 1 and shown.count("Next") == 1
        assert "testimony" not in keys and not app.live.check_action("testimony", ())
        await pilot.press("]")  # the first claim's rounds, in the paragraph's place
        await until(pilot, lambda: pane.display)
        assert view.opened == 1 and not paragraph.display
        assert "Which vitamin is niacin?" in pane.plain_text()
        assert transcript.follow, "the transcript still follows the run"
        await pilot.press("]", "]")
        assert view.opened == 3 and view.query_one(OptionList).highlighted == 2
        assert "What other name does niacin have?" in pane.plain_text()
        assert "Which vitamin is niacin?" not in pane.plain_text()
        assert app.live.check_action("testimony", ())
        assert "testimony" in {b.binding.id for b in app.screen.active_bindings.values()}
        await pilot.press("t")
        await until(pilot, lambda: paragraph.display)
        assert not pane.display and view.opened is None
        # Enter on the transcript opens the selected claim: no form, no run started
        transcript.focus()
        await pilot.press("enter")
        await until(pilot, lambda: view.opened == 3)
        assert app.focused is not app.live.query_one("#hypothesis")
        assert app.live.status_text.startswith("completed")
        await pilot.press("[")
        assert view.opened == 2
        assert "the rounds that bear on the hypothesis cancel each other out" in \
            pane.plain_text() or "What does niacin do in the body?" in pane.plain_text()


async def test_seventeen_claims_fit_a_line_each_at_100_columns(home: Path) -> None:
    """The Vitamin B3 testimony: every claim on screen at 100×40, each on one line with its
    state and P(false) whole; the paragraph's markdown read, not shown as stars."""
    long_testimony(home / "data" / "sessions")
    app = app_for(home)
    async with app.run_test(size=(100, 40)) as pilot:
        view = await opened(pilot, app)
        options = view.query_one(OptionList)
        await until(pilot, lambda: options.option_count == 17)
        screen = screen_text(app)
        for row in prompts(options):
            words, state = row.split("  ")[0], row.rstrip().rsplit("  ", 1)[-1].strip()
            number = words.split()[1]
            lines = [line for line in screen if f" {number} " in line and state in line]
            assert lines, f"claim {number} ({state}) is not on one screen line"
        assert any("contradicted 0.93" in line for line in screen)
        marked = str(view.query_one("#testimony-text", Static).render())
        assert "**" not in marked and "###" not in marked
        assert "Energy Production: Niacin helps convert food into energy." in marked


async def test_help_names_each_key_once_and_says_where_a_claim_opens(home: Path) -> None:
    app = app_for(home)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("2")
        await until(pilot, lambda: app.screen is app.live)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        ids = [binding_id for _, _, binding_id in screen.rows]
        assert len(ids) == len(set(ids))
        keys = [keys for keys, _, _ in screen.rows]
        assert keys.count("[") == 1 and keys.count("]") == 1
        # the help says where Enter puts a claim's rounds
        assert "in a pane of their own" in screen.tips["open"]
        assert "in a pane of their own" in str(screen.query_one(Static).render())


async def test_without_a_testimony_the_brackets_move_between_answers(home: Path) -> None:
    """From a cold start (nothing shown), `[` / `]` move between answers, and Enter goes to
    the form."""
    app = app_for(home)
    async with app.run_test(size=(80, 40)) as pilot:
        await pilot.press("2")
        await until(pilot, lambda: app.screen is app.live)
        await pilot.press("]", "[")  # nothing to move to: no error, the app goes on
        assert app.is_running and app.screen is app.live
        app.live.query_one(TranscriptView).focus()
        await pilot.press("enter")
        await until(pilot, lambda: app.focused is app.live.query_one("#hypothesis"))
