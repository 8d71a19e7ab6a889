"""The Live tab's side panel: the last gap analysis (a completeness bar and its gaps) — for a
testimony, its claims examined and their states — the audit's findings, and a reasoning
model's thinking. Model text goes in as `Content`, never as
markup."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import ProgressBar, Static

from engine import AuditResult, Claim, GapAnalysis, audit_lines, claims_tally, strip_control
from tui.funnel import Guarded
from tui.widgets.reasoning import ReasoningPanel

__all__ = ["SidePanel"]


class SidePanel(Guarded, Vertical):
    """See the module docstring."""

    def compose(self) -> ComposeResult:
        yield Static(Content.styled("Gap analysis", "bold"), classes="heading",
                     id="gaps-heading")
        yield ProgressBar(total=100, show_eta=False, id="completeness")
        yield Static(Content("no analysis yet"), id="gaps")
        yield Static(Content.styled("Audit", "bold"), classes="heading")
        yield Static(Content("not yet"), id="audit")
        yield ReasoningPanel()

    def clear(self) -> None:
        """Back to a run not started yet."""
        self.query_one("#gaps-heading", Static).update(Content.styled("Gap analysis", "bold"))
        self.query_one("#completeness", ProgressBar).update(progress=0)
        self.query_one("#gaps", Static).update(Content("no analysis yet"))
        self.query_one("#audit", Static).update(Content("not yet"))
        self.query_one(ReasoningPanel).clear()

    def show_analysis(self, analysis: GapAnalysis, sequence: int) -> None:
        """A round's analysis (the transcript has its block)."""
        self.query_one("#completeness", ProgressBar).update(
            progress=analysis.completeness_score)
        side = [f"round {sequence}: {analysis.completeness_score}/100"]
        side += [f"• {g.severity} {g.category}: {g.description.strip()}" for g in analysis.gaps]
        self.query_one("#gaps", Static).update(Content(strip_control("\n".join(side))))

    def show_claims(self, claims: list[Claim]) -> None:
        """A testimony's claims, where a single claim's gap analysis would be: how many are
        examined (the bar) and their states counted (each claim's rounds have their own
        judgements; a testimony has no gap analysis)."""
        checkable = [c for c in claims if c.state != "not checkable"]
        done = sum(1 for c in checkable if c.state != "pending")
        self.query_one("#gaps-heading", Static).update(Content.styled("Claims", "bold"))
        self.query_one("#completeness", ProgressBar).update(
            progress=round(100 * done / len(checkable)) if checkable else 100)
        lines = [f"{done}/{len(checkable)} checkable claims examined", claims_tally(claims)]
        self.query_one("#gaps", Static).update(Content(strip_control("\n".join(lines))))

    def show_ended(self, status: str, reason: str | None) -> None:
        """A run that ended without an audit: say how, where the audit would be."""
        self.query_one("#audit", Static).update(Content(strip_control(
            f"none: the run ended {status}" + (f" ({reason})" if reason else ""))))

    def show_audit(self, audit: AuditResult) -> None:
        """The audit's findings (the transcript has its blocks)."""
        self.query_one("#audit", Static).update(
            Content(strip_control("\n".join(audit_lines(audit)))))
