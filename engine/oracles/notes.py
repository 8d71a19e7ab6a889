"""Notes: what the user types or imports into a session's case file (SPEC §4).

Imported files are `.txt`, `.md`, `.srt` and `.vtt`, UTF-8, at most `MAX_NOTE_BYTES`.
Subtitles become plain text, one cue per line, with the cue's start kept as a short marker and
its speaker when the file names one: `[1:05] Bob: Sure.` (parsed by webvtt-py, a maintained
WebVTT/SRT reader: cue settings, NOTE blocks, voice spans and styling tags are its job). Anything
else is refused with a message that says what would be taken.
"""

from __future__ import annotations

import html
import io
import re
from pathlib import Path

from engine.errors import NoteRefused

__all__ = ["MAX_NOTE_BYTES", "NOTE_TYPES", "read_note_file", "subtitles_to_text", "typed_note"]

NOTE_TYPES = (".txt", ".md", ".srt", ".vtt")
MAX_NOTE_BYTES = 4 * 1024 * 1024
"""Largest file taken as a note (a four-hour call's transcript is about 250 KB)."""
_ASS_TAG = re.compile(r"\{\\[^{}]*\}")


def _marker(seconds: float) -> str:
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"[{hours}:{minutes:02d}:{secs:02d}]" if hours else f"[{minutes}:{secs:02d}]"


def subtitles_to_text(text: str, fmt: str, name: str = "file") -> str:
    """`.srt`/`.vtt` text as plain lines with time markers; `NoteRefused` when unreadable."""
    import webvtt
    from webvtt.errors import MalformedFileError

    try:
        captions = webvtt.from_buffer(io.StringIO(text), format=fmt)
    except MalformedFileError as exc:
        raise NoteRefused(f"{name}: not a valid .{fmt} file ({exc})") from None
    except Exception as exc:  # a parser of untrusted input: any failure is the file's
        raise NoteRefused(f"{name}: not a valid .{fmt} file ({type(exc).__name__})") from None
    lines: list[str] = []
    for caption in captions.captions:
        body = html.unescape(_ASS_TAG.sub("", caption.text))
        body = " ".join(body.split())
        if not body:
            continue
        voice = getattr(caption, "voice", None)
        speaker = f"{' '.join(voice.split())}: " if voice else ""
        lines.append(f"{_marker(caption.start_in_seconds)} {speaker}{body}")
    if not lines:
        raise NoteRefused(f"{name}: no subtitles in it")
    return "\n".join(lines) + "\n"


def read_note_file(path: Path) -> tuple[str, str]:
    """(text, extension to store it under) for a file to import; `NoteRefused` says why not."""
    suffix = path.suffix.lower()
    if suffix not in NOTE_TYPES:
        kind = f"{suffix} files" if suffix else "files without an extension"
        raise NoteRefused(f"{path}: {kind} cannot be notes; import .txt, .md, .srt or .vtt")
    try:
        if path.is_dir():
            raise NoteRefused(f"{path}: a directory, not a file")
        size = path.stat().st_size
        if size > MAX_NOTE_BYTES:
            raise NoteRefused(f"{path}: {size // 1024} KB is more than a note may hold "
                              f"({MAX_NOTE_BYTES // 1024 // 1024} MB)")
        data = path.read_bytes()
    except FileNotFoundError:
        raise NoteRefused(f"{path}: no such file") from None
    except OSError as exc:
        raise NoteRefused(f"{path}: cannot read ({exc.strerror})") from None
    if b"\x00" in data:
        raise NoteRefused(f"{path}: a binary file, not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NoteRefused(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8 "
                          "and import it again") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if suffix in (".srt", ".vtt"):
        return subtitles_to_text(text, suffix[1:], str(path)), "txt"
    if not text.strip():
        raise NoteRefused(f"{path}: empty")
    return text, suffix[1:]


def typed_note(text: str) -> str:
    """A typed note as stored; `NoteRefused` when it is empty."""
    text = text.replace("\r\n", "\n")
    if not text.strip():
        raise NoteRefused("the note is empty")
    if len(text.encode("utf-8")) > MAX_NOTE_BYTES:
        raise NoteRefused("the note is longer than a note may hold")
    return text if text.endswith("\n") else text + "\n"
