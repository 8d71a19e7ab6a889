"""The Live tab: start an interrogation or attach to any running one, and watch it stream.

One worker per stream (group "live", exclusive), consuming the engine's typed events, or the
records of events.jsonl when attached to a run in another process; both go through `show`.
"""

from __future__ import annotations

import time
from contextlib import aclosing
from pathlib import Path
from typing import cast

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Input, Select, Static

from engine import (
    PROTOCOLS,
    WAS_REASONING,
    AuditReady,
    AuditResult,
    ClaimExamined,
    ClaimsSplit,
    ConfigError,
    DetektivError,
    Discarded,
    Finished,
    GapAnalysisReady,
    InterrogationEvent,
    JudgementReady,
    Narration,
    PairCompleted,
    Phase,
    Protocol,
    ProviderChosen,
    Reasoning,
    Run,
    Started,
    TokenTally,
    cost_badge,
    discarded_line,
    finished_line,
    phase_status,
    running_verdict,
    split_chain,
    strip_control,
    verdict_short,
)
from tui.funnel import Guarded
from tui.messages import ModelsChanged, SessionShown
from tui.widgets.badges import Badges
from tui.widgets.form import FormInput, HypothesisArea
from tui.widgets.reasoning import ReasoningPanel
from tui.widgets.side import SidePanel
from tui.widgets.tabs import ModeTabs
from tui.widgets.testimony import MarkedTestimony
from tui.widgets.transcript import TranscriptView

__all__ = ["LiveScreen"]

HYPOTHESIS_PLACEHOLDER = "Hypothesis, question or text · Enter starts · ctrl+j new line"
"""What the empty hypothesis field says (fits the field at 80 columns; ctrl+e, $EDITOR, is in
the footer while the field has the cursor)."""
FIELD_LABELS = {"hypothesis": "hypothesis", "detective": "detective", "witness": "witness",
                "document": "document", "limit": "rounds", "protocol": "protocol"}
"""Each form field's label, on its border."""


class LiveScreen(Guarded, Screen[None]):
    """See the module docstring."""

    CSS_PATH = "live.tcss"
    AUTO_FOCUS = "#transcript"
    """Showing the tab never puts the cursor in a field: the next key is a command (`2` then
    `1` goes back); `n`, Enter on the transcript or a click go to the field."""
    BINDINGS = [
        Binding("n", "focus_form", "New", id="focus-form"),
        Binding("enter", "open", "Open", id="open",
                tooltip="the selected claim's rounds, in a pane of their own; else the form"),
        Binding("ctrl+s", "start", "Start", id="start", show=False),
        Binding("escape", "stop", "Stop", id="stop"),
        Binding("ctrl+r", "resume", "Resume", id="resume"),
        Binding("left_square_bracket", "select(-1)", "Prev", id="previous",
                tooltip="the previous claim (its rounds shown), or answer"),
        Binding("right_square_bracket", "select(1)", "Next", id="next",
                tooltip="the next claim (its rounds shown), or answer"),
        Binding("t", "testimony", "Testimony", id="testimony",
                tooltip="the marked testimony again, in place of the claim's rounds"),
        Binding("c", "copy_answer", "Copy", id="copy-answer"),
        Binding("C", "copy_transcript", "Copy all", id="copy-transcript", show=False),
        Binding("r", "toggle_reasoning", "Reasoning", id="toggle-reasoning", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.session_dir: str | None = None
        self.attached = False
        self.narration = Narration()
        self.badges: dict[str, str] = {}
        self.status_text = "idle"
        self.usage = TokenTally()
        """Tokens and cost of the run on show, so far."""
        self._form_wanted = False
        self._built = False
        self.audited = False
        """The run on show has its audit (else its end says why there is none)."""
        self.case_dir: str | None = None
        """A notes-only session the next start interrogates in (None: a new session)."""

    def compose(self) -> ComposeResult:
        yield ModeTabs("live")
        with Vertical(id="form"):
            yield HypothesisArea(placeholder=HYPOTHESIS_PLACEHOLDER, id="hypothesis",
                                 soft_wrap=True, tab_behavior="focus",
                                 show_line_numbers=False)
            with Horizontal(id="form-fields"):
                yield FormInput(placeholder="default", id="detective")
                yield FormInput(placeholder="default", id="witness")
                yield FormInput(placeholder="none", id="document",
                                tooltip="a document the witness holds: a file (.txt .md .srt "
                                ".vtt), or 'notes' for the case's notes; the detective never "
                                "sees it")
                limit = self.host.workspace.config.interrogation.iteration_limit
                yield FormInput(value=str(limit), id="limit", type="integer", max_length=2)
                yield Select([(name, name) for name in PROTOCOLS], value="cross-exam",
                             allow_blank=False, id="protocol", compact=True,
                             tooltip="cross-exam: one answer a question; consistency: each "
                             "question asked several times, judged by agreement")
        advice = self.advice_text()
        line = Static(Content(strip_control(advice)), id="advice")
        line.display = bool(advice)
        yield line
        yield Badges(id="badges")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield MarkedTestimony(id="testimony")
                yield TranscriptView(id="transcript")
            yield SidePanel(id="side")
        yield Footer(compact=True, show_command_palette=False)

    # ---- actions -----------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._built = True
        for name, label in FIELD_LABELS.items():
            self.query_one(f"#{name}").border_title = label
        self.query_one(MarkedTestimony).display = False
        self.query_one(TranscriptView).add("note", self.empty_text())
        if self._form_wanted:
            self.focus_form()

    def on_models_changed(self, _: ModelsChanged) -> None:
        """The advice line says again whether a demonstration model plays the detective."""
        advice = self.advice_text()
        line = self.query_one("#advice", Static)
        line.update(Content(strip_control(advice)))
        line.display = bool(advice)

    def advice_text(self) -> str:
        """The line under the form when a demonstration model would play the detective."""
        try:
            advice = self.host.workspace.advice()
        except DetektivError:  # a bad config is the app's to say, not this line's
            return ""
        return f"Note: {advice}" if advice else ""

    def empty_text(self) -> str:
        """What the Live tab says before anything runs in it: how to start or open one."""
        keys = self.host.key_for
        return (f"Nothing is running here yet. To start an interrogation, press "
                f"{keys('focus-form', 'n')}, type a hypothesis and press Enter. To watch or "
                f"resume one, open it from the Sessions tab ({keys('tab-sessions', '1')}, then "
                f"Enter).")

    def focus_form(self) -> None:
        """Put the cursor in the hypothesis field (as soon as the tab is built, when it is
        not yet: an action from another tab may ask before this one was ever shown)."""
        if not self._built:
            self._form_wanted = True
            return
        self._form_wanted = False
        self.query_one("#hypothesis", HypothesisArea).focus()

    def action_focus_form(self) -> None:
        self.focus_form()

    def on_hypothesis_area_submitted(self, _: HypothesisArea.Submitted) -> None:
        self.action_start()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id in ("hypothesis", "detective", "witness", "document", "limit"):
            self.action_start()

    def start_in_case(self, directory: str) -> None:
        """Put the cursor in the form; the run it starts goes into `directory`'s case."""
        self.case_dir = directory
        self.set_status(f"the next interrogation goes into case {directory[-8:]} "
                        "(its notes stay)")
        self.focus_form()

    def action_start(self) -> None:
        try:
            limit: int | None = int(self.query_one("#limit", Input).value or "0")
        except ValueError:
            limit = 0
        document = self.query_one("#document", Input).value.strip()
        try:
            run = self.host.workspace.sessions.start(
                self.query_one("#hypothesis", HypothesisArea).text, limit,
                split_chain(self.query_one("#detective", Input).value),
                split_chain(self.query_one("#witness", Input).value),
                session=self.case_dir,
                protocol=cast(Protocol, self.query_one("#protocol", Select).value),
                document=Path(document).expanduser() if document and document != "notes"
                else None,
                witness_notes=document == "notes",
            )
        except ConfigError as exc:  # the engine's rule, said as a hint: nothing was stored
            self.notify(exc.message[:1].upper() + exc.message[1:] + ".", severity="warning",
                        markup=False)
            if "hypothesis" in exc.message:
                self.focus_form()
            return
        except DetektivError as exc:  # the case is gone, or has its interrogation already
            self.case_dir = None
            self.notify(exc.message, title="Not started", severity="error", markup=False)
            return
        self.case_dir = None
        self.query_one("#hypothesis", HypothesisArea).started()  # the next starts empty
        self.query_one(TranscriptView).focus()
        self.run_interrogation(run)

    def action_stop(self) -> None:
        if self.workers.cancel_group(self, "live"):
            if self.attached:
                self.set_status("detached; the run goes on in its own process")
            else:
                self.set_status("stopping…")

    def action_resume(self) -> None:
        if self.session_dir is None:
            self.notify("Open a session first (Sessions tab).", severity="warning",
                        markup=False)
            return
        if self.host.workspace.sessions.is_live(self.session_dir):
            self.notify("That session is running; it is shown live already.", markup=False)
            return
        self.run_interrogation(self.host.workspace.sessions.resume(self.session_dir),
                               resumed=True)

    def _claims_shown(self) -> bool:
        """Whether a testimony's claims are on show (then `[` / `]` move between claims)."""
        found = self.query(MarkedTestimony)
        return bool(found) and bool(found.first().display) and bool(found.first().claims)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`t` only while a claim's rounds are in the paragraph's place."""
        if action == "testimony":
            found = self.query(MarkedTestimony)
            return bool(found) and found.first().opened is not None
        return True

    def action_select(self, step: int) -> None:
        """`[` / `]`: the previous or next claim of a testimony on show (its rounds opened in
        the paragraph's place; the transcript goes on following the run), else the previous
        or next answer."""
        if self._claims_shown():
            self.query_one(MarkedTestimony).move(step)
            self.refresh_bindings()
        else:
            self.query_one(TranscriptView).select_answer(step)

    def action_open(self) -> None:
        """Enter: the selected claim's rounds (the first claim's when none is selected yet)
        while a testimony's claims are on show; else the form (never a run started)."""
        if not self._claims_shown():
            self.focus_form()
            return
        testimony = self.query_one(MarkedTestimony)
        number = testimony.selected
        if number is None:
            testimony.move(1)
        else:
            testimony.open(number)
        self.refresh_bindings()

    def action_testimony(self) -> None:
        """`t`: the marked testimony again in the claim's rounds' place."""
        self.query_one(MarkedTestimony).show_paragraph()
        self.refresh_bindings()

    def on_marked_testimony_claim_chosen(self, event: MarkedTestimony.ClaimChosen) -> None:
        self.query_one(MarkedTestimony).open(event.number)
        self.refresh_bindings()

    def action_copy_answer(self) -> None:
        view = self.query_one(TranscriptView)
        block = view.blocks[view.selected] if view.selected is not None else \
            view.select_answer(0)
        if block is None:
            self.notify("No answer to copy yet.", severity="warning", markup=False)
            return
        self.app.copy_to_clipboard(block.text)
        self.notify(f"Copied the answer ({len(block.text)} characters).", markup=False)

    def action_copy_transcript(self) -> None:
        text = self.query_one(TranscriptView).plain_text()
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied the transcript ({len(text)} characters).", markup=False)

    # ---- streams -----------------------------------------------------------------------------

    @work(exclusive=True, group="live", exit_on_error=False)
    async def run_interrogation(self, run: Run, resumed: bool = False) -> None:
        """Run a session in this process, showing every event as it comes. `resumed`: the
        session on show goes on, under the rounds it has (the transcript stays)."""
        self.session_dir, self.attached = run.journal.directory.name, False
        self.post_message(SessionShown(self.session_dir))
        view = self.query_one(TranscriptView)
        if resumed:
            view.follow = True
            view.scroll_end(animate=False)
        else:
            view.clear()
            self.narration = Narration()
        # closed here when cancelled (quitting): the session is stored before the app closes
        # the workspace under it
        async with aclosing(run.events()) as events:
            async for event in events:
                self.show(event)

    @work(exclusive=True, group="live", exit_on_error=False)
    async def attach(self, directory: str) -> None:
        """Show a stored session, then follow it live while its process runs it."""
        self.session_dir, self.attached = directory, True
        self.post_message(SessionShown(directory))
        self.query_one(TranscriptView).clear()
        self.narration = Narration()
        self.reset_side()
        live = self.host.workspace.sessions.is_live(directory)
        self.set_status("following a live run…" if live else "replaying…")
        last: InterrogationEvent | None = None
        opened = time.time()
        async with aclosing(self.host.workspace.sessions.follow(directory)) as records:
            async for record in records:
                # what happened before it was opened is history: shown, not announced
                self.show(record.event, announce=record.at >= opened - 1.0)
                last = record.event
        if not isinstance(last, Finished):
            status = self.host.workspace.sessions.status(directory)
            if status == "interrupted":
                self.set_status("interrupted: no process runs it any more (ctrl+r resumes)")
            else:
                self.set_status(status)

    # ---- showing events ----------------------------------------------------------------------

    def set_status(self, text: str) -> None:
        self.status_text = text
        self.query_one(Badges).set("status", text)

    def reset_side(self) -> None:
        self.badges.clear()
        self.query_one(Badges).reset()
        self.usage = TokenTally()
        self.query_one(SidePanel).clear()
        self.query_one(MarkedTestimony).clear()
        self.audited = False
        self.refresh_bindings()

    def show(self, event: InterrogationEvent, announce: bool = True) -> None:
        """Render one event (live, or replayed from a log): its blocks into the transcript
        (the words are `engine.report.blocks`', the CLI's too), then the side panels and
        badges; `announce` raises notifications for switches, discarded answers and the end."""
        replayed = isinstance(event, PairCompleted) and \
            event.pair.sequence not in self.narration.analysed
        view = self.query_one(TranscriptView)
        for piece in self.narration.pieces(event):
            view.draw(piece)
        match event:
            case Started(resumed_after=None):
                self.reset_side()
                self.set_status("running")
            case Started():
                self.audited = False
                self.set_status("running")
            case Phase(phase=phase, sequence=sequence):
                view.end_stream()  # what streamed is whole: later notes go below it
                self.set_status(phase_status(phase, sequence))
            case ProviderChosen(role=role, provider=provider):
                previous = self.badges.get(role)
                self.badges[role] = provider
                self.query_one(Badges).set(role, f"{role}: {provider}")
                if previous is not None and previous != provider and announce:
                    self.notify(f"{role}: {previous} → {provider}", title="Provider switch",
                                severity="warning", markup=False)
            case Discarded(provider=provider, reason=reason, text=text) if announce \
                    and reason != WAS_REASONING:  # a thinking model, every reply: no alarm
                self.notify(discarded_line(provider, len(text), reason),
                            title="Partial answer discarded", severity="warning",
                            markup=False)
            case Reasoning(role=role, phase=phase, sequence=sequence, text=text):
                self.query_one(ReasoningPanel).add(role, phase, sequence, text)
            case JudgementReady(verdict=verdict, probability_false=p_false,
                                demonstration=demo):
                self.query_one(Badges).set(
                    "verdict", "verdict " + running_verdict(verdict, p_false, demo), verdict)
            case GapAnalysisReady(analysis=analysis, sequence=sequence) \
                    if not self._claims_shown():  # a testimony's panel shows its claims
                self.query_one(SidePanel).show_analysis(analysis, sequence)
            case ClaimsSplit(testimony=testimony):
                self.query_one(MarkedTestimony).show_claims(testimony.claims)
                self.query_one(SidePanel).show_claims(testimony.claims)
                self.refresh_bindings()
            case ClaimExamined(claim=claim, tokens=tokens, single=single):
                if not single:  # a testimony's claim (a single claim's is the verdict's)
                    marked = self.query_one(MarkedTestimony)
                    marked.update_claim(claim)
                    self.query_one(SidePanel).show_claims(list(marked.claims.values()))
                if tokens is not None:  # the session's, claims beside it and readings counted
                    self.usage = tokens.model_copy(deep=True)
                    self.show_usage(tokens)
            case PairCompleted(pair=pair, tokens=tokens):
                if pair.testimony:
                    self.query_one(MarkedTestimony).show_text(pair.answer)
                    self.refresh_bindings()
                elif pair.claim is not None:
                    self.query_one(MarkedTestimony).add_round(pair)
                if replayed and not pair.testimony and pair.claim is None:
                    self.query_one(SidePanel).show_analysis(pair.gap_analysis, pair.sequence)
                if tokens is not None:
                    self.usage = tokens.model_copy(deep=True)
                    self.show_usage(tokens)
                elif pair.usage is not None:  # a log written before the session's tally
                    self.usage.add(pair.usage)
                    self.show_usage(self.usage)
            case AuditReady(audit=audit):
                self.audited = True
                self.show_audit(audit)
            case Finished(status=status, reason=reason, usage=usage):
                if usage is not None:
                    self.usage = usage
                    self.show_usage(usage)
                self.set_status(status + (f": {reason}" if reason else ""))
                if not self.audited:
                    self.query_one(SidePanel).show_ended(status, reason)
                ok = status in ("completed", "limit-reached")
                if announce:
                    self.notify(finished_line(self.narration.session_id, status, reason),
                                severity="information" if ok else "warning", markup=False)

    def action_toggle_reasoning(self) -> None:
        """A reasoning model's thinking: its last lines (the default) or all of it."""
        if not self.query_one(ReasoningPanel).toggle():
            self.notify("No reasoning to show: the models of this run think silently, or "
                        "not at all", markup=False)

    def show_usage(self, usage: TokenTally) -> None:
        """The cost badge: what the run has cost so far."""
        self.query_one(Badges).set("cost", cost_badge(usage))

    def show_audit(self, audit: AuditResult) -> None:
        """The verdict badge and the side panel's audit (the transcript has its blocks)."""
        self.query_one(Badges).set("verdict", "verdict: " + (verdict_short(
            audit.verdict, audit.probability_false, audit.demonstration) or "–"),
            audit.verdict or "none")
        self.query_one(SidePanel).show_audit(audit)

    def on_worker_state_changed(self, event: object) -> None:
        """Errors are the app's funnel; here only the status line follows the worker."""
        from textual.worker import Worker, WorkerState

        assert isinstance(event, Worker.StateChanged)
        if event.worker.group != "live":
            return
        if event.state is WorkerState.CANCELLED and not self.attached:
            self.set_status("cancelled")
        elif event.state is WorkerState.ERROR and isinstance(event.worker.error, DetektivError):
            line = f"failed: {event.worker.error.message}"
            self.set_status(line)  # shortened there if it must be: whole in the transcript
            self.query_one(TranscriptView).add("note", line)
            self.query_one(SidePanel).show_ended("failed", event.worker.error.message)
