"""The document a witness holds (`WitnessDocument`): made from text, a file (read as the notes
importer reads one: .txt .md .srt .vtt), or a case's notes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from engine.errors import NoteRefused
from engine.models.session import WitnessDocument

__all__ = ["document_file", "notes_document", "witness_document"]


def witness_document(name: str, text: str) -> WitnessDocument:
    """A document named `name` holding `text` (its size and sha256 taken here)."""
    return WitnessDocument(name=name, size=len(text), text=text,
                           sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())


def document_file(path: Path) -> WitnessDocument:
    """The document in `path`; `NoteRefused` says why a file cannot be one."""
    from engine.oracles.notes import read_note_file

    text, _ = read_note_file(path)
    return witness_document(path.name, text)


def notes_document(title: str, notes: Iterable[tuple[str, str]]) -> WitnessDocument:
    """A case's notes, (name, text) each, in order, as one document; `NoteRefused` when the
    case has none."""
    parts = [f"## {name}\n\n{text.strip()}" for name, text in notes if text.strip()]
    if not parts:
        raise NoteRefused(f"{title}: the case has no notes to give the witness")
    return witness_document(f"the notes of {title}", "\n\n".join(parts) + "\n")
