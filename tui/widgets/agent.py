"""The case agent in the Oracles tab: the conversation streaming on the left; on the right the
tree's current node, the signals as they are parsed, and the stop with its evidence.

The reply streams without its signal and tool tags (`TagFilter`); each tool call is one folded
line (`→ search_vault: 2 hits in 1 session`), its output shown in full when tool outputs are
unfolded (the screen's toggle re-renders the kept events). Model text and tool output are
data: every view is a `TranscriptView` or plain `Content`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Input, Static

from engine import (
    AgentDelta,
    AgentRun,
    AgentStarted,
    AgentStopped,
    FallbackDecided,
    NodeChanged,
    NoSignal,
    SignalInvalid,
    SignalParsed,
    TagFilter,
    ToolFinished,
    TurnEnded,
    TurnStarted,
    event_line,
    signal_line,
    stop_lines,
)
from tui.funnel import Guarded
from tui.widgets.transcript import TranscriptView

__all__ = ["AgentPanel"]

_HINT = ("Ask the case agent about your sessions: it searches the vault (every session's Q&A, "
         "audits, notes and oracle answers) over several turns and says why it stopped.")


class AgentPanel(Guarded, Vertical):
    """See the module docstring; `show` consumes one run's events."""

    DEFAULT_CSS = """
    AgentPanel { height: 1fr; }
    AgentPanel #agent-body { height: 1fr; }
    AgentPanel #agent-log { width: 1fr; border: round $panel-lighten-2; }
    AgentPanel #agent-side { width: 44; }
    AgentPanel #agent-node { height: auto; padding: 0 1; color: $accent; }
    AgentPanel #agent-signals { height: 1fr; border: round $primary 40%; }
    AgentPanel #agent-stop { height: auto; max-height: 10; padding: 0 1; }
    AgentPanel #agent-input { dock: bottom; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.conversation_id: str | None = None
        """The conversation the next question continues (None: a new one)."""
        self.unfolded = False
        self.turns: list[list[Any]] = []
        """Every event but the deltas, per question asked (kept to re-render on unfold)."""
        self.stop: AgentStopped | None = None
        self._filter = TagFilter()
        self._streaming = False

    def compose(self) -> ComposeResult:
        with Horizontal(id="agent-body"):
            yield TranscriptView(id="agent-log")
            with Vertical(id="agent-side"):
                yield Static(Content("node: —"), id="agent-node")
                yield TranscriptView(id="agent-signals")
                yield Static(Content(""), id="agent-stop")
        yield Input(placeholder="Ask the case agent (Enter)", id="agent-input")

    def on_mount(self) -> None:
        self.query_one("#agent-log", TranscriptView).add("note", _HINT)

    @property
    def conversation(self) -> TranscriptView:
        return self.query_one("#agent-log", TranscriptView)

    def new_conversation(self) -> None:
        self.conversation_id = None
        self.turns = []
        self.stop = None
        self.conversation.clear()
        self.conversation.add("note", _HINT)
        self.query_one("#agent-signals", TranscriptView).clear()
        self.query_one("#agent-stop", Static).update(Content(""))
        self.query_one("#agent-node", Static).update(Content("node: —"))

    @property
    def running(self) -> bool:
        """Whether a run is under way."""
        return any(w.group == "agent-run" and w.is_running for w in self.workers)

    def cancel(self) -> bool:
        """Cancel the run under way (it ends with its stop, `cancelled`); False if none."""
        running = [w for w in self.workers if w.group == "agent-run" and w.is_running]
        for worker in running:
            worker.cancel()  # cancelling a run is cancelling its task
        return bool(running)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id != "agent-input" or not event.value.strip():
            return
        if self.running:
            self.notify("The agent is still answering (esc cancels).", severity="warning")
            return
        event.input.value = ""
        self.ask(event.value)

    @work(exclusive=True, group="agent-run", exit_on_error=False)
    async def ask(self, question: str) -> None:
        """Run the case agent on `question` in this panel's conversation."""
        run = await self.host.workspace.agent.run(question,
                                                       conversation=self.conversation_id)
        await self.show(run)

    def toggle_tools(self) -> bool:
        """Fold or unfold tool outputs; returns whether they are now unfolded."""
        self.unfolded = not self.unfolded
        self.conversation.clear()
        for events in self.turns:
            for event in events:
                self._draw(event, replay=True)
        return self.unfolded

    async def show(self, run: AgentRun) -> None:
        """Stream one run into the views; the conversation continues with its id."""
        self.conversation_id = run.conversation_id
        self.turns.append([])
        self.stop = None
        self.query_one("#agent-stop", Static).update(Content("running…"))
        signals = self.query_one("#agent-signals", TranscriptView)
        signals.add("heading", run.question[:80], title="question")
        try:
            async for event in run.events():
                self._take(event)
        except asyncio.CancelledError:
            if run.stop is not None:  # cancelled: the run's stop says so, as a stop does
                self._take(run.stop)
            raise

    def _take(self, event: Any) -> None:
        if not isinstance(event, AgentDelta):
            self.turns[-1].append(event)
        self._side(event)
        self._draw(event)

    def _side(self, event: Any) -> None:
        signals = self.query_one("#agent-signals", TranscriptView)
        match event:
            case NodeChanged(node=node, path=path):
                self.query_one("#agent-node", Static).update(
                    Content(f"node: {node}\n{' › '.join(path[:-1])}"))
            case SignalParsed(turn=turn, signal=signal, step=step):
                signals.add("answer", signal_line(signal, step), title=f"turn {turn}")
            case SignalInvalid() | NoSignal() | FallbackDecided():
                signals.add("note", event_line(event) or "")
            case AgentStopped():
                self.stop = event
                self.query_one("#agent-stop", Static).update(
                    Content("\n".join(stop_lines(event))))
                self.query_one("#agent-node", Static).update(Content(f"node: {event.node} "
                                                                     "(stopped)"))

    def _draw(self, event: Any, replay: bool = False) -> None:
        log = self.conversation
        match event:
            case AgentStarted(question=question):
                log.add("question", question, title="You")
                log.add("note", event_line(event) or "")
            case TurnStarted(turn=turn, limit=limit, tool_free=tool_free):
                self._filter = TagFilter()
                log.start_stream("answer", title=f"Agent · turn {turn}/{limit}"
                                 + (" (summary)" if tool_free else ""))
                self._streaming = True
            case AgentDelta(text=text) if self._streaming:
                log.append(self._filter.feed(text))
            case TurnEnded(shown=shown):
                if replay:
                    log.append(shown)
                else:
                    log.append(self._filter.flush())
                if self._streaming:
                    log.end_stream()
                    self._streaming = False
            case ToolFinished(output=output):
                log.add("note", f"{event_line(event)}")
                if self.unfolded:
                    log.add("analysis", output, title=f"{event.name} output")
            case AgentStopped():
                log.add("note", "\n".join(stop_lines(event)))
            case NodeChanged() | SignalParsed() | NoSignal() | AgentDelta():
                pass
            case _:
                line = event_line(event)
                if line:
                    log.add("note", line)
