"""The Oracles tab with Pilot, against the real llama.cpp server: from the keyboard, open a
notes-only case, mark two oracles, preview, consult side by side, type and import notes,
toggle history, edit an oracle in $EDITOR, cancel a consultation."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from textual.widgets import DataTable, OptionList, Static

from engine import Paths, Workspace
from tests.support.app import until
from tests.support.cases import case_with_call, setup_home
from tests.support.faults import FaultProxy
from tests.support.servers import LlamaServer
from tui.app import DetektivApp, build_app
from tui.screens.oracles import OraclesScreen
from tui.widgets.transcript import TranscriptView


def entries(workspace: Workspace, ref: str) -> int:
    return len(workspace.store.load(ref).llm_entries)


def oracles_screen(app: DetektivApp) -> OraclesScreen:
    screen = app.screen
    assert isinstance(screen, OraclesScreen)
    return screen


def bar(screen: OraclesScreen) -> str:
    return " · ".join(str(screen.query_one(part, Static).render())
                      for part in ("#case-name", "#case-counts"))


async def test_consult_two_oracles_side_by_side_from_the_keyboard(
    home: Path, tmp_path: Path, llama_server: LlamaServer
) -> None:
    setup_home(home, llama_server.url)
    workspace = Workspace(Paths.from_env())
    ref = case_with_call(workspace, tmp_path, "Pricing call")
    app = build_app(Paths.from_env())
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: app.screen.query_one(DataTable).row_count == 1)
        await pilot.press("o")  # a notes-only case opens in the Oracles tab
        await until(pilot, lambda: app.current_mode == "oracles")
        screen = oracles_screen(app)
        await until(pilot, lambda: "1 note" in bar(screen) and len(screen.oracles) >= 4)
        assert "Pricing call" in bar(screen) and "history on" in bar(screen)
        names = [o.name for o in screen.oracles]
        listing = screen.query_one("#oracle-list", OptionList)
        listing.highlighted = names.index("Sceptic")
        await pilot.press("space")
        listing.highlighted = names.index("Visionary")
        await pilot.press("space")
        assert [o.name for o in screen.oracles if o.id in screen.marked] == [
            "Sceptic", "Visionary"]
        await pilot.press("p")
        preview = screen.query_one("#preview", TranscriptView)
        await until(pilot, lambda: "Repeat the notes." in preview.plain_text())
        text = preview.plain_text()
        assert text.count("tokens of 2,048 for llama") == 2 and "notes ~" in text
        assert "[0:01] Alice: We raise the price" in text
        await pilot.press("c")
        await until(pilot, lambda: entries(workspace, ref) == 2, timeout=120)
        await until(pilot, lambda: all("saved as" in c.plain_text()
                                       for c in screen.columns.values()))
        assert len(screen.columns) == 2
        stored = workspace.cases.answer_texts(ref)
        for (entry, answer), column in zip(
                sorted(stored, key=lambda s: s[0].oracle_id),
                [screen.columns[k] for k in sorted(screen.columns)], strict=True):
            assert answer.strip()[:20] in column.plain_text()
            assert entry.context_snapshot.transcript_count == 1
        await until(pilot, lambda: "2 answers" in bar(screen))
        await pilot.press("h")
        history = screen.query_one("#history", TranscriptView)
        assert "Answer 1 · " in history.plain_text() and "shown 1 note" in history.plain_text()
        await pilot.press("y")  # history off for this session, kept in metadata.json
        await until(pilot, lambda: "history off" in bar(screen))
        assert not workspace.store.load(ref).ui_preferences.include_llm_history
        assert app.internal_errors == []


async def test_notes_typed_and_imported_and_a_refused_file(
    home: Path, tmp_path: Path, llama_server: LlamaServer
) -> None:
    setup_home(home, llama_server.url)
    workspace = Workspace(Paths.from_env())
    ref = workspace.cases.new_case("Notes").short_id
    folder = workspace.store.resolve(ref).name
    (tmp_path / "plan.md").write_text("# Plan\n\nRaise prices in March.\n")
    (tmp_path / "deck.pptx").write_bytes(b"PK\x03\x04")
    app = build_app(Paths.from_env())
    app.current_session = folder  # as if Live showed it
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("3")
        screen = oracles_screen(app)
        await until(pilot, lambda: "0 notes" in bar(screen))
        await pilot.press("t")
        await pilot.pause()
        await pilot.press(*"Churn is 4%", "enter", *"per month")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: "1 note" in bar(screen))
        await pilot.press("i")
        await pilot.pause()
        await pilot.press(*str(tmp_path / "plan.md"), "enter")
        await until(pilot, lambda: "2 notes" in bar(screen))
        await pilot.press("i")
        await pilot.pause()
        await pilot.press(*str(tmp_path / "deck.pptx"), "enter")
        await until(pilot, lambda: any(".pptx files cannot be notes" in m
                                       for _, m in app.notices))
        notes = workspace.cases.note_texts(ref)
        assert [(e.kind, e.source) for e, _ in notes] == [
            ("typed", "Churn is 4%"), ("imported", "plan.md")]
        assert notes[0][1] == "Churn is 4%\nper month\n"
        view = screen.query_one("#notes", TranscriptView)
        assert "Raise prices in March." in view.plain_text()
        assert app.internal_errors == []


async def test_edit_and_new_oracle_in_the_editor_are_picked_up(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llama_server: LlamaServer
) -> None:
    setup_home(home, llama_server.url)
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "\\nEdited by the test.\\n" >> "$1"\n')
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EDITOR", str(editor))
    app = build_app(Paths.from_env())
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("3")
        screen = oracles_screen(app)
        await until(pilot, lambda: len(screen.oracles) >= 4)
        names = [o.name for o in screen.oracles]
        screen.query_one("#oracle-list", OptionList).highlighted = names.index("Judge")
        await pilot.press("e")
        await until(pilot, lambda: "Edited by the test." in (home / "oracles" /
                                                             "judge.md").read_text())
        await pilot.press("N")
        await pilot.pause()
        await pilot.press(*"Devil's advocate", "enter")
        await until(pilot, lambda: any(o.name == "Devil's advocate" for o in screen.oracles))
        created = home / "oracles" / "devil-s-advocate.md"
        assert "{{CONTEXT}}" in created.read_text() and "Edited by the test." in \
            created.read_text()
        assert app.internal_errors == []


async def test_escape_cancels_a_consultation_and_nothing_half_is_stored(
    home: Path, tmp_path: Path, llama_server: LlamaServer
) -> None:
    proxy = FaultProxy(llama_server.base)
    await proxy.start()
    try:
        setup_home(home, proxy.url)
        workspace = Workspace(Paths.from_env())
        ref = case_with_call(workspace, tmp_path, "Cancel me")
        proxy.plan = ["stall:3"]
        app = build_app(Paths.from_env())
        app.current_session = workspace.store.resolve(ref).name
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("3")
            screen = oracles_screen(app)
            await until(pilot, lambda: "1 note" in bar(screen) and bool(screen.oracles))
            await pilot.press("c")
            await until(pilot, lambda: bool(screen.columns) and any(
                "asking" in c.plain_text() for c in screen.columns.values()))
            await until(pilot, lambda: bool(proxy.requests))  # the question is at the server
            await pilot.press("escape")
            await until(pilot, lambda: not screen.workers_in("oracle-consult"))
            assert entries(workspace, ref) == 0
            assert any("cancelled" in m for _, m in app.notices)
            assert app.internal_errors == []
        data = json.loads((workspace.store.resolve(ref) / "metadata.json").read_text())
        assert data["llm_entries"] == []
    finally:
        await proxy.stop()


async def test_a_notes_case_gets_its_interrogation_from_the_oracles_tab(
    home: Path, tmp_path: Path, llama_server: LlamaServer, sleuth: str
) -> None:
    from tests.support.app import config_text, finished

    (home / "config.toml").write_text(config_text(
        {"llama": llama_server.url, "sleuth": sleuth}, ["sleuth"], ["llama"]))
    workspace = Workspace(Paths.from_env())
    ref = case_with_call(workspace, tmp_path, "Owls")
    app = build_app(Paths.from_env())
    app.current_session = workspace.store.resolve(ref).name
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("3")
        screen = oracles_screen(app)
        await until(pilot, lambda: "1 note" in bar(screen))
        await pilot.press("I")
        await until(pilot, lambda: app.current_mode == "live")
        assert app.live.status_text.startswith(f"the next interrogation goes into case {ref}")
        await pilot.press(*"Owls hunt at night", "enter")
        await until(pilot, lambda: finished(app), timeout=240)
        session = workspace.store.load(ref)
        assert session.status == "completed", session.error
        assert session.hypothesis is not None and session.hypothesis.text == "Owls hunt at night"
        assert session.title == "Owls" and len(session.notes) == 1 and session.qa_pairs
        assert len(workspace.store.list()) == 1  # the same session, not a new one
        await pilot.press("3")
        await pilot.press("I")  # it has its interrogation now: said, nothing started
        await until(pilot, lambda: any("has its interrogation already" in m
                                       for _, m in app.notices))
        assert app.internal_errors == []
