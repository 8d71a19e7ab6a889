"""The Oracles tab's list: every oracle (invalid ones struck through, with why), up to four
marked with space, and the highlighted one's description below."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from engine import Oracle, strip_control
from tui.funnel import Guarded

__all__ = ["OraclePicker"]


class OraclePicker(Guarded, Vertical):
    """See the module docstring."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.oracles: list[Oracle] = []
        self.marked: list[str] = []
        """Ids of the oracles marked with space, in the order marked."""

    def compose(self) -> ComposeResult:
        yield OptionList(id="oracle-list")
        yield Static(Content(""), id="oracle-info")

    def show(self, oracles: list[Oracle]) -> None:
        """List `oracles` (kept marks stay marked)."""
        if oracles == self.oracles:
            return
        self.oracles = oracles
        known = {o.id for o in oracles if o.valid}
        self.marked = [m for m in self.marked if m in known]
        listing = self.query_one("#oracle-list", OptionList)
        highlighted = listing.highlighted
        listing.clear_options()
        listing.add_options([self._option(o) for o in oracles])
        if oracles:
            listing.highlighted = min(highlighted or 0, len(oracles) - 1)
        self._show_info()

    def _option(self, oracle: Oracle) -> Option:
        mark = "✓ " if oracle.id in self.marked else "  "
        if not oracle.valid:
            return Option(Content.assemble(Content.styled(f"✗ {oracle.name}", "dim strike"),
                                           Content.styled(f"  {oracle.source}", "dim")),
                          id=oracle.id)
        return Option(Content.assemble(Content(f"{mark}{oracle.name}"),
                                       Content.styled(f"  {oracle.source}", "dim")),
                      id=oracle.id)

    def highlighted(self) -> Oracle | None:
        index = self.query_one("#oracle-list", OptionList).highlighted
        if index is None or not 0 <= index < len(self.oracles):
            return None
        return self.oracles[index]

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show_info()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.mark()

    def _show_info(self) -> None:
        oracle = self.highlighted()
        if oracle is None:
            text = "no oracles"
        elif not oracle.valid:
            text = f"invalid: {oracle.problem}\n{oracle.path}"
        else:
            text = "\n".join([oracle.description or "(no description)",
                              ("the case goes in place of " + oracle.placeholder
                               if oracle.mode == "placeholder" else "the case goes at the end")
                              + f" · {oracle.source} file {oracle.path.name}",
                              *oracle.warnings])
        self.query_one("#oracle-info", Static).update(Content(strip_control(text)))

    def mark(self) -> None:
        """Mark or unmark the highlighted oracle (at most 4; an invalid one says why)."""
        oracle = self.highlighted()
        if oracle is None:
            return
        if not oracle.valid:
            self.notify(f"{oracle.name} is invalid: {oracle.problem}", severity="warning")
            return
        if oracle.id in self.marked:
            self.marked.remove(oracle.id)
        elif len(self.marked) >= 4:
            self.notify("At most 4 oracles at once.", severity="warning")
            return
        else:
            self.marked.append(oracle.id)
        index = self.oracles.index(oracle)
        self.query_one("#oracle-list", OptionList).replace_option_prompt_at_index(
            index, self._option(oracle).prompt)

    def chosen(self) -> list[str]:
        """The marked oracles, else the highlighted one."""
        if self.marked:
            return list(self.marked)
        oracle = self.highlighted()
        if oracle is None or not oracle.valid:
            return []
        return [oracle.id]
