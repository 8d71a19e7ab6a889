"""Model text is data: never markup, never terminal control, never an action."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st
from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text
from textual.app import App, ComposeResult
from textual.content import Content
from textual.widgets import DataTable

from engine import strip_control
from tests.support.app import app_for, until
from tests.support.cases import HOSTILE, hostile_session
from tui.widgets.transcript import TranscriptView

NASTY = [
    "[@click=app.quit]quit[/]",
    "[/",
    "[@==",
    "[link=http://evil.example]x[/link]",
    "\x1b[31mred\x1b[0m \x1b[2J",
    "\x1b]0;title\x07 \x1b]8;;http://e\x1b\\l\x1b]8;;\x1b\\ \x1b]52;c;ZXZpbA==\x07",
    "\x9b31m C1 \x85 \x90",
    "\\[bold]not bold\\[/bold] \\",
    "a [markdown link](http://evil.example) and <http://evil.example/auto>",
]


class OneView(App[None]):
    def compose(self) -> ComposeResult:
        yield TranscriptView(id="view")
        table: DataTable[str | Text] = DataTable(id="table")
        yield table


async def test_hostile_text_shows_literally_fires_nothing_raises_nothing() -> None:
    app = OneView()
    async with app.run_test(size=(100, 30)) as pilot:
        view = app.query_one(TranscriptView)
        table = app.query_one(DataTable)
        table.add_column("text")
        for text in NASTY:
            view.add("question", text, title=text)
            view.add("answer", text, title=text, markdown=True)
            view.start_stream("answer", title=text)
            for ch in text:
                view.append(ch)
            view.end_stream()
            table.add_row(Text(strip_control(text)))
            app.notify(strip_control(text), markup=False)
        await pilot.pause(0.2)
        for y in range(0, 30, 2):  # click all over the rendered text
            await pilot.click(TranscriptView, offset=(10, y))
            await pilot.click(TranscriptView, offset=(2, y))
        await pilot.pause(0.2)
        assert app.is_running, "model text ran an action"
        plain = view.plain_text()
        assert "[@click=app.quit]quit[/]" in plain and "[link=http://evil.example]" in plain
        assert "\x1b" not in plain and "\x9b" not in plain
        for strip in view._lines:
            for segment in strip:
                assert "\x1b" not in segment.text and "\x9b" not in segment.text
                assert not (segment.style and segment.style.meta.get("@click")), segment
                assert not (segment.style and segment.style.link), segment  # no live links


async def test_hostile_session_in_every_tab_raises_nothing(home: Path) -> None:
    app = app_for(home)
    hostile_session(app.workspace.store)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count == 1)
        await pilot.press("o")
        await until(pilot, lambda: app.live.status_text.startswith("cancelled"))
        view = app.live.query_one(TranscriptView)
        assert strip_control(HOSTILE) in view.plain_text()
        await pilot.press("3", "1")
        assert app.is_running and app.internal_errors == []


CHARS = st.text(alphabet=st.sampled_from(list("[]/\\@=:.#*`_ab \n\t") + ["\x1b", "\x07",
                                                                           "\x9b", "\r"]),
                max_size=80)


@settings(max_examples=300, deadline=None)
@given(CHARS)
def test_any_brackets_backslashes_and_controls_render_safely(text: str) -> None:
    console = Console(width=60, color_system="truecolor", force_terminal=True,
                      legacy_windows=False)
    clean = strip_control(text)
    assert not any(ord(c) < 32 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F for c in clean)
    for renderable in (Text(clean), Markdown(clean, hyperlinks=False)):
        with console.capture() as capture:
            console.print(renderable)
        out = capture.get()
        assert "\x1b]" not in out and "\x07" not in out and "\x9b" not in out
    content = Content(clean)
    assert content.plain == clean
    assert all(not span.style or "@click" not in str(span.style) for span in content.spans)
