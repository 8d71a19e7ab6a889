"""A `DataTable` whose one-line text cells are drawn without Rich's general machinery, and
whose columns fit its width (`Table.fill`).

Fitting: each column is as wide as its widest cell; where the table is narrower than that, the
columns marked droppable go first (the highest `drop` first), and the one elastic column (a
title, a question, a model's name) takes the room left, its cells cut at their end with "…".
So a label, a verdict or a number is never cut mid-word: at 80 columns as at 160, what shows
is whole.

Textual draws every cell as `Styled(Padding(cell))` through `Console.render_lines`: a
renderable dispatched, measured, split into lines and cropped twice, ~40 µs a cell. A
screenful of the Sessions tab is ~240 cells: most of the first frame's table (issue 45). A
one-line `Text` cell is drawn here in the same steps done directly (the text wrapped as Rich
wraps it, cropped or padded to the cell, the padding and the two styles laid on as `Styled`
lays them): the same segments (tests/tui/test_table.py compares them with Textual's own for
every kind of cell), a quarter of the time. Any other cell (a header, a row label, a taller
row, a text with a line break or a tab, another renderable) is Textual's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.events import Resize
from textual.widgets import DataTable

from tui.funnel import Guarded

__all__ = ["Column", "Table", "fit"]

log = logging.getLogger(__name__)

_NULL = Style.null()


@dataclass(frozen=True, slots=True)
class Column:
    """A column of a fitted table (see the module docstring)."""

    label: str
    drop: int = 0
    """0: always shown; otherwise dropped where room is short, the highest first."""
    elastic: bool = False
    """Takes the room left, its cells cut at their end (one column a table)."""
    least: int = 12
    """The fewest characters the elastic column keeps."""


Cell = str | Text
Row = tuple[Sequence[Cell], str | None]
"""A row's cells, one a column, and its key."""


def fit(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int,
        padding: int = 1) -> list[tuple[int, int]]:
    """The columns shown in `width` characters, as (index, width) in order (see the module
    docstring)."""
    natural = [max([cell_len(column.label),
                    *(cell_len(_plain(row[i])) for row in rows if i < len(row))])
               for i, column in enumerate(columns)]
    shown = list(range(len(columns)))

    def needed() -> int:
        return sum((columns[i].least if columns[i].elastic else natural[i]) + 2 * padding
                   for i in shown)

    while needed() > width:
        droppable = [i for i in shown if columns[i].drop]
        if not droppable:
            break
        shown.remove(max(droppable, key=lambda i: (columns[i].drop, i)))
    fixed = sum(natural[i] + 2 * padding for i in shown if not columns[i].elastic)
    out = []
    for i in shown:
        if columns[i].elastic:
            out.append((i, max(min(columns[i].least, natural[i]),
                                min(natural[i], width - fixed - 2 * padding))))
        else:
            out.append((i, natural[i]))
    return out


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _cut(cell: Cell, width: int) -> Text:
    text = cell.copy() if isinstance(cell, Text) else Text(cell)
    if text.cell_len > width:
        text.truncate(max(1, width - 1))
        text.rstrip()
        text.append("…")
    return text


class Table(Guarded, DataTable[Any]):
    """`DataTable`, with its one-line text cells drawn directly and its columns fitted to its
    width (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fitted: tuple[Sequence[Column], Sequence[Row]] | None = None
        self._layout: list[tuple[int, int]] = []
        self.hidden: list[str] = []
        """The labels of the columns this width left out."""

    def fill(self, columns: Sequence[Column], rows: Sequence[Row]) -> None:
        """Show `rows` under `columns`, fitted to the table's width (again on a resize),
        the cursor kept on its row where it can be."""
        self._fitted = (columns, rows)
        region = self.scrollable_content_region
        room = region.width or self.app.size.width
        if self.show_vertical_scrollbar or len(rows) + 1 > (region.height or len(rows) + 1):
            room -= self.styles.scrollbar_size_vertical  # the rows will scroll: its bar
        layout = fit(columns, [cells for cells, _ in rows], max(20, room), self.cell_padding)
        shown = {index for index, _ in layout}
        self.hidden = [column.label for index, column in enumerate(columns) if index not in shown]
        cursor = self.cursor_row
        if layout != self._layout or not self.columns:
            self.clear(columns=True)
            for index, width in layout:
                self.add_column(columns[index].label, width=width, key=str(index))
            self._layout = layout
        else:
            self.clear()
        for cells, key in rows:
            self.add_row(*(_cut(cells[i], width) for i, width in layout), key=key)
        if rows and cursor >= 0:
            self.move_cursor(row=min(cursor, len(rows) - 1), animate=False)

    def on_resize(self, _: Resize) -> None:
        if self._fitted is not None:
            self.fill(*self._fitted)

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False) -> list[list[Segment]]:
        try:
            drawn = self._one_line(row_index, column_index, base_style, width, cursor, hover)
        except Exception:  # a cell unlike any tested: Textual draws it, the frame still comes
            log.debug("a table cell drawn by Textual after the direct path failed",
                      exc_info=True)
            drawn = None
        if drawn is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor,
                                        hover)
        return drawn

    def _one_line(self, row_index: int, column_index: int, base_style: Style, width: int,
                  cursor: bool, hover: bool) -> list[list[Segment]] | None:
        """The cell drawn directly, kept in Textual's own cache of cells; None: Textual's."""
        if row_index < 0 or column_index < 0 or width <= 2 * self.cell_padding:
            return None
        row_key = self._row_locations.get_key(row_index)
        if row_key is None:
            return None
        row = self.rows.get(row_key)
        if row is None or row.height != 1:
            return None
        column_key = self._column_locations.get_key(column_index)
        if column_key is None:
            return None
        key = (row_key, column_key, base_style, cursor, hover, self._show_hover_cursor,
               self._update_count, self._pseudo_class_state)
        cached = self._cell_render_cache.get(key)
        if cached is not None:
            return cached
        cells = self._get_row_renderables(row_index).cells
        cell = cells[column_index] if column_index < len(cells) else None
        if not isinstance(cell, Text) or "\n" in cell.plain or "\t" in cell.plain:
            return None
        fixed = row_index < self.fixed_rows or column_index < self.fixed_columns
        component_style, post_style = self._get_styles_to_render_cell(
            False, False, fixed, hover, cursor, self.show_cursor, self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css")
        pre_style = base_style + Style.from_meta({"row": row_index, "column": column_index}) \
            + component_style
        line = _padded_line(self.app.console, self.app.console_options, cell, width,
                            self.cell_padding)
        styled = list(Segment.apply_style(line, style=pre_style, post_style=post_style))
        lines = [Segment.adjust_line_length(styled, width, pad=True)]
        self._cell_render_cache[key] = lines
        return lines


def _padded_line(console: Any, options: Any, cell: Text, width: int, padding: int
                 ) -> list[Segment]:
    """`Padding(cell, (0, padding))` rendered one line high at `width`, as Rich renders it:
    the text wrapped with no wrapping (cropped by its overflow), padded to the inner width,
    a blank of `padding` either side."""
    inner = width - 2 * padding
    tab_size = console.tab_size if cell.tab_size is None else cell.tab_size
    lines = cell.wrap(console, inner, justify=cell.justify or options.justify or "default",
                      overflow=cell.overflow or options.overflow or "fold",
                      tab_size=tab_size or 8,
                      no_wrap=True if cell.no_wrap is None else cell.no_wrap)
    # joined as Rich joins them (a line's own style becomes a span), one line high: the first
    segments = Text("\n").join(lines).render(console, end=cell.end)
    first = next(iter(Segment.split_lines(segments)), [])
    body = Segment.adjust_line_length(first, inner, style=_NULL, pad=True)
    side = [Segment(" " * padding, _NULL)] if padding else []
    return [*side, *body, *side]
