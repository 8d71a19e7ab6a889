"""A readable transcript on stdout from interrogation events, live or replayed from a log.

Model text passes through `strip_control` on its way to the terminal; notes about providers
go to stderr so stdout stays the transcript.
"""

from __future__ import annotations

import sys
from typing import TextIO

from engine import (
    ANSWER_CUT_OFF,
    NO_ANSWER,
    AnswerCutOff,
    AnswerDelta,
    AnswerUnusable,
    AuditReady,
    AuditResult,
    Discarded,
    Finished,
    GapAnalysis,
    GapAnalysisReady,
    InterrogationEvent,
    PairCompleted,
    Phase,
    ProviderChosen,
    QuestionDelta,
    Started,
    TrailAdded,
    completeness,
    contradiction,
    in_transcript,
    note,
    round_title,
    strip_control,
    trail_line,
    verdict_line,
)

__all__ = ["StreamPrinter", "TranscriptPrinter"]

_PREFIX = {"question": "Q", "answer": "A"}


class StreamPrinter:
    """Writes streamed model text to stdout as it comes, control characters stripped."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.at_line_start = True

    def write(self, text: str) -> None:
        """Write model text (control characters removed) and flush."""
        text = strip_control(text)
        if text:
            self.out.write(text)
            self.out.flush()
            self.at_line_start = text.endswith("\n")

    def end_line(self) -> None:
        """Start a new line unless at the start of one."""
        if not self.at_line_start:
            self.write("\n")

    def note(self, message: str) -> None:
        """One line on stderr, after ending the current stdout line."""
        self.end_line()
        print(f"detektiv: {strip_control(message)}", file=self.err, flush=True)


class TranscriptPrinter(StreamPrinter):
    """Prints events as they come; `status` holds the final status once `Finished` is seen."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        super().__init__(out, err)
        self.phase = ""
        self.status: str | None = None
        self.session_id = ""

    def show(self, event: InterrogationEvent) -> None:
        """Print one event."""
        match event:
            case Started(session_id=sid, hypothesis=text, iteration_limit=limit,
                         resumed_after=after):
                self.session_id = sid
                self.end_line()
                if after is None:
                    self.write(f"Session {sid[:8]} · up to {limit} rounds\nHypothesis: "
                               f"{text.strip()}\n")
                else:
                    self.write(f"Session {sid[:8]} resumed after round {after}\n")
            case Phase(phase=phase, sequence=sequence):
                self.phase = phase
                self.end_line()
                if phase == "question":
                    self.write(f"\n── {round_title(sequence)} " + "─" * 40 + "\n")
                elif phase == "audit":
                    self.write("\n── Audit " + "─" * 44 + "\n")
            case ProviderChosen(role=role, provider=provider):
                if self.phase in _PREFIX and (role == "detective") == (self.phase == "question"):
                    self.end_line()
                    self.write(f"{_PREFIX[self.phase]} [{provider}] ")
            case QuestionDelta(text=text) | AnswerDelta(text=text):
                self.write(text)
            case AnswerCutOff():
                self.end_line()
                self.write(f"  ({ANSWER_CUT_OFF})\n")
            case AnswerUnusable(problem=problem) if problem == NO_ANSWER:
                self.write(f"({NO_ANSWER})\n")  # in the transcript, where the answer would be
            case AnswerUnusable(problem=problem):
                self.end_line()
                self.write(f"  ({problem})\n")
            case Discarded(provider=provider, text=text, reason=reason):
                self.end_line()
                self.write(f"  (the {len(text)} characters above from {provider} are discarded:"
                           f" {reason})\n")
            case TrailAdded(entry=entry) if in_transcript(entry):
                self.note(trail_line(entry))
            case GapAnalysisReady(analysis=analysis):
                self._analysis(analysis)
            case AuditReady(audit=audit):
                self._audit(audit)
            case Finished(status=status, reason=reason):
                self.status = status
                self.end_line()
                why = f": {reason}" if reason and status != "cancelled" else ""
                self.write(f"\nSession {self.session_id} {status}{why}\n")
            case PairCompleted() | TrailAdded():
                pass
            case _:  # any other event: its one line from engine.report, if it has one
                line = note(event)
                if line:
                    self.note(line)

    def _analysis(self, analysis: GapAnalysis) -> None:
        self.end_line()
        self.write(f"  {completeness(analysis)}\n")
        for gap in analysis.gaps:
            self.write(f"  - {gap.line}\n")

    def _audit(self, audit: AuditResult) -> None:
        self.end_line()
        verdict = verdict_line(audit)
        if verdict:
            self.write(verdict[:1].upper() + verdict[1:] + "\n")
        self.write(f"Consistency score: {audit.consistency_score}/100\n")
        for item in audit.contradictions:
            self.write(f"Contradiction {contradiction(item)}\n")
        for gap in audit.remaining_gaps:
            self.write(f"Remaining gap · {gap.line}\n")
        self.write(f"Summary:\n{audit.summary.strip()}\n")
