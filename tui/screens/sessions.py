"""The Sessions tab: every session from the index, filtered as you type. An evaluation's
sessions (thousands, for a HaluEval run) are one row per run until the filter asks for them:
Enter on that row, or its run id typed, lists them."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from engine import (
    DetektivError,
    EvalGroup,
    SessionSummary,
    counted,
    grouped,
    listed_title,
    newest_sessions,
    rounds_cell,
    strip_control,
    verdict_cell,
)
from tui._format import local_minute
from tui.background import in_background
from tui.funnel import Guarded
from tui.messages import ModelsChanged, NewSessionWanted, SessionOpened
from tui.screens.dialogs import ConfirmDialog
from tui.widgets.table import Column, Row, Table
from tui.widgets.tabs import ModeTabs

__all__ = ["SessionsScreen"]

REFRESH_SECONDS = 3.0
FIRST_ROWS = 40
"""Rows of the first screen (a terminal's height), from the index's tail, in the first frame;
the whole list is read after it."""
MAX_ROWS = 500
"""Rows drawn at once; the filter searches every session (a table of 10,000 rows takes
seconds to build and nobody scrolls through it)."""
COLUMNS = (Column("ID"), Column("Status"), Column("Verdict"), Column("Score", drop=3),
           Column("Started", drop=2), Column("Rounds", drop=1),
           Column("Hypothesis", elastic=True, least=16))
"""The list's columns: where room is short, the score goes first, then the start, then the
rounds; the hypothesis takes the room left, cut at its end."""


class SessionsScreen(Guarded, Screen[None]):
    """See the module docstring."""

    CSS_PATH = "sessions.tcss"
    BINDINGS = [
        Binding("o", "open", "Open", id="open"),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("n", "new", "New", id="new"),
        Binding("e", "export('md')", "Export", id="export-md"),
        Binding("j", "export('json')", "JSON", id="export-json"),
        Binding("d", "delete", "Delete", id="delete"),
        Binding("r", "refresh", "Refresh", id="refresh"),
        Binding("v", "evaluations", "Evals", id="evaluations"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[SessionSummary] = []
        self.shown: list[SessionSummary | EvalGroup] = []
        self.partial = False
        """`rows` are the newest only, from the index's tail; the whole list is on its way."""
        self.listed = False
        """The whole list was read at least once."""
        self.matches = 0
        self._seen: tuple[int, ...] | None = None
        """The store's version when it was last listed (`SessionStore.version`)."""

    def compose(self) -> ComposeResult:
        yield ModeTabs("sessions")
        yield Input(placeholder="Filter: hypothesis, id, status or run",
                    id="filter")
        table = Table(id="sessions", cursor_type="row")
        yield table
        yield Static(Content("loading sessions…"), id="sessions-status")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        table = self.query_one(Table)
        table.fill(COLUMNS, [])
        table.focus()
        self._show_newest()
        # the whole list's read holds the GIL for seconds at 100,000: it starts once the
        # first frame, rows and all, is on the screen, not half-drawn beside it
        self.call_after_refresh(self.refresh_rows)
        self.set_interval(REFRESH_SECONDS, self.refresh_rows)

    def _show_newest(self) -> None:
        """The first screen's rows, in the first frame: the index's last lines (4 ms, no model
        loaded, whatever the number of sessions; drawing a screenful of rows is ~25 ms more
        of that frame: rows 45 ms sooner than in the frame after it)."""
        paths = self.host.workspace.paths
        try:
            newest, whole = newest_sessions(paths.session_index, paths.data_dir / "sessions",
                                            FIRST_ROWS)
        except OSError:  # an unreadable index: the whole list says what is there
            return
        if newest:  # the store's list follows: it heals what the index cannot know
            self._show_rows(newest, not whole)

    @in_background("sessions-list")
    def refresh_rows(self) -> None:
        """Read every session off the event loop, then show them (at 100,000 that takes
        seconds); again every few seconds only when the store changed: a row was written
        (the index) or a folder made or removed, or a session shown running lost its
        process."""
        sessions = self.host.workspace.sessions
        running = [row.dir for row in self.rows if row.status == "running"]
        if self.listed and sessions.version(running) == self._seen:
            return
        base = sessions.version()  # before the read: a change while it reads is seen next time
        rows = sessions.rows()
        running = [row.dir for row in rows if row.status == "running"]
        self._seen = base + sessions.version(running)[len(base):]
        self.app.call_from_thread(self._show_rows, rows)

    def _show_rows(self, rows: list[SessionSummary], partial: bool = False) -> None:
        if rows == self.rows and self.shown and not self.partial:
            return
        self.rows, self.partial = rows, partial
        self.listed = self.listed or not partial
        self._apply_filter()
        self._show_status()

    def _show_status(self) -> None:
        rows = self.rows
        damaged = [r for r in rows if r.status == "damaged"]
        status = counted(len(rows), "session")
        if self.query_one("#filter", Input).value.strip():
            status = f"{self.matches:,} of {counted(len(rows), 'session')} match the filter"
        if self.partial:
            status = f"the newest {counted(len(rows), 'session')} · reading the rest…"
        runs = sum(isinstance(r, EvalGroup) for r in self.shown)
        if runs:
            status += f" · {runs} evaluation run{'s' if runs != 1 else ''} in one row each"
        if not rows:
            status = self.empty_text()
        elif not self.matches:
            status = f"none of {counted(len(rows), 'session')} matches the filter"
        if self.matches > len(self.shown):
            status += f" · showing the newest {len(self.shown)} of {self.matches}; type to filter"
        if damaged:
            status += f" · {len(damaged)} damaged: {strip_control(damaged[0].error or '')}"
        self.query_one("#sessions-status", Static).update(Content(status))

    def _apply_filter(self) -> None:
        needle = self.query_one("#filter", Input).value.strip().lower()
        table = self.query_one(Table)
        current = self._current()
        if needle:  # the filter searches every session, an evaluation's too
            matches: list[SessionSummary | EvalGroup] = [
                r for r in self.rows
                if needle in r.hypothesis.lower() or r.id.startswith(needle)
                or needle in r.status or (r.eval_run or "").startswith(needle)
            ]
        else:
            matches = grouped(self.rows)
        self.matches = len(matches)
        self.shown = matches[:MAX_ROWS]
        rows: list[Row] = []
        for row in self.shown:
            if isinstance(row, EvalGroup):
                rows.append(([  # every cell a Text or plain: nothing is read as markup
                    row.run[:8], "evaluation", counted(row.count, "session"), "",
                    local_minute(row.newest.started), "",
                    Text(f"evaluation run {row.run}: {counted(row.count, 'session')} (Enter "
                         "lists them)")], f"eval:{row.run}"))
                continue
            rows.append(([
                row.id[:8], row.status, verdict_cell(row),
                "" if row.score is None else str(row.score), local_minute(row.started),
                rounds_cell(row), Text(listed_title(row.hypothesis, row.claims)[:300])],
                row.dir))
        table.fill(COLUMNS, rows)
        if current is not None and current in self.shown:
            table.move_cursor(row=self.shown.index(current), animate=False)

    def _current(self) -> SessionSummary | EvalGroup | None:
        table = self.query_one(DataTable)
        if not self.shown or table.cursor_row < 0 or table.cursor_row >= len(self.shown):
            return None
        return self.shown[table.cursor_row]

    def _list_run(self, run: str) -> None:
        """Filter the list to one evaluation run's sessions."""
        field = self.query_one("#filter", Input)
        field.value = run
        self._apply_filter()
        self._show_status()
        self.query_one(DataTable).focus()

    def on_models_changed(self, _: ModelsChanged) -> None:
        """An empty list says again whether a demonstration model plays the detective."""
        self._show_status()

    def empty_text(self) -> str:
        """What an empty Sessions tab says: how to start the first interrogation (and, on the
        embedded model, that it is a demonstration model)."""
        text = (f"No sessions yet. Press {self.host.key_for('new', 'n')} to start your first "
                "interrogation (headless: detektiv run \"…\").")
        try:
            advice = self.host.workspace.advice()
        except DetektivError:
            advice = None
        return text + (f" Note: {advice}." if advice else "")

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self._apply_filter()
            if self.rows:
                self._show_status()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def chosen(self) -> SessionSummary | None:
        """The selected session, or None after saying why there is none."""
        row = self.selected()
        if row is None:
            group = self._current()
            if isinstance(group, EvalGroup):
                message = (f"Evaluation run {group.run[:10]}: "
                           f"{counted(group.count, 'session')}; press Enter to list them, "
                           "then choose one.")
            else:
                message = self.empty_text() if not self.rows else "No session is selected."
            self.notify(message, severity="warning", markup=False)
        return row

    def selected(self) -> SessionSummary | None:
        """The selected session (None on an evaluation run's row)."""
        current = self._current()
        return current if isinstance(current, SessionSummary) else None

    def action_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_refresh(self) -> None:
        self._seen = None  # asked for: read again, changed or not
        self.refresh_rows()

    def action_evaluations(self) -> None:
        """The evaluation runs; choosing one's sessions filters this list to them."""
        from tui.screens.evals import EvalsScreen

        def chosen(run: str | None) -> None:
            if run:
                self._list_run(run)

        self.app.push_screen(EvalsScreen(), chosen)

    def action_new(self) -> None:
        self.post_message(NewSessionWanted())

    def action_open(self) -> None:
        group = self._current()
        if isinstance(group, EvalGroup):
            self._list_run(group.run)
            return
        row = self.chosen()
        if row is None:
            return
        if row.status == "damaged":
            self.notify(row.error or "damaged", title="Cannot open", severity="error",
                        markup=False)
            return
        self.post_message(SessionOpened(row.dir, notes_only=row.status == "notes"))

    def action_export(self, fmt: str) -> None:
        row = self.chosen()
        if row is None:
            return
        target = self.host.workspace.sessions.export_file(row.dir,
                                                          "json" if fmt == "json" else "md")
        self.notify(f"Exported to {target}", title="Export", markup=False)

    def action_delete(self) -> None:
        row = self.chosen()
        if row is None:
            return
        text = " ".join(strip_control(row.hypothesis).split())[:80]

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.host.workspace.sessions.delete(row.dir)
                self.notify(f"Deleted session {row.id[:8]}", markup=False)
                self.refresh_rows()

        self.app.push_screen(ConfirmDialog(f"Delete session {row.id[:8]}?\n{text}"), confirmed)

