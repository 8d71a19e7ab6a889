"""The case agent's typed events, and its event log (seed 001's events table).

Every step of a run is one event: the UI and the CLI `match` on them, `--json` prints their
`to_json()`, and `AgentLog` appends each (but the token deltas: the turn's whole text is in
`TurnEnded`) to `data_dir/agent/runs/{started}_{run_id}.jsonl`, one JSON object a line, so a run
can be replayed (`read_run`) and audited. Nothing in it comes from the configuration (no key,
no URL).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TextIO

from pydantic import Field, TypeAdapter, ValidationError

from engine.agent.signals import Signal
from engine.models.event import Event, journal_line, read_journal_line

__all__ = [
    "STOP_REASONS",
    "AgentAttempt",
    "AgentDelta",
    "AgentEvent",
    "AgentLog",
    "AgentNote",
    "AgentStarted",
    "AgentStopped",
    "FallbackDecided",
    "NodeChanged",
    "NoSignal",
    "ReferenceResolved",
    "SignalInvalid",
    "SignalParsed",
    "StopReason",
    "ToolCalled",
    "ToolFinished",
    "TurnEnded",
    "TurnStarted",
    "event_from_json",
    "read_run",
]

StopReason = Literal["context_sufficient", "partial_answer", "stuck", "turn_limit",
                     "need_capability", "delegation_recommended", "fallback_stop", "error",
                     "cancelled"]
STOP_REASONS: tuple[StopReason, ...] = (
    "context_sufficient", "partial_answer", "stuck", "turn_limit", "need_capability",
    "delegation_recommended", "fallback_stop", "error", "cancelled")


class _Event(Event):
    """A case-agent run's event (journaled to the run's log)."""


class AgentStarted(_Event):
    """A run began: the question, how it was classified, the segments of its prompt."""

    type: Literal["started"] = "started"
    run_id: str
    question: str
    conversation_id: str | None
    query_type: str
    confidence: float
    keywords: list[str]
    needs: list[str]
    segments: list[str]
    turn_limit: int


class ReferenceResolved(_Event):
    """Which session "that session" / "the last one" means, and where that came from."""

    type: Literal["reference"] = "reference"
    session: str | None
    source: str
    reason: str


class NodeChanged(_Event):
    """The behaviour tree's current node (its running leaf) changed."""

    type: Literal["node"] = "node"
    node: str
    path: list[str]


class TurnStarted(_Event):
    type: Literal["turn"] = "turn"
    turn: int
    limit: int
    tool_free: bool


class AgentAttempt(_Event):
    """The turn is now streaming from `provider` (after a failover: from the start again)."""

    type: Literal["attempt"] = "attempt"
    turn: int
    provider: str


class AgentDelta(_Event):
    """A piece of the turn's reply, as the model streams it (not logged)."""

    type: Literal["delta"] = "delta"
    turn: int
    text: str


class AgentNote(_Event):
    """A line worth showing beside the reply: a provider switch, a trimmed prompt."""

    type: Literal["note"] = "note"
    turn: int
    text: str


class TurnEnded(_Event):
    """The turn's whole reply (`text`, as the model wrote it) and what a reader is shown
    (`shown`: without the signal and tool tags)."""

    type: Literal["turn_end"] = "turn_end"
    turn: int
    text: str
    shown: str
    finish: str
    provider: str | None


class SignalParsed(_Event):
    type: Literal["signal"] = "signal"
    turn: int
    signal: Signal
    step: str
    notes: list[str]


class SignalInvalid(_Event):
    """A signal block was there but could not be used; the turn counts as one without."""

    type: Literal["signal_invalid"] = "signal_invalid"
    turn: int
    reason: str
    raw: str
    step: str | None


class NoSignal(_Event):
    type: Literal["no_signal"] = "no_signal"
    turn: int
    turns_without_signal: int


class FallbackDecided(_Event):
    """After turns without a signal, the fallback classifier's verdict on the last reply."""

    type: Literal["fallback"] = "fallback"
    turn: int
    go_on: bool
    reason: str


class ToolCalled(_Event):
    type: Literal["tool_call"] = "tool_call"
    turn: int
    name: str
    argument: str


class ToolFinished(_Event):
    """A tool's result: `output` as the tool gave it (the model got it fenced and bounded)."""

    type: Literal["tool_result"] = "tool_result"
    turn: int
    name: str
    argument: str
    ok: bool
    summary: str
    truncated: bool
    output: str


class AgentStopped(_Event):
    """The run's end: always one, always last, with its reason and the evidence."""

    type: Literal["stop"] = "stop"
    reason: StopReason
    evidence: list[str]
    node: str
    answer: str
    turns: int
    signals: list[str] = Field(default_factory=list)


AgentEvent = (AgentStarted | ReferenceResolved | NodeChanged | TurnStarted | AgentAttempt
              | AgentDelta | AgentNote | TurnEnded | SignalParsed | SignalInvalid | NoSignal
              | FallbackDecided | ToolCalled | ToolFinished | AgentStopped)

_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(
    Annotated[AgentEvent, Field(discriminator="type")]
)


def event_from_json(data: dict[str, Any]) -> AgentEvent:
    """The event a `to_json()` made (`ValueError` for an unknown type or bad fields)."""
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise ValueError(f"bad {data.get('type')} event: {exc.errors()[0]['msg']}") from None


class AgentLog:
    """Appends a run's events to its log file (each line flushed; a crash loses at most the
    line being written, and `read_run` skips a torn last line)."""

    def __init__(self, directory: Path, run_id: str) -> None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%d_%H-%M-%S")
        self.path = directory / f"{stamp}_{run_id}.jsonl"
        self.problem: str | None = None
        """Why the log cannot be written (the run goes on without it), or None."""
        self._file: TextIO | None = None
        self._seq = 0
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (see close)
        except OSError as exc:
            self.problem = f"the run's event log cannot be written ({self.path}: {exc.strerror})"

    def write(self, event: AgentEvent) -> None:
        if isinstance(event, AgentDelta) or self._file is None or self._file.closed:
            return
        self._seq += 1
        try:
            self._file.write(journal_line(self._seq, time.time(), event).decode("utf-8"))
            self._file.flush()
        except OSError as exc:  # a full disk stops the log, not the run
            self.problem = f"the run's event log stopped ({exc.strerror})"
            self._file.close()

    def close(self) -> None:
        if self._file is not None and not self._file.closed:
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
            except OSError:
                pass
            self._file.close()


def read_run(path: Path) -> list[AgentEvent]:
    """A logged run's events in order (a torn or unreadable line is skipped)."""
    events: list[AgentEvent] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            events.append(read_journal_line(line, event_from_json)[2])
        except (ValueError, KeyError, TypeError):
            continue
    return events
