"""The Oracles tab's views of a case file: its bar, its notes, its consultations. Model text
and note text are shown as data (TranscriptView); the words come from `engine`."""

from __future__ import annotations

from engine import (
    LlmEntry,
    NoteEntry,
    answer_title,
    counted,
    note_title,
    snapshot_line,
    strip_control,
)
from tui.widgets.transcript import TranscriptView

__all__ = ["case_bar", "show_history", "show_notes"]


def case_bar(short_id: str, name: str, history: bool, notes: int, answers: int
             ) -> tuple[str, str]:
    """The bar's two parts: `"Session 1a2b3c4d · Tea"` (what a narrow tab cuts) and
    `"2 notes · 1 answer · history on"` (never cut)."""
    return (f"Session {short_id} · {' '.join(strip_control(name).split())}",
            f"{counted(notes, 'note')} · {counted(answers, 'answer')} · "
            f"history {'on' if history else 'off'}")


def show_notes(view: TranscriptView, notes: list[tuple[NoteEntry, str]]) -> None:
    view.clear()
    if not notes:
        view.add("note", "No notes yet: i imports a file (.txt .md .srt .vtt), t types one.")
    for entry, text in notes:
        view.add("answer", text, title=note_title(entry), markdown=False)


def show_history(view: TranscriptView, answers: list[tuple[LlmEntry, str]]) -> None:
    view.clear()
    if not answers:
        view.add("note", "No consultations yet.")
    for answer, content in answers:
        view.add("note", snapshot_line(answer), title=answer_title(answer))
        view.add("answer", content, markdown=True)
