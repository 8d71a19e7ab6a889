"""Plain-text tables for the command line: each column as wide as its widest cell (a verdict
with "· demo" after it pushes no column out of line), the last column left ragged."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rich.cells import cell_len

__all__ = ["print_table"]


def print_table(rows: Sequence[Sequence[str]], right: Collection[int] = ()) -> None:
    """Print `rows` (the first is the header) in aligned columns two spaces apart; the
    columns numbered in `right` are aligned right (numbers)."""
    if not rows:
        return
    columns = len(rows[0])
    widths = [max(cell_len(row[i]) for row in rows) for i in range(columns - 1)]
    for row in rows:
        cells = []
        for i, (cell, width) in enumerate(zip(row, widths, strict=False)):
            pad = " " * (width - cell_len(cell))
            cells.append(pad + cell if i in right else cell + pad)
        print("  ".join([*cells, row[-1]]).rstrip())
