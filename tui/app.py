"""The terminal app. For now one screen: ask through the router and watch the answer stream.

The Sessions, Live and Providers tabs arrive with the terminal-app issue; this app already
follows its rules: model text is plain data (a `Log`, no markup, control characters
stripped), network work runs in workers, and every failure ends as a notification.
"""

from __future__ import annotations

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header, Input, Log, Static
from textual.worker import Worker, WorkerState

from engine import (
    Attempt,
    Config,
    DetektivError,
    Done,
    PartialDiscarded,
    Paths,
    ProviderEvent,
    Router,
    StreamRequest,
    TokenDelta,
    discover_ollama,
    load_config,
    redact,
    strip_control,
)
from engine.logs import log_file
from tui.themes import load_themes

__all__ = ["DetektivApp", "run_app"]

DEFAULT_THEME = "detektiv-dark"


class DetektivApp(App[int]):
    """detektiv's Textual application."""

    CSS_PATH = "app.tcss"
    TITLE = "detektiv"
    BINDINGS = [
        Binding("escape", "stop", "Stop", id="stop"),
        Binding("ctrl+l", "clear", "Clear", id="clear"),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
    ]

    def __init__(self, paths: Paths, config: Config) -> None:
        super().__init__()
        self.paths = paths
        self.config = config
        self.router: Router | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("provider: choosing…", id="provider", markup=False)
        yield Log(id="answer")
        yield Static("", id="status", markup=False)
        yield Input(placeholder="Ask the model…  (Enter sends)", id="prompt")
        yield Footer()

    def on_mount(self) -> None:
        for theme in load_themes():
            self.register_theme(theme)
        wanted = self.config.ui.theme
        self.theme = wanted if wanted in self.available_themes else DEFAULT_THEME
        self.query_one("#prompt", Input).focus()
        self.choose_provider()

    @work(exclusive=True, group="choose", exit_on_error=False)
    async def choose_provider(self) -> None:
        """Build the router (probing Ollama off the UI path) and show its first choice."""
        await discover_ollama(self.config)
        self.router = Router(self.config, self.paths)
        chain = self.router.chain("default")
        label = self.router.providers[chain[0]].label if chain else "none enabled"
        self.query_one("#provider", Static).update(f"provider: {label}")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        prompt = event.value.strip()
        if not prompt:
            return
        event.input.clear()
        self.ask(prompt)

    @work(exclusive=True, group="ask", exit_on_error=False)
    async def ask(self, prompt: str) -> None:
        """Stream one answer into the log, through the router."""
        answer = self.query_one("#answer", Log)
        status = self.query_one("#status", Static)
        if self.router is None:
            status.update("no provider yet")
            return
        answer.write(f"\n> {strip_control(prompt)}\n")
        try:
            async for event in self.router.stream(StreamRequest.of(prompt)):
                match event:
                    case TokenDelta(text):
                        answer.write(strip_control(text))
                    case Attempt(label=label):
                        self.query_one("#provider", Static).update(f"provider: {label}")
                        status.update(f"{label} is answering…")
                    case PartialDiscarded(provider=name):
                        answer.write(f"\n[discarded: the partial answer from {name} above]\n")
                    case ProviderEvent(type="provider_switch", from_provider=old, to_provider=new):
                        self.notify(f"{old} failed; switched to {new}", title="Provider switch",
                                    severity="warning", markup=False)
                    case Done(finish_reason=reason):
                        status.update(f"done ({reason})")
        except DetektivError as exc:
            status.update(f"failed: {exc.message}")
            self.notify(exc.message, title="No provider answered", severity="error",
                        markup=False)
        finally:
            answer.write("\n")

    def action_stop(self) -> None:
        """Stop the answer being streamed."""
        if self.workers.cancel_group(self, "ask"):
            self.query_one("#status", Static).update("stopped")

    def action_clear(self) -> None:
        """Clear the answers."""
        self.query_one("#answer", Log).clear()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one error funnel: a worker that failed becomes a notification, not a crash."""
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            self.log.error(repr(error))
            message = redact(f"{type(error).__name__}: {error}")
            self.notify(message, title="Something failed", severity="error", markup=False)

    async def on_unmount(self) -> None:
        if self.router is not None:
            await self.router.aclose()


def run_app(paths: Paths) -> int:
    """Open the app full-screen; returns its exit code."""
    config = load_config(paths)  # a bad config stops here, before the screen is taken
    from tui._stderr import divert_native_stderr

    divert_native_stderr(log_file(paths.log_dir))
    app = DetektivApp(paths, config)
    app.run()
    return app.return_code or 0
