"""Model output is data: the functions that make it safe to put on a terminal or in a prompt.

`strip_control` is the one filter every terminal output goes through (the app, the CLI, the
markdown export). Stored sessions and the JSON export keep the text exactly as it came.
`TemplateMarkers` takes chat-template markers out of a streamed answer.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["END_OF_TURN_MARKERS", "TemplateMarkers", "counted", "one_line", "slug",
           "strip_control", "strip_markers", "without_reprs"]

# Every C0 control except TAB and LF, DEL, and every C1 control (U+0080–U+009F). Removing ESC
# and CSI/OSC introducers character by character is enough to defuse any escape sequence, and it
# works on a stream cut at arbitrary points: no state is carried between chunks. CR is removed
# too: on its own it lets text overwrite what a terminal line already shows.
#
# Invisible format characters go too: the bidirectional embeddings, overrides and isolates
# (U+202A–U+202E, U+2066–U+2069) and marks (U+200E, U+200F, U+061C) reorder what a reader sees
# ("Trojan Source") and break the cell arithmetic of boxes and tables; the zero-width
# characters (U+200B–U+200D, U+2060–U+2064, U+FEFF, U+180E) hide text and desynchronise
# widths; so do the interlinear annotation marks (U+FFF9–U+FFFB) and the tag characters
# (U+E0000–U+E007F), invisible letters that can smuggle text past a reader. U+2028/U+2029 are
# line breaks only some terminals honour: they become a space.
_INVISIBLE = (
    "\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
    "\ufff9-\ufffb\U000e0000-\U000e007f"
)
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")
_SEPARATORS = re.compile("[\u2028\u2029]")


def strip_control(text: str) -> str:
    """Return `text` without terminal control characters or invisible format characters
    (newlines and tabs are kept); see the comment above for the exact set."""
    return _SEPARATORS.sub(" ", _CONTROL.sub("", text))


_REPR = re.compile(r"(?:\b(?:ssl|sock|loop|transport)\s*[:=]\s*)?"
                   r"<[^<>\n]{1,200}? (?:object )?at 0x[0-9a-fA-F]+>")
"""A Python object's default repr (`<ssl.SSLContext object at 0x7fd8…>`, `<function f at
0x…>`), with the `ssl:` or `sock=` that aiohttp and asyncio put before one."""


def without_reprs(text: str) -> str:
    """`text` without any Python object's repr in it: a library's error (aiohttp's "Cannot
    connect to host … ssl:<ssl.SSLContext object at 0x…>", relayed by a gateway) says nothing
    a user can use in one, and the address differs on every run."""
    if " at 0x" not in text:
        return text
    return re.sub(r"[ \t]{2,}", " ", _REPR.sub("", text))


def one_line(text: str, limit: int | None) -> str:
    """`text` as one line, for a terminal or a prompt: controls stripped, spacing collapsed,
    cut to at most `limit` characters (None: not cut) with "…" marking the cut."""
    text = " ".join(strip_control(text).split())
    return text if limit is None or len(text) <= limit else text[:limit - 1].rstrip() + "…"


END_OF_TURN_MARKERS = (
    "<|im_end|>",
    "<|im_start|>",
    "<end_of_turn>",
    "<start_of_turn>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|endoftext|>",
    "</s>",
)
"""Chat-template markers that end (or start) a turn in the common templates: ChatML, Gemma,
Llama 3, GPT-style end of text, and the SentencePiece end of sequence. A server whose template
does not match its model lets them through as text."""

_MARKER = re.compile("|".join(re.escape(m) for m in END_OF_TURN_MARKERS))
_OPENERS = ("<|im_start|>", "<start_of_turn>", "<|start_header_id|>")
_ROLES = ("user", "assistant", "system", "model")


def _marker_before(text: str, end: int) -> int | None:
    """The start of the marker that ends `text[:end]` (an opener may carry its role name, as
    in `<|im_start|>user`), or None."""
    for role in _ROLES:
        if text.endswith(role, 0, end):
            opener = next((o for o in _OPENERS if text.endswith(o, 0, end - len(role))), None)
            if opener is not None:
                return end - len(role) - len(opener)
    marker = next((m for m in END_OF_TURN_MARKERS if text.endswith(m, 0, end)), None)
    return None if marker is None else end - len(marker)


def _tail_start(text: str) -> int:
    """Where the run of markers (with whitespace between and after them) that ends `text`
    begins, at its first marker; `len(text)` when `text` does not end with a marker. A
    backwards scan: linear, whatever the text."""
    start = end = len(text)
    while True:
        while end > 0 and text[end - 1].isspace():
            end -= 1
        found = _marker_before(text, end)
        if found is None:
            return start
        start = end = found


def strip_markers(text: str, stop: bool = False) -> str:
    """`text` without the chat-template markers at its end (and the whitespace around them).
    With `stop`, a marker anywhere ends the answer, as a stop sequence would have."""
    if stop:
        found = _MARKER.search(text)
        if found is not None:
            text = text[: found.start()]
    start = _tail_start(text)
    return text if start == len(text) else text[:start].rstrip()


class TemplateMarkers:
    """Takes chat-template markers out of an answer as it streams.

    `feed` returns what can be shown now; text that may be the start of a marker run at the end
    of the answer is held back until the next piece tells: a marker followed by more text was
    not the end, and is let through, unless `stop`, where the first marker ends the answer (a
    local model past its end of turn writes the next turn itself). `finish` returns what is
    left once the answer is complete, trailing markers removed. Held back is only a marker (or
    the start of one) and whitespace: a few characters, so streaming stays live.
    """

    def __init__(self, stop: bool = False) -> None:
        self.stop = stop
        self.stopped = False
        self._held = ""

    def feed(self, text: str) -> str:
        """The part of `text` (after what was held) that is safe to show now."""
        if self.stopped:
            return ""
        buffer = self._held + text
        if "<" not in buffer:  # the common case: no marker can start here
            self._held = ""
            return buffer
        if self.stop:
            found = _MARKER.search(buffer)
            if found is not None:
                self.stopped = True
                self._held = ""
                return buffer[: found.start()].rstrip()
        cut = _hold_from(buffer)
        self._held = buffer[cut:]
        return buffer[:cut]

    def finish(self) -> str:
        """What was held back, minus trailing markers: the end of the answer."""
        held, self._held = self._held, ""
        return strip_markers(held, self.stop)


def _hold_from(buffer: str) -> int:
    """Where a possible run of trailing markers starts: whole markers and whitespace, then
    perhaps the beginning of a marker (or of an opener's role name) at the very end."""
    start = len(buffer)
    lt = buffer.rfind("<", max(0, len(buffer) - 32))
    if lt != -1:
        piece = buffer[lt:]
        if any(m.startswith(piece) and m != piece for m in END_OF_TURN_MARKERS) or any(
            piece.startswith(o) and any(f"{o}{r}".startswith(piece) for r in _ROLES)
            for o in _OPENERS
        ):
            start = lt
    return min(start, _tail_start(buffer[:start]))


def slug(text: str, fallback: str = "note", limit: int = 40) -> str:
    """`text` as a file-name part: accents folded, lower case, runs of anything but letters
    and digits as one `-` (`"Cético: o Céu!"` → `cetico-o-ceu`); `fallback` when nothing is
    left."""

    folded = unicodedata.normalize("NFKD", text)
    ascii_only = folded.encode("ascii", "ignore").decode("ascii").lower()
    parts = re.sub(r"[^a-z0-9]+", "-", ascii_only).strip("-")
    return parts[:limit].rstrip("-") or fallback


def counted(number: int, word: str, plural: str | None = None) -> str:
    """`"1 session"`, `"2 sessions"`: a count and its noun, in the number it takes."""
    return f"{number:,} {word if number == 1 else plural or word + 's'}"
