"""A `DataTable` whose one-line text cells are drawn without Rich's general machinery.

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
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.widgets import DataTable

from tui.funnel import Guarded

__all__ = ["Table"]

log = logging.getLogger(__name__)

_NULL = Style.null()


class Table(Guarded, DataTable[Any]):
    """`DataTable`, with its one-line text cells drawn directly (see the module docstring)."""

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
