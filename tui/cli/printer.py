"""A readable transcript on stdout from interrogation events, live or replayed from a log.

Model text passes through `strip_control` on its way to the terminal; notes about providers
go to stderr so stdout stays the transcript.
"""

from __future__ import annotations

import sys
from typing import TextIO

from engine import (
    Append,
    Block,
    InterrogationEvent,
    Narration,
    Reasoning,
    Void,
    reasoning_title,
    strip_control,
)

__all__ = ["StreamPrinter", "TranscriptPrinter"]

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
    """Prints an interrogation's blocks (`engine.report.blocks`) as they come: the transcript
    on stdout, notes on stderr. `status` is the final status once the run has ended."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None,
                 show_reasoning: bool = False) -> None:
        super().__init__(out, err)
        self.narration = Narration()
        self.show_reasoning = show_reasoning
        """Print a reasoning model's thinking (dimmed on a terminal) on stderr."""
        self._thinking: tuple[str, str, int | None] | None = None  # the call it belongs to
        self._held = ""  # reasoning not yet printed: a line is printed whole

    @property
    def status(self) -> str | None:
        return self.narration.status

    def show(self, event: InterrogationEvent) -> None:
        """Print one event."""
        if isinstance(event, Reasoning):
            if self.show_reasoning:
                self._reason(event)
            return
        self._flush_reasoning()
        for piece in self.narration.pieces(event):
            self._print(piece)

    def _reason(self, event: Reasoning) -> None:
        """Reasoning on stderr, whole lines at a time, under a title per call."""
        call = (event.role, event.phase, event.sequence)
        if call != self._thinking:
            self._flush_reasoning()
            self._thinking = call
            self._dim(f"({reasoning_title(event.role)})")
        self._held += event.text
        *lines, self._held = self._held.split("\n")
        for line in lines:
            self._dim(line)

    def _flush_reasoning(self) -> None:
        if self._held.strip():
            self._dim(self._held)
        self._held = ""
        self._thinking = None

    def _dim(self, line: str) -> None:
        self.end_line()
        text = "  " + strip_control(line)
        if self.err.isatty():
            text = f"\x1b[2m{text}\x1b[0m"
        print(text, file=self.err, flush=True)

    def _print(self, piece: Block | Append | Void) -> None:
        match piece:
            case Append(text):
                self.write(text)
            case Void(line):
                self.end_line()
                self.write(f"  ({line})\n")
            case Block(kind="note", text=text):
                self.note(text)
            case Block(kind="mark", text=text):
                self.end_line()
                self.write(f"  ({text})\n")
            case Block(kind="heading", title=title, text=text):
                self.end_line()
                self.write(f"\n── {title} {'─' * max(4, 52 - len(title))}\n")
                if text.strip():
                    self.write(text.strip() + "\n")
            case Block(kind="question" | "answer", title=title, text=text):
                self.end_line()
                self.write(f"[{title}] " + (text.strip() + "\n" if text.strip() else ""))
            case Block(kind="end", text=text):
                self.end_line()
                self.write(f"\n{text}\n")
            case Block(title=title, text=text):  # an analysis, the audit, its summary
                self.end_line()
                self.write(f"{title}:\n" + "".join(f"  {line}\n"
                                                   for line in text.strip().splitlines()))
