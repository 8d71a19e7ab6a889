"""The interrogation transcript: one virtualised, line-based widget for the whole session.

Stock `MarkdownStream` mounts a widget per markdown block, and every mount reflows the whole
scroll view: fine for one short answer, slow once the view already holds a long transcript
(see bench/render.py). Here finished blocks are rendered once to strips (again only when the
width changes) and only the block being streamed is re-rendered, at most `FPS` times a second,
whatever the token rate. Only visible lines are drawn.

Model text is data: it is rendered as markdown (never as console markup), with terminal control
characters stripped and links shown as text, never opened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from rich.console import RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.events import Resize
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer

from engine import Append, Block as Said, BlockKind, Piece, Void, strip_control
from tui.funnel import Guarded

__all__ = ["SHOWN_AS", "Block", "TranscriptView"]

Kind = Literal["heading", "question", "answer", "analysis", "audit", "note", "discarded"]
SHOWN_AS: dict[BlockKind, Kind] = {
    "heading": "heading", "question": "question", "answer": "answer", "analysis": "analysis",
    "judgement": "analysis", "audit": "audit", "summary": "audit", "note": "note",
    "mark": "note", "end": "note", "claims": "analysis", "testimony": "audit"}
"""How each kind of the engine's blocks (`engine.report.blocks`) shows in the transcript."""
FPS = 30


@dataclass(slots=True)
class Block:
    """One piece of the transcript: its kind, optional title line, and (model) text."""

    kind: Kind
    text: str
    title: str = ""
    markdown: bool = False
    strips: list[Strip] = field(default_factory=list)
    width: int = -1
    frozen: list[Strip] = field(default_factory=list)
    """Rendered lines of `text[:frozen_upto]`, complete paragraphs that will not change."""
    frozen_upto: int = 0
    frozen_width: int = -1


def _safe_split(text: str) -> int:
    """The end of the last complete paragraph outside a code fence (0 when there is none)."""
    split = 0
    position = 0
    fenced = False
    for line in text.splitlines(keepends=True):
        position += len(line)
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not line.strip() and not fenced and line.endswith("\n"):
            split = position
    return split


class TranscriptView(Guarded, ScrollView, can_focus=True):
    """See the module docstring."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "transcript--heading",
        "transcript--title",
        "transcript--note",
        "transcript--discarded",
        "transcript--selected",
    }
    DEFAULT_CSS = """
    TranscriptView {
        background: $surface; padding: 0 1;
        /* the scrollbar's columns are always kept: a scrollbar that appears as the text
           grows never covers the ends of lines wrapped before it was there */
        scrollbar-gutter: stable; overflow-x: hidden;
    }
    TranscriptView > .transcript--heading { color: $accent; text-style: bold; }
    TranscriptView > .transcript--title { color: $primary; text-style: bold; }
    TranscriptView > .transcript--note { color: $text-muted; }
    TranscriptView > .transcript--discarded { color: $text-muted; text-style: strike; }
    TranscriptView > .transcript--selected { background: $boost; }
    """

    def __init__(self, *, id: str | None = None, follows: bool = True) -> None:
        """`follows`: keep the end in view as text arrives (a live log); False: read from the
        start (a pane of what has happened)."""
        super().__init__(id=id)
        self.follows = follows
        self.blocks: list[Block] = []
        self._lines: list[Strip] = []
        self._live: Block | None = None
        self._live_parts: list[str] = []
        self._live_dirty = False
        self._timer: Timer | None = None
        self._width = 0
        self._refit_asked = False
        """A wrap for the room the lines have now is asked for (`render_line`)."""
        self.follow = follows
        """Keep the end in view as text arrives (turned off when the user scrolls up)."""
        self.selected: int | None = None
        """Index in `blocks` of the selected answer, for copying."""

    # ---- writing -------------------------------------------------------------------------

    def add(self, kind: Kind, text: str, title: str = "", markdown: bool = False) -> None:
        """Add a finished block; while a block streams, it goes just above it."""
        block = Block(kind, strip_control(text), strip_control(title), markdown)
        index = len(self.blocks) - 1 if self._live is not None else len(self.blocks)
        self.blocks.insert(index, block)
        if self.selected is not None and self.selected >= index:
            self.selected += 1
        self._relayout(from_block=index)

    def start_stream(self, kind: Kind, title: str = "", markdown: bool = True) -> None:
        """Begin a block that grows with `append`."""
        self.end_stream()
        self._live = Block(kind, "", strip_control(title), markdown)
        self._live_parts = []
        self.blocks.append(self._live)
        self._relayout(from_block=len(self.blocks) - 1)
        if self._timer is None:
            self._timer = self.set_interval(1 / FPS, self._flush_live)
        else:
            self._timer.resume()

    def append(self, text: str) -> None:
        """Add streamed text to the live block; drawn at the next tick (≤ FPS a second)."""
        if self._live is None or not text:
            return
        self._live_parts.append(text)
        self._live_dirty = True

    def end_stream(self) -> None:
        """Finish the live block (it is drawn in full now)."""
        if self._live is None:
            return
        self._flush_live()
        self._live = None
        if self._timer is not None:
            self._timer.pause()

    def discard_stream(self, reason: str) -> None:
        """Mark the live block void (a failover threw its text away) and finish it."""
        if self._live is None:
            return
        self._flush_live()
        live, self._live = self._live, None
        if self._timer is not None:
            self._timer.pause()
        live.kind = "discarded"
        live.title = f"{live.title} — discarded: {strip_control(reason)}"
        live.markdown, live.width = False, -1
        self._relayout(from_block=self.blocks.index(live))

    def clear(self) -> None:
        """Empty the transcript; it follows the end again (a new run is watched as it
        comes, whatever the one before it was scrolled to)."""
        self._live = None
        self.blocks.clear()
        self._lines.clear()
        self.selected = None
        self.virtual_size = Size(self._width, 0)
        self.scroll_to(y=0, animate=False, immediate=True)
        self.follow = self.follows  # after the scroll back up, which would turn it off
        self.refresh()

    # ---- reading ---------------------------------------------------------------------------

    @property
    def live_text(self) -> str:
        """The text of the live block, including what is not drawn yet."""
        if self._live is None:
            return ""
        return self._live.text + "".join(self._live_parts)

    def draw(self, piece: Piece) -> None:
        """One piece of the engine's narration (`engine.report.blocks`): a new block, more
        text of the one streaming, or that text voided."""
        match piece:
            case Append(text):
                self.append(text)
            case Void(line):
                self.discard_stream(line)
            case Said(kind="question" | "answer" as kind, title=title, streaming=True):
                self.end_stream()
                self.start_stream(kind, title=title)
            case Said(kind="heading", title=title, text=""):
                self.end_stream()
                self.add("heading", "", title=f"── {title}")
            case Said(kind="note", text=text):
                self.add("note", text)  # beside the stream, which goes on (or is voided next)
            case Said(kind=kind, title=title, text=text, markdown=markdown):
                self.end_stream()
                self.add(SHOWN_AS[kind], text, title=title, markdown=markdown)

    def plain_text(self) -> str:
        """The whole transcript as plain text (for the clipboard)."""
        self._flush_live()
        out: list[str] = []
        for block in self.blocks:
            if block.title:
                out.append(block.title)
            if block.text:
                out.append(block.text.rstrip())
            out.append("")
        return "\n".join(out).strip() + "\n"

    def select_answer(self, step: int) -> Block | None:
        """Move the answer selection by `step` (-1 up, +1 down) and return the selected one."""
        answers = [i for i, b in enumerate(self.blocks) if b.kind == "answer"]
        if not answers:
            return None
        if self.selected not in answers:
            index = len(answers) - 1
        else:
            index = max(0, min(len(answers) - 1, answers.index(self.selected) + step))
        previous, self.selected = self.selected, answers[index]
        for block_index in {previous, self.selected} - {None}:
            assert block_index is not None
            self.blocks[block_index].width = -1
        self._relayout(from_block=min(i for i in (previous, self.selected) if i is not None))
        start = self._start_line(self.selected)
        self.follow = False
        self.scroll_to(y=start, animate=False)
        return self.blocks[self.selected]

    def scroll_to_title(self, prefix: str) -> bool:
        """Scroll to the first block whose title starts with `prefix`; False when none
        does."""
        self._flush_live()
        for index, block in enumerate(self.blocks):
            if block.title.startswith(prefix):
                self.follow = False
                self.scroll_to(y=self._start_line(index), animate=False)
                return True
        return False

    # ---- rendering -------------------------------------------------------------------------

    def _flush_live(self) -> None:
        live = self._live
        if live is None or not self._live_dirty:
            return
        self._live_dirty = False
        live.text += strip_control("".join(self._live_parts))
        self._live_parts = []
        live.width = -1
        self._relayout(from_block=len(self.blocks) - 1)

    def _start_line(self, index: int) -> int:
        return sum(len(block.strips) for block in self.blocks[:index])

    def _render_block(self, index: int, block: Block, width: int) -> list[Strip]:
        if block.width == width:
            return block.strips
        from rich.markdown import Markdown  # ~40 ms to import: not before the first frame

        parts: list[RenderableType | list[Strip]] = []
        title_style = self._style(block)
        if block.title:
            parts.append(Text(block.title, style=title_style))
        if block.text:
            if block.markdown:
                text = block.text
                if block is self._live:  # render finished paragraphs once, then only the tail
                    if block.frozen_width != width:
                        block.frozen, block.frozen_upto, block.frozen_width = [], 0, width
                    split = _safe_split(text)
                    if split > block.frozen_upto:
                        block.frozen += self._strips(
                            Markdown(text[block.frozen_upto:split], hyperlinks=False), width
                        )
                        block.frozen_upto = split
                    text = text[block.frozen_upto:]
                    parts.append(block.frozen)
                parts.append(Markdown(text, hyperlinks=False))
            else:
                parts.append(Text(block.text, style=self._body_style(block)))
        lines: list[Strip] = []
        for part in parts:
            lines += self._strips(part, width)
        lines.append(Strip.blank(width))
        if index == self.selected:
            selected = self.get_component_rich_style("transcript--selected")
            lines = [strip.apply_style(selected) for strip in lines]
        block.strips, block.width = lines, width
        return lines

    def _strips(self, part: RenderableType | list[Strip], width: int) -> list[Strip]:
        if isinstance(part, list):
            return part
        console = self.app.console
        options = console.options.update_width(max(1, width))
        return [Strip(line) for line in Segment.split_lines(console.render(part, options))]

    def _style(self, block: Block) -> Style:
        name = {"heading": "transcript--heading", "note": "transcript--note",
                "discarded": "transcript--discarded"}.get(block.kind, "transcript--title")
        return self.get_component_rich_style(name)

    def _body_style(self, block: Block) -> Style:
        if block.kind in ("note", "discarded"):
            return self.get_component_rich_style(f"transcript--{block.kind}")
        return Style()

    def _relayout(self, from_block: int = 0) -> None:
        width = self._width
        if width <= 0:
            return
        start = self._start_line(from_block)
        del self._lines[start:]
        for index in range(from_block, len(self.blocks)):
            self._lines += self._render_block(index, self.blocks[index], width)
        self.virtual_size = Size(width, len(self._lines))
        self.refresh()
        if self.follow:
            self.scroll_end(animate=False, immediate=False, x_axis=False)

    def on_resize(self, event: Resize) -> None:
        self._fit_width()

    def _fit_width(self) -> None:
        """Wrap the lines again when the room for them changed (a resize, a scrollbar)."""
        self._refit_asked = False
        width = self.scrollable_content_region.width
        if width != self._width:
            self._width = width
            self._relayout(0)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new < old:
            self.follow = False
        elif new >= self.max_scroll_y and self.follows:
            self.follow = True

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if width != self._width and not self._refit_asked:  # wrapped for other room: once
            self._refit_asked = True  # more, after this frame (not once a line drawn)
            self.call_after_refresh(self._fit_width)
        if index >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        return self._lines[index].crop_extend(scroll_x, scroll_x + width, self.rich_style)
