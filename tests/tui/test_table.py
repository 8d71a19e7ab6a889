"""`tui.widgets.table.Table` draws one-line text cells itself: every cell must come out as
Textual's own `DataTable` draws it, segment for segment and style for style, whatever the
text (wide characters cut at the edge, emoji, styled spans, justified, ellipsis, empty), the
width, and the cursor and hover states."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from tui.widgets.table import Table

CELLS: list[Any] = [
    Text("completed"),
    Text("Marie Curie won two Nobel Prizes in physics and chemistry, and more besides"),
    Text("雷雨の中で東京タワーは何メートルの高さですか、そして誰が建てましたか"),
    Text("emoji 🕵️ and 🧪 at the edge 🧪🧪🧪🧪🧪🧪🧪🧪🧪🧪"),
    Text.assemble(("true", "bold green"), " · ", ("0.91", "italic")),
    Text("right", justify="right"),
    Text("a cut with an ellipsis at the end of a long line", overflow="ellipsis"),
    Text("wraps when told to, and the first line is what a one-line row shows",
         no_wrap=False),
    Text(""),
    Text("centre", justify="center", style="reverse"),
    "a plain [b]string[/b] cell",
]


class Tables(App[None]):
    def compose(self) -> ComposeResult:
        yield Table(id="fast", cursor_type="row")
        yield DataTable(id="textual", cursor_type="row")


def fill(table: DataTable[Any]) -> None:
    table.add_column("A", width=9)
    table.add_column("B", width=24)
    table.add_column("C")
    for n, cell in enumerate(CELLS):
        table.add_row(str(n), cell, cell, key=str(n))


async def test_a_one_line_cell_is_drawn_as_textual_draws_it() -> None:
    app = Tables()
    async with app.run_test(size=(120, 40)) as pilot:
        fast = app.query_one("#fast", Table)
        fill(fast)
        await pilot.pause()
        base = fast.rich_style
        compared = 0
        for fixed in (0, 1):  # a fixed column is styled as one
            fast.fixed_columns = fixed
            for row in range(len(CELLS)):
                for column in range(3):
                    for width in (1, 2, 3, 7, 12, 40):
                        for cursor, hover in ((False, False), (True, False), (False, True)):
                            fast._cell_render_cache.clear()
                            ours = fast._render_cell(row, column, base, width, cursor, hover)
                            fast._cell_render_cache.clear()
                            theirs = DataTable._render_cell(fast, row, column, base, width,
                                                            cursor, hover)
                            assert _plain(ours) == _plain(theirs), (fixed, row, column, width)
                            compared += 1
        assert compared == 2 * len(CELLS) * 3 * 6 * 3


async def test_the_table_draws_the_same_screen_as_textuals() -> None:
    app = Tables()
    async with app.run_test(size=(120, 40)) as pilot:
        fast, textual = app.query_one("#fast", Table), app.query_one("#textual", DataTable)
        fill(fast)
        fill(textual)
        app.set_focus(None)  # the same state, the cursor's row drawn alike
        await pilot.pause()
        for y in range(len(CELLS) + 1):
            assert _plain([fast.render_line(y)]) == _plain([textual.render_line(y)])


def _plain(lines: Any) -> list[list[tuple[str, Any]]]:
    """Lines as (text, style) pairs, the meta's row and column left in (they are the same)."""
    return [[(segment.text, segment.style) for segment in line] for line in lines]
