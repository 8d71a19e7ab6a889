"""The Live tab's testimony: the claims as a list, one line each with its state, and the
paragraph with each claim's span marked by its state as its examination ends — or, once a
claim is opened (Enter on it, or `[` / `]`), that claim's rounds in the paragraph's place while
the transcript below goes on following the run (`t` shows the paragraph again). A state has a
symbol as well as a colour (`engine.report.claims.MARKS`), so it reads without colour. Model
text goes in as `Content`, never as markup: the witness's markdown shows its structure
(numbered lines, a heading's words, `**bold**` in bold, bullets as •) by our own reading of it,
never as markup of ours."""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.events import Resize
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from engine import (
    MARKS,
    Block,
    Claim,
    QuestionAnswerPair,
    claim_line,
    claim_round_blocks,
    claim_row,
    marked_parts,
    severest,
    strip_control,
)
from tui.funnel import Guarded
from tui.widgets.transcript import TranscriptView

__all__ = ["MarkedTestimony"]

STYLES = {"held": "$success", "contradicted": "$error", "unsupported": "$error",
          "unsure": "$warning", "pending": "$text-muted", "not checkable": "$text-muted",
          "not examined": "$text-muted"}
"""The colour of each state (the symbol says it too)."""

_EMPHASIS = re.compile(r"\*\*|__")
_HEADING = re.compile(r"#{1,6}[ \t]+")
_BULLET = re.compile(r"([ \t]*)[-*+][ \t]+")


class Emphasis:
    """The witness's markdown read across the pieces of one text: whether
    the next character is at a line's start, and whether it is in bold."""

    def __init__(self) -> None:
        self.line_start = True
        self.bold = False
        self.heading = False

    def read(self, text: str, style: str = "") -> Content:
        """`text` (the next piece) as `Content` with `style`: emphasis markers dropped and
        their words bold, a heading's hashes dropped and its line bold, a bullet as •."""
        pieces: list[Content] = []
        for line in text.splitlines(keepends=True):
            if self.line_start:
                self.bold = self.heading = False
                heading = _HEADING.match(line)
                bullet = _BULLET.match(line)
                if heading is not None:
                    line, self.heading = line[heading.end():], True
                elif bullet is not None:
                    pieces.append(Content.styled(bullet.group(1) + "• ", style))
                    line = line[bullet.end():]
            at = 0
            for found in _EMPHASIS.finditer(line):
                pieces.append(self._styled(line[at:found.start()], style))
                self.bold = not self.bold
                at = found.end()
            pieces.append(self._styled(line[at:], style))
            self.line_start = line.endswith("\n")
        return Content("").join(pieces)

    def _styled(self, text: str, style: str) -> Content:
        if not text:
            return Content("")
        bold = "bold" if self.bold or self.heading else ""
        return Content.styled(text, f"{style} {bold}".strip()) if style or bold \
            else Content(text)


class MarkedTestimony(Guarded, Vertical):
    """See the module docstring. Hidden until a testimony is shown."""

    class ClaimChosen(Message):
        """Enter on claim `number` in the list: open it."""

        def __init__(self, number: int) -> None:
            super().__init__()
            self.number = number

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 (Textual's name)
        super().__init__(id=id)
        self.text = ""
        self.claims: dict[int, Claim] = {}
        self.rounds: dict[int, list[QuestionAnswerPair]] = {}
        """Each claim's rounds so far, by claim number."""
        self.opened: int | None = None
        """The claim whose rounds are in view (None: the marked paragraph is)."""

    def compose(self) -> ComposeResult:
        yield OptionList(id="claims")
        with VerticalScroll(id="testimony-text-box"):
            yield Static(Content(""), id="testimony-text")
        yield TranscriptView(id="claim-rounds", follows=False)  # read from the start

    def on_mount(self) -> None:
        self.query_one("#claim-rounds").display = False

    def clear(self) -> None:
        """No testimony on show."""
        self.text, self.claims, self.rounds, self.opened = "", {}, {}, None
        self.display = False
        self.query_one("#testimony-text", Static).update(Content(""))
        self.query_one(OptionList).clear_options()
        self._show_paragraph()

    def show_text(self, text: str) -> None:
        """The testimony, before its claims are known."""
        self.text = text
        self.display = True
        self._draw()

    def show_claims(self, claims: list[Claim]) -> None:
        """The claims as split (or with a state each, replayed)."""
        self.claims = {claim.number: claim for claim in claims}
        self.display = True
        self._draw()

    def update_claim(self, claim: Claim) -> None:
        """A claim's examination ended: its mark and its line take its state."""
        self.claims[claim.number] = claim
        self._draw()
        if self.opened == claim.number:
            self._draw_rounds()

    def add_round(self, pair: QuestionAnswerPair) -> None:
        """A claim's round ended (the pane shows it when that claim is open)."""
        if pair.claim is None:
            return
        rounds = self.rounds.setdefault(pair.claim, [])
        rounds[:] = [p for p in rounds if p.sequence != pair.sequence] + [pair]
        if self.opened == pair.claim:
            self._draw_rounds()

    @property
    def selected(self) -> int | None:
        """The claim selected in the list (None: none is)."""
        options = self.query_one(OptionList)
        index = options.highlighted
        return None if index is None or not options.option_count else self._number(index)

    def move(self, step: int) -> int | None:
        """Move the claim selection by `step` and open the claim now selected (None: no
        claims)."""
        options = self.query_one(OptionList)
        if not options.option_count:
            return None
        current = options.highlighted
        index = (options.option_count - 1 if step < 0 else 0) if current is None else \
            max(0, min(options.option_count - 1, current + step))
        number = self._number(index)
        if number is not None:
            self.open(number)  # selects it in the list too
            options.scroll_to_highlight()
        return number

    def open(self, number: int) -> None:
        """Claim `number`'s rounds in the paragraph's place, selected in the list."""
        if number not in self.claims:
            return
        self.opened = number
        options = self.query_one(OptionList)
        index = sorted(self.claims).index(number)
        if options.highlighted != index:
            options.highlighted = index
        self.query_one("#testimony-text-box").display = False
        self.add_class("-open")
        pane = self.query_one("#claim-rounds", TranscriptView)
        pane.display = True
        self._draw_rounds()
        self._draw()

    def show_paragraph(self) -> bool:
        """The marked paragraph again in the pane's place; False when it was in view."""
        if self.opened is None:
            return False
        self.opened = None
        self._show_paragraph()
        self._draw()
        return True

    def _show_paragraph(self) -> None:
        self.remove_class("-open")
        self.query_one("#claim-rounds").display = False
        self.query_one("#testimony-text-box").display = True

    def _number(self, index: int) -> int | None:
        option = self.query_one(OptionList).get_option_at_index(index)
        return int(option.id) if option.id is not None else None

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.post_message(self.ClaimChosen(int(event.option.id)))

    def on_resize(self, _: Resize) -> None:
        self._draw()  # each claim's line is cut to the list's width

    def _draw_rounds(self) -> None:
        """The open claim's pane: its line (state, readings), then its rounds as the
        transcript shows them."""
        number = self.opened
        if number is None:
            return
        claim = self.claims[number]
        pane = self.query_one("#claim-rounds", TranscriptView)
        pane.clear()
        pane.border_title = f"Claim {number} · its rounds · t: the testimony"
        pane.draw(Block("judgement", f"Claim {number}", claim_line(claim)))
        rounds = sorted(self.rounds.get(number, []), key=lambda p: p.sequence)
        if not rounds:
            pane.draw(Block("note", text="No rounds (yet): " + (
                "its examination has not begun." if claim.state == "pending" else
                "its other readings settled it." if claim.examined else
                "it was not examined.")))
        for pair in rounds:
            for block in claim_round_blocks(pair, ""):
                pane.draw(block)
        pane.scroll_home(animate=False)

    def _draw(self) -> None:
        parts: list[Content] = []
        reader = Emphasis()
        for part in marked_parts(self.text, list(self.claims.values())):
            if not part.claims:
                parts.append(reader.read(part.text))
                continue
            worst = severest(part.claims)
            parts.append(reader.read(part.text, STYLES[worst.state]))
            marks = " ".join(f"{MARKS[c.state]}{c.number}" for c in part.claims)
            parts.append(Content.styled(f" [{marks}]", f"bold {STYLES[worst.state]}"))
        self.query_one("#testimony-text", Static).update(Content("").join(parts))
        options = self.query_one(OptionList)
        width = max(10, options.scrollable_content_region.width - 3)  # room for a scrollbar
        highlighted = options.highlighted
        options.clear_options()
        options.add_options([
            Option(Content.styled(_row(claim, claim.number == self.opened, width),
                                  STYLES[claim.state]), id=str(claim.number))
            for claim in sorted(self.claims.values(), key=lambda c: c.number)])
        if highlighted is not None and highlighted < options.option_count:
            options.highlighted = highlighted


def _row(claim: Claim, opened: bool, width: int) -> str:
    """Claim `claim`'s line in a list `width` columns wide: its words cut where they must be
    ("…"), its state and P(false) at the right end, whole; `▶` when its rounds are open."""
    words, state = claim_row(claim)
    words = ("▶ " if opened else "") + strip_control(words)
    room = max(4, width - len(state) - 2)
    if len(words) > room:
        words = words[:room - 1].rstrip() + "…"
    return words.ljust(room) + "  " + state


