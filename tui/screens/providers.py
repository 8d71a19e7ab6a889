"""The Providers tab: health, circuit state and latency; enable, reorder, and Ollama models.

Health checks run in the router's background task while this tab exists; the table is redrawn
from the router's state every second. Changes are written to the config file at once.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Footer, ProgressBar, Static

from engine import (
    DetektivError,
    ProviderConfig,
    model_row,
    strip_control,
)
from tui.background import in_background
from tui.funnel import Guarded
from tui.screens.dialogs import PromptDialog
from tui.widgets.table import Column, Table
from tui.widgets.tabs import ModeTabs

__all__ = ["ProvidersScreen"]


COLUMNS = (Column("Name"), Column("Kind", drop=5), Column("Model", elastic=True, least=14),
           Column("Prio", drop=4), Column("Enabled", drop=3), Column("Status"),
           Column("Health"), Column("Check", drop=7), Column("Circuit", drop=6),
           Column("Checked", drop=2), Column("Latency"), Column("Window", drop=8),
           Column("Detail", drop=9))
"""The table's columns: where room is short, the detail goes first, then the window, the
check, the circuit, the kind, the priority, whether enabled, when checked; a long model
name is cut at its end."""

class ProvidersScreen(Guarded, Screen[None]):
    """See the module docstring."""

    CSS_PATH = "providers.tcss"
    BINDINGS = [
        Binding("space", "toggle_enabled", "On/off", id="toggle-provider"),
        Binding("plus,equals_sign", "move(-1)", "Earlier", id="raise-priority"),
        Binding("minus", "move(1)", "Later", id="lower-priority"),
        Binding("h", "check", "Check", id="check-health"),
        Binding("m", "models", "Ollama models", id="ollama-models", show=False),
        Binding("p", "pull", "Pull Ollama model", id="ollama-pull", show=False),
        Binding("L", "local_models", "Models", id="local-models"),
        Binding("P", "pull_gguf", "Pull", id="gguf-pull"),
        Binding("F", "fetch_capable", "Fetch", id="capable-fetch"),
        Binding("F", "stop_fetch", "Stop fetch", id="capable-stop"),
    ]

    AUTO_CHECK = True
    """Start the background health checks when the tab opens (tests turn it off)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def compose(self) -> ComposeResult:
        yield ModeTabs("providers")
        table = Table(id="providers", cursor_type="row")
        yield table
        with Vertical(id="detail"):
            yield Static(Content(strip_control(self._advice())), id="provider-detail")
            yield ProgressBar(total=100, id="pull-progress")
        yield Footer(compact=True, show_command_palette=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`F` fetches the capable model, or stops the fetch while one runs: one of the two
        is active (and in the footer) at a time."""
        fetching = self.host.fetch_stop is not None
        if action == "fetch_capable":
            return not fetching
        if action == "stop_fetch":
            return fetching
        return True

    def action_fetch_capable(self) -> None:
        """Fetch the capable local model (on purpose: what a stop remembered is cleared)."""
        state = self.host.workspace.models.capable()
        if state.present:
            self.notify("The capable local model is here already.", markup=False)
            return
        if state.refused is not None:
            self.notify(f"The capable local model is not fetched: {state.refused}.",
                        severity="warning", markup=False)
            return
        self.host.fetch_capable(state.offer())
        self.refresh_bindings()

    def action_stop_fetch(self) -> None:
        self.host.stop_fetch()
        self.refresh_bindings()

    def on_mount(self) -> None:
        table = self.query_one(Table)
        self.query_one("#pull-progress", ProgressBar).display = False
        table.focus()
        self.redraw()
        self.set_interval(1.0, self.redraw)
        if self.AUTO_CHECK:
            self.start_checks()

    @work(exclusive=True, group="health-start", exit_on_error=False)
    async def start_checks(self) -> None:
        """Start the router's health loop (the SDKs are imported off the event loop first)."""
        await self.host.workspace.watch_health()

    def redraw(self) -> None:
        rows = self.host.workspace.provider_rows()
        self.names = [row.name for row in rows]
        self.query_one(Table).fill(COLUMNS, [([
            Text(row.name), row.kind, Text(row.model), str(row.priority),
            "yes" if row.enabled else "no", row.status, row.health, row.check or "–",
            row.circuit, row.checked(), row.latency, Text(row.window_text or "–"),
            Text(row.detail[:80])], row.name) for row in rows])

    def _advice(self) -> str:
        """The detail pane's first words: what plays the detective, when that is a
        demonstration model, and how to change it."""
        try:
            advice = self.host.workspace.advice()
        except Exception:  # a bad config is said elsewhere
            advice = None
        return ("Select a provider." if advice is None else
                f"Select a provider.\n\nNote: {advice}.\nL lists the local models, P pulls one.")

    def selected(self) -> str | None:
        row = self.query_one(DataTable).cursor_row
        return self.names[row] if 0 <= row < len(self.names) else None

    def _change(self, changes: dict[str, dict[str, object]]) -> None:
        """Apply field changes to providers, then write the config once."""
        providers = self.host.workspace.config.providers
        updated = {
            name: ProviderConfig.model_validate(
                {**providers[name].model_dump(), **fields, "origin": "config"})
            for name, fields in changes.items()
        }
        self.host.workspace.update_providers(updated)  # written once, now
        if self.AUTO_CHECK:
            self.start_checks()  # on the rebuilt router
        self.redraw()

    def action_toggle_enabled(self) -> None:
        name = self.selected()
        if name is not None:
            enabled = not self.host.workspace.config.providers[name].enabled
            self._change({name: {"enabled": enabled}})
            self.notify(f"{name} {'enabled' if enabled else 'disabled'}", markup=False)

    def action_move(self, step: int) -> None:
        """Swap priorities with the neighbour above (-1) or below (+1)."""
        name = self.selected()
        if name is None:
            return
        index = self.names.index(name)
        other_index = index + step
        if not 0 <= other_index < len(self.names):
            return
        other = self.names[other_index]
        providers = self.host.workspace.config.providers
        mine, theirs = providers[name].priority, providers[other].priority
        self._change({name: {"priority": theirs}, other: {"priority": mine}})
        self.query_one(DataTable).move_cursor(row=other_index, animate=False)

    @work(exclusive=True, group="health-now", exit_on_error=False)
    async def action_check(self) -> None:
        await self.host.workspace.check_health()
        self.redraw()
        self.notify("Health checked.", markup=False)

    def _ollama(self) -> str | None:
        name = self.selected()
        if name is None or self.host.workspace.config.providers[name].kind != "ollama":
            self.notify("Select an Ollama provider.", severity="warning", markup=False)
            return None
        return name

    @work(exclusive=True, group="ollama", exit_on_error=False)
    async def action_models(self) -> None:
        name = self._ollama()
        if name is None:
            return
        provider = await self.host.workspace.configured_provider(name)
        models = await provider.list_models()
        text = f"{name}: {len(models)} models\n" + "\n".join(f"• {m}" for m in models)
        self.query_one("#provider-detail", Static).update(Content(strip_control(text)))

    def action_pull(self) -> None:
        name = self._ollama()
        if name is None:
            return

        def chosen(model: str | None) -> None:
            if model and model.strip():
                self.pull(name, model.strip())

        self.app.push_screen(PromptDialog(f"Pull which model into {name}?"), chosen)

    @work(exclusive=True, group="ollama", exit_on_error=False)
    async def pull(self, name: str, model: str) -> None:
        """Pull `model` with a progress bar."""
        provider = await self.host.workspace.configured_provider(name)
        bar = self.query_one("#pull-progress", ProgressBar)
        detail = self.query_one("#provider-detail", Static)
        bar.display = True
        bar.update(total=100, progress=0)
        try:
            async for part in provider.pull(model):
                if part.total:
                    bar.update(total=part.total, progress=part.completed or 0)
                detail.update(Content(strip_control(f"pulling {model}: {part.status}")))
            detail.update(Content(f"pulled {model}"))
            self.notify(f"Pulled {model}.", markup=False)
        finally:
            bar.display = False

    @in_background("gguf")
    def action_local_models(self) -> None:
        """List the GGUF models detektiv can run (reading their headers off the event loop)."""
        rows = [model_row(model) for model in self.host.workspace.models.list()]
        lines = [f"{len(rows)} local models (use one as local:NAME)"]
        for row in rows:
            facts = " · ".join(str(part) for part in (
                row["source"], row["size_text"], row["parameters"], row["quantisation"],
                f"{row['context_length']:,} ctx" if row["context_length"] else None,
                None if row["chat_template"] is None else
                ("chat template" if row["chat_template"] else "no chat template")) if part)
            lines.append(f"• {row['name']}: {facts}"
                         + (f" — {row['error'] or row['note']}" if row["error"] or row["note"]
                            else ""))
        text = strip_control("\n".join(lines))
        self.app.call_from_thread(
            self.query_one("#provider-detail", Static).update, Content(text))

    def action_pull_gguf(self) -> None:
        def chosen(spec: str | None) -> None:
            parts = (spec or "").split()
            if 1 <= len(parts) <= 2:
                self.pull_gguf(parts[0], parts[1] if len(parts) == 2 else None)

        names = ", ".join(entry.name for entry in self.host.workspace.models.catalogue()[:3])
        self.app.push_screen(PromptDialog(
            f"Pull which GGUF model? A catalogue name ({names}, …) or OWNER/REPO FILE.gguf"),
            chosen)

    @in_background("gguf")
    def pull_gguf(self, spec: str, file: str | None) -> None:
        """Pull a GGUF model from the Hub on a thread, its progress in the bar."""
        bar = self.query_one("#pull-progress", ProgressBar)
        detail = self.query_one("#provider-detail", Static)
        call = self.app.call_from_thread
        screen = self
        shown = [0.0]

        def progress(done: int, total: int | None) -> None:
            now = time.monotonic()
            if now - shown[0] >= 0.1 or (total is not None and done >= total):
                shown[0] = now  # at most ten screen updates a second
                call(bar.update, total=total or None, progress=done)

        call(setattr, bar, "display", True)
        call(detail.update, Content(strip_control(f"pulling {spec}…")))
        try:
            manifest = self.host.workspace.models.pull(spec, file, progress=progress)
        except DetektivError as exc:
            call(detail.update, Content(strip_control(exc.message)))
            call(screen.notify, exc.message, title="Pull failed", severity="error",
                 markup=False)
            return
        finally:
            call(setattr, bar, "display", False)
        done = f"pulled {manifest.name}: use it as local:{manifest.name}"
        call(detail.update, Content(strip_control(done)))
        call(screen.notify, done, markup=False)
