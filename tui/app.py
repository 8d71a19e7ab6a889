"""The terminal app: Sessions, Live and Providers tabs over the engine.

`MODES` give each tab its own screen stack; number keys switch. Global bindings live here and
everything else on the screen that owns it. One error funnel: a failed worker, or any exception
in a handler, becomes a notification and a log record, never a traceback on the screen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from engine.config import Config, ProviderConfig, load_config, save_config
from engine.errors import DetektivError
from engine.logs import log_file
from engine.paths import Paths
from engine.secrets import redact
from engine.storage.sessions import SessionStore
from engine.text import strip_control
from tui.screens.dialogs import HelpScreen
from tui.screens.sessions import SessionsScreen
from tui.themes import load_themes
from tui.widgets.tabs import TABS

if TYPE_CHECKING:
    from engine.router import Router
    from tui.screens.live import LiveScreen

__all__ = ["DetektivApp", "run_app"]

log = logging.getLogger(__name__)

DEFAULT_THEME = "detektiv-dark"


def _providers_screen() -> Screen[Any]:
    from tui.screens.providers import ProvidersScreen

    return ProvidersScreen()


def _preimport() -> None:
    """Import the provider SDKs (slow) on a worker thread, not on the event loop."""
    import openai  # noqa: F401

    import engine.providers._ollama  # noqa: F401
    import engine.providers._openai  # noqa: F401


class DetektivApp(App[int]):
    """detektiv's Textual application."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "detektiv"
    DEFAULT_MODE = "sessions"
    BINDINGS = [
        # F-keys switch tabs even while typing in a field, where the digits are text
        Binding("1,f1", "tab('sessions')", "Sessions", id="tab-sessions", show=False),
        Binding("2,f2", "tab('live')", "Live", id="tab-live", show=False),
        Binding("3,f3", "tab('providers')", "Providers", id="tab-providers", show=False),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("ctrl+t", "toggle_theme", "Theme", id="toggle-theme"),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
    ]

    def __init__(self, paths: Paths, config: Config) -> None:
        super().__init__()
        self.paths = paths
        self.config = config
        self.store = SessionStore(paths.data_dir / "sessions")
        self.router: Router | None = None
        self._router_lock = asyncio.Lock()
        self.internal_errors: list[BaseException] = []
        self.notices: list[tuple[str, str]] = []
        self._live: LiveScreen | None = None
        for mode, screen in (("sessions", SessionsScreen), ("live", lambda: self.live),
                             ("providers", _providers_screen)):
            self.add_mode(mode, screen)
        for theme in load_themes():
            self.register_theme(theme)
        wanted = config.ui.theme
        self.theme = wanted if wanted in self.available_themes else DEFAULT_THEME
        self.set_keymap(config.keymap)

    def on_mount(self) -> None:
        self.store.sweep()

    # ---- shared engine objects ---------------------------------------------------------------

    @property
    def live(self) -> LiveScreen:
        """The Live tab's screen (its module loads on first use, not before the first frame)."""
        if self._live is None:
            from tui.screens.live import LiveScreen

            self._live = LiveScreen()
        return self._live

    async def get_router(self, config: Config | None = None) -> Router:
        """The app's router (built on first use, off the UI path), or a new one for `config`."""
        from engine.providers import discover_ollama
        from engine.router import Router

        async with self._router_lock:
            if config is not None and config is not self.config:
                await asyncio.to_thread(_preimport)
                return Router(config, self.paths)
            if self.router is None:
                await asyncio.to_thread(_preimport)
                await discover_ollama(self.config)
                self.router = Router(self.config, self.paths)
            return self.router

    def update_providers(self, providers: dict[str, ProviderConfig]) -> None:
        """Change providers and write the config file once; the router is rebuilt."""
        self.config.providers.update(providers)
        save_config(self.config, self.paths.config_file)
        old, self.router = self.router, None
        if old is not None:
            self.run_worker(old.aclose(), exit_on_error=False)

    async def open_session(self, directory: str) -> None:
        """Show a session in the Live tab (following it while it runs)."""
        await self.switch_mode("live")
        self.live.attach(directory)

    # ---- actions -----------------------------------------------------------------------------

    def action_tab(self, mode: str) -> None:
        self.switch_mode(mode)

    def action_help(self) -> None:
        rows: list[tuple[str, str, str]] = []
        seen: set[str] = set()
        for binding in [*self.screen.BINDINGS, *self.BINDINGS]:
            if isinstance(binding, Binding) and binding.id and binding.id not in seen:
                seen.add(binding.id)
                keys = self._keymap.get(binding.id, binding.key)
                rows.append((keys, binding.description, binding.id))
        self.push_screen(HelpScreen(rows))

    def action_toggle_theme(self) -> None:
        self.theme = "detektiv-light" if self.theme == "detektiv-dark" else "detektiv-dark"

    def watch_theme(self, theme: str) -> None:
        """Remember the theme in the config file."""
        if not self.is_running or theme == self.config.ui.theme:
            return
        self.config.ui.theme = theme
        try:
            save_config(self.config, self.paths.config_file)
        except OSError as exc:
            self.notify(f"Cannot save the theme: {exc.strerror}", severity="warning",
                        markup=False)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The command palette lists every action of this tab and the global ones."""
        yield from super().get_system_commands(screen)
        for mode, label in TABS:
            yield SystemCommand(f"Go to {label}", f"Switch to the {label} tab",
                                lambda mode=mode: self.switch_mode(mode))
        for binding in [*screen.BINDINGS, *self.BINDINGS]:
            if isinstance(binding, Binding) and binding.id and not binding.id.startswith("tab-"):
                action = binding.action
                yield SystemCommand(binding.description, f"{binding.id} ({binding.key})",
                                    lambda action=action: self.run_action(
                                        action, screen))

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Notify, always without markup, control characters stripped (the text is often a
        model's or a server's); every notification is kept in `notices`."""
        message, title = strip_control(message), strip_control(title)
        self.notices.append((title, message))
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    # ---- the one error funnel ----------------------------------------------------------------

    def _report(self, error: BaseException) -> None:
        if isinstance(error, DetektivError):
            self.notify(error.message, title="Failed", severity="error", markup=False)
            return
        if isinstance(error, OSError):
            self.notify(redact(f"{error.strerror or error}: {error.filename or ''}"),
                        title="File error", severity="error", markup=False)
            return
        self.internal_errors.append(error)
        log.error("internal error", exc_info=error)
        self.notify(f"Internal error: {type(error).__name__} (details in "
                    f"{log_file(self.paths.log_dir)})", severity="error", markup=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            self._report(event.worker.error)

    def _handle_exception(self, error: Exception) -> None:
        """An exception in a handler: report it and keep running (never a traceback)."""
        try:
            self._report(error)
        except Exception:  # pragma: no cover - reporting itself failed: fall back to Textual
            super()._handle_exception(error)

    async def on_unmount(self) -> None:
        if self.router is not None:
            await self.router.aclose()


def run_app(paths: Paths) -> int:
    """Open the app full-screen; returns its exit code."""
    config = load_config(paths)  # a bad config stops here, before the screen is taken
    from tui._input import harden_input_decoder
    from tui._stderr import divert_native_stderr

    divert_native_stderr(log_file(paths.log_dir))
    harden_input_decoder()
    app = DetektivApp(paths, config)
    app.run()
    return app.return_code or 0
