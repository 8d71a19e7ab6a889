"""Every tab at 80, 100 and 160 columns (issue 73), with the 17-claim Vitamin B3 testimony
open: what shows is whole. A table drops a column before it cuts a label, the footer's keys
fit, a claim's state and P(false), the verdict and the cost are never cut, a long model name
or hypothesis ends in an ellipsis instead of pushing the counts after it off the line."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.widgets import DataTable, OptionList, Static

from engine import Paths, load_config
from engine.models.events import JudgementReady, ProviderChosen
from engine.models.judgement import Judgement
from tests.support.app import long_testimony, quiet, screen_text, until
from tests.tui.test_snapshots import fixed_comparison
from tui.app import DetektivApp
from tui.screens.evals import EvalsScreen
from tui.screens.providers import ProvidersScreen
from tui.widgets.badges import Badges
from tui.widgets.table import Table
from tui.widgets.testimony import MarkedTestimony

LONG_DETECTIVE = "openrouter:anthropic/claude-3.5-sonnet-20241022-with-a-long-suffix"
LONG_WITNESS = "ollama:qwen2.5-coder:1.5b-instruct-q4_K_M-with-a-long-suffix"


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.setattr(ProvidersScreen, "AUTO_CHECK", False)


def footer_whole(app: DetektivApp, lines: list[str]) -> None:
    """Every key the footer shows is on its last line, with its whole description (a
    binding of two keys, `+` and `=`, shows one of them)."""
    footer = lines[-1]
    shown: dict[str, list[str]] = {}
    for active in app.screen.active_bindings.values():
        binding = active.binding
        if binding.show and active.enabled and active.node is app.screen:
            key = app.get_key_display(Binding(binding.key, ""))
            shown.setdefault(binding.id or binding.action, []).append(
                f"{key} {binding.description}")
    assert shown
    for binding_id, texts in shown.items():
        assert any(text in footer for text in texts), (binding_id, footer)


def headers_whole(app: DetektivApp) -> None:
    """Each table's shown labels are whole and its dropped ones named."""
    for table in app.screen.query(Table):
        shown = [str(column.label) for column in table.columns.values()]
        for label in shown:
            assert "…" not in label
        for row in range(table.row_count):
            for cell, width in zip(table.get_row_at(row), table._layout, strict=True):
                assert len(str(cell)) <= width[1]


@pytest.mark.parametrize("width", [80, 100, 160])
async def test_every_tab_reads_whole(home: Path, width: int) -> None:
    (home / "config.toml").write_text(
        '[providers.cloud]\nkind = "openai"\nmodel = "gpt-4o-2024-08-06-with-a-long-name"\n'
        'api_key_env = "X_KEY"\npriority = 1\n')
    session = long_testimony(home / "data" / "sessions")
    fixed_comparison(home)
    paths = Paths.from_env()
    app = DetektivApp(paths, load_config(paths))
    async with app.run_test(size=(width, 40)) as pilot:
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 1)
        await quiet(pilot)
        lines = screen_text(app)
        footer_whole(app, lines)
        headers_whole(app)
        assert session.short_id in "\n".join(lines)

        await pilot.press("o")  # Live, the testimony open
        await until(pilot, lambda: app.live.status_text.startswith("completed"))
        app.live.show(ProviderChosen(role="detective", provider=LONG_DETECTIVE), False)
        app.live.show(ProviderChosen(role="witness", provider=LONG_WITNESS), False)
        app.live.show(JudgementReady(  # the longest verdict the badge shows: a running one
            sequence=2, verdict="false", probability_false=0.93,
            judgement=Judgement(bearing="contradicts", p_true=0.1, source="logprobs")), False)
        await quiet(pilot)
        lines = screen_text(app)
        footer_whole(app, lines)
        badges = next(line for line in lines if "detective:" in line)
        texts = app.live.query_one(Badges).texts
        assert texts["verdict"] in badges and texts["cost"] in badges, badges
        assert LONG_DETECTIVE not in badges and LONG_WITNESS not in badges and "…" in badges
        options = app.live.query_one(MarkedTestimony).query_one(OptionList)
        assert options.option_count == 17
        visible = "\n".join(lines)
        for state in ("contradicted 0.86", "unsupported 0.71", "unsure 0.50", "held 0.02",
                      "not checkable"):
            assert state in visible, (state, width)
        await pilot.press("]")  # a claim open: its pane, and `t` in the footer
        await quiet(pilot)
        footer_whole(app, screen_text(app))

        await pilot.press("3")  # Oracles: the case bar keeps its counts
        await quiet(pilot, lambda: app.current_mode == "oracles")
        await until(pilot, lambda: "history" in str(
            app.screen.query_one("#case-counts", Static).render()))
        lines = screen_text(app)
        footer_whole(app, lines)
        assert any("0 notes · 0 answers · history on" in line for line in lines)

        for key, mode in (("4", "cache"), ("5", "providers")):
            await pilot.press(key)
            await quiet(pilot, lambda mode=mode: app.current_mode == mode)  # type: ignore[misc]
            footer_whole(app, screen_text(app))
            headers_whole(app)

        await pilot.press("1", "v")  # Evaluations: figures dropped, never cut, and named
        await quiet(pilot, lambda: isinstance(app.screen, EvalsScreen)
                    and app.screen.board is not None)
        screen = app.screen
        assert isinstance(screen, EvalsScreen)
        footer_whole(app, screen_text(app))
        headers_whole(app)
        figures = screen.query_one("#eval-figures", Table)
        lines_text = str(screen.query_one("#eval-lines", Static).render())
        if figures.hidden:
            assert "Not shown at this width: " + ", ".join(figures.hidden) in \
                " ".join(lines_text.split())
        else:
            assert "Not shown" not in lines_text
        assert (width >= 160) == (not figures.hidden)
