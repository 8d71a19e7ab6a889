"""How a routed stream's happenings read, for every front end and every operation alike: a
failover, a skip, a discarded partial reply, a trimmed prompt, a reply cut at its limit.

The interrogation keeps these as audit-trail entries (`trail_line` words them); oracles, the
case agent and `ask` show them as notes beside the text with the words below.
"""

from __future__ import annotations

from engine.context.budget import FitReport
from engine.providers import FILTERED, Done
from engine.routing.events import Fitted, PartialDiscarded, ProviderEvent, RouterEvent
from engine.text import strip_control

__all__ = ["CUT_AT_LIMIT", "context_trim_note", "cut_note", "discarded_note", "stream_note",
           "switch_note", "trim_note"]

CUT_AT_LIMIT = "stopped: max tokens reached"


def switch_note(old: str | None, new: str | None) -> str:
    """`"switching from a to b"`."""
    return f"switching from {old} to {new}"


def discarded_note(provider: str) -> str:
    """What a reader is told when the text shown so far is void."""
    return f"the partial reply from {provider} is discarded; starting over"


def trim_note(report: FitReport) -> str | None:
    """`"3 earlier turns of the conversation left out to fit p's window of 2048 tokens"`,
    `"the reply may take at most 300 tokens (asked 1000) to fit p's context window of 1024
    tokens"`, both, or None when the whole prompt was sent with the reply's room asked."""
    notes = [note for note in (_turns_note(report), _reply_note(report)) if note]
    return "; ".join(notes) if notes else None


def _reply_note(report: FitReport) -> str | None:
    if not report.reply_lowered:
        return None
    return (f"the reply may take at most {report.reply} tokens (asked {report.asked_reply}) "
            f"to fit {report.provider}'s context window of {report.window} tokens")


def _turns_note(report: FitReport) -> str | None:
    if not report.trim:
        return None
    left_out = len(report.trim.omitted)
    if not left_out:
        return (f"earlier turns shortened to fit {report.provider}'s window of "
                f"{report.window} tokens")
    return (f"{left_out} earlier turn{'s' if left_out != 1 else ''} of the conversation left "
            f"out to fit {report.provider}'s window of {report.window} tokens")


def context_trim_note(window: int, lines: list[str]) -> str:
    """A case context cut to fit a window: what was left out."""
    return f"context trimmed to fit {window} tokens: " + "; ".join(lines)


def cut_note(fitted: FitReport | None = None) -> str:
    """A reply stopped at its limit: `CUT_AT_LIMIT`, and the limit's cause when the window
    lowered the reply's room (`fitted`, how the call was fitted)."""
    if fitted is None or not fitted.reply_lowered:
        return CUT_AT_LIMIT
    return (f"{CUT_AT_LIMIT}: {fitted.reply} tokens, lowered from {fitted.asked_reply} to fit "
            f"{fitted.provider}'s context window of {fitted.window} tokens")


def stream_note(event: RouterEvent, fitted: FitReport | None = None) -> str | None:
    """The note a router event is worth beside the reply, or None (text, attempts, usage);
    `fitted`: how the call being read was fitted (a cut reply then says its room was
    lowered)."""
    match event:
        case ProviderEvent(type="provider_switch", from_provider=old, to_provider=new):
            return switch_note(old, new)
        case ProviderEvent(from_provider=name, reason=reason):
            return f"{name}: {strip_control(reason)}"
        case PartialDiscarded(provider=name):
            return discarded_note(name)
        case Fitted(report=report):
            return trim_note(report)
        case Done(finish_reason="length"):
            return cut_note(fitted)
        case Done(finish_reason="content_filter"):
            return f"stopped: {FILTERED}"
    return None
