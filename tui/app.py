"""The terminal app: Sessions, Live, Oracles, Cache and Providers tabs over the engine.

`MODES` give each tab its own screen stack; number keys switch. Global bindings live here and
everything else on the screen that owns it. One error funnel: a failed worker, or any exception
in a handler, becomes a notification and a log record, never a traceback on the screen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import tomllib
from collections import deque
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerFailed, WorkerState

from engine import (
    DEFAULT_THEME,
    Cancelled,
    ConfigError,
    DetektivError,
    Paths,
    PullBusy,
    Workspace,
    log_file,
    redact,
    strip_control,
)
from tui._input import harden_input_decoder
from tui._stderr import divert_native_stderr
from tui.background import Background, in_background
from tui.funnel import GuardedApp
from tui.messages import (
    InterrogationWanted,
    NewSessionWanted,
    SessionOpened,
    SessionShown,
    TabClosed,
)
from tui.screens.dialogs import HelpScreen
from tui.tabs import TABS, tab_bindings
from tui.themes import load_themes

if TYPE_CHECKING:
    from rich.console import RenderableType

    from engine import Config, FetchProgress
    from tui.screens.live import LiveScreen

__all__ = ["DetektivApp", "build_app", "run_app"]

log = logging.getLogger(__name__)

SHUTDOWN_WAIT = 10.0
"""Seconds quitting waits for thread work in flight before the stores close under it (they
then refuse it: `StoreClosed`)."""



class DetektivApp(GuardedApp, App[int]):
    """detektiv's Textual application."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "detektiv"
    DEFAULT_MODE = "sessions"
    BINDINGS = [
        # F-keys switch tabs even while typing in a field, where the digits are text
        *tab_bindings(),
        # in the tab bar and the palette, not the footer: there, each tab's own keys
        Binding("question_mark", "help", "Help", id="help", show=False),
        Binding("ctrl+t", "toggle_theme", "Theme", id="toggle-theme", show=False),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
    ]

    def __init__(self, paths: Paths, config: Config | None = None,
                 preview: dict[str, Any] | None = None) -> None:
        """`config` validated already, or None: then it is validated on a worker thread right
        after the first frame (pydantic costs ~110 ms to load), with `preview` (the config
        file's TOML, parsed) giving the theme and keymap until then. A config that fails
        validation ends the app with exit code 2 and `config_error` set."""
        super().__init__()
        self.paths = paths
        self.workspace = Workspace(paths, config, preimport=True)
        self.background = Background()
        """Thread work in flight: drained before the workspace closes (`tui.background`)."""
        self._unvalidated = config is None
        self.config_error: str | None = None
        self.internal_errors: list[BaseException] = []
        self._reported: deque[BaseException] = deque(maxlen=32)
        self._last_notice: tuple[str, str] | None = None
        self._last_notice_at = 0.0
        self.notices: list[tuple[str, str]] = []
        self._screens: dict[str, Screen[Any]] = {}
        self.current_session: str | None = None
        """The session the Live tab shows (the Oracles tab's default)."""
        self.fetch_stop: threading.Event | None = None
        """Set to stop the capable model's fetch in flight (None: none runs)."""
        self.fetch_line: str | list[str] = ""
        """The fetch's progress, as the tab bars show it."""
        for tab in TABS:
            self.add_mode(tab.mode, partial(self.tab_screen, tab.mode))
        for theme in load_themes():
            self.register_theme(theme)
        if config is not None:
            wanted, keymap = config.ui.theme, config.keymap
        else:
            wanted, keymap = _preview_ui(preview or {})
        wanted = os.environ.get("TEXTUAL_THEME") or wanted  # the environment wins
        self.theme = wanted if wanted in self.available_themes else DEFAULT_THEME
        self.served = bool(os.environ.get("DETEKTIV_SERVED"))
        """Running in a browser tab (`detektiv serve`): the browser keymap, no $EDITOR."""
        self.closing = False
        self.quitting = False
        """The app is quitting: screens close under their handlers and thread work; what
        fails then is logged, not notified."""
        """The tab closed while an interrogation ran here: the app ends when it does."""
        if self.served:
            from tui.serve.driver import BROWSER_KEYMAP

            keymap = {**BROWSER_KEYMAP, **keymap}
        self.set_keymap(keymap)

    def on_mount(self) -> None:
        if self._unvalidated:
            self.call_after_refresh(self._validate_config)
        self.call_after_refresh(self._read_policies)
        self.call_after_refresh(self._offer_capable)

    # ---- the capable local model, fetched in the background -----------------------------------

    @in_background("capable-offer")
    def _offer_capable(self) -> None:
        """Start fetching the capable model by itself when a demonstration model would play
        the detective (see `Workspace.capable_offer`); a reason it cannot start is one line."""
        if self.served:  # the tabs of `serve` share its one model: no tab fetches another
            return
        try:
            state = self.workspace.capable_offer()
        except ConfigError:
            return  # the config's own error is shown and ends the app
        if state is None or state.quiet:
            return
        if state.refused is not None:
            self.call_from_thread(
                self.notify, f"The capable local model is not fetched: {state.refused}. The "
                "demonstration model stays.", title="Local model", severity="warning",
                timeout=15)
            return
        self.call_from_thread(self.fetch_capable, state.offer())

    def fetch_capable(self, offer: str = "") -> None:
        """Fetch the capable model on a thread, its progress in every tab bar."""
        if self.fetch_stop is not None:
            return
        self.fetch_stop = stop = threading.Event()
        key = self.key_for("capable-fetch", "F")
        offer = offer or "fetching the capable local model"
        self.notify(f"{offer[0].upper()}{offer[1:]}; it replaces the demonstration model once "
                    f"here. {key} on the Providers tab stops it.", title="Local model",
                    timeout=12)
        self.show_fetch("capable model: starting…")
        self._fetch_thread(stop)

    def stop_fetch(self) -> None:
        """Stop the fetch and remember it (it does not start by itself again)."""
        if self.fetch_stop is not None:
            self.fetch_stop.set()
            self.workspace.models.decline_fetch()

    @in_background("capable-fetch")
    def _fetch_thread(self, stop: threading.Event) -> None:
        shown = [0.0]

        def progress(step: FetchProgress) -> None:
            now = time.monotonic()
            if now - shown[0] >= 0.5 or step.done >= step.total:
                shown[0] = now
                self.call_from_thread(self.show_fetch, step.shorter())

        try:
            self.workspace.models.fetch_capable(progress=progress, cancel=stop)
        except Cancelled:
            if not self.quitting:
                self.call_from_thread(self._fetch_ended, "capable model: stopped", (
                    f"Stopped; what came is kept. {self.key_for('capable-fetch', 'F')} on "
                    "the Providers tab goes on from there."), "information")
            return
        except PullBusy:  # another detektiv fetches it: it will be here
            self.call_from_thread(self._fetch_ended, "", "Another detektiv is fetching the "
                                  "capable local model; it is the default once here.",
                                  "information")
            return
        except DetektivError as exc:
            self.call_from_thread(self._fetch_ended, "", f"{exc.message}. The demonstration "
                                  "model stays.", "warning")
            return
        # a run in flight keeps the router it has; the old one closes with the workspace
        self.workspace.reload_config()
        self.call_from_thread(self._fetch_ended, "", self.workspace.models.fetched_line(),
                              "information")
        self.call_from_thread(self._models_changed)

    def _models_changed(self) -> None:
        """Every screen built so far says again who plays the detective (`ModelsChanged`)."""
        from tui.messages import ModelsChanged

        for screen in self._screens.values():
            screen.post_message(ModelsChanged())

    def _fetch_ended(self, line: str, message: str, severity: SeverityLevel) -> None:
        self.fetch_stop = None
        self.show_fetch(line)
        self.notify(message, title="Local model", severity=severity, timeout=15)
        self.refresh_bindings()

    def show_fetch(self, line: str | list[str]) -> None:
        """Put `line` at the right of every tab bar (several: the same, ever shorter; each
        bar shows the longest that fits)."""
        from tui.widgets.tabs import ModeTabs

        self.fetch_line = line
        for screen in self._screens.values():
            for tabs in screen.query(ModeTabs):
                tabs.show_fetch(line)

    @in_background("config-policies")
    def _read_policies(self) -> None:
        """Read context.toml now, off the first frame: an invalid one is a warning, shown."""
        self.workspace.context_policy  # noqa: B018 - reads it; problems land in `warnings`
        for warning in self.workspace.warnings:
            self.call_from_thread(self.notify, warning, title="Defaults in use",
                                  severity="warning", timeout=12)

    # ---- configuration and storage, loaded off the path to the first frame -------------------

    @property
    def config(self) -> Config:
        """The validated configuration (loaded now if the worker has not done it yet)."""
        return self.workspace.config

    @in_background("config")
    def _validate_config(self) -> None:
        try:
            self.config  # noqa: B018 - loads and validates it
        except ConfigError as exc:
            self.call_from_thread(self._config_failed, exc.message)

    def _config_failed(self, message: str) -> None:
        self.config_error = message
        self.exit(return_code=2)

    # ---- shared engine objects ---------------------------------------------------------------

    def tab_screen(self, mode: str) -> Screen[Any]:
        """The base screen of a tab (built, and its module imported, on first use)."""
        if mode not in self._screens:
            screen = next(t for t in TABS if t.mode == mode).build()
            # a screen just made is styled as it mounts: Textual's whole restyle for a screen
            # that missed a change of the stylesheet (~5 ms of the first frame) has no work
            screen._css_update_count = self._css_update_count
            self._screens[mode] = screen
        return self._screens[mode]

    @property
    def live(self) -> LiveScreen:
        """The Live tab's screen (its module loads on first use, not before the first frame)."""
        from tui.screens.live import LiveScreen

        screen = self.tab_screen("live")
        assert isinstance(screen, LiveScreen)
        return screen

    def key_for(self, binding_id: str, default: str) -> str:
        """The key the user's keymap gives a binding (for texts that name it)."""
        return self._keymap.get(binding_id, default).split(",")[0]

    # ---- messages between screens (the app routes them) ---------------------------------------

    async def on_session_opened(self, message: SessionOpened) -> None:
        """Show a session in the Live tab (following it while it runs); a notes-only one in
        the Oracles tab."""
        if message.notes_only:
            self.current_session = message.directory
            await self.switch_mode("oracles")
            return
        await self.switch_mode("live")  # builds the Live tab the first time
        self.live.attach(message.directory)

    def on_session_shown(self, message: SessionShown) -> None:
        self.current_session = message.directory

    async def on_interrogation_wanted(self, message: InterrogationWanted) -> None:
        await self.switch_mode("live")
        self.live.start_in_case(message.directory)

    async def on_new_session_wanted(self, message: NewSessionWanted) -> None:
        await self.switch_mode("live")
        self.live.focus_form()

    # ---- actions -----------------------------------------------------------------------------

    async def action_tab(self, mode: str) -> None:
        # awaited: a key pressed right after a tab key must reach the new tab, not the old
        # one (`e` on the Sessions table would export a session into the working directory)
        await self.switch_mode(mode)

    def action_help(self) -> None:
        rows: list[tuple[str, str, str]] = []
        tips: dict[str, str] = {}
        seen: set[str] = set()
        for binding in [*self.screen.BINDINGS, *self.BINDINGS]:
            if isinstance(binding, Binding) and binding.id and binding.id not in seen:
                seen.add(binding.id)
                keys = self._keymap.get(binding.id, binding.key)
                shown = " or ".join(self.get_key_display(Binding(key.strip(), ""))
                                    for key in keys.split(","))  # "/", not "slash"
                rows.append((shown, binding.description, binding.id))
                if binding.tooltip:
                    tips[binding.id] = binding.tooltip
        self.push_screen(HelpScreen(rows, tips))

    def action_toggle_theme(self) -> None:
        self.theme = "detektiv-light" if self.theme == "detektiv-dark" else "detektiv-dark"

    def _watch_theme(self, theme_name: str) -> None:
        """Textual's, except before the app runs (the theme set from the config in
        `__init__`): the stylesheet, not read yet, is given the theme's variables to be read
        with, so the whole reparse and restyle Textual asks for (~11 ms of the first frame)
        is left out; the classes the theme gives the app are set as Textual sets them."""
        if self.is_running:
            super()._watch_theme(theme_name)
            return
        theme = self.current_theme
        classes = {name: False for name in self.classes if name.startswith("-theme-")}
        classes[f"-theme-{theme.name}"] = True
        classes["-dark-mode"] = theme.dark
        classes["-light-mode"] = not theme.dark
        self.update_classes(classes, update=False)
        self._refresh_truecolor_filter(self.ansi_theme)
        self.stylesheet.set_variables(self.get_css_variables())  # read with them, first

    def watch_theme(self, theme: str) -> None:
        """Remember the theme in the config file."""
        if not self.is_running or theme == self.config.ui.theme:
            return
        self.config.ui.theme = theme
        try:
            self.workspace.save_config()
        except OSError as exc:
            self.notify(f"Cannot save the theme: {exc.strerror}", severity="warning",
                        markup=False)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The command palette lists every action of this tab and the global ones."""
        yield from super().get_system_commands(screen)
        for tab in TABS:
            yield SystemCommand(f"Go to {tab.label}", f"Switch to the {tab.label} tab",
                                lambda mode=tab.mode: self.switch_mode(mode))
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

    # Textual's own notifications carry Textual markup, which `notify` never renders (the
    # text it shows is usually a model's or a server's): they are said here in plain words.

    def action_help_quit(self) -> None:
        """ctrl+c does not quit (it copies in a field): say which key does."""
        key = self.key_for("quit", "ctrl+q")
        self.notify(f"Press {key} to quit the app.", title="Do you want to quit?")

    def _on_delivery_complete(self, event: events.DeliveryComplete) -> None:
        event.prevent_default()  # Textual's own handler says it in markup
        if event.name == "screenshot":
            where = f" to {event.path}" if event.path is not None else ""
            self.notify(f"Saved the screenshot{where}.", title="Screenshot")

    # ---- the one error funnel ----------------------------------------------------------------

    def _report(self, error: BaseException) -> None:
        """One notification per failure (a worker's error arrives twice: as a state change
        and from the worker); the same message again within a few seconds is only logged."""
        if isinstance(error, WorkerFailed):
            error = error.error
        if self.quitting:  # a screen closed under its own handler: no news to anyone
            log.info("while quitting: %r", error)
            return
        if any(seen is error for seen in self._reported):
            return
        self._reported.append(error)
        if isinstance(error, DetektivError):
            title, message = "Failed", error.message
        elif isinstance(error, OSError):
            title = "File error"
            message = redact(f"{error.strerror or error}: {error.filename or ''}")
        else:
            self.internal_errors.append(error)
            log.error("internal error", exc_info=error)
            detail = redact(strip_control(str(error)).strip())[:160]
            title = "Internal error"
            message = (f"{type(error).__name__}" + (f": {detail}" if detail else "")
                       + f" — the app goes on; details in {log_file(self.paths.log_dir)}")
        now = time.monotonic()
        if self._last_notice == (title, message) and now - self._last_notice_at < 5.0:
            log.info("repeated: %s: %s", title, message)
            return
        self._last_notice, self._last_notice_at = (title, message), now
        self.notify(message, title=title, severity="error", markup=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            self._report(event.worker.error)
        if self.closing and event.worker.group == "live" and event.worker.is_finished:
            self.exit()

    def on_tab_closed(self, _: TabClosed) -> None:
        """The browser tab closed: end now, or once the interrogation run here has ended."""
        live = self._screens.get("live")
        running = live is not None and not getattr(live, "attached", True) and any(
            w.group == "live" and not w.is_finished for w in live.workers)
        if running:
            self.closing = True
            log.info("tab closed; the interrogation goes on until it ends")
        else:
            self.exit()

    def exit(self, result: int | None = None, return_code: int = 0,
             message: RenderableType | None = None) -> None:
        """Quit (see `on_unmount` for the order things stop in)."""
        self.quitting = True
        super().exit(result, return_code, message)

    async def on_unmount(self) -> None:
        """Stop what uses the workspace, then close it: workers cancelled and awaited, thread
        work drained (a thread outlives its cancelled worker), and only then the stores."""
        self.quitting = True
        if self.fetch_stop is not None:  # stopped, not declined: it goes on next time
            self.fetch_stop.set()
        self.workers.cancel_all()
        started = [w.wait() for w in self.workers if w.state is not WorkerState.PENDING]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*started, return_exceptions=True),
                                   SHUTDOWN_WAIT)
        still = await self.background.drain(timeout=SHUTDOWN_WAIT)
        if still:
            log.warning("%d thread(s) still ran after %.0f s; closing the stores under them",
                        still, SHUTDOWN_WAIT)
        await self.workspace.aclose()


def _preview_ui(raw: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """Theme and keymap from the unvalidated TOML (anything odd falls back to defaults)."""
    ui = raw.get("ui")
    theme = ui.get("theme") if isinstance(ui, dict) else None
    keymap = raw.get("keymap")
    if not isinstance(keymap, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in keymap.items()
    ):
        keymap = {}
    return (theme if isinstance(theme, str) else DEFAULT_THEME), keymap


def build_app(paths: Paths, app_class: type[DetektivApp] | None = None) -> DetektivApp:
    """The app as `detektiv` opens it: the config file is read (TOML only) before the screen is
    taken, so a syntax error is one line on stderr; it is validated right after the first
    frame. Raises `ConfigError` for a file that cannot be read or parsed."""
    path = paths.config_file
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        from engine import load_config  # here: validating imports pydantic, which the first
        # frame does not wait for (bench/startup.py)

        load_config(paths)  # raises the ConfigError that names the file and the problem
        raw = {}
    return (app_class or DetektivApp)(paths, preview=raw)


def run_app(paths: Paths) -> int:
    """Open the app full-screen; returns its exit code (2 with one line on stderr for a bad
    config)."""
    app = build_app(paths)
    divert_native_stderr(log_file(paths.log_dir))
    harden_input_decoder()
    app.run()
    if app.config_error is not None:
        raise ConfigError(app.config_error)
    return app.return_code or 0
