"""The Oracles tab's answers: one column per oracle, each streaming its answer as it comes.

Notes about a call (a failover, a trimmed context, a timeout) are shown under the answer, never
inside it; an answer asked again (a failover, an empty reply) is struck through and started
anew. Model text is data: each column is a `TranscriptView`.
"""

from __future__ import annotations

from textual.containers import Horizontal

from engine import (
    Consultation,
    OracleAttempt,
    OracleDelta,
    OracleFailed,
    OracleNote,
    OracleSaved,
    snapshot_line,
)
from tui.funnel import Guarded
from tui.widgets.transcript import TranscriptView

__all__ = ["AnswerColumns"]


class AnswerColumns(Guarded, Horizontal):
    """See the module docstring; `show` consumes one consultation's events."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns: dict[str, TranscriptView] = {}
        self._streaming: set[str] = set()
        self._pending: dict[str, list[str]] = {}

    async def show(self, consultation: Consultation) -> None:
        """A column per oracle, filled as the consultation's events come."""
        await self.remove_children()
        self.columns = {o.id: TranscriptView(id=f"col-{o.id}") for o in consultation.oracles}
        await self.mount_all(self.columns.values())
        names = {o.id: o.name for o in consultation.oracles}
        self._streaming, self._pending = set(), {oid: [] for oid in self.columns}
        for oid, column in self.columns.items():
            column.add("heading", "waiting…", title=names[oid])
        async for event in consultation.events():
            oid = event.oracle_id
            column = self.columns[oid]
            match event:
                case OracleAttempt(provider=provider):
                    self._close(oid, "asked again")
                    column.add("note", f"asking {provider}")
                    column.start_stream("answer", title=names[oid])
                    self._streaming.add(oid)
                case OracleDelta(text=text):
                    column.append(text)
                case OracleNote(text=text):
                    self._pending[oid].append(text)
                case OracleSaved(entry=entry):
                    self._close(oid)
                    column.add("note", f"saved as {entry.response_filename} · "
                               f"{snapshot_line(entry)}")
                case OracleFailed(error=error):
                    self._close(oid, error)
                    column.add("note", f"failed: {error}")

    def _close(self, oid: str, discard: str | None = None) -> None:
        column = self.columns[oid]
        if oid in self._streaming:
            if discard:
                column.discard_stream(discard)
            else:
                column.end_stream()
            self._streaming.discard(oid)
        for text in self._pending[oid]:
            column.add("note", text)
        self._pending[oid].clear()
