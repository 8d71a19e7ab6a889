"""The Live tab's testimony: the paragraph with each claim's span marked by its state as its
examination ends, and the claims as a list beside it (Enter on one shows its rounds in the
transcript). A state has a symbol as well as a colour (`engine.report.claims.MARKS`), so it
reads without colour. Model text goes in as `Content`, never as markup."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from engine import MARKS, Claim, claim_line, marked_parts, strip_control
from tui.funnel import Guarded

__all__ = ["MarkedTestimony"]

STYLES = {"held": "$success", "contradicted": "$error", "unsupported": "$error",
          "unsure": "$warning", "pending": "$text-muted", "not checkable": "$text-muted",
          "not examined": "$text-muted"}
"""The colour of each state (the symbol says it too)."""


class MarkedTestimony(Guarded, Vertical):
    """See the module docstring. Hidden until a testimony is shown."""

    class ClaimChosen(Message):
        """Enter on claim `number`: show its rounds."""

        def __init__(self, number: int) -> None:
            super().__init__()
            self.number = number

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 (Textual's name)
        super().__init__(id=id)
        self.text = ""
        self.claims: dict[int, Claim] = {}

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="testimony-text-box"):
            yield Static(Content(""), id="testimony-text")
        yield OptionList(id="claims")

    def clear(self) -> None:
        """No testimony on show."""
        self.text, self.claims = "", {}
        self.display = False
        self.query_one("#testimony-text", Static).update(Content(""))
        self.query_one(OptionList).clear_options()

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

    def move(self, step: int) -> int | None:
        """Move the claim selection by `step`; the claim now selected (None: no claims)."""
        options = self.query_one(OptionList)
        if not options.option_count:
            return None
        current = options.highlighted
        index = (options.option_count - 1 if step < 0 else 0) if current is None else \
            max(0, min(options.option_count - 1, current + step))
        options.highlighted = index
        return self._number(index)

    def _number(self, index: int) -> int | None:
        option = self.query_one(OptionList).get_option_at_index(index)
        return int(option.id) if option.id is not None else None

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.post_message(self.ClaimChosen(int(event.option.id)))

    def _draw(self) -> None:
        parts: list[Content] = []
        for part in marked_parts(self.text, list(self.claims.values())):
            if not part.claims:
                parts.append(Content(part.text))
                continue
            worst = _worst(part.claims)
            parts.append(Content.styled(part.text, STYLES[worst.state]))
            marks = " ".join(f"{MARKS[c.state]}{c.number}" for c in part.claims)
            parts.append(Content.styled(f" [{marks}]", f"bold {STYLES[worst.state]}"))
        self.query_one("#testimony-text", Static).update(Content("").join(parts))
        options = self.query_one(OptionList)
        highlighted = options.highlighted
        options.clear_options()
        options.add_options([
            Option(Content.styled(strip_control(claim_line(claim)), STYLES[claim.state]),
                   id=str(claim.number))
            for claim in sorted(self.claims.values(), key=lambda c: c.number)])
        if highlighted is not None and highlighted < options.option_count:
            options.highlighted = highlighted


_RANK = {"contradicted": 0, "unsupported": 1, "unsure": 2, "pending": 3, "held": 4,
         "not examined": 5, "not checkable": 6}


def _worst(claims: tuple[Claim, ...]) -> Claim:
    """The claim whose state a shared sentence is coloured by: the most serious."""
    return min(claims, key=lambda c: _RANK[c.state])
