"""The Evaluations screen (from the Sessions tab): every `detektiv eval` run, the figures of
the one selected (the same table `detektiv evals RUN` prints) and a reliability diagram in
text. `o` goes back to Sessions filtered to the run's sessions, each one a stored
interrogation that opens like any other.

A witness comparison (`detektiv eval … --compare A,B`) is one row: selected, it shows the
leaderboard (a witness a row, the paired differences under it); `o` moves to its witnesses,
and Enter on a witness's row goes back to Sessions filtered to that witness's sessions."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from engine import (
    DetektivError,
    EvalRunInfo,
    EvalSummary,
    Leaderboard,
    board_lines,
    board_table,
    counted,
    eval_lines,
    eval_table,
    reliability_lines,
    strip_control,
)
from tui._format import local_minute
from tui.background import in_background
from tui.funnel import Guarded
from tui.widgets.table import Column, Row, Table

__all__ = ["EvalsScreen"]


RUN_COLUMNS = (Column("Run"), Column("Updated", drop=2), Column("Dataset"), Column("Claims"),
               Column("Mode", drop=3), Column("Detective", drop=1),
               Column("Witness", elastic=True, least=14))
"""The runs: where room is short the detective goes first, then the date, then the mode."""


def figure_columns(head: list[str], elastic: int | None = None) -> list[Column]:
    """A table of figures: the first column always; where room is short the rightmost
    figures go first (`Table.hidden` names them); column `elastic` takes the room left."""
    return [Column(label, elastic=index == elastic,
                   drop=0 if index == 0 or index == elastic else index)
            for index, label in enumerate(head)]


class EvalsScreen(Guarded, Screen[str | None]):
    """See the module docstring. Dismissed with a run id to filter Sessions by, or None."""

    DEFAULT_CSS = """
    EvalsScreen #eval-runs { height: 10; }
    EvalsScreen #eval-figures { height: auto; max-height: 16; }
    EvalsScreen #eval-detail { height: 1fr; }
    EvalsScreen .eval-text { padding: 0 1; }
    EvalsScreen #eval-status { height: auto; padding: 0 1; color: $text-muted; }
    """
    BINDINGS = [
        Binding("escape", "back", "Back", id="evals-back"),
        Binding("o", "sessions", "Its sessions", id="evals-sessions"),
        Binding("r", "refresh", "Refresh", id="evals-refresh"),
    ]

    COMPARISON = "compare:"
    """The key of a comparison's row in the runs table (then its id)."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[EvalRunInfo] = []
        """A row each: a run, or a comparison's first run standing for its witnesses."""
        self.summary: EvalSummary | None = None
        self.board: Leaderboard | None = None

    def compose(self) -> ComposeResult:
        yield Static(Content("Evaluations: does interrogation catch false claims? "
                             "(detektiv eval DATASET)"), classes="eval-text")
        yield Table(id="eval-runs", cursor_type="row")
        yield Static(Content("loading evaluation runs…"), id="eval-status")
        yield Table(id="eval-figures", cursor_type="none", zebra_stripes=True)
        with VerticalScroll(id="eval-detail"):
            yield Static(Content(""), id="eval-lines", classes="eval-text")
            yield Static(Content(""), id="eval-plot", classes="eval-text")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#eval-runs", Table).focus()
        self.load_runs()

    @in_background("eval-runs")
    def load_runs(self) -> None:
        runs = self.host.workspace.evals.runs()
        self.app.call_from_thread(self._show_runs, runs)

    def _key(self, info: EvalRunInfo) -> str:
        """A row's key: the run's id, or its comparison's (`COMPARISON` before it)."""
        return self.COMPARISON + info.comparison if info.comparison else info.id

    def _show_runs(self, every: list[EvalRunInfo]) -> None:
        witnesses: dict[str, list[str]] = {}
        runs: list[EvalRunInfo] = []
        for info in every:  # a comparison: one row, where its newest run stands
            if info.comparison is not None:
                named = witnesses.setdefault(info.comparison, [])
                named.append(info.witness_name)
                if len(named) > 1:
                    continue
            runs.append(info)
        self.runs = runs
        rows: list[Row] = []
        for info in runs:
            named = witnesses.get(info.comparison or "", [])
            witness = f"{len(named)} compared: " + ", ".join(reversed(named)) if named \
                else info.witness_label
            rows.append(([info.comparison or info.id, local_minute(info.updated.isoformat()),
                          Text(strip_control(info.dataset)[-40:]), str(info.items), info.mode,
                          Text(strip_control(info.detective_label)),
                          Text(strip_control(witness))], self._key(info)))
        self.query_one("#eval-runs", Table).fill(RUN_COLUMNS, rows)
        status = self.query_one("#eval-status", Static)
        if not runs:
            status.update(Content("No evaluation runs yet. Run one from a shell: "
                                  "detektiv eval demo (see detektiv eval --help)."))
            return
        status.update(Content(f"{counted(len(runs), 'evaluation run')} · o: show a run's "
                              "sessions (a comparison's: Enter on a witness)"))
        self.load_figures(self._key(runs[0]))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "eval-runs" and event.row_key.value:
            self.load_figures(str(event.row_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a witness of a comparison: Sessions, filtered to its run."""
        if event.data_table.id == "eval-figures" and self.board is not None and \
                event.row_key.value:
            self.dismiss(str(event.row_key.value))

    @in_background("eval-figures")
    def load_figures(self, ident: str) -> None:
        """Figures off the event loop (the bootstrap takes a moment on a large run)."""
        evals = self.host.workspace.evals
        try:
            if ident.startswith(self.COMPARISON):
                board = evals.comparison(ident.removeprefix(self.COMPARISON))
                self.app.call_from_thread(self._show_board, board)
                return
            summary = evals.summary(ident)
        except DetektivError as exc:
            self.app.call_from_thread(self.notify, exc.message, severity="error")
            return
        self.app.call_from_thread(self._show_figures, summary)

    def _show_board(self, board: Leaderboard) -> None:
        self.board, self.summary = board, None
        table = self.query_one("#eval-figures", Table)
        table.cursor_type = "row"
        head, *rows = board_table(board)
        runs = {row.witness: row.run for row in board.rows}
        table.fill(figure_columns(head, elastic=1),
                   [([Text(strip_control(cell)) for cell in row], runs[row[0]]) for row in rows])
        self.query_one("#eval-lines", Static).update(Content("\n".join(
            [*self._hidden_line(table), *board_lines(board)])))
        self.query_one("#eval-plot", Static).update(Content(
            "Enter on a witness's row: its sessions"))

    def _show_figures(self, summary: EvalSummary) -> None:
        self.summary, self.board = summary, None
        table = self.query_one("#eval-figures", Table)
        table.cursor_type = "none"
        if not summary.systems:
            table.fill([], [])
            self.query_one("#eval-lines", Static).update(Content(
                "No item of this run has finished yet."))
            self.query_one("#eval-plot", Static).update(Content(""))
            return
        head, *rows = eval_table(summary)
        table.fill(figure_columns([head[0] or "figure", *head[1:]]),
                   [(list(row), None) for row in rows])
        self.query_one("#eval-lines", Static).update(Content("\n".join(
            [*self._hidden_line(table), *eval_lines(summary)])))
        self.query_one("#eval-plot", Static).update(Content("\n".join(
            reliability_lines(summary))))

    @staticmethod
    def _hidden_line(table: Table) -> list[str]:
        """Which figures this width left out of the table, where it did."""
        return [f"Not shown at this width: {', '.join(table.hidden)} (a wider terminal shows "
                "them; detektiv eval --json has every figure)."] if table.hidden else []

    def selected(self) -> EvalRunInfo | None:
        table = self.query_one("#eval-runs", Table)
        if not self.runs or not 0 <= table.cursor_row < len(self.runs):
            return None
        return self.runs[table.cursor_row]

    def action_back(self) -> None:
        self.dismiss(None)

    def action_refresh(self) -> None:
        self.load_runs()

    def action_sessions(self) -> None:
        info = self.selected()
        if info is None:
            self.notify("No evaluation run is selected.", severity="warning")
            return
        if info.comparison is not None:  # whose sessions: a witness's, chosen in its table
            if self.board is not None:
                self.query_one("#eval-figures", Table).focus()
            self.notify("A comparison: Enter on a witness's row shows its sessions.")
            return
        self.dismiss(info.id)
