"""The Oracles tab: persona prompts consulted on a session's case file (SPEC §4, §7).

Oracles on the left (space marks several); on the right one of five views: the final prompt
**preview** with its token estimate per part, the **answers** streaming side by side (a column
per oracle), the **history** of consultations with what each was shown, the session's
**notes**, and the **case agent** (`g`: a conversation about all sessions, its signals live).
The session is the one the Live tab shows, or any other picked with `s`. Every
engine call goes through the workspace; model text is shown as data (TranscriptView).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Input, OptionList, Static
from textual.worker import Worker

from engine import (
    LlmEntry,
    NoteEntry,
    Oracle,
    SessionSummary,
    note_title,
    strip_control,
)
from tui._editor import edit_file
from tui.background import in_background
from tui.funnel import Guarded
from tui.messages import InterrogationWanted
from tui.screens.dialogs import ChoiceDialog, PromptDialog, TextDialog
from tui.widgets.agent import AgentPanel
from tui.widgets.answers import AnswerColumns
from tui.widgets.case_views import case_bar, show_history, show_notes
from tui.widgets.oracle_picker import OraclePicker
from tui.widgets.tabs import ModeTabs
from tui.widgets.transcript import TranscriptView

__all__ = ["OraclesScreen"]

NEW_CASE = "+new"


class OraclesScreen(Guarded, Screen[None]):
    """See the module docstring."""

    CSS_PATH = "oracles.tcss"
    BINDINGS = [
        Binding("space", "mark", "Mark", id="oracle-mark"),
        Binding("c", "consult", "Consult", id="consult"),
        Binding("p", "preview", "Preview", id="oracle-preview", show=False),
        Binding("a", "view('answers')", "Answers", id="oracle-answers"),
        Binding("h", "history", "History", id="oracle-history", show=False),
        Binding("o", "notes", "Notes", id="oracle-notes", show=False),
        Binding("i", "import_note", "Import note", id="import-note", show=False),
        Binding("t", "type_note", "Note", id="type-note"),
        Binding("s", "pick_session", "Session", id="pick-session", show=False),
        Binding("y", "toggle_history", "History on/off", id="toggle-history", show=False),
        Binding("e", "edit_oracle", "Edit oracle", id="edit-oracle", show=False),
        Binding("N", "new_oracle", "New oracle", id="new-oracle"),
        Binding("I", "interrogate", "Interrogate", id="interrogate-case", show=False),
        Binding("g", "agent", "Agent", id="agent-view"),
        Binding("ctrl+n", "agent_new", "New conversation", id="agent-new", show=False),
        Binding("ctrl+o", "agent_tools", "Tool outputs", id="agent-tools", show=False),
        Binding("escape", "cancel", "Cancel", id="cancel-consult"),
        Binding("r", "refresh", "Refresh", id="refresh-oracles", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.session_dir: str | None = None
        self._followed: str | None = None
        self.include_history = True
        self.status_text = ""

    @property
    def picker(self) -> OraclePicker:
        return self.query_one(OraclePicker)

    @property
    def oracles(self) -> list[Oracle]:
        return self.picker.oracles

    @property
    def marked(self) -> list[str]:
        return self.picker.marked

    def highlighted(self) -> Oracle | None:
        return self.picker.highlighted()

    def chosen(self) -> list[str]:
        """The marked oracles, else the highlighted one."""
        return self.picker.chosen()

    def action_mark(self) -> None:
        self.picker.mark()

    @property
    def columns(self) -> dict[str, TranscriptView]:
        """The answer columns of the last consultation, by oracle id."""
        return self.query_one("#answers", AnswerColumns).columns

    def compose(self) -> ComposeResult:
        yield ModeTabs("oracles")
        with Horizontal(id="case-bar"):
            yield Static(Content("no session"), id="case-name")
            yield Static(id="case-counts")
        with Horizontal(id="oracle-main"):
            yield OraclePicker(id="oracle-side")
            with ContentSwitcher(initial="preview", id="oracle-views"):
                yield TranscriptView(id="preview")
                yield AnswerColumns(id="answers")
                yield TranscriptView(id="history")
                yield TranscriptView(id="notes")
                yield AgentPanel(id="agent")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#preview", TranscriptView).add("note", self.empty_text())
        self.query_one("#oracle-list", OptionList).focus()
        self.load_oracles()
        self._follow_live()

    def on_screen_resume(self) -> None:
        if not self._follow_live() and self.session_dir is not None:
            self.load_case()  # what happened to it while another tab was shown
        self.load_oracles()

    def _follow_live(self) -> bool:
        """Take the session the Live tab shows, when it changed since last looked."""
        current = self.host.current_session
        if current is not None and current != self._followed:
            self._followed = current
            self.use_session(current)
            return True
        return False

    def empty_text(self) -> str:
        keys = self.host.key_for
        return (f"Mark oracles with {keys('oracle-mark', 'space')}, then "
                f"{keys('oracle-preview', 'p')} previews the prompt and "
                f"{keys('consult', 'c')} consults them side by side. The session is the one "
                f"open in Live; {keys('pick-session', 's')} picks another or starts a new case "
                f"for notes ({keys('import-note', 'i')} imports a file, "
                f"{keys('type-note', 't')} types one). {keys('agent-view', 'g')} asks the "
                "case agent about all your sessions.")

    # ---- oracles and the session -------------------------------------------------------------

    @in_background("oracle-list")
    def load_oracles(self) -> None:
        oracles = self.host.workspace.cases.oracles()
        self.app.call_from_thread(self.picker.show, oracles)

    def use_session(self, directory: str) -> None:
        self.session_dir = directory
        self.load_case()

    @in_background("oracle-case")
    def load_case(self) -> None:
        """Read the session's notes and answers (off the event loop) and show them."""
        if self.session_dir is None:
            return
        workspace = self.host.workspace
        session = workspace.sessions.load(self.session_dir)
        notes = workspace.cases.note_texts(self.session_dir, session)
        answers = workspace.cases.answer_texts(self.session_dir, session)
        self.app.call_from_thread(self._show_case, session.short_id, session.name,
                                  session.ui_preferences.include_llm_history, notes, answers)

    def _show_case(self, short_id: str, name: str, history: bool,
                   notes: list[tuple[NoteEntry, str]],
                   answers: list[tuple[LlmEntry, str]]) -> None:
        self.include_history = history
        title, counts = case_bar(short_id, name, history, len(notes), len(answers))
        self.query_one("#case-name", Static).update(Content(title))
        self.query_one("#case-counts", Static).update(Content(counts))
        show_notes(self.query_one("#notes", TranscriptView), notes)
        show_history(self.query_one("#history", TranscriptView), answers)

    def session_or_say(self) -> str | None:
        if self.session_dir is None:
            self.notify(f"No session: press {self.host.key_for('pick-session', 's')} to pick "
                        "one or start a new case.", severity="warning")
        return self.session_dir

    # ---- actions -----------------------------------------------------------------------------

    def action_view(self, name: str) -> None:
        self.query_one("#oracle-views", ContentSwitcher).current = name

    def action_history(self) -> None:
        self.action_view("history")

    def action_notes(self) -> None:
        self.action_view("notes")

    def action_preview(self) -> None:
        if self.session_or_say() is None or not self._have_oracles():
            return
        self.action_view("preview")
        self.preview()

    def _have_oracles(self) -> bool:
        if not self.chosen():
            self.notify("Mark an oracle first (space), or highlight a valid one.",
                        severity="warning")
            return False
        return True

    @work(exclusive=True, group="oracle-preview", exit_on_error=False)
    async def preview(self) -> None:
        assert self.session_dir is not None
        view = self.query_one("#preview", TranscriptView)
        view.clear()
        view.add("note", "building the prompt…")
        consultation = await self.host.workspace.cases.consultation(
            self.session_dir, self.chosen(), include_history=self.include_history)
        try:
            previews = await consultation.preview()
        finally:
            await consultation.aclose()
        view.clear()
        for item in previews:
            parts = ", ".join(f"{p.name} ~{p.tokens:,}" for p in item.parts)
            lines = [f"~{item.total:,} tokens of {item.window:,} for {item.provider} "
                     f"({parts})", *[f"trimmed: {t}" for t in item.trimmed],
                     *[f"warning: {w}" for w in item.warnings]]
            view.add("heading", "\n".join(lines), title=item.oracle.name)
            view.add("question", item.prompt, markdown=False)

    def action_consult(self) -> None:
        if self.session_or_say() is None or not self._have_oracles():
            return
        self.consult()

    @work(exclusive=True, group="oracle-consult", exit_on_error=False)
    async def consult(self) -> None:
        assert self.session_dir is not None
        consultation = await self.host.workspace.cases.consultation(
            self.session_dir, self.chosen(), include_history=self.include_history)
        self.action_view("answers")
        await self.query_one("#answers", AnswerColumns).show(consultation)
        self.load_case()

    def action_cancel(self) -> None:
        if self.query_one("#agent", AgentPanel).cancel():
            return
        cancelled = self.workers_in("oracle-consult")
        for worker in cancelled:
            worker.cancel()
        if cancelled:
            self.notify("Consultation cancelled; nothing half was stored.")

    # ---- the case agent ----------------------------------------------------------------------

    def action_agent(self) -> None:
        self.action_view("agent")
        self.query_one("#agent-input", Input).focus()

    def action_agent_new(self) -> None:
        self.action_agent()
        panel = self.query_one("#agent", AgentPanel)
        if not panel.running:
            panel.new_conversation()

    def action_agent_tools(self) -> None:
        unfolded = self.query_one("#agent", AgentPanel).toggle_tools()
        self.notify("Tool outputs shown in full." if unfolded else "Tool outputs folded.")

    def workers_in(self, group: str) -> list[Worker[Any]]:
        return [w for w in self.workers if w.group == group and w.is_running]

    def action_pick_session(self) -> None:
        self.pick_session()

    @work(exclusive=True, group="oracle-pick", exit_on_error=False)
    async def pick_session(self) -> None:
        rows = await self._rows()
        choices = [(NEW_CASE, "+ New case (notes only)…")]
        choices += [(r.dir, f"{r.id[:8]}  {r.status:9}  "
                     f"{' '.join(strip_control(r.hypothesis).split())[:50]}")
                    for r in rows if r.status != "damaged"]
        picked = await self.app.push_screen_wait(ChoiceDialog("Work on which session?",
                                                              choices))
        if picked == NEW_CASE:
            title = await self.app.push_screen_wait(PromptDialog("Title of the new case:"))
            if not title:
                return
            session = self.host.workspace.cases.new_case(title)
            picked = self.host.workspace.sessions.folder(session.short_id).name
            self.notify(f"Created case {session.short_id}.")
        if picked:
            self.use_session(picked)

    async def _rows(self) -> list[SessionSummary]:

        return await self.host.background.call(self.host.workspace.sessions.rows)

    def action_import_note(self) -> None:
        if self.session_or_say() is None:
            return
        self.import_note()

    @work(exclusive=True, group="oracle-note", exit_on_error=False)
    async def import_note(self) -> None:
        path = await self.app.push_screen_wait(
            PromptDialog("Import a note: path to a .txt, .md, .srt or .vtt file"))
        if not path or self.session_dir is None:
            return
        added, refused = self.host.workspace.cases.import_notes(
            self.session_dir, [Path(path.strip()).expanduser()])
        for reason in refused:
            self.notify(reason, title="Not imported", severity="error")
        for entry in added:
            self.notify(f"Added {note_title(entry)}")
        self.load_case()
        self.action_notes()

    def action_type_note(self) -> None:
        if self.session_or_say() is None:
            return
        self.type_note()

    @work(exclusive=True, group="oracle-note", exit_on_error=False)
    async def type_note(self) -> None:
        text = await self.app.push_screen_wait(TextDialog("Type a note (the first line names "
                                                          "it):"))
        if not text or not text.strip() or self.session_dir is None:
            return
        title = text.strip().splitlines()[0][:40]
        entry = self.host.workspace.cases.add_note(self.session_dir, text, title)
        self.notify(f"Added {note_title(entry)}")
        self.load_case()
        self.action_notes()

    def action_interrogate(self) -> None:
        directory = self.session_or_say()
        if directory is None:
            return
        if self.host.workspace.sessions.status(directory) != "notes":  # read now: it may have begun
            self.notify("This session has its interrogation already; a new one starts from "
                        "the Live tab.", severity="warning")
            return
        self.post_message(InterrogationWanted(directory))

    def action_toggle_history(self) -> None:
        directory = self.session_or_say()
        if directory is None:
            return
        self.include_history = not self.include_history
        self.host.workspace.cases.set_include_history(directory, self.include_history)
        self.notify(f"Earlier answers {'go' if self.include_history else 'do not go'} into "
                    "the next consultation.")
        self.load_case()

    def action_refresh(self) -> None:
        self.host.workspace.cases.oracle_catalog.refresh()
        self.load_oracles()
        if self.session_dir is not None:
            self.load_case()

    def action_edit_oracle(self) -> None:
        oracle = self.highlighted()
        if oracle is None:
            return
        path, copied = self.host.workspace.cases.editable_oracle(oracle)
        if copied:
            self.notify(f"Your copy {path} overrides the {oracle.source} oracle.")
        self.edit(path)

    def action_new_oracle(self) -> None:
        self.new_oracle()

    @work(exclusive=True, group="oracle-new", exit_on_error=False)
    async def new_oracle(self) -> None:
        name = await self.app.push_screen_wait(PromptDialog("Name of the new oracle:"))
        if not name or not name.strip():
            return
        self.edit(self.host.workspace.cases.new_oracle(name))

    def edit(self, path: Path) -> None:
        """Open `path` in the user's editor (the app suspends); re-read the oracles."""
        problem = edit_file(self.app, path)
        if problem:
            self.notify(problem, severity="warning")
        self.action_refresh()
