"""The case agent's words, for the CLI and the app alike: one line per event worth a line, and
the filter that keeps signal and tool tags out of a streamed reply.

Model text in these lines is cleaned with `strip_control` and shortened; a front end still
renders them as plain text, never as markup.
"""

from __future__ import annotations

import re

from engine.agent.events import (
    AgentAttempt,
    AgentEvent,
    AgentNote,
    AgentStarted,
    AgentStopped,
    FallbackDecided,
    NodeChanged,
    NoSignal,
    ReferenceResolved,
    SignalInvalid,
    SignalParsed,
    ToolCalled,
    ToolFinished,
    TurnStarted,
)
from engine.agent.signals import Signal
from engine.text import one_line, strip_control

__all__ = ["TagFilter", "event_line", "signal_line", "stop_lines"]


def signal_line(signal: Signal, step: str | None = None) -> str:
    """`need_turn 0.60: reason='read the audit'` (and how it was read, unless plain XML)."""
    how = f" [{step}]" if step and step != "xml" else ""
    return f"{signal.type} {signal.confidence:.2f}{how}: {strip_control(signal.fields_text(60))}"


def stop_lines(stop: AgentStopped) -> list[str]:
    """The stop's reason, then each piece of evidence."""
    return [f"stop: {stop.reason} (node {stop.node}, {stop.turns} turn"
            f"{'s' if stop.turns != 1 else ''})",
            *(f"  evidence: {one_line(item, 200)}" for item in stop.evidence)]


def event_line(event: AgentEvent) -> str | None:
    """The one line an event is shown as beside the reply, or None (deltas, turn ends)."""
    match event:
        case AgentStarted():
            keywords = ", ".join(event.keywords) or "none"
            needs = ", ".join(event.needs) or "nothing"
            return (f"{event.query_type} question (confidence {event.confidence:.2f}; "
                    f"keywords: {keywords}) → needs {needs}; prompt: "
                    f"{', '.join(event.segments)}")
        case ReferenceResolved(session=session, source=source, reason=reason):
            if session is None:
                return f"reference: not resolved ({reason})"
            return f"reference: session {session} ({source}: {reason})"
        case NodeChanged(node=node):
            return f"node: {node}"
        case TurnStarted(turn=turn, limit=limit, tool_free=tool_free):
            return f"── turn {turn}/{limit}" + (" (summary, no tools)" if tool_free else "")
        case AgentAttempt(provider=provider):
            return f"asking {provider}"
        case AgentNote(text=text):
            return one_line(text, 200)
        case SignalParsed(signal=signal, step=step):
            return "signal " + signal_line(signal, step)
        case SignalInvalid(reason=reason, step=step):
            return f"signal invalid ({step or 'not read'}): {one_line(reason, 120)}"
        case NoSignal(turns_without_signal=count):
            return f"no signal ({count} turn{'s' if count != 1 else ''} in a row)"
        case FallbackDecided(go_on=go_on, reason=reason):
            return f"fallback: {'go on' if go_on else 'stop'} ({one_line(reason, 120)})"
        case ToolCalled(name=name, argument=argument):
            return f"tool {name}({one_line(argument, 60)!r})"
        case ToolFinished(name=name, ok=ok, summary=summary, truncated=truncated):
            cut = ", cut for the model" if truncated else ""
            return f"  → {name}: {one_line(summary, 100)}{cut}" if ok else \
                f"  → {name} failed: {one_line(summary, 100)}"
        case AgentStopped():
            return stop_lines(event)[0]
    return None


_HIDDEN = ("signal", "tool")


class TagFilter:
    """Streams a reply's text without its `<signal …>…</signal>` and `<tool …>…</tool>`
    blocks (they are shown apart, once parsed): text that may begin a tag is held back until
    it is known not to."""

    def __init__(self) -> None:
        self._buffer = ""
        self._inside: str | None = None

    def feed(self, text: str) -> str:
        self._buffer += text
        out: list[str] = []
        while self._buffer:
            if self._inside is not None:
                close = re.search(rf"<\s*/\s*{self._inside}\s*>", self._buffer, re.IGNORECASE)
                if close is None:
                    keep = self._buffer.rfind("<")
                    self._buffer = self._buffer[keep:] if keep >= 0 else ""
                    break
                self._buffer = self._buffer[close.end():]
                self._inside = None
                continue
            start = self._buffer.find("<")
            if start < 0:
                out.append(self._buffer)
                self._buffer = ""
                break
            out.append(self._buffer[:start])
            self._buffer = self._buffer[start:]
            head = self._buffer[1:].lstrip().lower()
            name = next((n for n in _HIDDEN if head.startswith(n)
                         and head[len(n):len(n) + 1] in (" ", "\t", "\n", ">", "/")), None)
            if name is None:
                if any(n.startswith(head[:len(n)]) and len(head) <= len(n) for n in _HIDDEN):
                    break  # "<sig" or "<signal" so far: wait for more
                out.append("<")
                self._buffer = self._buffer[1:]
                continue
            end = self._buffer.find(">")
            if end < 0:
                break  # the opening tag is still coming
            if self._buffer[end - 1] == "/":  # <tool name="x"/>
                self._buffer = self._buffer[end + 1:]
            else:
                self._inside, self._buffer = name, self._buffer[end + 1:]
        return "".join(out)

    def flush(self) -> str:
        """What was held back, at the end of the turn (an unclosed tag is dropped)."""
        rest = "" if self._inside is not None else self._buffer
        self._buffer, self._inside = "", None
        head = rest[1:].lstrip().lower()
        if rest.startswith("<") and any(head.startswith(n) for n in _HIDDEN):
            return ""
        return rest
