"""The Cache tab: entries (search as you type), an entry's answer and validation, invalidate /
delete / export, live hit and miss counters, and a "why" box: a question, and what it would
match and why not. Everything through `workspace.cache`; questions and answers are data."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from engine import (
    atomic_write_text,
    check_line,
    explanation_lines,
    strip_control,
)
from tui.background import in_background
from tui.funnel import Guarded
from tui.screens.dialogs import ConfirmDialog
from tui.widgets.table import Column, Row, Table
from tui.widgets.tabs import ModeTabs

__all__ = ["CacheScreen"]

REFRESH_SECONDS = 2.0


COLUMNS = (Column("ID"), Column("Status"), Column("Uses", drop=1),
           Column("Question", elastic=True, least=16))
"""The entries' columns: the question takes the room left, cut at its end."""


class CacheScreen(Guarded, Screen[None]):
    """See the module docstring."""

    CSS_PATH = "cache.tcss"
    BINDINGS = [
        Binding("slash", "search", "Search", id="cache-search"),
        Binding("w", "why", "Why?", id="cache-why"),
        Binding("x", "invalidate", "Invalidate", id="cache-invalidate"),
        Binding("d", "delete", "Delete", id="cache-delete"),
        Binding("e", "export", "Export", id="cache-export"),
        Binding("r", "refresh", "Refresh", id="cache-refresh"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[Any] = []
        self.stats_text = ""

    def compose(self) -> ComposeResult:
        yield ModeTabs("cache")
        yield Input(placeholder="Search entries… (as you type)", id="cache-filter")
        with Horizontal(id="cache-main"):
            table = Table(id="cache-entries", cursor_type="row")
            yield table
            with Vertical(id="cache-side"):
                with VerticalScroll(id="cache-detail-box"):  # scrolls, never cuts off
                    yield Static(Content("no entry selected"), id="cache-detail")
                yield Input(placeholder="Why? A question to match",
                            id="cache-question")
                yield Static(Content(""), id="cache-explanation")
        yield Static(Content("reading the cache…"), id="cache-stats")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one(Table).fill(COLUMNS, [])
        self.query_one(Table).focus()
        self.refresh_entries()
        self.set_interval(REFRESH_SECONDS, self.refresh_entries)

    @in_background("cache-list")
    def refresh_entries(self) -> None:
        cache = self.host.workspace.cache
        search = self.query_one("#cache-filter", Input).value.strip()
        entries = cache.entries(search, limit=500)
        stats = cache.stats()
        self.app.call_from_thread(self._show, entries, stats)

    def _show(self, entries: list[Any], stats: dict[str, int]) -> None:
        self.stats_text = (f"{stats['entries']} entries · {stats['bytes'] / 1024:.0f} KB · "
                           f"hits {stats['hit']} · misses {stats['miss']} · near misses "
                           f"{stats['near_miss']} · guard rejects {stats['guard_reject']}")
        self.query_one("#cache-stats", Static).update(Content(self.stats_text))
        if [e.model_dump() for e in entries] == [e.model_dump() for e in self.entries]:
            self._show_detail()
            return
        self.entries = entries
        rows: list[Row] = []
        for e in entries:
            meta = e.validation_metadata
            status = "invalidated" if e.invalidated else (meta.status if meta else "?")
            rows.append(([e.entry_id[:8], Text(status), str(e.usage_count),
                          Text(" ".join(strip_control(e.question).split())[:300])], None))
        self.query_one(Table).fill(COLUMNS, rows)
        self._show_detail()

    def selected(self) -> Any | None:
        table = self.query_one(DataTable)
        if not self.entries or not 0 <= table.cursor_row < len(self.entries):
            return None
        return self.entries[table.cursor_row]

    def _show_detail(self) -> None:
        entry = self.selected()
        if entry is None:
            text = ("The cache is empty. Put an answer in with:\n\n"
                    "  detektiv cache put \"question\" --answer \"…\""
                    if not self.entries else "no entry selected")
        else:
            meta = entry.validation_metadata
            lines = [entry.question, "", entry.payload[:600], "",
                     f"id {entry.entry_id} · used {entry.usage_count}× · last "
                     f"{entry.last_used:%Y-%m-%d %H:%M}",
                     f"variations: {len(entry.variations)} · realtime: "
                     f"{entry.requires_realtime} · invalidated: {entry.invalidated}"]
            if meta is not None:
                lines.append(f"validation {meta.status} (v{meta.validator_version}, "
                             f"confidence {meta.confidence:.2f})")
                lines += [check_line(c) for c in meta.checks]
            text = "\n".join(lines)
        self.query_one("#cache-detail", Static).update(Content(strip_control(text)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "cache-filter":
            self.refresh_entries()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "cache-question":
            self.explain(event.value)
        else:
            self.query_one(DataTable).focus()

    @in_background("cache-why")
    def explain(self, question: str) -> None:
        if not question.strip():
            return
        why, served = self.host.workspace.cache.lookup(question)
        lines = explanation_lines(why)
        if served is not None:
            lines += ["", served.payload[:400]]
        text = strip_control("\n".join(lines))
        self.app.call_from_thread(
            self.query_one("#cache-explanation", Static).update, Content(text))
        self.app.call_from_thread(self.refresh_entries)

    def action_search(self) -> None:
        self.query_one("#cache-filter", Input).focus()

    def action_why(self) -> None:
        self.query_one("#cache-question", Input).focus()

    def action_refresh(self) -> None:
        self.refresh_entries()

    def _chosen(self) -> Any | None:
        entry = self.selected()
        if entry is None:
            self.notify("No entry is selected.", severity="warning")
        return entry

    def action_invalidate(self) -> None:
        entry = self._chosen()
        if entry is None:
            return
        self.host.workspace.cache.invalidate(entry.entry_id)
        self.notify(f"Entry {entry.entry_id[:8]} will not be served again.")
        self.refresh_entries()

    def action_delete(self) -> None:
        entry = self._chosen()
        if entry is None:
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.host.workspace.cache.delete(entry.entry_id)
                self.notify(f"Deleted entry {entry.entry_id[:8]}.")
                self.refresh_entries()

        self.app.push_screen(ConfirmDialog(f"Delete cache entry {entry.entry_id[:8]}?\n"
                                           f"{strip_control(entry.question)[:80]}"), confirmed)

    def action_export(self) -> None:
        cache = self.host.workspace.cache
        text = cache.export("json")
        target = self.host.workspace.paths.exports_dir / "detektiv-cache.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, text)
        self.notify(f"Exported {cache.stats()['entries']} entries to {target}", markup=False)
