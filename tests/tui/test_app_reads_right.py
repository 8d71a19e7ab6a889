"""The app reads right (Pilot): every tab at 80 and 160 columns shows no literal markup, no
footer key or field label cut, no transcript line under its scrollbar; the Live tab follows a
new run, keeps the rounds a resume goes on from, puts a note after the answer it follows,
says why a run has no audit; the form starts empty with the last hypothesis a key away;
ctrl+c says in plain words how to quit; counts agree with their nouns; exports go to the
exports folder, never the working directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual.pilot import Pilot
from textual.widgets import DataTable, Footer, Input, TextArea
from textual.widgets._footer import FooterKey

from engine.costs import cost_badge
from engine.models.events import (
    AnswerDelta,
    PairCompleted,
    Phase,
    ProviderChosen,
    QuestionDelta,
    Started,
    TrailAdded,
)
from engine.models.session import GapAnalysis, ProvidersUsed, QuestionAnswerPair
from engine.models.trail import AuditTrailEntry
from engine.models.usage import TokenTally
from tests.support.app import app_for, config_text, finished, fixed_session, screen_text, until
from tests.support.servers import LlamaServer, closed_port
from tui.app import DetektivApp
from tui.widgets.form import HypothesisArea
from tui.widgets.transcript import TranscriptView

MARKUP = re.compile(r"\[/?(?:b|i|u|bold|italic|dim|reverse|\$[\w-]+|#[0-9a-fA-F]{3,6}|"
                    r"link[^\]]*|on \w+|[a-z]+ on [a-z]+)\]")
"""A console-markup tag as text: what a notification or label shows when markup leaks."""

LONG = ("The witness answered at length. " * 12 + "It ends here with a full stop.")


async def look(pilot: Pilot[int], app: DetektivApp) -> list[str]:
    await pilot.pause()
    return screen_text(app)


def cut_labels(app: DetektivApp) -> list[str]:
    """Every label of the screen that does not fit its place: a footer key past the footer's
    right edge or narrower than its text, a field's placeholder or border title."""
    problems: list[str] = []
    screen = app.screen
    for footer in screen.query(Footer):
        right = footer.region.right
        for key in footer.query(FooterKey):
            text = f"{key.key_display} {key.description}"
            if key.region.right > right or key.region.width < cell_len(text):
                problems.append(f"footer key {text!r} is cut")
    shown = [w for w in [*screen.query(Input), *screen.query(TextArea)] if w.region.area]
    for field in [w for w in shown if isinstance(w, Input)]:
        room = field.content_region.width
        if field.placeholder and cell_len(field.placeholder) >= room:
            problems.append(f"placeholder {field.placeholder!r} in {room} cells")
    for field in shown:
        title = str(field.border_title or "")
        if title and cell_len(title) + 4 > field.region.width:
            problems.append(f"label {title!r} in {field.region.width} cells")
    for area in [w for w in shown if isinstance(w, TextArea)]:
        if area.placeholder and cell_len(str(area.placeholder)) >= area.content_region.width:
            problems.append(f"placeholder {area.placeholder!r} cut")
    for widget in screen.query("*"):  # a horizontal scrollbar is drawn inside the text
        if widget.region.area and getattr(widget, "show_horizontal_scrollbar", False) \
                and not isinstance(widget, DataTable | TextArea | Footer):
            problems.append(f"{widget!r} scrolls sideways")
    return problems


@pytest.mark.parametrize("width", [80, 160])
async def test_every_tab_has_no_markup_shown_no_label_cut_and_no_text_under_a_scrollbar(
        home: Path, width: int) -> None:
    for n in range(3):
        fixed_session(home / "data" / "sessions", n)
    app = app_for(home)
    async with app.run_test(size=(width, 30)) as pilot:
        for key in ("1", "2", "3", "4", "5"):
            await pilot.press(key)
            await until(pilot, lambda: app.workspace.config_loaded, timeout=10)
            text = "\n".join(await look(pilot, app))
            assert not MARKUP.search(text), (key, MARKUP.search(text))
            assert cut_labels(app) == [], (key, cut_labels(app))
        await pilot.press("ctrl+c")  # Textual's own notice, in plain words
        await until(pilot, lambda: any("to quit" in m for _, m in app.notices), timeout=10)
        assert ("Do you want to quit?", "Press ctrl+q to quit the app.") in app.notices
        assert not any(MARKUP.search(title + message) for title, message in app.notices)
        # the transcript: long lines, a scrollbar that appears as they come
        await pilot.press("2")
        view = app.live.query_one(TranscriptView)
        for n in range(12):
            view.add("answer", LONG, title=f"Answer {n}")
        await pilot.pause()
        room = view.scrollable_content_region.width
        assert view.show_vertical_scrollbar and not view.show_horizontal_scrollbar
        assert max(line.cell_length for line in view._lines) <= room
        rows = await look(pilot, app)
        right = view.region.right - 1 - 1  # the border's column, then the scrollbar's
        scrollbar = {rows[y][right - 1:right] for y in range(view.region.y + 1,
                                                               view.region.bottom - 1)}
        assert not any(ch.isalnum() for piece in scrollbar for ch in piece), scrollbar
        assert app.internal_errors == []


async def test_a_new_run_after_a_finished_one_is_followed(
        home: Path, llama_server: LlamaServer, sleuth: str) -> None:
    fixed_session(home / "data" / "sessions", 1)
    app = app_for(home, config_text({"llama": llama_server.url, "sleuth": sleuth}, ["sleuth"],
                                    ["llama"]))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.screen.query_one("DataTable").row_count == 1)
        await pilot.press("enter")  # opens the finished session in the Live tab
        view = app.live.query_one(TranscriptView)
        await until(pilot, lambda: any(b.kind == "answer" for b in view.blocks))
        await pilot.press("left_square_bracket")  # selecting an answer stops following
        assert not view.follow
        await pilot.press("n", *"Glass is a liquid", "enter")
        await until(pilot, lambda: sum(b.kind == "answer" for b in view.blocks) >= 2
                    or finished(app), timeout=120)
        await pilot.pause()
        assert view.follow and view.scroll_y == view.max_scroll_y
        assert app.live.query_one("#hypothesis", HypothesisArea).text == ""  # starts empty
        assert app.internal_errors == []


async def test_the_last_hypothesis_is_one_key_away_and_a_new_one_starts_empty(
        home: Path) -> None:
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    app = app_for(home, config_text({"dead": dead}, ["dead"], ["dead"]))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        app.live.focus_form()
        await pilot.press(*"Owls hunt at night", "enter")
        area = app.live.query_one("#hypothesis", HypothesisArea)
        assert area.text == ""
        await until(pilot, lambda: finished(app), timeout=60)
        # a failed run says so where the audit would be
        audit = str(app.live.query_one("#audit").render())
        assert audit.startswith("none: the run ended failed"), audit
        await pilot.press("n", "up")
        assert area.text == "Owls hunt at night"
        assert app.internal_errors == []


async def test_resume_keeps_the_rounds_it_goes_on_from(
        home: Path, llama_server: LlamaServer, sleuth: str) -> None:
    app = app_for(home, config_text({"llama": llama_server.url, "sleuth": sleuth}, ["sleuth"],
                                    ["llama"]))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        app.live.focus_form()
        await pilot.press(*"Glass is a liquid", "enter")
        view = app.live.query_one(TranscriptView)
        await until(pilot, lambda: any(b.kind == "answer" for b in view.blocks))
        first = next(b for b in view.blocks if b.kind == "question")
        view.focus()
        await pilot.press("escape")
        await until(pilot, lambda: app.live.status_text == "cancelled")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: finished(app) and app.live.status_text != "cancelled",
                    timeout=120)
        assert first in view.blocks  # the rounds before the resume stay
        titles = [b.title for b in view.blocks]
        resumed = next(i for i, t in enumerate(titles) if "resumed" in t)
        assert view.blocks.index(first) < resumed
        assert app.internal_errors == []


async def test_a_note_after_an_answer_stands_below_it(home: Path) -> None:
    app = app_for(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        live = app.live
        for event in (
            Started(session_id="0" * 32, hypothesis="Owls hunt at night.", iteration_limit=5),
            Phase(phase="question", sequence=1),
            ProviderChosen(role="detective", provider="d:m"),
            QuestionDelta(sequence=1, text="When?"),
            Phase(phase="answer", sequence=1), ProviderChosen(role="witness", provider="w:m"),
            AnswerDelta(sequence=1, text="At night."),
            Phase(phase="analysis", sequence=1),
            TrailAdded(entry=AuditTrailEntry(
                event="contradictory_analysis", role="detective",
                reason="the analysis of answer 1 contradicts itself")),
        ):
            live.show(event)
        await pilot.pause()
        view = live.query_one(TranscriptView)
        answer = next(i for i, b in enumerate(view.blocks) if b.kind == "answer")
        note = next(i for i, b in enumerate(view.blocks) if "contradicts itself" in b.text)
        assert answer < note


async def test_the_cost_badge_shows_the_sessions_tally_while_claims_run_side_by_side(
        home: Path) -> None:
    app = app_for(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        live = app.live
        live.show(Started(session_id="0" * 32, hypothesis="Describe owls.", iteration_limit=5))
        badge = live.query_one("#cost-badge")
        # two claims' rounds, each its own 300 tokens; the session had also spent 500 on the
        # testimony, the split and the claims' readings, which are in no round
        for n, total in ((2, 800), (3, 1100)):
            pair = QuestionAnswerPair(
                sequence=n, question="When do owls hunt?", answer="At night.",
                gap_analysis=GapAnalysis(gaps=[], completeness_score=100,
                                         requires_follow_up=False),
                provider_used=ProvidersUsed(detective="d:m", witness="w:m"), claim=n - 1,
                usage=TokenTally(prompt=290, completion=10))
            live.show(PairCompleted(pair=pair, tokens=TokenTally(prompt=total - 20,
                                                                 completion=20)))
            await pilot.pause()
            assert str(badge.render()) == cost_badge(TokenTally(prompt=total - 20,
                                                                completion=20))


async def test_counts_agree_and_exports_go_to_the_exports_folder(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    session = fixed_session(home / "data" / "sessions", 1)
    app = app_for(home)
    async with app.run_test(size=(120, 40)) as pilot:
        status = app.screen.query_one("#sessions-status")
        await until(pilot, lambda: str(status.render()).startswith("1 session"))
        assert not str(status.render()).startswith("1 sessions")
        await pilot.press("e")
        target = home / "data" / "exports" / f"detektiv-{str(session.id)[:8]}.md"
        await until(pilot, lambda: target.is_file(), timeout=10)
        assert any(str(target) in message for _, message in app.notices)
        assert list(tmp_path.glob("detektiv-*")) == []
        await pilot.press("question_mark")
        shown = "\n".join(await look(pilot, app))
        assert "slash" not in shown and "question_mark" not in shown
        assert app.internal_errors == []


async def test_the_help_names_keys_as_they_are_typed_and_the_browsers_own(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """"/" and "?", not `slash` and `question_mark`; in a browser tab (`serve`), where the
    browser keeps ctrl+t, the theme is f9."""
    monkeypatch.setenv("DETEKTIV_SERVED", "1")
    app = app_for(home)
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.press("question_mark")
        rows = app.screen.rows  # type: ignore[attr-defined]
        assert ("/", "Filter", "filter") in rows and ("?", "Help", "help") in rows
        assert ("f9", "Theme", "toggle-theme") in rows


async def test_an_oracle_says_where_the_case_goes_in_words(home: Path) -> None:
    """Not a bare "placeholder ·": the shipped oracles put the case in place of their
    placeholder, and the line says so."""
    app = app_for(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3")
        info = app.screen.query_one("#oracle-info")
        await until(pilot, lambda: "the case goes" in str(info.render()), timeout=30)
        line = str(info.render()).splitlines()[1]
        assert line.startswith(("the case goes in place of ", "the case goes at the end")), line
        assert not line.startswith("placeholder")
